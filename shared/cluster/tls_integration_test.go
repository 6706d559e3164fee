package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/secret"
	"github.com/mm2go/mm2go/test/testkit"
)

// keytoolStores are Java key and trust stores made by the JDK's keytool, as
// a Kafka operator makes them: a CA, the broker's JKS keystore signed by
// it, client truststores in JKS and PKCS12, and client keystores for mutual
// TLS (PKCS12, and JKS with a key password of its own).
type keytoolStores struct {
	dir                           string
	caPEM                         string
	brokerJKS, trustJKS, trustP12 string
	clientP12, clientJKS          string
	caPass, brokerPass, trustPass string
	clientPass, clientKeyPass     string
}

func makeKeytoolStores(t *testing.T) keytoolStores {
	t.Helper()
	if _, err := exec.LookPath("keytool"); err != nil {
		t.Fatalf("keytool (from the JDK that runs Kafka) is required: %v", err)
	}
	d := t.TempDir()
	k := keytoolStores{
		dir: d, caPEM: filepath.Join(d, "ca.pem"),
		brokerJKS: filepath.Join(d, "broker.jks"), trustJKS: filepath.Join(d, "trust.jks"), trustP12: filepath.Join(d, "trust.p12"),
		clientP12: filepath.Join(d, "client.p12"), clientJKS: filepath.Join(d, "client.jks"),
		caPass: "ca-pass-1", brokerPass: "broker-pass-1", trustPass: "trust-pass-1", clientPass: "client-pass-1", clientKeyPass: "client-key-pass-1",
	}
	ca := filepath.Join(d, "ca.p12")
	run := func(args ...string) {
		t.Helper()
		out, err := exec.Command("keytool", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("keytool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	san := "SAN=ip:127.0.0.1,dns:localhost"
	run("-genkeypair", "-alias", "ca", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=mm2go keytool CA", "-ext", "bc:c",
		"-validity", "2", "-keystore", ca, "-storetype", "PKCS12", "-storepass", k.caPass)
	run("-exportcert", "-rfc", "-alias", "ca", "-keystore", ca, "-storepass", k.caPass, "-file", k.caPEM)
	// signed makes a key pair in store, has the CA sign it, and imports CA and certificate.
	signed := func(store, storeType, storePass, cn string, ext ...string) {
		run("-genkeypair", "-alias", "me", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN="+cn, "-validity", "2",
			"-keystore", store, "-storetype", storeType, "-storepass", storePass, "-keypass", storePass)
		csr, crt := store+".csr", store+".crt"
		run("-certreq", "-alias", "me", "-keystore", store, "-storepass", storePass, "-file", csr)
		run(append([]string{"-gencert", "-alias", "ca", "-keystore", ca, "-storepass", k.caPass, "-infile", csr, "-outfile", crt, "-rfc", "-validity", "2"}, ext...)...)
		run("-importcert", "-noprompt", "-alias", "ca", "-file", k.caPEM, "-keystore", store, "-storepass", storePass)
		run("-importcert", "-alias", "me", "-file", crt, "-keystore", store, "-storepass", storePass)
	}
	signed(k.brokerJKS, "JKS", k.brokerPass, "localhost", "-ext", san)
	signed(k.clientP12, "PKCS12", k.clientPass, "mm2go-client")
	for store, typ := range map[string]string{k.trustJKS: "JKS", k.trustP12: "PKCS12"} {
		run("-importcert", "-noprompt", "-alias", "ca", "-file", k.caPEM, "-keystore", store, "-storetype", typ, "-storepass", k.trustPass)
	}
	// The JKS client keystore: the PKCS12 one converted, its key under a password of its own.
	run("-importkeystore", "-srckeystore", k.clientP12, "-srcstoretype", "PKCS12", "-srcstorepass", k.clientPass, "-srcalias", "me",
		"-destkeystore", k.clientJKS, "-deststoretype", "JKS", "-deststorepass", k.clientPass, "-destkeypass", k.clientKeyPass)
	return k
}

// TestIntegrationKeytoolStores connects to a real broker whose listeners use
// keytool-made JKS and PKCS12 stores: SASL_SSL (SCRAM) trusting through JKS
// and PKCS12 truststores with passwords, and an SSL listener that requires
// a client certificate (mutual TLS) from a PKCS12 or JKS keystore. Records
// produced through each are read back byte for byte on the PLAINTEXT
// listener. A wrong store password fails with an error naming the setting.
func TestIntegrationKeytoolStores(t *testing.T) {
	t.Parallel() // its own broker: overlaps with TestIntegrationGSSAPI
	c := testkit.Require(t)
	k := makeKeytoolStores(t)
	b := testkit.StartExtraBroker(t, c, "tlsstores", 5, func(base int) []string {
		return []string{
			fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d,STORES://127.0.0.1:%d,MTLS://127.0.0.1:%d", base, base+1, base+3, base+4),
			fmt.Sprintf("advertised.listeners=PLAINTEXT://127.0.0.1:%d,STORES://127.0.0.1:%d,MTLS://127.0.0.1:%d", base, base+3, base+4),
			"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,STORES:SASL_SSL,MTLS:SSL",
			"listener.name.stores.sasl.enabled.mechanisms=SCRAM-SHA-512",
			"listener.name.stores.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required ;",
			"listener.name.stores.ssl.keystore.type=JKS",
			"listener.name.stores.ssl.keystore.location=" + k.brokerJKS,
			"listener.name.stores.ssl.keystore.password=" + k.brokerPass,
			"listener.name.stores.ssl.key.password=" + k.brokerPass,
			"listener.name.mtls.ssl.keystore.type=JKS",
			"listener.name.mtls.ssl.keystore.location=" + k.brokerJKS,
			"listener.name.mtls.ssl.keystore.password=" + k.brokerPass,
			"listener.name.mtls.ssl.key.password=" + k.brokerPass,
			"listener.name.mtls.ssl.truststore.type=PKCS12",
			"listener.name.mtls.ssl.truststore.location=" + k.trustP12,
			"listener.name.mtls.ssl.truststore.password=" + k.trustPass,
			"listener.name.mtls.ssl.client.auth=required",
		}
	})
	scram := func(s Settings) Settings {
		s.SecurityProtocol, s.SASLMechanism = ProtocolSASLSSL, MechanismScramSHA512
		s.SASLUsername, s.SASLPassword = testkit.ScramUser, secret.New(testkit.ScramPass)
		return s
	}
	base := Settings{Alias: "target", SSLEndpointIdentificationAlgorithm: "https"}
	for _, test := range []struct {
		name string
		s    Settings
	}{
		{name: "SASL_SSL, JKS truststore", s: scram(withStores(base, b.Addr(3), k.trustJKS, "JKS", k.trustPass))},
		{name: "SASL_SSL, PKCS12 truststore, type from the file", s: scram(withStores(base, b.Addr(3), k.trustP12, "", k.trustPass))},
		{name: "SSL, PKCS12 keystore (mutual TLS)", s: func() Settings {
			s := withStores(base, b.Addr(4), k.trustJKS, "JKS", k.trustPass)
			s.SecurityProtocol = ProtocolSSL
			s.SSLKeystoreLocation, s.SSLKeystoreType, s.SSLKeystorePassword = k.clientP12, "PKCS12", secret.New(k.clientPass)
			return s
		}()},
		{name: "SSL, JKS keystore with a key password (mutual TLS)", s: func() Settings {
			s := withStores(base, b.Addr(4), k.trustP12, "PKCS12", k.trustPass)
			s.SecurityProtocol = ProtocolSSL
			s.SSLKeystoreLocation, s.SSLKeystorePassword, s.SSLKeyPassword = k.clientJKS, secret.New(k.clientPass), secret.New(k.clientKeyPass)
			return s
		}()},
	} {
		t.Run(test.name, func(t *testing.T) {
			ctx := testkit.Context(t, 60*time.Second)
			topic := testkit.CreateTopic(t, b.Plain, testkit.Name(t, "stores"), 1, nil)
			cl, err := NewClient(ctx, test.s, nil, kgo.DefaultProduceTopic(topic))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if err := Ping(ctx, cl, test.s); err != nil {
				t.Fatal(err)
			}
			want := []*kgo.Record{{Topic: topic, Key: []byte("k\x00"), Value: []byte("value over " + test.name)}}
			if err := cl.ProduceSync(ctx, want...).FirstErr(); err != nil {
				t.Fatalf("producing: %v", err)
			}
			testkit.AssertSameRecords(t, want, testkit.ReadAll(t, b.Plain, topic))
		})
	}

	t.Run("no client certificate is refused by the broker", func(t *testing.T) {
		ctx := testkit.Context(t, 30*time.Second)
		s := withStores(base, b.Addr(4), k.trustJKS, "JKS", k.trustPass)
		s.SecurityProtocol = ProtocolSSL
		cl, err := NewClient(ctx, s, nil, kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := Ping(ctx, cl, s); err == nil {
			t.Fatal("the mutual TLS listener accepted a client without a certificate")
		}
	})

	// A wrong SASL password of one or two characters: the real broker's
	// refusal comes out intact (the old substring redaction spliced
	// "[redacted]" into every word holding the letter).
	for _, pass := range []string{"b", "er"} {
		t.Run("short wrong SASL password "+pass, func(t *testing.T) {
			ctx := testkit.Context(t, 30*time.Second)
			s := scram(withStores(base, b.Addr(3), k.trustJKS, "JKS", k.trustPass))
			s.SASLPassword = secret.New(pass)
			cl, err := NewClient(ctx, s, nil, kgo.RequestRetries(0))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			err = Ping(ctx, cl, s)
			if err == nil {
				t.Fatal("a wrong password was accepted")
			}
			want := fmt.Sprintf("connecting to cluster %q at %s: SASL authentication failed (SCRAM-SHA-512 as %q): ", "target", b.Addr(3), testkit.ScramUser)
			if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512") {
				t.Errorf("error\n got %q\nwant %q + the broker's message", err, want)
			}
			if strings.Contains(err.Error(), "redacted") || strings.Contains(err.Error(), "withheld") {
				t.Errorf("error text edited: %q", err)
			}
		})
	}

	t.Run("wrong passwords name the setting", func(t *testing.T) {
		for _, test := range []struct {
			name string
			s    Settings
			want string
		}{
			{name: "JKS truststore", s: scram(withStores(base, b.Addr(3), k.trustJKS, "JKS", "x")),
				want: "MM2_TARGET_SSL_TRUSTSTORE_PASSWORD (target.ssl.truststore.password): wrong password for the JKS store " + k.trustJKS + " (or the store is damaged)"},
			{name: "PKCS12 truststore", s: scram(withStores(base, b.Addr(3), k.trustP12, "PKCS12", "xy")),
				want: "MM2_TARGET_SSL_TRUSTSTORE_PASSWORD (target.ssl.truststore.password): wrong password for the PKCS12 truststore " + k.trustP12},
			{name: "JKS key password", s: func() Settings {
				s := withStores(base, b.Addr(4), k.trustJKS, "JKS", k.trustPass)
				s.SecurityProtocol = ProtocolSSL
				s.SSLKeystoreLocation, s.SSLKeystorePassword, s.SSLKeyPassword = k.clientJKS, secret.New(k.clientPass), secret.New("k")
				return s
			}(), want: `MM2_TARGET_SSL_KEY_PASSWORD (target.ssl.key.password): cannot open the private key "me" of the JKS store ` + k.clientJKS + ": wrong password?"},
		} {
			t.Run(test.name, func(t *testing.T) {
				_, err := NewClient(context.Background(), test.s, nil)
				if err == nil {
					t.Fatal("no error")
				}
				if err.Error() != test.want {
					t.Errorf("error\n got %q\nwant %q", err, test.want)
				}
				for _, p := range []string{k.trustPass, k.clientPass, k.clientKeyPass, secret.Redacted} {
					if strings.Contains(err.Error(), p) {
						t.Errorf("error contains %q", p)
					}
				}
			})
		}
	})
	if t.Failed() {
		t.Logf("broker log:\n%s", lastN(b.Log(), 40))
	}
	_ = os.Remove(k.dir)
}

func withStores(s Settings, addr, trust, typ, pass string) Settings {
	s.BootstrapServers = []string{addr}
	s.SSLTruststoreLocation, s.SSLTruststoreType, s.SSLTruststorePassword = trust, typ, secret.New(pass)
	return s
}

func lastN(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
