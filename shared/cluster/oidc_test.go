package cluster

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mm2go/mm2go/shared/secret"
	"github.com/mm2go/mm2go/test/testkit/oidcissuer"
)

const (
	oidcClientID = "mm2go-mirror"
	oidcSecret   = "oidc-secret-DO-NOT-LOG-4b2e"
	oidcJAAS     = `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="mm2go-mirror" clientSecret="oidc-secret-DO-NOT-LOG-4b2e" scope="kafka-cluster";`
)

func oidcSettings(endpoint string) Settings {
	return Settings{
		Alias: "target", Role: "target", BootstrapServers: []string{"127.0.0.1:9"},
		SecurityProtocol: "SASL_PLAINTEXT", SASLMechanism: "OAUTHBEARER", SASLJAASConfig: secret.New(oidcJAAS),
		OAuthBearer: OAuthBearerConfig{LoginCallbackHandlerClass: OAuthBearerLoginCallbackHandler, TokenEndpointURL: endpoint,
			AllowedURLs: endpoint + ", file:/var/run/secrets/token"},
		ConsumerAutoOffsetReset: "earliest", ConsumerIsolationLevel: "read_uncommitted", ProducerCompressionType: "none",
	}
}

func TestOIDCSettings(t *testing.T) {
	const ep = "https://issuer.example/token"
	for _, tc := range []struct {
		name string
		mod  func(*Settings)
		want []string // problems (substrings); none: valid
	}{
		{name: "kafka's settings", mod: func(*Settings) {}},
		{name: "older handler class name", mod: func(s *Settings) { s.OAuthBearer.LoginCallbackHandlerClass = OAuthBearerLoginCallbackHandlerLegacy }},
		{name: "handler class left out, mechanism implied", mod: func(s *Settings) { s.OAuthBearer.LoginCallbackHandlerClass, s.SASLMechanism = "", "" }},
		{name: "client credentials as properties (Kafka 4.1)", mod: func(s *Settings) {
			s.SASLJAASConfig = secret.New(OAuthBearerLoginModule + " required ;")
			s.OAuthBearer.ClientID, s.OAuthBearer.ClientSecret, s.OAuthBearer.Scope = "id", secret.New("sec"), "kafka"
			s.OAuthBearer.JWTRetrieverClass = ClientCredentialsJwtRetriever
		}},
		{name: "token file", mod: func(s *Settings) {
			s.SASLJAASConfig, s.OAuthBearer.TokenEndpointURL = secret.Secret{}, "file:/var/run/secrets/token"
		}},
		{name: "other handler class", mod: func(s *Settings) { s.OAuthBearer.LoginCallbackHandlerClass = "com.example.MyHandler" },
			want: []string{`MM2_TARGET_SASL_LOGIN_CALLBACK_HANDLER_CLASS (target.sasl.login.callback.handler.class): "com.example.MyHandler" is not supported`}},
		{name: "handler without endpoint", mod: func(s *Settings) { s.OAuthBearer.TokenEndpointURL = "" },
			want: []string{"MM2_TARGET_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL (target.sasl.oauthbearer.token.endpoint.url): required with sasl.login.callback.handler.class"}},
		{name: "no client secret", mod: func(s *Settings) {
			s.SASLJAASConfig = secret.New(OAuthBearerLoginModule + ` required clientId="id";`)
		}, want: []string{"MM2_TARGET_SASL_JAAS_CONFIG (target.sasl.jaas.config): needs the clientSecret option"}},
		{name: "plain login module", mod: func(s *Settings) {
			s.SASLJAASConfig = secret.New(`org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";`)
		}, want: []string{"MM2_TARGET_SASL_JAAS_CONFIG (target.sasl.jaas.config): login module org.apache.kafka.common.security.plain.PlainLoginModule does not do OAUTHBEARER"}},
		{name: "jwt-bearer retriever", mod: func(s *Settings) {
			s.OAuthBearer.JWTRetrieverClass = "org.apache.kafka.common.security.oauthbearer.JwtBearerJwtRetriever"
		}, want: []string{"MM2_TARGET_SASL_OAUTHBEARER_JWT_RETRIEVER_CLASS", "the jwt-bearer grant is not supported"}},
		{name: "protocol not SASL", mod: func(s *Settings) { s.SecurityProtocol = "" },
			want: []string{"MM2_TARGET_SECURITY_PROTOCOL (target.security.protocol): SASL credentials are set but the protocol is not"}},
		{name: "other mechanism", mod: func(s *Settings) { s.SASLMechanism = "PLAIN" },
			want: []string{"MM2_TARGET_SASL_MECHANISM (target.sasl.mechanism): must be OAUTHBEARER with sasl.oauthbearer.token.endpoint.url"}},
		{name: "and azure", mod: func(s *Settings) { s.Azure.Auth = AzureAuthDefault; s.SecurityProtocol = "SASL_SSL" },
			want: []string{"set either azure.auth (Azure AD through azidentity) or sasl.oauthbearer.token.endpoint.url"}},
		{name: "bad refresh factor", mod: func(s *Settings) { s.OAuthBearer.LoginRefreshWindowFactor = "0.2" },
			want: []string{`MM2_TARGET_SASL_LOGIN_REFRESH_WINDOW_FACTOR (target.sasl.login.refresh.window.factor): "0.2" is not a number from 0.5 to 1`}},
		{name: "bad url", mod: func(s *Settings) { s.OAuthBearer.TokenEndpointURL = "issuer.example/token" },
			want: []string{`"issuer.example/token" is not an https, http or file URL`}},
		// F10: Kafka 4 refuses a token endpoint its allow-list does not name (CVE-2025-27817).
		{name: "endpoint not allow-listed", mod: func(s *Settings) { s.OAuthBearer.AllowedURLs = "" },
			want: []string{`MM2_TARGET_SASL_OAUTHBEARER_ALLOWED_URLS (target.sasl.oauthbearer.allowed.urls): does not list the token endpoint "` + ep + `"`}},
		{name: "http endpoint not allow-listed", mod: func(s *Settings) { s.OAuthBearer.TokenEndpointURL = "http://issuer.example/token" },
			want: []string{`does not list the token endpoint "http://issuer.example/token"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := oidcSettings(ep)
			tc.mod(&s)
			errs := s.Normalize("MM2_TARGET_", "target.")
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			joined := strings.Join(got, "\n")
			if len(tc.want) == 0 && len(errs) > 0 || strings.Contains(joined, oidcSecret) {
				t.Fatalf("problems: %s", joined)
			}
			for _, w := range tc.want {
				if !strings.Contains(joined, w) {
					t.Errorf("problems %q lack %q", got, w)
				}
			}
			if len(tc.want) == 0 && s.SASLMechanism != MechanismOAuthBearer {
				t.Errorf("mechanism %q, want OAUTHBEARER", s.SASLMechanism)
			}
		})
	}
}

func jwtClaims(t *testing.T, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestOIDCTokens fetches tokens from a real OIDC issuer's token endpoint (mock-oauth2-server):
// cached until Kafka's refresh time, then fetched again; errors name the setting, never the secret.
func TestOIDCTokens(t *testing.T) {
	iss := oidcissuer.Start(t, oidcissuer.Options{})
	ctx := context.Background()
	s := oidcSettings(iss.TokenEndpoint(oidcissuer.DefaultIssuer))
	if errs := s.Normalize("MM2_TARGET_", "target."); len(errs) > 0 {
		t.Fatal(errs)
	}
	tokens, err := NewOIDCTokens(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	tokens.now = func() time.Time { return clock }

	t.Run("cached until the refresh time", func(t *testing.T) {
		first, err := tokens.Token(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c := jwtClaims(t, first)
		if c["sub"] != oidcClientID || c["aud"] != "kafka-cluster" || c["iss"] != iss.Issuer(oidcissuer.DefaultIssuer) {
			t.Fatalf("token claims %v: want sub %s, aud kafka-cluster (the scope), iss %s", c, oidcClientID, iss.Issuer(oidcissuer.DefaultIssuer))
		}
		exp := time.Unix(int64(c["exp"].(float64)), 0)
		life := exp.Sub(clock)
		// Kafka's window: 80 % of the lifetime plus up to 5 % jitter.
		lo, hi := clock.Add(life*80/100-time.Second), clock.Add(life*85/100+time.Second)
		if tokens.refreshAt.Before(lo) || tokens.refreshAt.After(hi) {
			t.Fatalf("refresh at %s, want between %s and %s (lifetime %s)", tokens.refreshAt, lo, hi, life)
		}
		clock = tokens.refreshAt.Add(-time.Second)
		again, err := tokens.Token(ctx)
		if err != nil || again != first || tokens.Fetches() != 1 {
			t.Fatalf("before the refresh time: same token %v, %d fetches, err %v; want the cached token, 1 fetch", again == first, tokens.Fetches(), err)
		}
		clock = tokens.refreshAt.Add(time.Second)
		next, err := tokens.Token(ctx)
		if err != nil || next == first || tokens.Fetches() != 2 {
			t.Fatalf("after the refresh time: new token %v, %d fetches, err %v; want a new token, 2 fetches", next != first, tokens.Fetches(), err)
		}
	})

	t.Run("sub claim name", func(t *testing.T) {
		s2 := s
		s2.OAuthBearer.SubClaimName = "preferred_username" // not in the issuer's tokens
		tk, err := NewOIDCTokens(s2, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tk.Token(ctx)
		var te *OIDCTokenError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), `the access token has no "preferred_username" claim (MM2_TARGET_SASL_OAUTHBEARER_SUB_CLAIM_NAME, target.sasl.oauthbearer.sub.claim.name)`) {
			t.Fatalf("err = %v, want the missing claim named with its setting", err)
		}
	})

	t.Run("wrong endpoint", func(t *testing.T) {
		s2 := s
		// A usual mistake: the issuer URL instead of its token endpoint.
		s2.OAuthBearer.TokenEndpointURL = iss.Issuer(oidcissuer.DefaultIssuer)
		tk, err := NewOIDCTokens(s2, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tk.Token(ctx)
		want := `cluster "target": getting an OAUTHBEARER token from ` + s2.OAuthBearer.TokenEndpointURL + ` for client ID "mm2go-mirror" (MM2_TARGET_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL, target.sasl.oauthbearer.token.endpoint.url) failed: HTTP 405: method not allowed (is this the issuer's token endpoint? see token_endpoint in its .well-known/openid-configuration)`
		if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), oidcSecret) {
			t.Fatalf("err = %v\nwant it to start with %s", err, want)
		}
		t.Logf("wrong endpoint: %v", err)
	})

	t.Run("unreachable endpoint is retried, then reported", func(t *testing.T) {
		s2 := s
		s2.OAuthBearer.TokenEndpointURL = "http://127.0.0.1:1/token"
		s2.OAuthBearer.LoginRetryBackoffMS, s2.OAuthBearer.LoginRetryBackoffMaxMS = 1, 4
		tk, err := NewOIDCTokens(s2, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tk.Token(ctx)
		if err == nil || !strings.Contains(err.Error(), "failed: the token endpoint did not answer") {
			t.Fatalf("err = %v, want the endpoint reported unreachable", err)
		}
	})
}
