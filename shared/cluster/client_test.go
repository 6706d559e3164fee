package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/mm2go/mm2go/shared/secret"
)

const unitPass = "unit-password-do-not-log"

func TestSASLMechanismSelection(t *testing.T) {
	cs := "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=" + testSASKey
	for _, test := range []struct {
		name               string
		s                  Settings
		wantName, wantUser string
		wantPass           string
	}{
		{name: "plain", s: Settings{SASLMechanism: "PLAIN", SASLUsername: "alice", SASLPassword: secret.New(unitPass)}, wantName: "PLAIN", wantUser: "alice", wantPass: unitPass},
		{name: "plain lower case", s: Settings{SASLMechanism: "plain", SASLUsername: "alice", SASLPassword: secret.New(unitPass)}, wantName: "PLAIN", wantUser: "alice", wantPass: unitPass},
		{name: "scram 256", s: Settings{SASLMechanism: "SCRAM-SHA-256", SASLUsername: "bob", SASLPassword: secret.New(unitPass)}, wantName: "SCRAM-SHA-256", wantUser: "bob"},
		{name: "scram 512", s: Settings{SASLMechanism: "SCRAM-SHA-512", SASLUsername: "bob", SASLPassword: secret.New(unitPass)}, wantName: "SCRAM-SHA-512", wantUser: "bob"},
		{name: "scram via jaas", s: Settings{SASLMechanism: "SCRAM-SHA-512", SASLJAASConfig: secret.New(`org.apache.kafka.common.security.scram.ScramLoginModule required username="carol" password="` + unitPass + `";`)}, wantName: "SCRAM-SHA-512", wantUser: "carol"},
		{name: "event hubs", s: Settings{EventHubsConnectionString: secret.New(cs)}, wantName: "PLAIN", wantUser: "$ConnectionString", wantPass: cs},
	} {
		t.Run(test.name, func(t *testing.T) {
			mech, err := SASLMechanism(test.s)
			if err != nil {
				t.Fatal(err)
			}
			if mech.Name() != test.wantName {
				t.Errorf("mechanism %s, want %s", mech.Name(), test.wantName)
			}
			_, first, err := mech.Authenticate(context.Background(), "127.0.0.1:9093")
			if err != nil {
				t.Fatal(err)
			}
			if test.wantName == "PLAIN" {
				if want := "\x00" + test.wantUser + "\x00" + test.wantPass; string(first) != want {
					t.Errorf("PLAIN message %q, want %q", first, want)
				}
			} else if !strings.Contains(string(first), "n="+test.wantUser+",") {
				t.Errorf("SCRAM client-first %q does not name user %s", first, test.wantUser)
			}
		})
	}
}

func TestOptionsInvalidCombinations(t *testing.T) {
	cs := "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=" + testSASKey
	seeds := []string{"127.0.0.1:9092"}
	for _, test := range []struct {
		name string
		s    Settings
		want []string // each must appear in the error
	}{
		{name: "no bootstrap", s: Settings{}, want: []string{"MM2_SOURCE_BOOTSTRAP_SERVERS", "required"}},
		{name: "bad bootstrap", s: Settings{BootstrapServers: []string{"broker"}}, want: []string{"MM2_SOURCE_BOOTSTRAP_SERVERS", "not host:port"}},
		{name: "sasl protocol without mechanism", s: Settings{BootstrapServers: seeds, SecurityProtocol: "SASL_SSL", SASLUsername: "u", SASLPassword: secret.New(unitPass)}, want: []string{"MM2_SOURCE_SASL_MECHANISM", "Kafka's default is GSSAPI; here it must be named"}},
		{name: "credentials without sasl protocol", s: Settings{BootstrapServers: seeds, SASLMechanism: "PLAIN", SASLUsername: "u", SASLPassword: secret.New(unitPass)}, want: []string{"MM2_SOURCE_SECURITY_PROTOCOL", "SASL credentials are set"}},
		{name: "password missing", s: Settings{BootstrapServers: seeds, SecurityProtocol: "SASL_SSL", SASLMechanism: "SCRAM-SHA-256", SASLUsername: "u"}, want: []string{"MM2_SOURCE_SASL_PASSWORD", "required"}},
		{name: "gssapi without service name", s: Settings{BootstrapServers: seeds, SecurityProtocol: "SASL_PLAINTEXT", SASLMechanism: "GSSAPI"}, want: []string{"MM2_SOURCE_SASL_KERBEROS_SERVICE_NAME (source.sasl.kerberos.service.name): required with GSSAPI"}},
		{name: "gssapi with a password login", s: Settings{BootstrapServers: seeds, SecurityProtocol: "SASL_PLAINTEXT", SASLMechanism: "GSSAPI", SASLKerberosServiceName: "kafka",
			SASLJAASConfig: secret.New(`com.sun.security.auth.module.Krb5LoginModule required useTicketCache=true;`)}, want: []string{"MM2_SOURCE_SASL_JAAS_CONFIG (source.sasl.jaas.config): GSSAPI logs in from a keytab only"}},
		{name: "gssapi with a PLAIN login module", s: Settings{BootstrapServers: seeds, SecurityProtocol: "SASL_PLAINTEXT", SASLMechanism: "GSSAPI", SASLKerberosServiceName: "kafka",
			SASLJAASConfig: secret.New(`org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";`)}, want: []string{"MM2_SOURCE_SASL_JAAS_CONFIG (source.sasl.jaas.config): GSSAPI needs exactly one com.sun.security.auth.module.Krb5LoginModule login module"}},
		{name: "gssapi keytab missing", s: Settings{BootstrapServers: seeds, SecurityProtocol: "SASL_PLAINTEXT", SASLMechanism: "GSSAPI", SASLKerberosServiceName: "kafka", SASLKerberosKrb5Conf: "/nonexistent/krb5.conf",
			SASLJAASConfig: secret.New(`com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/nonexistent/x.keytab" principal="u@R";`)}, want: []string{"MM2_SOURCE_SASL_KERBEROS_KRB5_CONF (source.sasl.kerberos.krb5.conf): open /nonexistent/krb5.conf"}},
		{name: "oauthbearer not yet", s: Settings{BootstrapServers: seeds, SecurityProtocol: "SASL_SSL", SASLMechanism: "OAUTHBEARER"}, want: []string{"MM2_SOURCE_SASL_MECHANISM", "OAUTHBEARER needs a token source: set azure.auth"}},
		{name: "unknown protocol", s: Settings{BootstrapServers: seeds, SecurityProtocol: "TLS"}, want: []string{"MM2_SOURCE_SECURITY_PROTOCOL", `"TLS"`}},
		{name: "event hubs and sasl credentials", s: Settings{EventHubsConnectionString: secret.New(cs), SASLUsername: "u", SASLPassword: secret.New(unitPass)}, want: []string{"MM2_SOURCE_EVENTHUBS_CONNECTION_STRING", "not both"}},
		{name: "event hubs over plaintext", s: Settings{EventHubsConnectionString: secret.New(cs), SecurityProtocol: "PLAINTEXT"}, want: []string{"MM2_SOURCE_SECURITY_PROTOCOL", "must be SASL_SSL"}},
		{name: "event hubs with scram", s: Settings{EventHubsConnectionString: secret.New(cs), SASLMechanism: "SCRAM-SHA-256"}, want: []string{"MM2_SOURCE_SASL_MECHANISM", "must be PLAIN"}},
		{name: "unknown truststore type", s: Settings{BootstrapServers: seeds, SecurityProtocol: "SSL", SSLTruststoreType: "BCFKS"}, want: []string{"MM2_SOURCE_SSL_TRUSTSTORE_TYPE (source.ssl.truststore.type)", `"BCFKS" is not supported (want JKS, PKCS12 or PEM)`}},
		{name: "missing JKS truststore", s: Settings{BootstrapServers: seeds, SecurityProtocol: "SSL", SSLTruststoreLocation: "testdata/none.jks", SSLTruststoreType: "JKS"}, want: []string{"MM2_SOURCE_SSL_TRUSTSTORE_LOCATION (source.ssl.truststore.location)", "no such file"}},
		{name: "unreadable truststore", s: Settings{BootstrapServers: seeds, SecurityProtocol: "SSL", SSLTruststoreLocation: "/nonexistent/ca.pem"}, want: []string{"MM2_SOURCE_SSL_TRUSTSTORE_LOCATION (source.ssl.truststore.location)", "no such file"}},
		{name: "bad compression", s: Settings{BootstrapServers: seeds, ProducerCompressionType: "brotli"}, want: []string{"MM2_SOURCE_PRODUCER_COMPRESSION_TYPE", "brotli"}},
		{name: "zstd level too high", s: Settings{BootstrapServers: seeds, ProducerCompressionType: "zstd", ProducerCompressionZstdLevel: 23},
			want: []string{"MM2_SOURCE_PRODUCER_COMPRESSION_ZSTD_LEVEL (source.producer.compression.zstd.level): 23 is out of range (want -131072 to 22)"}},
		{name: "gzip level too high", s: Settings{BootstrapServers: seeds, ProducerCompressionGzipLevel: 10},
			want: []string{"MM2_SOURCE_PRODUCER_COMPRESSION_GZIP_LEVEL (source.producer.compression.gzip.level): 10 is out of range (want 1 to 9, or -1 for gzip's default)"}},
		{name: "lz4 level negative", s: Settings{BootstrapServers: seeds, ProducerCompressionLz4Level: -1},
			want: []string{"MM2_SOURCE_PRODUCER_COMPRESSION_LZ4_LEVEL (source.producer.compression.lz4.level): -1 is out of range (want 1 to 17)"}},
	} {
		t.Run(test.name, func(t *testing.T) {
			test.s.Alias = "source"
			_, err := Options(test.s, nil)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range test.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), unitPass) || strings.Contains(err.Error(), testSASKey) {
				t.Errorf("error %q contains a secret", err)
			}
		})
	}
}

// TestErrorsNameRoleAndAlias: a cluster aliased "primary" in the source role is configured by
// MM2_SOURCE_* variables and primary.* properties; its errors name both, never MM2_PRIMARY_*.
func TestErrorsNameRoleAndAlias(t *testing.T) {
	s := Settings{Alias: "primary", Role: "source", BootstrapServers: []string{"127.0.0.1:9092"}, SecurityProtocol: "SSL", SSLTruststoreLocation: "/nonexistent/ca.pem"}
	_, err := Options(s, nil)
	if err == nil || !strings.Contains(err.Error(), "MM2_SOURCE_SSL_TRUSTSTORE_LOCATION (primary.ssl.truststore.location)") {
		t.Errorf("error %v, want it to name MM2_SOURCE_SSL_TRUSTSTORE_LOCATION (primary.ssl.truststore.location)", err)
	}
	s = Settings{Alias: "primary", Role: "target", BootstrapServers: []string{"broker"}}
	_, err = Options(s, nil)
	if err == nil || !strings.Contains(err.Error(), "MM2_TARGET_BOOTSTRAP_SERVERS") || !strings.Contains(err.Error(), "primary.bootstrap.servers") || strings.Contains(err.Error(), "MM2_PRIMARY") {
		t.Errorf("error %v, want MM2_TARGET_BOOTSTRAP_SERVERS and primary.bootstrap.servers", err)
	}
	s = Settings{Alias: "primary", Role: "target", BootstrapServers: []string{"ns.servicebus.windows.net:9093"},
		EventHubs: ProfileConfig{Mode: ProfileOn}, ProducerCompressionType: "lz4"}
	if _, err := SettingsProfile(s); err == nil || !strings.Contains(err.Error(), "MM2_TARGET_PRODUCER_COMPRESSION_TYPE (primary.producer.compression.type)") {
		t.Errorf("profile error %v, want it to name MM2_TARGET_PRODUCER_COMPRESSION_TYPE (primary.producer.compression.type)", err)
	}
}

func TestOptionsValid(t *testing.T) {
	p := newTestPKI(t)
	for _, test := range []struct {
		name string
		s    Settings
	}{
		{name: "plaintext zero values", s: Settings{BootstrapServers: []string{"127.0.0.1:9092"}}},
		{name: "tls", s: Settings{BootstrapServers: []string{"b:9093"}, SecurityProtocol: "ssl", SSLTruststoreLocation: p.caFile, SSLKeystoreLocation: p.ksFile, SSLEndpointIdentificationAlgorithm: "https"}},
		{name: "sasl plaintext scram", s: Settings{BootstrapServers: []string{"b:9092"}, SecurityProtocol: "SASL_PLAINTEXT", SASLMechanism: "scram-sha-512", SASLUsername: "u", SASLPassword: secret.New(unitPass)}},
		{name: "everything set", s: Settings{BootstrapServers: []string{"b:9092"}, ClientID: "mine", ConsumerAutoOffsetReset: "none", ConsumerIsolationLevel: "read_committed", ProducerCompressionType: "zstd", ProducerLingerMS: 20}},
	} {
		t.Run(test.name, func(t *testing.T) {
			test.s.Alias = "source"
			opts, err := Options(test.s, nil)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatalf("kgo.NewClient rejects the options: %v", err)
			}
			cl.Close()
		})
	}
}

func TestOptionsLogsIgnoredTLSAndEntityPath(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	cs := "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=" + testSASKey + ";EntityPath=hub"
	if _, err := Options(Settings{Alias: "target", EventHubsConnectionString: secret.New(cs), ProducerCompressionType: "snappy"}, logger); err != nil {
		t.Fatal(err)
	}
	if _, err := Options(Settings{Alias: "source", BootstrapServers: []string{"b:9092"}, SSLTruststoreCertificates: "x"}, logger); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"entity-level", "only uncompressed or gzip", "TLS settings are ignored"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, testSASKey) || strings.Contains(out, "servicebus") {
		t.Errorf("log contains the connection string:\n%s", out)
	}
}

// TestOptionsWarnsBootstrapOutsideConnectionStringNamespace: bootstrap servers outside the
// connection string's namespace (left at the old Kafka cluster) are named in a WARN line
// that holds neither the key nor its name; the namespace itself, or a private endpoint of
// it, is not.
func TestOptionsWarnsBootstrapOutsideConnectionStringNamespace(t *testing.T) {
	cs := "Endpoint=sb://mynamespace.servicebus.windows.net/;SharedAccessKeyName=mirrorpolicy;SharedAccessKey=" + testSASKey
	for _, c := range []struct {
		bootstrap []string
		warn      bool
	}{
		{[]string{"kafka-old:9092"}, true},
		{[]string{"othernamespace.servicebus.windows.net:9093"}, true},
		{nil, false},
		{[]string{"mynamespace.servicebus.windows.net:9093"}, false},
		{[]string{"MyNamespace.privatelink.servicebus.windows.net:9093"}, false},
	} {
		var buf bytes.Buffer
		logger := slog.New(slog.NewJSONHandler(&buf, nil))
		if _, err := Options(Settings{Alias: "target", BootstrapServers: c.bootstrap, EventHubsConnectionString: secret.New(cs)}, logger); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if got := strings.Contains(out, "are not the Event Hubs namespace of the connection string"); got != c.warn {
			t.Errorf("bootstrap %v: warned %v, want %v:\n%s", c.bootstrap, got, c.warn, out)
		}
		if c.warn && !strings.Contains(out, `"bootstrap_servers":"`+c.bootstrap[0]+`"`) {
			t.Errorf("bootstrap %v: the warning does not name the bootstrap servers:\n%s", c.bootstrap, out)
		}
		if strings.Contains(out, testSASKey) || strings.Contains(out, "mirrorpolicy") {
			t.Errorf("bootstrap %v: log contains the connection string's key or key name:\n%s", c.bootstrap, out)
		}
	}
}

func TestPingUnreachable(t *testing.T) {
	s := Settings{Alias: "target", BootstrapServers: []string{"127.0.0.1:1"}, SecurityProtocol: "SASL_PLAINTEXT", SASLMechanism: "PLAIN", SASLUsername: "u", SASLPassword: secret.New(unitPass)}
	cl, err := NewClient(context.Background(), s, nil, kgo.DialTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = Ping(ctx, cl, s)
	if err == nil {
		t.Fatal("Ping of a closed port succeeded")
	}
	if !strings.HasPrefix(err.Error(), `connecting to cluster "target" at 127.0.0.1:1: `) {
		t.Errorf("error %q does not start with the alias and address", err)
	}
	if strings.Contains(err.Error(), unitPass) {
		t.Errorf("error contains the password: %v", err)
	}
}

func TestKafkaLoggerLevelsAndRedaction(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := Settings{Alias: "source", SASLPassword: secret.New(unitPass)}

	def := KafkaLogger(logger, DefaultKafkaLogLevel, s)
	if def.Level() != kgo.LogLevelWarn {
		t.Errorf("default level %v, want warn", def.Level())
	}
	def.Log(kgo.LogLevelInfo, "info is dropped")
	quiet := KafkaLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelError})), slog.LevelDebug, s)
	if quiet.Level() != kgo.LogLevelError {
		t.Errorf("handler at ERROR: level %v, want error", quiet.Level())
	}

	dbg := KafkaLogger(logger, slog.LevelDebug, s)
	if dbg.Level() != kgo.LogLevelDebug {
		t.Errorf("debug level %v", dbg.Level())
	}
	dbg.Log(kgo.LogLevelDebug, "auth with "+unitPass, "err", fmt.Errorf("bad password %s", unitPass), "broker", 1, "pass", unitPass, "list", []string{unitPass})
	out := buf.String()
	if strings.Contains(out, "info is dropped") {
		t.Errorf("INFO logged at the default level:\n%s", out)
	}
	if strings.Contains(out, unitPass) {
		t.Errorf("secret logged:\n%s", out)
	}
	for _, want := range []string{`"component":"franz-go"`, `"cluster":"source"`, `"broker":1`, `"err":"[text withheld: it contained the value of sasl.password]"`, `"msg":"[text withheld: it contained the value of sasl.password]"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
}

func TestLeakGuardKeepsChain(t *testing.T) {
	base := errors.New("root")
	g := guardOf(Settings{SASLPassword: secret.New(unitPass)})
	err := g.err(fmt.Errorf("x %s: %w", unitPass, base))
	if err.Error() != "[text withheld: it contained the value of sasl.password]" || !errors.Is(err, base) {
		t.Errorf("guard: %v (is base: %v)", err, errors.Is(err, base))
	}
	if err := g.err(base); err != base {
		t.Errorf("the guard changed an error without secrets")
	}
}

func TestConnectErrorWrapsOnce(t *testing.T) {
	s := Settings{Alias: "source", BootstrapServers: []string{"b:9092"}, SecurityProtocol: "SASL_SSL", SASLMechanism: "PLAIN", SASLUsername: "u", SASLPassword: secret.New(unitPass)}
	base := fmt.Errorf("broker said %s: %w", unitPass, kerr.SaslAuthenticationFailed)
	err := ConnectError(s, base)
	want := `connecting to cluster "source" at b:9092: SASL authentication failed (PLAIN as "u"): [text withheld: it contained the value of sasl.password]`
	if err.Error() != want {
		t.Errorf("got  %s\nwant %s...", err, want)
	}
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("errors.Is(kerr.SaslAuthenticationFailed) is false")
	}
	if again := ConnectError(s, fmt.Errorf("producing: %w", err)); !strings.HasPrefix(again.Error(), "producing: connecting") {
		t.Errorf("wrapped twice: %v", again)
	}
}

func TestOptionValuesReachTheClient(t *testing.T) {
	cs := "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=" + testSASKey
	for _, test := range []struct {
		name               string
		s                  Settings
		wantSeed, wantID   string
		wantMaxWrite       int32
		wantMetadataMaxAge time.Duration
		wantLinger         time.Duration
		wantSASL, wantTLS  bool
	}{
		{name: "plain kafka", s: Settings{Alias: "source", BootstrapServers: []string{"b:9092"}, ProducerLingerMS: 5},
			wantSeed: "b:9092", wantID: DefaultClientID("source", os.LookupEnv), wantMaxWrite: 100 << 20, wantMetadataMaxAge: 5 * time.Minute, wantLinger: 5 * time.Millisecond},
		{name: "event hubs", s: Settings{Alias: "target", ClientID: "mine", EventHubsConnectionString: secret.New(cs)},
			wantSeed: "ns.servicebus.windows.net:9093", wantID: "mine", wantMaxWrite: 1_000_000, wantMetadataMaxAge: 180 * time.Second, wantSASL: true, wantTLS: true},
	} {
		t.Run(test.name, func(t *testing.T) {
			cl, err := NewClient(context.Background(), test.s, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			seeds, _ := cl.OptValue(kgo.SeedBrokers).([]string)
			id, _ := cl.OptValue(kgo.ClientID).(string)
			if strings.Join(seeds, ",") != test.wantSeed || id != test.wantID {
				t.Errorf("seeds %v, client id %v", seeds, id)
			}
			if v := cl.OptValue(kgo.BrokerMaxWriteBytes); v != test.wantMaxWrite {
				t.Errorf("BrokerMaxWriteBytes = %v, want %d", v, test.wantMaxWrite)
			}
			if v := cl.OptValue(kgo.MetadataMaxAge); v != test.wantMetadataMaxAge {
				t.Errorf("MetadataMaxAge = %v, want %v", v, test.wantMetadataMaxAge)
			}
			if v := cl.OptValue(kgo.ProducerLinger); v != test.wantLinger {
				t.Errorf("ProducerLinger = %v, want %v", v, test.wantLinger)
			}
			sasls, _ := cl.OptValue(kgo.SASL).([]sasl.Mechanism)
			if (len(sasls) == 1) != test.wantSASL {
				t.Errorf("SASL mechanisms %v", sasls)
			}
			tlsCfg, _ := cl.OptValue(kgo.DialTLSConfig).(*tls.Config)
			if (tlsCfg != nil) != test.wantTLS {
				t.Errorf("TLS config %v", tlsCfg)
			}
		})
	}
}

// TestCompressionLevelsReachTheClient checks Kafka's compression.<type>.level against the codec
// the client's producer is given: Kafka's defaults are franz-go's defaults, and other levels
// select franz-go's nearest setting.
func TestCompressionLevelsReachTheClient(t *testing.T) {
	for _, test := range []struct {
		name string
		s    Settings
		want kgo.CompressionCodec
	}{
		{"none", Settings{}, kgo.NoCompression()},
		{"gzip default", Settings{ProducerCompressionType: "gzip", ProducerCompressionGzipLevel: -1}, kgo.GzipCompression()},
		{"gzip 1", Settings{ProducerCompressionType: "gzip", ProducerCompressionGzipLevel: 1}, kgo.GzipCompression().WithLevel(1)},
		{"gzip 9", Settings{ProducerCompressionType: "gzip", ProducerCompressionGzipLevel: 9}, kgo.GzipCompression().WithLevel(9)},
		{"snappy", Settings{ProducerCompressionType: "snappy"}, kgo.SnappyCompression()},
		{"lz4 default is the fast mode", Settings{ProducerCompressionType: "lz4", ProducerCompressionLz4Level: 9}, kgo.Lz4Compression()},
		{"lz4 zero value", Settings{ProducerCompressionType: "lz4"}, kgo.Lz4Compression()},
		{"lz4 1", Settings{ProducerCompressionType: "lz4", ProducerCompressionLz4Level: 1}, kgo.Lz4Compression().WithLevel(int(lz4.Level1))},
		{"lz4 8", Settings{ProducerCompressionType: "lz4", ProducerCompressionLz4Level: 8}, kgo.Lz4Compression().WithLevel(int(lz4.Level8))},
		{"lz4 17 as the deepest", Settings{ProducerCompressionType: "lz4", ProducerCompressionLz4Level: 17}, kgo.Lz4Compression().WithLevel(int(lz4.Level9))},
		{"zstd default", Settings{ProducerCompressionType: "zstd", ProducerCompressionZstdLevel: 3}, kgo.ZstdCompression().WithLevel(int(zstd.SpeedDefault))},
		{"zstd zero value", Settings{ProducerCompressionType: "zstd"}, kgo.ZstdCompression().WithLevel(int(zstd.SpeedDefault))},
		{"zstd 1", Settings{ProducerCompressionType: "zstd", ProducerCompressionZstdLevel: 1}, kgo.ZstdCompression().WithLevel(int(zstd.SpeedFastest))},
		{"zstd negative", Settings{ProducerCompressionType: "zstd", ProducerCompressionZstdLevel: -5}, kgo.ZstdCompression().WithLevel(int(zstd.SpeedFastest))},
		{"zstd 7", Settings{ProducerCompressionType: "zstd", ProducerCompressionZstdLevel: 7}, kgo.ZstdCompression().WithLevel(int(zstd.SpeedBetterCompression))},
		{"zstd 19", Settings{ProducerCompressionType: "zstd", ProducerCompressionZstdLevel: 19}, kgo.ZstdCompression().WithLevel(int(zstd.SpeedBestCompression))},
	} {
		t.Run(test.name, func(t *testing.T) {
			test.s.Alias, test.s.Role, test.s.BootstrapServers = "target", "target", []string{"b:9092"}
			cl, err := NewClient(context.Background(), test.s, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			got, _ := cl.OptValue(kgo.ProducerBatchCompression).([]kgo.CompressionCodec)
			if len(got) != 1 || got[0] != test.want {
				t.Errorf("producer codecs %+v, want %+v", got, test.want)
			}
		})
	}
}

// TestInstanceClientID: without client.id every instance gets a client id of its own, from its
// pod or replica name, so a broker's per-client quota is not shared by the instances of one
// burst group; client.id still wins.
func TestInstanceClientID(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{env: nil, want: "mm2go-target"},
		{env: map[string]string{"HOSTNAME": "mm2go-mirror-lag-x7k2p-9d4fz"}, want: "mm2go-target-mm2go-mirror-lag-x7k2p-9d4fz"},
		{env: map[string]string{"HOSTNAME": "h", "CONTAINER_APP_REPLICA_NAME": "mm2go-mirror-28a1--abc"}, want: "mm2go-target-mm2go-mirror-28a1--abc"},
		{env: map[string]string{"HOSTNAME": "h", "CONTAINER_APP_REPLICA_NAME": "r", "POD_NAME": "p"}, want: "mm2go-target-p"},
		{env: map[string]string{"POD_NAME": " ", "HOSTNAME": "h"}, want: "mm2go-target-h"},
	} {
		got := DefaultClientID("target", func(k string) (string, bool) { v, ok := c.env[k]; return v, ok })
		if got != c.want {
			t.Errorf("DefaultClientID with %v = %q, want %q", c.env, got, c.want)
		}
	}
	// As the clients see it: a Knative or KEDA pod's name from the environment.
	t.Setenv("POD_NAME", "mm2go-mirror-00001-deployment-5d8f7")
	for _, c := range []struct {
		s    Settings
		want string
	}{
		{Settings{Alias: "source", BootstrapServers: []string{"b:9092"}}, "mm2go-source-mm2go-mirror-00001-deployment-5d8f7"},
		{Settings{Alias: "source", BootstrapServers: []string{"b:9092"}, ClientID: "mine"}, "mine"},
	} {
		cl, err := NewClient(context.Background(), c.s, nil)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := cl.OptValue(kgo.ClientID).(string)
		cl.Close()
		if id != c.want {
			t.Errorf("client.id %q: client id %q, want %q", c.s.ClientID, id, c.want)
		}
	}
}
