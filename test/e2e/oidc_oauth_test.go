package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/oidcissuer"
)

// The OIDC client of these tests and the audience the broker expects (requested as the scope:
// the issuer puts the scopes into "aud").
const (
	oidcClient   = "mm2go-mirror"
	oidcSecret   = "oidc-client-secret-DO-NOT-LOG-91c3"
	oidcAudience = "kafka-cluster"
)

// TestOIDCOAuthBearerMirror runs `mirror run` with Kafka's own OIDC client-credentials settings
// against a real OIDC issuer (mock-oauth2-server) and a real broker whose OAUTHBEARER listener
// validates the tokens (Kafka's OAuthBearerValidatorCallbackHandler: signature from the issuer's
// JWKS over HTTP, issuer, audience, expiry).
func TestOIDCOAuthBearerMirror(t *testing.T) {
	c := testkit.Require(t)
	iss := oidcissuer.Start(t, oidcissuer.Options{})
	ob := startValidatingBroker(t, c, tokenValidation{
		JWKSURL:  iss.JWKSURL(oidcissuer.DefaultIssuer),
		Audience: oidcAudience,
		Issuer:   iss.Issuer(oidcissuer.DefaultIssuer),
	})
	endpoint := iss.TokenEndpoint(oidcissuer.DefaultIssuer)

	// mirrorOnce copies a fresh topic to the OAUTHBEARER broker and checks it byte for byte.
	mirrorOnce := func(t *testing.T, env []string) MirrorResult {
		t.Helper()
		topic := createTopic(t, c.Source.Bootstrap, testkit.Name(t, "oidc"), 3, nil)
		want := testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 3, 300)...)
		testkit.DeleteTopicsAtEnd(t, ob.Plain, "source."+topic)
		r := runMirrorEnv(t, append(env, "MM2_TOPICS="+topic)...)
		if r.Code != 0 || r.Records() != int64(len(want)) {
			t.Fatalf("mirror run: exit %d, %d records (want %d)\nstdout: %s\nstderr: %s", r.Code, r.Records(), len(want), r.Stdout, lastLines(r.Stderr, 30))
		}
		testkit.AssertSameRecords(t, want, testkit.ReadAll(t, ob.Plain, "source."+topic))
		if strings.Contains(r.Stdout+r.Stderr, oidcSecret) {
			t.Fatal("the client secret is in the mirror's output")
		}
		return r
	}

	t.Run("MM2 properties file", func(t *testing.T) {
		// The lines a Kafka/MM2 user writes for an OIDC provider, unchanged.
		props := strings.Join([]string{
			"clusters = source, target",
			"source.bootstrap.servers = " + c.Source.Bootstrap,
			"target.bootstrap.servers = " + ob.OAuth,
			"source->target.enabled = true",
			"target.security.protocol = SASL_SSL",
			"target.ssl.truststore.location = " + ob.CA,
			"target.sasl.mechanism = OAUTHBEARER",
			"target.sasl.oauthbearer.token.endpoint.url = " + endpoint,
			"target.sasl.login.callback.handler.class = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
			`target.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="` + oidcClient + `" clientSecret="` + oidcSecret + `" scope="` + oidcAudience + `";`,
			"target.sasl.oauthbearer.sub.claim.name = sub",
			"target.sasl.oauthbearer.scope.claim.name = scope",
			"replication.factor = 1",
			"offset-syncs.topic.replication.factor = 1",
			"offset.storage.replication.factor = 1",
			"offset.storage.partitions = 3",
			"heartbeats.replication.enabled = false",
		}, "\n") + "\n"
		file := filepath.Join(t.TempDir(), "mm2.properties")
		if err := os.WriteFile(file, []byte(props), 0o600); err != nil {
			t.Fatal(err)
		}
		// Kafka 4 needs the endpoint in the JVM property org.apache.kafka.sasl.oauthbearer.allowed.urls;
		// mm2go in its setting of the same name.
		_ = mirrorOnce(t, []string{"MM2_CONFIG_FILE=" + file, "MM2_TARGET_SASL_OAUTHBEARER_ALLOWED_URLS=" + endpoint})
	})

	flowEnv := []string{
		"MM2_SOURCE_BOOTSTRAP_SERVERS=" + c.Source.Bootstrap,
		"MM2_TARGET_BOOTSTRAP_SERVERS=" + ob.OAuth,
		"MM2_TARGET_SECURITY_PROTOCOL=SASL_SSL",
		"MM2_TARGET_SSL_TRUSTSTORE_LOCATION=" + ob.CA,
		"MM2_TARGET_SASL_MECHANISM=OAUTHBEARER",
		"MM2_TARGET_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL=" + endpoint,
		"MM2_TARGET_SASL_OAUTHBEARER_ALLOWED_URLS=" + endpoint,
		"MM2_HEARTBEATS_REPLICATION_ENABLED=false",
		"MM2_REPLICATION_FACTOR=1",
		"MM2_OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR=1",
		"MM2_OFFSET_STORAGE_REPLICATION_FACTOR=1",
		"MM2_OFFSET_STORAGE_PARTITIONS=3",
	}

	t.Run("environment, Kafka 4.1 client credentials properties, older handler class", func(t *testing.T) {
		r := mirrorOnce(t, append(flowEnv, "MM2_LOG_LEVEL=debug",
			"MM2_TARGET_SASL_LOGIN_CALLBACK_HANDLER_CLASS=org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
			"MM2_TARGET_SASL_OAUTHBEARER_CLIENT_CREDENTIALS_CLIENT_ID="+oidcClient,
			"MM2_TARGET_SASL_OAUTHBEARER_CLIENT_CREDENTIALS_CLIENT_SECRET="+oidcSecret,
			"MM2_TARGET_SASL_OAUTHBEARER_SCOPE="+oidcAudience))
		// The run's target clients share one token source: one token for the whole run.
		if n := strings.Count(r.Stderr, "OAUTHBEARER token fetched"); n != 1 {
			t.Errorf("the run fetched %d tokens, want 1 (cached)", n)
		}
	})

	t.Run("wrong audience refused by the broker", func(t *testing.T) {
		topic := createTopic(t, c.Source.Bootstrap, testkit.Name(t, "oidc"), 1, nil)
		testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 1, 5)...)
		off := ob.logSize()
		r := runMirrorEnv(t, append(flowEnv, "MM2_TOPICS="+topic,
			`MM2_TARGET_SASL_JAAS_CONFIG=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="`+oidcClient+`" clientSecret="`+oidcSecret+`" scope="some-other-cluster";`)...)
		if r.Code == 0 {
			t.Fatalf("mirror run with a wrong-audience token succeeded:\n%s", r.Stdout)
		}
		t.Logf("mirror's error: %s", lastLines(strings.TrimSpace(r.Stderr), 1))
		for _, want := range []string{"the broker refused the OAUTHBEARER token", `"token_endpoint":"` + endpoint + `"`,
			`"client_id":"` + oidcClient + `"`, `"scope":"some-other-cluster"`, "SASL_AUTHENTICATION_FAILED"} {
			if !strings.Contains(r.Stderr, want) {
				t.Errorf("the failure lacks %q:\n%s", want, lastLines(r.Stderr, 20))
			}
		}
		if !strings.Contains(ob.logSince(off), "some-other-cluster") {
			t.Errorf("the broker did not log the audience as the reason:\n%s", lastLines(ob.logSince(off), 10))
		}
		if strings.Contains(r.Stdout+r.Stderr, oidcSecret) {
			t.Fatal("the client secret is in the mirror's output")
		}
	})

	t.Run("wrong secret", func(t *testing.T) {
		// mock-oauth2-server grants any secret, so this case uses the repository's Entra ID
		// stand-in (testkit/entrafake), whose v2.0 token endpoint checks client secrets and
		// answers invalid_client as Entra ID does: an OIDC token endpoint like any other here.
		fake := newFakeEntra(t)
		trust := filepath.Join(t.TempDir(), "trust.pem")
		var pem []byte
		for _, f := range []string{ob.CA, fake.CAFile} {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			pem = append(pem, b...)
		}
		if err := os.WriteFile(trust, pem, 0o600); err != nil {
			t.Fatal(err)
		}
		entraEndpoint := strings.TrimSuffix(fake.AuthorityHost, "/") + "/" + azTenant + "/oauth2/v2.0/token"
		topic := createTopic(t, c.Source.Bootstrap, testkit.Name(t, "oidc"), 1, nil)
		r := runMirrorEnv(t, append(flowEnv, "MM2_TOPICS="+topic,
			"MM2_TARGET_SSL_TRUSTSTORE_LOCATION="+trust,
			"MM2_TARGET_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL="+entraEndpoint, "MM2_TARGET_SASL_OAUTHBEARER_ALLOWED_URLS="+entraEndpoint,
			`MM2_TARGET_SASL_JAAS_CONFIG=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="`+azSPClientID+`" clientSecret="not-the-secret-DO-NOT-LOG" scope="https://kafka.example/.default";`)...)
		if r.Code == 0 {
			t.Fatalf("mirror run with a wrong client secret succeeded:\n%s", r.Stdout)
		}
		t.Logf("mirror's error: %s", lastLines(strings.TrimSpace(r.Stderr), 1))
		want := `getting an OAUTHBEARER token from ` + entraEndpoint + ` for client ID \"` + azSPClientID + `\" (MM2_TARGET_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL, target.sasl.oauthbearer.token.endpoint.url) failed: HTTP 401: invalid_client: AADSTS7000215: Invalid client secret provided.`
		if !strings.Contains(r.Stderr, want) || !strings.Contains(r.Stderr, "(check the client ID and secret: JAAS clientId/clientSecret or sasl.oauthbearer.client.credentials.*)") {
			t.Errorf("the failure does not name the setting and the reason; want %s in:\n%s", want, lastLines(r.Stderr, 10))
		}
		if strings.Contains(r.Stdout+r.Stderr, "not-the-secret-DO-NOT-LOG") {
			t.Fatal("the client secret is in the mirror's output")
		}
	})
}
