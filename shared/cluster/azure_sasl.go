package cluster

import (
	"context"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// Mechanism returns the SASL OAUTHBEARER mechanism presenting this source's
// tokens. When a broker refuses a token (Kafka answers only
// {"status":"invalid_token"}), it logs one error line naming the cluster,
// the credential and the scope, with what to check.
func (t *AzureTokens) Mechanism() sasl.Mechanism {
	return refusalLogger{onRefusal: t.logRefusal, inner: oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
		tok, err := t.Token(ctx)
		if err != nil {
			return oauth.Auth{}, err
		}
		return oauth.Auth{Token: tok}, nil
	})}
}

// refusalLogger wraps an OAUTHBEARER mechanism so that a broker's refusal of a token (Kafka
// answers only {"status":"invalid_token"}) is reported by onRefusal with the broker's answer,
// before franz-go fails the authentication. Azure AD and OIDC sources share it.
type refusalLogger struct {
	onRefusal func(host, answer string)
	inner     sasl.Mechanism
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
		s.m.onRefusal(s.host, string(resp))
	}
	return s.inner.Challenge(resp)
}

// logRefusal says what to check when a broker refused an Azure AD token.
func (t *AzureTokens) logRefusal(host, answer string) {
	t.logger.Error("the broker refused the Azure AD token: check that the token scope is the namespace URI (https://<namespace>.servicebus.windows.net/.default), "+
		"that the identity has a data role on the namespace or event hub (Azure Event Hubs Data Sender / Data Receiver; new assignments take up to 5 minutes), and that the clock is right",
		"cluster", t.cluster, "broker", host, "credential", t.credName, "scope", t.scope, "answer", answer)
}
