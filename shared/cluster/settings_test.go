package cluster

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mm2go/mm2go/shared/secret"
)

const ehConn = "Endpoint=sb://ns1.servicebus.windows.net/;SharedAccessKeyName=test;SharedAccessKey=fake-key-do-not-log"

func base() Settings {
	return Settings{
		BootstrapServers:                   []string{"b1:9092"},
		SSLEndpointIdentificationAlgorithm: "https",
		ConsumerAutoOffsetReset:            "earliest",
		ConsumerIsolationLevel:             "read_uncommitted",
		ProducerCompressionType:            "none",
		ProducerLingerMS:                   5,
	}
}

func TestNormalize(t *testing.T) {
	for _, test := range []struct {
		name   string
		modify func(*Settings)
		errs   []string // substrings, one per expected problem, in order
		check  func(*testing.T, *Settings)
	}{
		{name: "plaintext default", modify: func(*Settings) {}, check: func(t *testing.T, s *Settings) {
			if s.SecurityProtocol != ProtocolPlaintext || s.UsesSASL() || s.UsesTLS() {
				t.Errorf("protocol = %q", s.SecurityProtocol)
			}
		}},
		{name: "missing bootstrap", modify: func(s *Settings) { s.BootstrapServers = nil },
			errs: []string{"MM2_SOURCE_BOOTSTRAP_SERVERS (source.bootstrap.servers): required"}},
		{name: "unresolved provider", modify: func(s *Settings) {
			s.BootstrapServers = []string{"${file:/properties/access.properties:SRC_BROKERS}"}
		}, errs: []string{`MM2_SOURCE_BOOTSTRAP_SERVERS (source.bootstrap.servers): "${file:/properties/access.properties:SRC_BROKERS}" contains an unresolved config provider reference`}},
		{name: "no port", modify: func(s *Settings) { s.BootstrapServers = []string{"b1"} },
			errs: []string{`"b1" is not host:port`}},
		{name: "bad protocol", modify: func(s *Settings) { s.SecurityProtocol = "TLS" },
			errs: []string{`MM2_SOURCE_SECURITY_PROTOCOL (source.security.protocol): unknown value "TLS"`}},
		{name: "lower-case protocol", modify: func(s *Settings) { s.SecurityProtocol = "ssl" }, check: func(t *testing.T, s *Settings) {
			if s.SecurityProtocol != ProtocolSSL || !s.UsesTLS() {
				t.Errorf("protocol = %q", s.SecurityProtocol)
			}
		}},
		{name: "sasl without mechanism", modify: func(s *Settings) {
			s.SecurityProtocol, s.SASLUsername, s.SASLPassword = "SASL_SSL", "u", secret.New("p")
		}, errs: []string{"MM2_SOURCE_SASL_MECHANISM (source.sasl.mechanism): required with SASL_SSL"}},
		{name: "gssapi", modify: func(s *Settings) { s.SecurityProtocol, s.SASLMechanism = "SASL_SSL", "GSSAPI" },
			errs: []string{`MM2_SOURCE_SASL_KERBEROS_SERVICE_NAME (source.sasl.kerberos.service.name): required with GSSAPI`}},
		{name: "sasl plain missing password", modify: func(s *Settings) {
			s.SecurityProtocol, s.SASLMechanism, s.SASLUsername = "SASL_PLAINTEXT", "PLAIN", "u"
		}, errs: []string{"MM2_SOURCE_SASL_PASSWORD (source.sasl.password): required"}},
		{name: "creds without protocol", modify: func(s *Settings) { s.SASLUsername, s.SASLPassword = "u", secret.New("p") },
			errs: []string{"MM2_SOURCE_SECURITY_PROTOCOL (source.security.protocol): SASL credentials are set"}},
		{name: "jaas", modify: func(s *Settings) {
			s.SecurityProtocol, s.SASLMechanism = "SASL_SSL", "SCRAM-SHA-512"
			s.SASLJAASConfig = secret.New(`org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="a\"b";`)
		}, check: func(t *testing.T, s *Settings) {
			u, p, err := s.SASLCredentials()
			if err != nil || u != "alice" || p.Reveal() != `a"b` {
				t.Errorf("credentials = %q, %q, %v", u, p.Reveal(), err)
			}
		}},
		{name: "jaas and username", modify: func(s *Settings) {
			s.SecurityProtocol, s.SASLMechanism, s.SASLUsername = "SASL_SSL", "PLAIN", "u"
			s.SASLJAASConfig = secret.New(`x.PlainLoginModule required username="alice" password="pw-secret";`)
		}, errs: []string{"MM2_SOURCE_SASL_JAAS_CONFIG (source.sasl.jaas.config): set either"}},
		{name: "jaas unterminated", modify: func(s *Settings) {
			s.SecurityProtocol, s.SASLMechanism = "SASL_SSL", "PLAIN"
			s.SASLJAASConfig = secret.New(`x.PlainLoginModule required username="alice" password="pw-secret"`)
		}, errs: []string{"not terminated by a semicolon"}},
		{name: "eventhubs", modify: func(s *Settings) {
			s.BootstrapServers = nil
			s.EventHubsConnectionString = secret.New(ehConn)
		}, check: func(t *testing.T, s *Settings) {
			u, p, err := s.SASLCredentials()
			if s.SecurityProtocol != ProtocolSASLSSL || s.SASLMechanism != MechanismPlain || u != EventHubsUser || p.Reveal() != ehConn || err != nil {
				t.Errorf("eventhubs: %q %q %q", s.SecurityProtocol, s.SASLMechanism, u)
			}
			if fmt.Sprint(s.BootstrapServers) != "[ns1.servicebus.windows.net:9093]" {
				t.Errorf("bootstrap = %v", s.BootstrapServers)
			}
			if errs := s.Normalize("MM2_SOURCE_", "source."); len(errs) != 0 {
				t.Errorf("second Normalize: %v", errs)
			}
		}},
		{name: "eventhubs and sasl", modify: func(s *Settings) {
			s.EventHubsConnectionString = secret.New(ehConn)
			s.SASLUsername, s.SASLPassword = "u", secret.New("p")
		}, errs: []string{"MM2_SOURCE_EVENTHUBS_CONNECTION_STRING (source.eventhubs.connection.string): set either"}},
		{name: "eventhubs wrong protocol", modify: func(s *Settings) {
			s.EventHubsConnectionString = secret.New(ehConn)
			s.SecurityProtocol = "SSL"
		}, errs: []string{"MM2_SOURCE_SECURITY_PROTOCOL (source.security.protocol): must be SASL_SSL"}},
		{name: "bad eventhubs", modify: func(s *Settings) {
			s.EventHubsConnectionString = secret.New("Endpoint=https://x;SharedAccessKey=fake-key-do-not-log")
		}, errs: []string{"not an Event Hubs connection string"}},
		{name: "tls conflicts", modify: func(s *Settings) {
			s.SSLTruststoreLocation, s.SSLTruststoreCertificates = "/ca.pem", "-----BEGIN"
			s.SSLKeystoreKey = secret.New("k")
			s.SSLTruststoreType = "JKS"
			s.SSLEndpointIdentificationAlgorithm = "none"
		}, errs: []string{
			"MM2_SOURCE_SSL_TRUSTSTORE_CERTIFICATES (source.ssl.truststore.certificates): set either",
			"MM2_SOURCE_SSL_KEYSTORE_CERTIFICATE_CHAIN",
			`MM2_SOURCE_SSL_TRUSTSTORE_TYPE (source.ssl.truststore.type): must be PEM (or empty) with ssl.truststore.certificates`,
			`MM2_SOURCE_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM (source.ssl.endpoint.identification.algorithm): unknown value "none"`,
		}},
		{name: "empty endpoint algorithm disables", modify: func(s *Settings) { s.SSLEndpointIdentificationAlgorithm = "" }},
		{name: "client enums", modify: func(s *Settings) {
			s.ConsumerAutoOffsetReset, s.ConsumerIsolationLevel, s.ProducerCompressionType, s.ProducerLingerMS = "smallest", "x", "brotli", -1
		}, errs: []string{
			`MM2_SOURCE_CONSUMER_AUTO_OFFSET_RESET (source.consumer.auto.offset.reset): unknown value "smallest"`,
			"MM2_SOURCE_CONSUMER_ISOLATION_LEVEL", "MM2_SOURCE_PRODUCER_COMPRESSION_TYPE", "MM2_SOURCE_PRODUCER_LINGER_MS",
		}},
	} {
		t.Run(test.name, func(t *testing.T) {
			s := base()
			test.modify(&s)
			errs := s.Normalize("MM2_SOURCE_", "source.")
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, e.Error())
			}
			all := strings.Join(msgs, "\n")
			if len(errs) != len(test.errs) {
				t.Fatalf("problems:\n%s\nwant %d: %q", all, len(test.errs), test.errs)
			}
			for i, want := range test.errs {
				if !strings.Contains(msgs[i], want) {
					t.Errorf("problem %d = %q, want it to contain %q", i, msgs[i], want)
				}
			}
			for _, leak := range []string{"fake-key-do-not-log", "pw-secret"} {
				if strings.Contains(all, leak) {
					t.Errorf("secret in errors: %s", all)
				}
			}
			if test.check != nil {
				test.check(t, &s)
			}
		})
	}
}

func TestParseJAAS(t *testing.T) {
	for _, test := range []struct {
		name, in  string
		user, pwd string
		n         int
		err       string
	}{
		{"plain", `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";`, "u", "p", 1, ""},
		{"unquoted words", `a.B required username=alice password=al-ice.1_$;`, "alice", "al-ice.1_$", 1, ""},
		{"single quotes", `M required username='u' password='p w';`, "u", "p w", 1, ""},
		{"escapes", `M required username="u" password="a\\b\"c\td\101";`, "u", "a\\b\"c\tdA", 1, ""},
		{"comments and newlines", "M /* c */ REQUIRED\n  username=\"u\" // c\n password=\"p\" ;", "u", "p", 1, ""},
		{"eventhubs", `M required username="$ConnectionString" password="Endpoint=sb://x/;SharedAccessKeyName=a;SharedAccessKey=b=";`, "$ConnectionString", "Endpoint=sb://x/;SharedAccessKeyName=a;SharedAccessKey=b=", 1, ""},
		{"two modules", `A required; B optional x="1";`, "", "", 2, ""},
		{"empty", "  ", "", "", 0, "login module not specified"},
		{"no flag", "M", "", "", 0, "control flag not specified"},
		{"bad flag", "M always;", "", "", 0, "invalid control flag"},
		{"no semicolon", `M required username="u"`, "", "", 0, "not terminated"},
		{"unquoted number", `M required username=u password=123;`, "", "", 0, "option 2: expected key=value"},
		{"unquoted special", `M required password=p@ss;`, "", "", 0, "option 2"},
	} {
		t.Run(test.name, func(t *testing.T) {
			entries, err := parseJAAS(test.in)
			if test.err != "" {
				if err == nil || !strings.Contains(err.Error(), test.err) {
					t.Fatalf("err = %v, want %q", err, test.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != test.n {
				t.Fatalf("%d entries", len(entries))
			}
			if o := entries[0].options; o["username"] != test.user || o["password"] != test.pwd {
				t.Errorf("options = %q", o)
			}
		})
	}
}
