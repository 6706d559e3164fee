// Azure AD (Microsoft Entra ID) sign-in is split by job: azure.go holds the settings
// (AzureConfig, the sign-in modes and their checks), azure_scope.go the token scope,
// azure_credential.go the azidentity credential a mode selects, azure_tokens.go the token
// cache and its errors, azure_sasl.go the SASL OAUTHBEARER mechanism presenting the tokens.

package cluster

import (
	"net/url"
	"strings"

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
		set := a.credentialSettings()
		set["azure.authority.host"], set["azure.scope"] = a.AuthorityHost != "", a.Scope != ""
		for key, set := range set {
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
	for key, set := range a.credentialSettings() {
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

// credentialSettings tells which of the credential settings a mode may read are set.
func (a *AzureConfig) credentialSettings() map[string]bool {
	return map[string]bool{
		"azure.client.id":                   a.ClientID != "",
		"azure.tenant.id":                   a.TenantID != "",
		"azure.client.secret":               a.ClientSecret.IsSet(),
		"azure.client.certificate.path":     a.ClientCertificatePath != "",
		"azure.client.certificate.password": a.ClientCertificatePassword.IsSet(),
		"azure.federated.token.file":        a.FederatedTokenFile != "",
	}
}
