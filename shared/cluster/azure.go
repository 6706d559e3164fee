package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/mm2go/mm2go/shared/secret"
)

// Azure AD (Microsoft Entra ID) sign-in modes, the values of
// MM2_<CLUSTER>_AZURE_AUTH.
const (
	// AzureAuthOff (the default) does not use Azure AD.
	AzureAuthOff = "off"
	// AzureAuthDefault uses the Azure SDK's DefaultAzureCredential chain:
	// environment service principal, workload identity, managed identity,
	// Azure CLI, Azure Developer CLI. It needs no other setting in Container
	// Apps, AKS (workload identity webhook) or after `az login`.
	AzureAuthDefault = "default"
	// AzureAuthManagedIdentity uses the hosting environment's managed
	// identity (system-assigned, or user-assigned with AzureConfig.ClientID).
	AzureAuthManagedIdentity = "managed-identity"
	// AzureAuthWorkloadIdentity exchanges a Kubernetes service account token
	// (AZURE_FEDERATED_TOKEN_FILE) for an Entra ID token.
	AzureAuthWorkloadIdentity = "workload-identity"
	// AzureAuthClientSecret signs in a service principal with a secret.
	AzureAuthClientSecret = "client-secret"
	// AzureAuthClientCertificate signs in a service principal with a
	// certificate (PEM or PKCS#12 file holding the certificate and key).
	AzureAuthClientCertificate = "client-certificate"
	// AzureAuthAzureCLI uses the account logged in with `az login`.
	AzureAuthAzureCLI = "azure-cli"
)

var azureAuthModes = []string{AzureAuthOff, AzureAuthDefault, AzureAuthManagedIdentity,
	AzureAuthWorkloadIdentity, AzureAuthClientSecret, AzureAuthClientCertificate, AzureAuthAzureCLI}

// AzureConfig is one cluster's Azure AD sign-in: SASL OAUTHBEARER over TLS
// with tokens from azidentity. Settings carries these values as
// MM2_<CLUSTER>_AZURE_* (see Settings.Azure).
type AzureConfig struct {
	// Auth is one of the AzureAuth* modes; empty means off.
	Auth string `envconfig:"AUTH" mm2:"auth" defaultdoc:"off" desc:"Azure AD (Entra ID) sign-in: off, default, managed-identity, workload-identity, client-secret, client-certificate or azure-cli; implies SASL_SSL + OAUTHBEARER"`
	// ClientID is the application (client) ID of a service principal or a
	// workload identity, or the client ID (or resource ID, starting with
	// /subscriptions/) of a user-assigned managed identity. Empty: the
	// Azure SDK's environment (AZURE_CLIENT_ID) or the system identity.
	ClientID string `envconfig:"CLIENT_ID" mm2:"client.id" desc:"Azure AD application (client) ID, or a user-assigned managed identity's client ID or resource ID (empty: AZURE_CLIENT_ID / system identity)"`
	// TenantID is the directory (tenant) ID. Empty: AZURE_TENANT_ID.
	TenantID string `envconfig:"TENANT_ID" mm2:"tenant.id" desc:"Azure AD tenant (directory) ID (empty: AZURE_TENANT_ID)"`
	// ClientSecret is the service principal's secret (client-secret mode).
	ClientSecret secret.Secret `envconfig:"CLIENT_SECRET" mm2:"client.secret" desc:"service principal secret for azure.auth=client-secret (secret)"`
	// ClientCertificatePath is a PEM or PKCS#12 file with the service
	// principal's certificate and private key (client-certificate mode).
	ClientCertificatePath string `envconfig:"CLIENT_CERTIFICATE_PATH" mm2:"client.certificate.path" desc:"PEM or PKCS#12 file with the service principal's certificate and key for azure.auth=client-certificate"`
	// ClientCertificatePassword decrypts the certificate file, if needed.
	ClientCertificatePassword secret.Secret `envconfig:"CLIENT_CERTIFICATE_PASSWORD" mm2:"client.certificate.password" desc:"password of the certificate file, if any (secret)"`
	// FederatedTokenFile is the Kubernetes service account token file
	// (workload-identity mode). Empty: AZURE_FEDERATED_TOKEN_FILE.
	FederatedTokenFile string `envconfig:"FEDERATED_TOKEN_FILE" mm2:"federated.token.file" desc:"Kubernetes service account token file for azure.auth=workload-identity (empty: AZURE_FEDERATED_TOKEN_FILE)"`
	// AuthorityHost is the Entra ID endpoint, e.g.
	// https://login.microsoftonline.us/ for Azure Government. Empty: the
	// Azure SDK's default (AZURE_AUTHORITY_HOST, else the public cloud).
	// Instance discovery is skipped for hosts other than Microsoft's own, so
	// the host is trusted as configured.
	AuthorityHost string `envconfig:"AUTHORITY_HOST" mm2:"authority.host" desc:"Azure AD endpoint, https URL (empty: AZURE_AUTHORITY_HOST or the public cloud)"`
	// Scope overrides the token scope. Empty: https://<bootstrap host>/.default,
	// the namespace URI that the Event Hubs Kafka endpoint expects as audience.
	Scope string `envconfig:"SCOPE" mm2:"scope" defaultdoc:"https://<bootstrap host>/.default" desc:"token scope (Event Hubs wants the namespace URI)"`
}

// Enabled reports whether Azure AD sign-in is configured.
func (a *AzureConfig) Enabled() bool {
	return a.Auth != "" && a.Auth != AzureAuthOff
}

// normalize checks the Azure settings and lower-cases the mode. bad reports
// a problem with a setting named by its MM2 property suffix ("azure.auth").
// Problems never quote secret values.
func (a *AzureConfig) normalize(bad func(key, format string, args ...any)) {
	a.Auth = strings.ToLower(strings.TrimSpace(a.Auth))
	known := a.Auth == ""
	for _, m := range azureAuthModes {
		known = known || a.Auth == m
	}
	if !known {
		bad("azure.auth", "unknown value %q (want %s)", a.Auth, strings.Join(azureAuthModes, ", "))
		return
	}
	if !a.Enabled() {
		for key, set := range map[string]bool{
			"azure.client.id":                   a.ClientID != "",
			"azure.tenant.id":                   a.TenantID != "",
			"azure.client.secret":               a.ClientSecret.IsSet(),
			"azure.client.certificate.path":     a.ClientCertificatePath != "",
			"azure.client.certificate.password": a.ClientCertificatePassword.IsSet(),
			"azure.federated.token.file":        a.FederatedTokenFile != "",
			"azure.authority.host":              a.AuthorityHost != "",
			"azure.scope":                       a.Scope != "",
		} {
			if set {
				bad(key, "is set but azure.auth is off: set azure.auth (e.g. default or managed-identity) to sign in with Azure AD")
			}
		}
		return
	}
	// Which optional settings each mode reads; anything else is a mistake
	// worth reporting rather than ignoring.
	uses := map[string][]string{
		AzureAuthDefault:           {"azure.tenant.id"},
		AzureAuthManagedIdentity:   {"azure.client.id"},
		AzureAuthWorkloadIdentity:  {"azure.client.id", "azure.tenant.id", "azure.federated.token.file"},
		AzureAuthClientSecret:      {"azure.client.id", "azure.tenant.id", "azure.client.secret"},
		AzureAuthClientCertificate: {"azure.client.id", "azure.tenant.id", "azure.client.certificate.path", "azure.client.certificate.password"},
		AzureAuthAzureCLI:          {"azure.tenant.id"},
	}[a.Auth]
	allowed := func(key string) bool {
		for _, k := range uses {
			if k == key {
				return true
			}
		}
		return false
	}
	for key, set := range map[string]bool{
		"azure.client.id":                   a.ClientID != "",
		"azure.tenant.id":                   a.TenantID != "",
		"azure.client.secret":               a.ClientSecret.IsSet(),
		"azure.client.certificate.path":     a.ClientCertificatePath != "",
		"azure.client.certificate.password": a.ClientCertificatePassword.IsSet(),
		"azure.federated.token.file":        a.FederatedTokenFile != "",
	} {
		if set && !allowed(key) {
			hint := ""
			if key == "azure.client.id" && a.Auth == AzureAuthDefault {
				hint = " (the default chain reads AZURE_CLIENT_ID from the environment; to pick a user-assigned identity per cluster use azure.auth=managed-identity)"
			}
			bad(key, "is not used with azure.auth=%s%s", a.Auth, hint)
		}
	}
	switch a.Auth {
	case AzureAuthClientSecret:
		if a.TenantID == "" {
			bad("azure.tenant.id", "required with azure.auth=%s", a.Auth)
		}
		if a.ClientID == "" {
			bad("azure.client.id", "required with azure.auth=%s", a.Auth)
		}
		if !a.ClientSecret.IsSet() {
			bad("azure.client.secret", "required with azure.auth=%s", a.Auth)
		}
	case AzureAuthClientCertificate:
		if a.TenantID == "" {
			bad("azure.tenant.id", "required with azure.auth=%s", a.Auth)
		}
		if a.ClientID == "" {
			bad("azure.client.id", "required with azure.auth=%s", a.Auth)
		}
		if a.ClientCertificatePath == "" {
			bad("azure.client.certificate.path", "required with azure.auth=%s", a.Auth)
		}
	}
	if a.AuthorityHost != "" {
		if u, err := url.Parse(a.AuthorityHost); err != nil || u.Scheme != "https" || u.Host == "" {
			bad("azure.authority.host", "%q is not an https:// URL", a.AuthorityHost)
		}
	}
	if a.Scope != "" {
		if u, err := url.Parse(a.Scope); err != nil || u.Scheme == "" || u.Host == "" {
			bad("azure.scope", "%q is not a URL such as https://<namespace>.servicebus.windows.net/.default", a.Scope)
		}
	}
}

// AzureScope returns the token scope for a cluster: scope if set (with
// "/.default" appended when missing), else https://<host>/.default for the
// host of the first bootstrap server. Event Hubs' Kafka endpoint wants the
// namespace URI as audience; a token for https://eventhubs.azure.net is
// refused there.
func AzureScope(scope string, bootstrap []string) (string, error) {
	if scope != "" {
		if !strings.HasSuffix(scope, "/.default") {
			scope = strings.TrimSuffix(scope, "/") + "/.default"
		}
		return scope, nil
	}
	if len(bootstrap) == 0 {
		return "", errors.New("no bootstrap server to derive the Azure AD token scope from")
	}
	host, _, err := net.SplitHostPort(bootstrap[0])
	if err != nil {
		host = bootstrap[0]
	}
	if host == "" || net.ParseIP(host) != nil {
		return "", fmt.Errorf("cannot derive the Azure AD token scope from bootstrap server %q: use the namespace host name (<namespace>.servicebus.windows.net:9093) or set azure.scope", bootstrap[0])
	}
	return "https://" + strings.ToLower(host) + "/.default", nil
}

// AzureOption adjusts how Azure AD tokens are fetched.
type AzureOption func(*azureOptions)

type azureOptions struct {
	client     azcore.ClientOptions
	credential azcore.TokenCredential
	credName   string
	now        func() time.Time
	timeout    time.Duration
}

// WithAzureClientOptions sets the Azure SDK pipeline options of the
// credential (HTTP transport, proxy, retries, cloud), e.g. to trust a
// private CA for a sovereign or Azure Stack authority. AuthorityHost still
// overrides Cloud when set.
func WithAzureClientOptions(o azcore.ClientOptions) AzureOption {
	return func(a *azureOptions) { a.client = o }
}

// WithAzureCredential replaces the credential built from AzureConfig.Auth
// with cred (named name in errors), for embedding programs that build their
// own credential.
func WithAzureCredential(name string, cred azcore.TokenCredential) AzureOption {
	return func(a *azureOptions) { a.credential, a.credName = cred, name }
}

// knownAuthorityHosts are Microsoft's own Entra ID hosts, for which instance
// discovery stays on.
var knownAuthorityHosts = map[string]bool{
	"login.microsoftonline.com":        true,
	"login.microsoftonline.us":         true,
	"login.chinacloudapi.cn":           true,
	"login.microsoft.com":              true,
	"login.windows.net":                true,
	"login.partner.microsoftonline.cn": true,
}

// AzureTokens fetches Entra ID access tokens for one cluster and caches them:
// franz-go asks for a token on every new connection and every
// re-authentication, and MSAL does not cache tokens with less than five
// minutes left. A token is reused until its refresh time (a fifth of its
// lifetime, at most five minutes, before expiry, or the earlier refresh time
// the identity provider suggests). One fetch runs at a time; callers arriving
// meanwhile wait for it.
type AzureTokens struct {
	cluster  string
	credName string
	detail   string // tenant/client, never a secret
	scope    string
	cred     azcore.TokenCredential
	secrets  []string // values scrubbed from error text, defence in depth
	logger   *slog.Logger
	now      func() time.Time
	timeout  time.Duration

	mu       sync.Mutex
	tok      azcore.AccessToken
	refresh  time.Time     // when tok should be replaced
	inflight chan struct{} // closed when the running fetch ends
	fetches  int
}

// NewAzureTokens builds the credential that cfg selects for the cluster named
// alias, with the token scope derived from bootstrap (see AzureScope).
// Building checks the configuration (files, IDs) but fetches no token.
func NewAzureTokens(alias string, cfg AzureConfig, bootstrap []string, logger *slog.Logger, opts ...AzureOption) (*AzureTokens, error) {
	o := azureOptions{now: time.Now, timeout: 30 * time.Second}
	for _, fn := range opts {
		fn(&o)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	scope, err := AzureScope(cfg.Scope, bootstrap)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", alias, err)
	}
	t := &AzureTokens{
		cluster: alias, scope: scope, logger: logger, now: o.now, timeout: o.timeout,
		secrets: []string{cfg.ClientSecret.Reveal(), cfg.ClientCertificatePassword.Reveal()},
	}
	if cfg.TenantID != "" {
		t.detail += fmt.Sprintf(" tenant %q", cfg.TenantID)
	}
	if cfg.ClientID != "" {
		t.detail += fmt.Sprintf(" client %q", cfg.ClientID)
	}
	if o.credential != nil {
		t.cred, t.credName = o.credential, o.credName
		return t, nil
	}
	t.cred, t.credName, err = newAzureCredential(cfg, o.client)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: Azure AD sign-in (azure.auth=%s): %s", alias, cfg.Auth, t.scrub(err.Error()))
	}
	return t, nil
}

// newAzureCredential builds the azidentity credential for cfg.Auth.
func newAzureCredential(cfg AzureConfig, co azcore.ClientOptions) (azcore.TokenCredential, string, error) {
	host := cfg.AuthorityHost
	if host == "" {
		// azidentity reads this variable itself; we only need it to decide
		// about instance discovery below.
		host = os.Getenv("AZURE_AUTHORITY_HOST")
	}
	disableDiscovery := false
	if host != "" {
		u, err := url.Parse(host)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return nil, "", fmt.Errorf("authority host %q is not an https:// URL", host)
		}
		disableDiscovery = !knownAuthorityHosts[strings.ToLower(u.Hostname())]
	}
	if cfg.AuthorityHost != "" {
		co.Cloud = cloud.Configuration{ActiveDirectoryAuthorityHost: cfg.AuthorityHost, Services: co.Cloud.Services}
	}
	switch cfg.Auth {
	case AzureAuthDefault:
		c, err := azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{
			ClientOptions: co, TenantID: cfg.TenantID, DisableInstanceDiscovery: disableDiscovery,
		})
		return c, "DefaultAzureCredential", err
	case AzureAuthManagedIdentity:
		o := &azidentity.ManagedIdentityCredentialOptions{ClientOptions: co}
		name := "ManagedIdentityCredential (system-assigned)"
		switch {
		case strings.HasPrefix(cfg.ClientID, "/subscriptions/"):
			o.ID, name = azidentity.ResourceID(cfg.ClientID), "ManagedIdentityCredential (user-assigned, resource ID)"
		case cfg.ClientID != "":
			o.ID, name = azidentity.ClientID(cfg.ClientID), "ManagedIdentityCredential (user-assigned)"
		case os.Getenv("AZURE_CLIENT_ID") != "":
			// Container Apps and the docs' convention: a user-assigned
			// identity is named by AZURE_CLIENT_ID.
			o.ID, name = azidentity.ClientID(os.Getenv("AZURE_CLIENT_ID")), "ManagedIdentityCredential (user-assigned via AZURE_CLIENT_ID)"
		}
		c, err := azidentity.NewManagedIdentityCredential(o)
		return c, name, err
	case AzureAuthWorkloadIdentity:
		c, err := azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{
			ClientOptions: co, ClientID: cfg.ClientID, TenantID: cfg.TenantID,
			TokenFilePath: cfg.FederatedTokenFile, DisableInstanceDiscovery: disableDiscovery,
		})
		return c, "WorkloadIdentityCredential", err
	case AzureAuthClientSecret:
		c, err := azidentity.NewClientSecretCredential(cfg.TenantID, cfg.ClientID, cfg.ClientSecret.Reveal(),
			&azidentity.ClientSecretCredentialOptions{ClientOptions: co, DisableInstanceDiscovery: disableDiscovery})
		return c, "ClientSecretCredential", err
	case AzureAuthClientCertificate:
		data, err := os.ReadFile(cfg.ClientCertificatePath)
		if err != nil {
			return nil, "ClientCertificateCredential", fmt.Errorf("reading client certificate: %w", err)
		}
		var pw []byte
		if cfg.ClientCertificatePassword.IsSet() {
			pw = []byte(cfg.ClientCertificatePassword.Reveal())
		}
		certs, key, err := azidentity.ParseCertificates(data, pw)
		if err != nil {
			return nil, "ClientCertificateCredential", fmt.Errorf("client certificate %s: %w", cfg.ClientCertificatePath, err)
		}
		c, err := azidentity.NewClientCertificateCredential(cfg.TenantID, cfg.ClientID, certs, key,
			&azidentity.ClientCertificateCredentialOptions{ClientOptions: co, DisableInstanceDiscovery: disableDiscovery})
		return c, "ClientCertificateCredential", err
	case AzureAuthAzureCLI:
		c, err := azidentity.NewAzureCLICredential(&azidentity.AzureCLICredentialOptions{TenantID: cfg.TenantID})
		return c, "AzureCLICredential", err
	}
	return nil, "", fmt.Errorf("azure.auth=%q does not sign in", cfg.Auth)
}

// Scope returns the token scope.
func (t *AzureTokens) Scope() string { return t.scope }

// Credential returns the name of the credential in use, as errors name it.
func (t *AzureTokens) Credential() string { return t.credName }

// Fetches returns how many tokens were fetched from the identity provider.
func (t *AzureTokens) Fetches() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fetches
}

// Token returns a valid access token, fetching a new one when the cached one
// is due for refresh. A failed refresh while the cached token is still valid
// is logged and the cached token returned.
func (t *AzureTokens) Token(ctx context.Context) (string, error) {
	for {
		t.mu.Lock()
		now := t.now()
		if t.tok.Token != "" && now.Before(t.refresh) {
			tok := t.tok.Token
			t.mu.Unlock()
			return tok, nil
		}
		if wait := t.inflight; wait != nil {
			t.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return "", fmt.Errorf("cluster %q: waiting for an Azure AD token: %w", t.cluster, ctx.Err())
			}
		}
		done := make(chan struct{})
		t.inflight = done
		t.mu.Unlock()

		tok, err := t.fetch(ctx)

		t.mu.Lock()
		t.inflight = nil
		close(done)
		if err != nil {
			if now := t.now(); t.tok.Token != "" && now.Before(t.tok.ExpiresOn) {
				// Keep the valid token and retry later, not on every new
				// connection in between.
				t.refresh = now.Add(min(30*time.Second, t.tok.ExpiresOn.Sub(now)/2))
				old := t.tok.Token
				t.mu.Unlock()
				t.logger.Warn("refreshing the Azure AD token failed; using the current one until it expires",
					"cluster", t.cluster, "credential", t.credName, "expires", t.tok.ExpiresOn, "error", err.Error())
				return old, nil
			}
			t.mu.Unlock()
			return "", err
		}
		t.fetches++
		t.tok = tok
		t.refresh = refreshTime(t.now(), tok)
		t.mu.Unlock()
		t.logger.Debug("fetched an Azure AD token", "cluster", t.cluster, "credential", t.credName,
			"scope", t.scope, "expires", tok.ExpiresOn)
		return tok.Token, nil
	}
}

// refreshTime is when a token fetched at now should be replaced.
func refreshTime(now time.Time, tok azcore.AccessToken) time.Time {
	life := tok.ExpiresOn.Sub(now)
	margin := min(life/5, 5*time.Minute)
	at := tok.ExpiresOn.Add(-margin)
	if !tok.RefreshOn.IsZero() && tok.RefreshOn.Before(at) {
		at = tok.RefreshOn
	}
	return at
}

func (t *AzureTokens) fetch(ctx context.Context) (azcore.AccessToken, error) {
	// franz-go passes the client's context, which lives as long as the
	// client: bound the fetch ourselves.
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	tok, err := t.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{t.scope}})
	if err == nil && tok.Token == "" {
		err = errors.New("the identity provider returned an empty token")
	}
	if err == nil && !tok.ExpiresOn.After(t.now()) {
		err = fmt.Errorf("the identity provider returned a token that expired at %s", tok.ExpiresOn.UTC().Format(time.RFC3339))
	}
	if err != nil {
		return azcore.AccessToken{}, &AzureTokenError{
			Cluster: t.cluster, Credential: t.credName, Detail: strings.TrimSpace(t.detail), Scope: t.scope,
			Reason: t.scrub(err.Error()),
		}
	}
	return tok, nil
}

// scrub returns s, or a notice in its place when s holds one of the
// credential's secrets (azidentity's messages carry identity provider
// responses, which should not echo secrets, but a buggy proxy could). The
// text is never edited; see leakGuard for why short values are not looked
// for.
func (t *AzureTokens) scrub(s string) string {
	for _, v := range t.secrets {
		if len(v) >= minGuardedSecret && strings.Contains(s, v) {
			return withheld("azure.client.secret or azure.client.certificate.password")
		}
	}
	return s
}

// Mechanism returns the SASL OAUTHBEARER mechanism presenting this source's
// tokens. When a broker refuses a token (Kafka answers only
// {"status":"invalid_token"}), it logs one error line naming the cluster,
// the credential and the scope, with what to check.
func (t *AzureTokens) Mechanism() sasl.Mechanism {
	return refusalLogger{t: t, inner: oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
		tok, err := t.Token(ctx)
		if err != nil {
			return oauth.Auth{}, err
		}
		return oauth.Auth{Token: tok}, nil
	})}
}

type refusalLogger struct {
	t     *AzureTokens
	inner sasl.Mechanism
}

func (m refusalLogger) Name() string { return m.inner.Name() }

func (m refusalLogger) Authenticate(ctx context.Context, host string) (sasl.Session, []byte, error) {
	s, first, err := m.inner.Authenticate(ctx, host)
	if err != nil {
		return nil, nil, err
	}
	return refusalSession{m: m, host: host, inner: s}, first, nil
}

type refusalSession struct {
	m     refusalLogger
	host  string
	inner sasl.Session
}

// Challenge sees the broker's error document (RFC 7628 section 3.2.2)
// before franz-go fails the authentication.
func (s refusalSession) Challenge(resp []byte) (bool, []byte, error) {
	if len(resp) > 0 {
		t := s.m.t
		t.logger.Error("the broker refused the Azure AD token: check that the token scope is the namespace URI (https://<namespace>.servicebus.windows.net/.default), "+
			"that the identity has a data role on the namespace or event hub (Azure Event Hubs Data Sender / Data Receiver; new assignments take up to 5 minutes), and that the clock is right",
			"cluster", t.cluster, "broker", s.host, "credential", t.credName, "scope", t.scope, "answer", string(resp))
	}
	return s.inner.Challenge(resp)
}

// AzureTokenError is a failed Azure AD token fetch. It names the cluster, the
// credential, the scope and the identity provider's reason, never a secret.
type AzureTokenError struct {
	Cluster    string // cluster alias
	Credential string // e.g. ClientSecretCredential
	Detail     string // tenant and client IDs, when configured
	Scope      string
	Reason     string // the credential's error text, secrets removed
}

func (e *AzureTokenError) Error() string {
	d := ""
	if e.Detail != "" {
		d = " (" + e.Detail + ")"
	}
	return fmt.Sprintf("cluster %q: getting an Azure AD token with %s%s for scope %s failed: %s",
		e.Cluster, e.Credential, d, e.Scope, e.Reason)
}

// normalizeAzure checks the Azure AD and Event Hubs profile settings of s
// and, with Azure AD on, sets SASL_SSL and OAUTHBEARER. Settings.Normalize
// calls it after the connection-string rules and before the protocol ones.
func (s *Settings) normalizeAzure(hasSASLCreds bool, bad func(key, format string, args ...any)) {
	s.Azure.normalize(bad)
	s.EventHubs.normalize(bad)
	if !s.Azure.Enabled() {
		return
	}
	if s.EventHubsConnectionString.IsSet() {
		bad("azure.auth", "set either azure.auth (Azure AD) or eventhubs.connection.string (SAS), not both")
		return
	}
	if hasSASLCreds {
		bad("azure.auth", "Azure AD sign-in takes no SASL user, password or JAAS config: remove sasl.username, sasl.password and sasl.jaas.config")
	}
	if s.SASLMechanism != "" && s.SASLMechanism != MechanismOAuthBearer {
		bad("sasl.mechanism", "must be OAUTHBEARER or empty with azure.auth=%s", s.Azure.Auth)
	}
	if s.SecurityProtocol != "" && s.SecurityProtocol != ProtocolSASLSSL {
		bad("security.protocol", "must be SASL_SSL or empty with azure.auth=%s (tokens are only sent over TLS)", s.Azure.Auth)
	}
	s.SecurityProtocol, s.SASLMechanism = ProtocolSASLSSL, MechanismOAuthBearer
	if len(s.BootstrapServers) > 0 {
		if _, err := AzureScope(s.Azure.Scope, s.BootstrapServers); err != nil {
			bad("azure.scope", "%v", err)
		}
	}
}
