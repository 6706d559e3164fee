package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/secret"
	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/entrafake"
)

// Identities the fake Entra ID knows in these tests.
const (
	azTenant         = "7f3c1a2b-0000-4000-8000-00000000cafe"
	azSPClientID     = "5a1d0c9e-0000-4000-8000-0000000000s1"
	azSPSecret       = "sp-secret-DO-NOT-LOG-7c1f"
	azWorkloadID     = "5a1d0c9e-0000-4000-8000-0000000000w1"
	azUserAssignedMI = "5a1d0c9e-0000-4000-8000-0000000000m1"
	azServiceAccount = "eyJhbGciOiJSUzI1NiJ9.fake-kubernetes-service-account-token.sig"
)

func newFakeEntra(t *testing.T) *entrafake.Server {
	return entrafake.New(t, entrafake.Config{
		Tenant:            azTenant,
		Secrets:           map[string]string{azSPClientID: azSPSecret},
		Federated:         map[string]string{azWorkloadID: azServiceAccount},
		ManagedIdentities: []string{azUserAssignedMI},
	})
}

// brokerTLS trusts the harness CA that signed the broker's certificate.
func brokerTLS(t *testing.T, caFile string) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

func oauthClient(t *testing.T, ob *oauthBroker, mech sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(ob.OAuth), kgo.DialTLSConfig(brokerTLS(t, ob.CA)), kgo.SASL(mech),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestAzureADOAuthBearer runs mm2go's Azure AD token source against a real
// Kafka broker that validates Entra-style JWTs (signature from the fake's
// JWKS, issuer, audience, expiry), with the real azidentity credentials
// talking HTTPS to the fake Entra ID.
func TestAzureADOAuthBearer(t *testing.T) {
	c := testkit.Require(t)
	fake := newFakeEntra(t)
	ob := startOAuthBroker(t, c, fake)
	co := azcore.ClientOptions{Transport: fake.HTTPClient()}
	spConfig := cluster.AzureConfig{Auth: cluster.AzureAuthClientSecret, TenantID: azTenant, ClientID: azSPClientID,
		ClientSecret: secret.New(azSPSecret), AuthorityHost: fake.AuthorityHost}
	bootstrap := []string{ehNamespace + ":9093"} // the scope comes from the namespace host

	t.Run("client secret produce and consume", func(t *testing.T) {
		tokens, err := cluster.NewAzureTokens("target", spConfig, bootstrap, nil, cluster.WithAzureClientOptions(co))
		if err != nil {
			t.Fatal(err)
		}
		cl := oauthClient(t, ob, tokens.Mechanism(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		ctx := testkit.Context(t, 60*time.Second)
		topic := testkit.Name(t, "az")
		resp, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("creating a topic through the OAUTHBEARER listener: %v", err)
		}
		var recs []*kgo.Record
		for i := range 100 {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("v%d", i))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("producing with an Azure AD token: %v", err)
		}
		got := testkit.ReadAll(t, ob.Plain, topic)
		if len(got) != len(recs) {
			t.Fatalf("read %d records, want %d", len(got), len(recs))
		}
		issued := fake.Issued()
		if len(issued) == 0 || issued[0].Grant != "client_secret" || issued[0].Audience != ob.Audience {
			t.Fatalf("issued tokens = %+v, want a client_secret token for %s", issued, ob.Audience)
		}
		if tokens.Fetches() != 1 {
			t.Errorf("one client, several connections: %d token fetches, want 1 (cached)", tokens.Fetches())
		}
	})

	// refused checks that the broker refuses the token and logs why: the
	// reason must be the one the test provoked, not another.
	refused := func(t *testing.T, mech sasl.Mechanism, reason string) error {
		t.Helper()
		off := ob.logSize()
		defer func() {
			if !strings.Contains(ob.logSince(off), reason) {
				t.Errorf("the broker did not log %q as the reason:\n%s", reason, lastLines(ob.logSince(off), 10))
			}
		}()
		cl := oauthClient(t, ob, mech)
		ctx := testkit.Context(t, 30*time.Second)
		err := cl.Ping(ctx)
		if err == nil {
			t.Fatal("the broker accepted the token: is the broker JWT validator active? (Kafka 4.1.0-4.1.1 needs sasl.oauthbearer.jwt.validator.class)")
		}
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("error = %v, want SASL_AUTHENTICATION_FAILED", err)
		}
		return err
	}

	t.Run("wrong audience refused", func(t *testing.T) {
		cfg := spConfig
		cfg.Scope = "https://eventhubs.azure.net/.default" // the AMQP SDKs' audience, wrong for Kafka
		var logs bytes.Buffer
		tokens, err := cluster.NewAzureTokens("target", cfg, bootstrap, slog.New(slog.NewTextHandler(&logs, nil)), cluster.WithAzureClientOptions(co))
		if err != nil {
			t.Fatal(err)
		}
		// Only the scope differs from the accepted client-secret case, so the
		// refusal is the audience check (the broker answers just
		// {"status":"invalid_token"}).
		err = refused(t, tokens.Mechanism(), "Audience (aud) claim [https://eventhubs.azure.net]")
		t.Logf("wrong audience: %v", err)
		for _, want := range []string{"the broker refused the Azure AD token", "cluster=target", "credential=ClientSecretCredential", "scope=https://eventhubs.azure.net/.default"} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("the refusal log lacks %q:\n%s", want, logs.String())
			}
		}
	})

	t.Run("expired token refused", func(t *testing.T) {
		// Beyond the broker's 30 s clock skew allowance.
		tok := fake.Mint(ob.Audience, azSPClientID, time.Now().Add(-2*time.Hour), time.Hour)
		err := refused(t, oauth.Auth{Token: tok}.AsMechanism(), "on or after the Expiration Time")
		t.Logf("expired: %v", err)
	})

	t.Run("token signed by another key refused", func(t *testing.T) {
		refused(t, oauth.Auth{Token: fake.MintForeign(ob.Audience, azSPClientID)}.AsMechanism(), "JwtValidatorException")
	})

	t.Run("wrong issuer refused", func(t *testing.T) {
		other := entrafake.New(t, entrafake.Config{Tenant: "another-tenant"})
		// Same audience, foreign issuer and key: refused either way.
		refused(t, oauth.Auth{Token: other.Mint(ob.Audience, azSPClientID, time.Now(), time.Hour)}.AsMechanism(), "JwtValidatorException")
	})

	t.Run("token fetch failure names cluster and credential", func(t *testing.T) {
		cfg := spConfig
		cfg.ClientSecret = secret.New("wrong-secret-DO-NOT-LOG")
		tokens, err := cluster.NewAzureTokens("target", cfg, bootstrap, nil, cluster.WithAzureClientOptions(co))
		if err != nil {
			t.Fatal(err)
		}
		cl := oauthClient(t, ob, tokens.Mechanism())
		err = cl.Ping(testkit.Context(t, 30*time.Second))
		if err == nil {
			t.Fatal("a wrong client secret connected")
		}
		msg := err.Error()
		for _, want := range []string{`cluster "target"`, "ClientSecretCredential", azSPClientID, "AADSTS7000215"} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q lacks %q", msg, want)
			}
		}
		if strings.Contains(msg, "wrong-secret-DO-NOT-LOG") || strings.Contains(msg, azSPSecret) {
			t.Errorf("error reveals a secret: %q", msg)
		}
	})

	t.Run("token expiring mid-burst is refreshed without loss", func(t *testing.T) {
		// Short-lived tokens: the broker gives each session the token's
		// remaining life (KIP-368), so franz-go re-authenticates in place on
		// its connections, and new connections need fresh tokens.
		fake.SetLifetime(6 * time.Second)
		defer fake.SetLifetime(time.Hour)
		tokens, err := cluster.NewAzureTokens("target", spConfig, bootstrap, nil, cluster.WithAzureClientOptions(co))
		if err != nil {
			t.Fatal(err)
		}
		topic := testkit.Name(t, "az-refresh")
		createTopic(t, ob.Plain, topic, 3, nil)
		cl := oauthClient(t, ob, tokens.Mechanism(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
		ctx := testkit.Context(t, 120*time.Second)
		var failed atomic.Int64
		var firstErr atomic.Value
		sent := 0
		// Keep producing across several token lifetimes (bounded by count,
		// not asserted on time).
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			for range 50 {
				r := &kgo.Record{Topic: topic, Partition: int32(sent % 3), Key: []byte(fmt.Sprint(sent)), Value: []byte(fmt.Sprintf("value-%06d", sent))}
				sent++
				cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
					if err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					}
				})
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if failed.Load() > 0 {
			t.Fatalf("%d of %d records failed across token refreshes; first: %v", failed.Load(), sent, firstErr.Load())
		}
		got := testkit.ReadAll(t, ob.Plain, topic)
		seen := map[string]bool{}
		for _, r := range got {
			seen[string(r.Key)] = true
		}
		if len(seen) != sent {
			t.Fatalf("read %d distinct records, want %d", len(seen), sent)
		}
		if tokens.Fetches() < 3 {
			t.Fatalf("%d token fetches over 20 s of 6 s tokens; want refreshes", tokens.Fetches())
		}
		t.Logf("%d records across %d tokens", sent, tokens.Fetches())
	})
}
