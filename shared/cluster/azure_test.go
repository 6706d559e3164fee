package cluster

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/mm2go/mm2go/shared/secret"
	"github.com/mm2go/mm2go/test/testkit/entrafake"
)

func TestAzureScope(t *testing.T) {
	for _, test := range []struct {
		scope     string
		bootstrap []string
		want      string
		errPart   string
	}{
		{bootstrap: []string{"NS1.servicebus.windows.net:9093"}, want: "https://ns1.servicebus.windows.net/.default"},
		{bootstrap: []string{"ns.servicebus.chinacloudapi.cn:9093", "x:1"}, want: "https://ns.servicebus.chinacloudapi.cn/.default"},
		{scope: "https://other.servicebus.windows.net", bootstrap: []string{"127.0.0.1:9093"}, want: "https://other.servicebus.windows.net/.default"},
		{scope: "https://other.servicebus.windows.net/.default", want: "https://other.servicebus.windows.net/.default"},
		{bootstrap: []string{"127.0.0.1:9093"}, errPart: "set azure.scope"},
		{errPart: "no bootstrap server"},
	} {
		got, err := AzureScope(test.scope, test.bootstrap)
		if test.errPart != "" {
			if err == nil || !strings.Contains(err.Error(), test.errPart) {
				t.Errorf("AzureScope(%q, %v) error = %v, want it to contain %q", test.scope, test.bootstrap, err, test.errPart)
			}
			continue
		}
		if err != nil || got != test.want {
			t.Errorf("AzureScope(%q, %v) = %q, %v; want %q", test.scope, test.bootstrap, got, err, test.want)
		}
	}
}

func TestAzureConfigNormalize(t *testing.T) {
	for _, test := range []struct {
		name string
		cfg  AzureConfig
		want []string // substrings of problems, in any order; none means valid
	}{
		{name: "off by default", cfg: AzureConfig{}},
		{name: "default chain", cfg: AzureConfig{Auth: "Default"}},
		{name: "managed identity user-assigned", cfg: AzureConfig{Auth: "managed-identity", ClientID: "c"}},
		{name: "unknown mode", cfg: AzureConfig{Auth: "msi"}, want: []string{"azure.auth: unknown value \"msi\""}},
		{name: "secret without mode", cfg: AzureConfig{ClientSecret: secret.New("s3cr3t-value")}, want: []string{"azure.client.secret: is set but azure.auth is off"}},
		{name: "client secret incomplete", cfg: AzureConfig{Auth: "client-secret"}, want: []string{
			"azure.tenant.id: required", "azure.client.id: required", "azure.client.secret: required"}},
		{name: "certificate incomplete", cfg: AzureConfig{Auth: "client-certificate", TenantID: "t", ClientID: "c"}, want: []string{"azure.client.certificate.path: required"}},
		{name: "client id with default chain", cfg: AzureConfig{Auth: "default", ClientID: "c"}, want: []string{"azure.client.id: is not used with azure.auth=default (the default chain reads AZURE_CLIENT_ID"}},
		{name: "secret with managed identity", cfg: AzureConfig{Auth: "managed-identity", ClientSecret: secret.New("s3cr3t-value")}, want: []string{"azure.client.secret: is not used with azure.auth=managed-identity"}},
		{name: "http authority", cfg: AzureConfig{Auth: "default", AuthorityHost: "http://login.example"}, want: []string{"azure.authority.host: \"http://login.example\" is not an https:// URL"}},
		{name: "bad scope", cfg: AzureConfig{Auth: "default", Scope: "eventhubs"}, want: []string{"azure.scope: \"eventhubs\" is not a URL"}},
	} {
		t.Run(test.name, func(t *testing.T) {
			var got []string
			test.cfg.normalize(func(key, format string, args ...any) {
				got = append(got, key+": "+fmt.Sprintf(format, args...))
			})
			if len(got) != len(test.want) {
				t.Fatalf("problems = %q, want %d matching %q", got, len(test.want), test.want)
			}
			for _, w := range test.want {
				found := false
				for _, g := range got {
					found = found || strings.Contains(g, w)
				}
				if !found {
					t.Errorf("no problem contains %q; got %q", w, got)
				}
			}
			for _, g := range got {
				if strings.Contains(g, "s3cr3t-value") {
					t.Errorf("problem reveals the secret: %q", g)
				}
			}
		})
	}
}

// fakeCred is an azcore.TokenCredential with a settable clock and failures.
type fakeCred struct {
	mu      sync.Mutex
	now     *time.Time
	life    time.Duration
	n       int
	fail    error
	scopes  []string
	started chan struct{}
	release chan struct{}
}

func (f *fakeCred) GetToken(ctx context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	if f.started != nil {
		f.started <- struct{}{}
		<-f.release
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scopes = append(f.scopes, o.Scopes...)
	if f.fail != nil {
		return azcore.AccessToken{}, f.fail
	}
	f.n++
	return azcore.AccessToken{Token: fmt.Sprintf("token-%d", f.n), ExpiresOn: f.now.Add(f.life)}, nil
}

func TestAzureTokensCacheAndRefresh(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	cred := &fakeCred{now: &now, life: time.Hour}
	var logs bytes.Buffer
	tokens, err := NewAzureTokens("target", AzureConfig{Auth: AzureAuthDefault}, []string{"ns.servicebus.windows.net:9093"},
		slog.New(slog.NewTextHandler(&logs, nil)),
		WithAzureCredential("FakeCredential", cred), func(o *azureOptions) { o.now = func() time.Time { return now } })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	get := func() string {
		t.Helper()
		tok, err := tokens.Token(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	if got := get(); got != "token-1" {
		t.Fatalf("first token = %q", got)
	}
	// Many connections within the token's life share it.
	now = now.Add(54 * time.Minute)
	if got := get(); got != "token-1" {
		t.Fatalf("token before the refresh margin = %q, want the cached token-1", got)
	}
	// Within 5 minutes of expiry (the margin for a one-hour token) it is replaced.
	now = now.Add(2 * time.Minute)
	if got := get(); got != "token-2" {
		t.Fatalf("token inside the refresh margin = %q, want token-2", got)
	}
	// A short-lived token is replaced after four fifths of its life.
	cred.life = 10 * time.Second
	now = now.Add(time.Hour)
	if got := get(); got != "token-3" {
		t.Fatalf("got %q", got)
	}
	now = now.Add(7 * time.Second)
	if got := get(); got != "token-3" {
		t.Fatalf("short token refreshed too early: %q", got)
	}
	now = now.Add(1500 * time.Millisecond)
	if got := get(); got != "token-4" {
		t.Fatalf("short token not refreshed in its last fifth: %q", got)
	}
	// A failed refresh while the token is still valid keeps the old token, and says so.
	cred.fail = errors.New("AADSTS90033: transient")
	now = now.Add(9 * time.Second)
	if got := get(); got != "token-4" {
		t.Fatalf("after failed refresh got %q, want token-4", got)
	}
	if !strings.Contains(logs.String(), "refreshing the Azure AD token failed") {
		t.Errorf("no warning logged for a failed refresh: %s", logs.String())
	}
	// The next tries wait a little instead of hitting the provider per connection.
	calls := len(cred.scopes)
	if got := get(); got != "token-4" || len(cred.scopes) != calls {
		t.Fatalf("right after a failed refresh: %q, %d more provider calls; want the cached token, none", got, len(cred.scopes)-calls)
	}
	// Once expired, the failure is returned.
	now = now.Add(2 * time.Second)
	if _, err := tokens.Token(ctx); err == nil {
		t.Fatal("expired token and failing credential: no error")
	}
	if tokens.Fetches() != 4 {
		t.Errorf("fetches = %d, want 4", tokens.Fetches())
	}
	for _, s := range cred.scopes {
		if s != "https://ns.servicebus.windows.net/.default" {
			t.Errorf("scope = %q", s)
		}
	}
}

func TestAzureTokensOneFetchAtATime(t *testing.T) {
	now := time.Now()
	cred := &fakeCred{now: &now, life: time.Hour, started: make(chan struct{}, 16), release: make(chan struct{})}
	tokens, err := NewAzureTokens("source", AzureConfig{Auth: AzureAuthDefault}, []string{"ns.servicebus.windows.net:9093"}, nil,
		WithAzureCredential("FakeCredential", cred))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var bad atomic.Int32
	for range 8 {
		wg.Go(func() {
			if tok, err := tokens.Token(context.Background()); err != nil || tok != "token-1" {
				bad.Add(1)
			}
		})
	}
	<-cred.started
	close(cred.release)
	wg.Wait()
	if bad.Load() != 0 || tokens.Fetches() != 1 {
		t.Fatalf("8 concurrent callers: %d bad answers, %d fetches; want 0 and 1", bad.Load(), tokens.Fetches())
	}
}

// The identity provider's text echoes the secret here (a buggy proxy): it is
// withheld whole, never edited, and the context around it stays.
func TestAzureTokenErrorNamesClusterNotSecret(t *testing.T) {
	const sec = "very-secret-client-secret"
	cred := &fakeCred{fail: errors.New("AADSTS7000215: Invalid client secret provided: " + sec)}
	tokens, err := NewAzureTokens("target", AzureConfig{Auth: AzureAuthClientSecret, TenantID: "tenant-1", ClientID: "app-1", ClientSecret: secret.New(sec)},
		[]string{"ns.servicebus.windows.net:9093"}, nil, WithAzureCredential("ClientSecretCredential", cred))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tokens.Token(context.Background())
	var te *AzureTokenError
	if !errors.As(err, &te) {
		t.Fatalf("error %v is not an *AzureTokenError", err)
	}
	msg := err.Error()
	for _, want := range []string{`cluster "target"`, "ClientSecretCredential", `tenant "tenant-1"`, `client "app-1"`,
		"https://ns.servicebus.windows.net/.default", "[text withheld: it contained the value of azure.client.secret or azure.client.certificate.password]"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, sec) {
		t.Errorf("error reveals the secret: %q", msg)
	}
}

// TestAzureRealCredentialsAgainstFakeEntra runs azidentity's real credentials
// (discovery, token request, HTTPS) against the local fake.
func TestAzureRealCredentialsAgainstFakeEntra(t *testing.T) {
	const (
		spID, spSecret = "11111111-0000-0000-0000-000000000001", "sp-secret-value-do-not-log"
		certID         = "11111111-0000-0000-0000-000000000002"
		wiID           = "11111111-0000-0000-0000-000000000003"
		saToken        = "kubernetes-service-account-token"
	)
	cert, certPath := entrafake.ClientCertificate(t, certID)
	fake := entrafake.New(t, entrafake.Config{
		Secrets:      map[string]string{spID: spSecret},
		Certificates: map[string]*x509.Certificate{certID: cert},
		Federated:    map[string]string{wiID: saToken},
	})
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(saToken), 0o600); err != nil {
		t.Fatal(err)
	}
	co := azcore.ClientOptions{Transport: fake.HTTPClient()}
	bootstrap := []string{"mm2go-test.servicebus.windows.net:9093"}
	for _, test := range []struct {
		name    string
		cfg     AzureConfig
		grant   string
		errPart string
	}{
		{name: "client secret", grant: "client_secret",
			cfg: AzureConfig{Auth: AzureAuthClientSecret, TenantID: fake.Tenant, ClientID: spID, ClientSecret: secret.New(spSecret)}},
		{name: "client certificate", grant: "client_certificate",
			cfg: AzureConfig{Auth: AzureAuthClientCertificate, TenantID: fake.Tenant, ClientID: certID, ClientCertificatePath: certPath}},
		{name: "workload identity", grant: "workload_identity",
			cfg: AzureConfig{Auth: AzureAuthWorkloadIdentity, TenantID: fake.Tenant, ClientID: wiID, FederatedTokenFile: tokenFile}},
		{name: "wrong secret", errPart: "AADSTS7000215",
			cfg: AzureConfig{Auth: AzureAuthClientSecret, TenantID: fake.Tenant, ClientID: spID, ClientSecret: secret.New("wrong-secret-value")}},
	} {
		t.Run(test.name, func(t *testing.T) {
			test.cfg.AuthorityHost = fake.AuthorityHost
			before := len(fake.Issued())
			tokens, err := NewAzureTokens("target", test.cfg, bootstrap, nil, WithAzureClientOptions(co))
			if err != nil {
				t.Fatal(err)
			}
			tok, err := tokens.Token(context.Background())
			if test.errPart != "" {
				if err == nil || !strings.Contains(err.Error(), test.errPart) || !strings.Contains(err.Error(), `cluster "target"`) {
					t.Fatalf("error = %v, want it to name the cluster and contain %q", err, test.errPart)
				}
				if strings.Contains(err.Error(), test.cfg.ClientSecret.Reveal()) {
					t.Fatalf("error reveals the secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			issued := fake.Issued()[before:]
			if len(issued) != 1 || issued[0].Grant != test.grant || issued[0].Audience != "https://mm2go-test.servicebus.windows.net" {
				t.Fatalf("issued = %+v, want one %s token for the namespace", issued, test.grant)
			}
			if strings.Count(tok, ".") != 2 {
				t.Fatalf("token %q is not a JWT", tok)
			}
			// Cached: the second call does not reach the identity provider.
			if _, err := tokens.Token(context.Background()); err != nil || len(fake.Issued()) != before+1 {
				t.Fatalf("second Token: err %v, issued %d, want cached", err, len(fake.Issued())-before)
			}
		})
	}
}

func TestSettingsAzure(t *testing.T) {
	ns := []string{"ns.servicebus.windows.net:9093"}
	cs := secret.New("Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=c2VjcmV0")
	for _, test := range []struct {
		name string
		s    Settings
		want []string // problems (substrings); none: valid, SASL_SSL + OAUTHBEARER
	}{
		{name: "managed identity", s: Settings{BootstrapServers: ns, Azure: AzureConfig{Auth: "managed-identity"}}},
		{name: "explicit protocol and mechanism", s: Settings{BootstrapServers: ns, SecurityProtocol: "sasl_ssl", SASLMechanism: "oauthbearer", Azure: AzureConfig{Auth: "default"}}},
		{name: "with connection string", s: Settings{EventHubsConnectionString: cs, Azure: AzureConfig{Auth: "default"}},
			want: []string{"MM2_TARGET_AZURE_AUTH (target.azure.auth): set either azure.auth (Azure AD) or eventhubs.connection.string (SAS), not both"}},
		{name: "with SASL password", s: Settings{BootstrapServers: ns, SASLUsername: "u", SASLPassword: secret.New("pw-secret"), Azure: AzureConfig{Auth: "default"}},
			want: []string{"MM2_TARGET_AZURE_AUTH (target.azure.auth): Azure AD sign-in takes no SASL user"}},
		{name: "without TLS", s: Settings{BootstrapServers: ns, SecurityProtocol: "SASL_PLAINTEXT", Azure: AzureConfig{Auth: "default"}},
			want: []string{"MM2_TARGET_SECURITY_PROTOCOL (target.security.protocol): must be SASL_SSL or empty"}},
		{name: "plain mechanism", s: Settings{BootstrapServers: ns, SASLMechanism: "PLAIN", Azure: AzureConfig{Auth: "default"}},
			want: []string{"MM2_TARGET_SASL_MECHANISM (target.sasl.mechanism): must be OAUTHBEARER or empty"}},
		{name: "ip bootstrap without scope", s: Settings{BootstrapServers: []string{"10.1.2.3:9093"}, Azure: AzureConfig{Auth: "default"}},
			want: []string{"MM2_TARGET_AZURE_SCOPE (target.azure.scope): cannot derive the Azure AD token scope"}},
		{name: "oauthbearer without azure", s: Settings{BootstrapServers: ns, SecurityProtocol: "SASL_SSL", SASLMechanism: "OAUTHBEARER"},
			want: []string{"MM2_TARGET_SASL_MECHANISM (target.sasl.mechanism): OAUTHBEARER needs a token source: set azure.auth"}},
		{name: "bad profile", s: Settings{BootstrapServers: ns, EventHubs: ProfileConfig{Mode: "maybe"}},
			want: []string{"MM2_TARGET_EVENTHUBS_PROFILE (target.eventhubs.profile): unknown value \"maybe\""}},
	} {
		t.Run(test.name, func(t *testing.T) {
			s := test.s
			s.ConsumerAutoOffsetReset, s.ConsumerIsolationLevel, s.ProducerCompressionType = "earliest", "read_uncommitted", "none"
			s.SSLEndpointIdentificationAlgorithm = "https"
			errs := s.Normalize("MM2_TARGET_", "target.")
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if len(test.want) == 0 {
				if len(errs) > 0 || s.SecurityProtocol != ProtocolSASLSSL || s.SASLMechanism != MechanismOAuthBearer {
					t.Fatalf("problems %q, protocol %s, mechanism %s; want none, SASL_SSL, OAUTHBEARER", got, s.SecurityProtocol, s.SASLMechanism)
				}
				if again := s.Normalize("MM2_TARGET_", "target."); len(again) > 0 {
					t.Fatalf("Normalize is not idempotent: %v", again)
				}
				return
			}
			for _, w := range test.want {
				found := false
				for _, g := range got {
					found = found || strings.Contains(g, w)
				}
				if !found {
					t.Errorf("no problem contains %q; got %q", w, got)
				}
			}
			for _, g := range got {
				if strings.Contains(g, "pw-secret") || strings.Contains(g, "c2VjcmV0") {
					t.Errorf("problem reveals a secret: %q", g)
				}
			}
		})
	}
}

func TestSettingsAzureOptions(t *testing.T) {
	s := Settings{Alias: "target", BootstrapServers: []string{"ns.servicebus.windows.net:9093"},
		Azure: AzureConfig{Auth: AzureAuthClientSecret, TenantID: "t", ClientID: "c", ClientSecret: secret.New("the-secret-value")}}
	if _, err := Options(s, nil); err != nil {
		t.Fatalf("Options with Azure AD: %v", err)
	}
	p, err := SettingsProfile(s)
	if err != nil || !p.EventHubs {
		t.Fatalf("profile of a servicebus host: %+v, %v", p, err)
	}
	s.Azure.ClientCertificatePath = "/nonexistent/cert.pem"
	s.Azure.Auth = AzureAuthClientCertificate
	s.Azure.ClientSecret = secret.Secret{}
	_, err = Options(s, nil)
	if err == nil || !strings.Contains(err.Error(), "MM2_TARGET_AZURE_AUTH") || !strings.Contains(err.Error(), "/nonexistent/cert.pem") {
		t.Fatalf("missing certificate: err = %v, want it to name the setting and the file", err)
	}
}
