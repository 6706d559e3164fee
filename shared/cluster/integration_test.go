package cluster

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/secret"
	"github.com/mm2go/mm2go/test/testkit"
)

// Integration tests against the harness's real brokers: their SASL_SSL
// listener (TLS with the harness CA; PLAIN, SCRAM-SHA-256/512 and the Event
// Hubs style $ConnectionString user).

func tlsSettings(c testkit.Clusters, addr string) Settings {
	return Settings{
		Alias:                              "target",
		BootstrapServers:                   []string{addr},
		SecurityProtocol:                   ProtocolSASLSSL,
		SSLTruststoreLocation:              c.CA,
		SSLEndpointIdentificationAlgorithm: "https",
	}
}

func withSASL(s Settings, mech, user, pass string) Settings {
	s.SASLMechanism, s.SASLUsername, s.SASLPassword = mech, user, secret.New(pass)
	return s
}

// wrongKeyConnectionString is the harness's connection string with another key.
const wrongKeyConnectionString = "Endpoint=sb://localhost/;SharedAccessKeyName=test;SharedAccessKey=wrong-key-must-not-leak"

func TestIntegrationProduceConsume(t *testing.T) {
	c := testkit.Require(t)
	addr := c.Target.SASLSSL
	for _, test := range []struct {
		name string
		s    Settings
	}{
		{name: "PLAIN over TLS", s: withSASL(tlsSettings(c, addr), MechanismPlain, testkit.PlainUser, testkit.PlainPass)},
		{name: "SCRAM-SHA-256 over TLS", s: withSASL(tlsSettings(c, addr), MechanismScramSHA256, testkit.ScramUser, testkit.ScramPass)},
		{name: "SCRAM-SHA-512 over TLS", s: withSASL(tlsSettings(c, addr), MechanismScramSHA512, testkit.ScramUser, testkit.ScramPass)},
		{name: "SCRAM-SHA-512 via JAAS, source cluster", s: func() Settings {
			s := tlsSettings(c, c.Source.SASLSSL)
			s.Alias, s.SASLMechanism = "source", MechanismScramSHA512
			s.SASLJAASConfig = secret.New(fmt.Sprintf(`org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";`, testkit.ScramUser, testkit.ScramPass))
			return s
		}()},
		{name: "Event Hubs connection string", s: Settings{
			// sb://localhost/ derives localhost:9093; the harness listens elsewhere,
			// so the explicit bootstrap (as for a private endpoint) wins.
			Alias:                              "target",
			BootstrapServers:                   []string{addr},
			EventHubsConnectionString:          secret.New(testkit.EHConnectionString),
			SSLTruststoreLocation:              c.CA,
			SSLEndpointIdentificationAlgorithm: "https",
		}},
	} {
		t.Run(test.name, func(t *testing.T) {
			plainAddr := c.Target.Bootstrap
			if test.s.Alias == "source" {
				plainAddr = c.Source.Bootstrap
			}
			topic := testkit.CreateTopic(t, plainAddr, testkit.Name(t, "cluster"), 2, nil)
			ctx := testkit.Context(t, 60*time.Second)

			prod, err := NewClient(ctx, test.s, nil, kgo.DefaultProduceTopic(topic))
			if err != nil {
				t.Fatal(err)
			}
			defer prod.Close()
			start := time.Now()
			if err := Ping(ctx, prod, test.s); err != nil {
				t.Fatal(err)
			}
			t.Logf("connect+authenticate+metadata: %v", time.Since(start).Round(time.Millisecond))
			var recs []*kgo.Record
			for i := range 10 {
				recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
			}
			if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatalf("producing: %v", err)
			}

			cons, err := NewClient(ctx, test.s, nil, kgo.ConsumeTopics(topic))
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			got := map[string]string{}
			for len(got) < len(recs) {
				fs := cons.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("consumed %d of %d records: %v", len(got), len(recs), err)
				}
				fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetching %s[%d]: %v", tp, p, err) })
				fs.EachRecord(func(r *kgo.Record) { got[string(r.Key)] = string(r.Value) })
			}
			for _, r := range recs {
				if got[string(r.Key)] != string(r.Value) {
					t.Errorf("key %s: got %q, want %q", r.Key, got[string(r.Key)], r.Value)
				}
			}
		})
	}
}

func TestIntegrationConnectErrors(t *testing.T) {
	c := testkit.Require(t)
	addr := c.Target.SASLSSL
	prefix := fmt.Sprintf("connecting to cluster %q at %s: ", "target", addr)
	noCA := withSASL(tlsSettings(c, addr), MechanismPlain, testkit.PlainUser, testkit.PlainPass)
	noCA.SSLTruststoreLocation = ""
	noTLS := withSASL(tlsSettings(c, addr), MechanismPlain, testkit.PlainUser, testkit.PlainPass)
	noTLS.SecurityProtocol = ProtocolSASLPlaintext
	ehWrong := Settings{Alias: "target", BootstrapServers: []string{addr}, EventHubsConnectionString: secret.New(wrongKeyConnectionString), SSLTruststoreLocation: c.CA, SSLEndpointIdentificationAlgorithm: "https"}
	for _, test := range []struct {
		name    string
		s       Settings
		want    string
		secrets []string
	}{
		{name: "PLAIN wrong password", s: withSASL(tlsSettings(c, addr), MechanismPlain, testkit.PlainUser, "alice-wrong-secret"), want: `SASL authentication failed (PLAIN as "alice"): `, secrets: []string{"alice-wrong-secret"}},
		{name: "SCRAM-SHA-256 wrong password", s: withSASL(tlsSettings(c, addr), MechanismScramSHA256, testkit.ScramUser, "scram-wrong-secret"), want: `SASL authentication failed (SCRAM-SHA-256 as "scram-user"): `, secrets: []string{"scram-wrong-secret"}},
		{name: "SCRAM-SHA-512 unknown user", s: withSASL(tlsSettings(c, addr), MechanismScramSHA512, "nobody", "scram-wrong-secret"), want: `SASL authentication failed (SCRAM-SHA-512 as "nobody"): `, secrets: []string{"scram-wrong-secret"}},
		{name: "Event Hubs wrong key", s: ehWrong, want: `SASL authentication failed (PLAIN as "$ConnectionString"): `, secrets: []string{wrongKeyConnectionString, "wrong-key-must-not-leak"}},
		{name: "untrusted CA", s: noCA, want: "TLS: broker certificate not signed by a trusted CA", secrets: []string{testkit.PlainPass}},
		{name: "plaintext to TLS listener", s: noTLS, want: "", secrets: []string{testkit.PlainPass}},
	} {
		t.Run(test.name, func(t *testing.T) {
			cl, err := NewClient(context.Background(), test.s, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			err = Ping(ctx, cl, test.s)
			if err == nil {
				t.Fatal("Ping succeeded")
			}
			t.Log(err)
			if !strings.HasPrefix(err.Error(), prefix+test.want) {
				t.Errorf("error %q does not start with %q", err, prefix+test.want)
			}
			for _, sec := range test.secrets {
				if strings.Contains(err.Error(), sec) {
					t.Errorf("error contains secret %q", sec)
				}
			}
		})
	}
}

// TestIntegrationFailedConnectionLeaksNoSecret captures every log line (the
// package's and franz-go's, at DEBUG) and the errors of failed connections
// and checks that no secret appears in them.
func TestIntegrationFailedConnectionLeaksNoSecret(t *testing.T) {
	c := testkit.Require(t)
	addr := c.Target.SASLSSL
	const wrongPass = "alice-wrong-password-xyzzy"
	for _, test := range []struct {
		name    string
		s       Settings
		secrets []string
	}{
		{
			name: "Event Hubs wrong SAS key",
			s:    Settings{Alias: "target", BootstrapServers: []string{addr}, EventHubsConnectionString: secret.New(wrongKeyConnectionString), SSLTruststoreLocation: c.CA, SSLEndpointIdentificationAlgorithm: "https"},
			// The whole string, its key, and the harness's real string and key.
			secrets: []string{wrongKeyConnectionString, "wrong-key-must-not-leak", testkit.EHConnectionString, "fake-key-do-not-log"},
		},
		{
			name:    "PLAIN wrong password",
			s:       withSASL(tlsSettings(c, addr), MechanismPlain, testkit.PlainUser, wrongPass),
			secrets: []string{wrongPass},
		},
		{
			name: "SCRAM wrong password in JAAS",
			s: func() Settings {
				s := tlsSettings(c, addr)
				s.SASLMechanism = MechanismScramSHA256
				s.SASLJAASConfig = secret.New(`org.apache.kafka.common.security.scram.ScramLoginModule required username="scram-user" password="` + wrongPass + `";`)
				return s
			}(),
			secrets: []string{wrongPass},
		},
	} {
		t.Run(test.name, func(t *testing.T) {
			var buf bytes.Buffer
			logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			ctx := testkit.Context(t, 30*time.Second)

			cl, err := NewClient(ctx, test.s, logger,
				kgo.WithLogger(KafkaLogger(logger, slog.LevelDebug, test.s)),
				kgo.DefaultProduceTopic(testkit.Name(t, "never")),
				kgo.RecordRetries(1), kgo.RecordDeliveryTimeout(2*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			var errs []error
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			errs = append(errs, Ping(pctx, cl, test.s))
			cancel()
			// A produce retries the connection in the background: more log lines.
			pctx, cancel = context.WithTimeout(ctx, 3*time.Second)
			if err := cl.ProduceSync(pctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
				errs = append(errs, ConnectError(test.s, err))
			}
			cancel()
			cl.Close()

			logs := buf.String()
			if !strings.Contains(logs, `"level":"DEBUG"`) || !strings.Contains(logs, "beginning sasl authentication") {
				t.Fatalf("franz-go DEBUG logs were not captured:\n%s", logs)
			}
			t.Logf("%d log bytes, %d lines captured", len(logs), strings.Count(logs, "\n"))
			all := logs
			for _, err := range errs {
				if err == nil {
					t.Fatal("a failed connection returned no error")
				}
				t.Log(err)
				all += "\n" + err.Error() + "\n" + fmt.Sprintf("%+v %#v", err, err)
			}
			for _, sec := range test.secrets {
				if strings.Contains(all, sec) {
					t.Errorf("secret %q found in logs or errors", sec)
				}
			}
		})
	}
}
