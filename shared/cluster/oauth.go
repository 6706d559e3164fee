package cluster

import (
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/sasl"
)

// oauthBearerMechanism builds the OAUTHBEARER mechanism (Microsoft Entra ID
// for Event Hubs) for Options and SASLMechanism; logger may be nil. It is
// the extension point for Azure AD: once Settings carries the AzureConfig,
// return the mechanism of NewAzureTokens(s.Alias, s.Azure, s.BootstrapServers,
// logger).Mechanism(). Return errors as propErr("<mm2 property>", err) so
// that they name the setting's environment variable.
func oauthBearerMechanism(s Settings, logger *slog.Logger) (sasl.Mechanism, error) {
	if !s.Azure.Enabled() {
		return nil, propErr("azure.auth", fmt.Errorf("%s needs a token source: set azure.auth", MechanismOAuthBearer))
	}
	t, err := NewAzureTokens(s.Alias, s.Azure, s.BootstrapServers, logger)
	if err != nil {
		return nil, propErr("azure.auth", err)
	}
	return t.Mechanism(), nil
}
