package cluster

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

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
