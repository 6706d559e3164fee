package cluster

import (
	"log/slog"

	"github.com/twmb/franz-go/pkg/sasl"
)

// oauthBearerMechanism builds the OAUTHBEARER mechanism for Options and
// SASLMechanism; logger may be nil: Azure AD through azidentity
// (azure.auth, azure.go), or any OIDC token endpoint with Kafka's
// client-credentials settings (sasl.oauthbearer.token.endpoint.url,
// oidc.go). Errors are propErr("<mm2 property>", err) so that they name the
// setting's environment variable.
func oauthBearerMechanism(s Settings, logger *slog.Logger) (sasl.Mechanism, error) {
	if !s.Azure.Enabled() && s.OAuthBearer.Enabled() {
		t, err := NewOIDCTokens(s, logger)
		if err != nil {
			return nil, err
		}
		return t.Mechanism(), nil
	}
	if !s.Azure.Enabled() {
		return nil, propErr("azure.auth", errNoTokenSource)
	}
	t, err := NewAzureTokens(s.Alias, s.Azure, s.BootstrapServers, logger)
	if err != nil {
		return nil, propErr("azure.auth", err)
	}
	return t.Mechanism(), nil
}
