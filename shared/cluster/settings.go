// Package cluster describes how to reach one Kafka cluster (Settings) and
// builds franz-go clients from it.
package cluster

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/mm2go/mm2go/shared/secret"
)

// Settings is how to connect to one cluster of a flow, with MM2's names.
//
// Each field's `envconfig` tag is its environment variable name below the
// cluster prefix (MM2_SOURCE_ or MM2_TARGET_), and its `mm2` tag is the MM2
// property below the cluster alias ("<alias>.bootstrap.servers"). Both follow
// one rule: the env name is the property upper-cased with '.' and '-'
// replaced by '_'. shared/config fills Settings and calls Normalize.
type Settings struct {
	// Alias is the cluster's MM2 alias ("source", "primary", ...); set by
	// shared/config from MM2_SOURCE_ALIAS / MM2_TARGET_ALIAS or the flow.
	Alias string `ignored:"true"`
	// Role is "source" or "target": which MM2_SOURCE_* / MM2_TARGET_* variables configure
	// the cluster, so messages name them whatever the alias; set by shared/config. Empty
	// means the alias is the role.
	Role string `ignored:"true"`

	// BootstrapServers are host:port seed brokers. Normalize derives them
	// from EventHubsConnectionString when empty.
	BootstrapServers []string `envconfig:"BOOTSTRAP_SERVERS" mm2:"bootstrap.servers" desc:"seed brokers, host:port, comma separated (required)"`
	// SecurityProtocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
	// Empty means PLAINTEXT, or SASL_SSL with an Event Hubs connection string.
	SecurityProtocol string `envconfig:"SECURITY_PROTOCOL" mm2:"security.protocol" defaultdoc:"PLAINTEXT (SASL_SSL with an Event Hubs connection string)" desc:"PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"`

	// SASLMechanism is PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or
	// GSSAPI; required with a SASL protocol (Kafka defaults to GSSAPI; here
	// it must be named).
	SASLMechanism string `envconfig:"SASL_MECHANISM" mm2:"sasl.mechanism" desc:"PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or GSSAPI"`
	// SASLUsername and SASLPassword are PLAIN/SCRAM credentials, an
	// alternative to SASLJAASConfig.
	SASLUsername string        `envconfig:"SASL_USERNAME" mm2:"sasl.username" desc:"SASL user (alternative to sasl.jaas.config)"`
	SASLPassword secret.Secret `envconfig:"SASL_PASSWORD" mm2:"sasl.password" desc:"SASL password (secret)"`
	// SASLKerberosServiceName and SASLKerberosKrb5Conf are for GSSAPI
	// (kerberos.go): the brokers' service name, and the krb5.conf to read
	// (Java takes it from -Djava.security.krb5.conf).
	SASLKerberosServiceName string `envconfig:"SASL_KERBEROS_SERVICE_NAME" mm2:"sasl.kerberos.service.name" desc:"Kerberos service name of the brokers, for GSSAPI (e.g. kafka)"`
	SASLKerberosKrb5Conf    string `envconfig:"SASL_KERBEROS_KRB5_CONF" mm2:"sasl.kerberos.krb5.conf" defaultdoc:"/etc/krb5.conf" desc:"krb5.conf for GSSAPI (what Java takes from -Djava.security.krb5.conf)"`
	// SASLJAASConfig is Kafka's sasl.jaas.config; username and password
	// are read from its options (see SASLCredentials).
	SASLJAASConfig secret.Secret `envconfig:"SASL_JAAS_CONFIG" mm2:"sasl.jaas.config" desc:"Kafka JAAS line, e.g. org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"p\"; (secret)"`

	// TLS stores as in Kafka: JKS, PKCS12 or PEM files, or inline PEM.
	SSLTruststoreLocation       string        `envconfig:"SSL_TRUSTSTORE_LOCATION" mm2:"ssl.truststore.location" desc:"truststore file (JKS, PKCS12 or PEM); it replaces the system roots (empty: system roots)"`
	SSLTruststorePassword       secret.Secret `envconfig:"SSL_TRUSTSTORE_PASSWORD" mm2:"ssl.truststore.password" desc:"password of a JKS or PKCS12 truststore (secret)"`
	SSLTruststoreCertificates   string        `envconfig:"SSL_TRUSTSTORE_CERTIFICATES" mm2:"ssl.truststore.certificates" desc:"trusted CA certificates, inline PEM"`
	SSLTruststoreType           string        `envconfig:"SSL_TRUSTSTORE_TYPE" mm2:"ssl.truststore.type" defaultdoc:"from the file's content" desc:"JKS, PKCS12 or PEM"`
	SSLKeystoreLocation         string        `envconfig:"SSL_KEYSTORE_LOCATION" mm2:"ssl.keystore.location" desc:"keystore file (JKS, PKCS12 or PEM) with the client key and certificate chain (mutual TLS)"`
	SSLKeystorePassword         secret.Secret `envconfig:"SSL_KEYSTORE_PASSWORD" mm2:"ssl.keystore.password" desc:"password of a JKS or PKCS12 keystore (secret)"`
	SSLKeystoreType             string        `envconfig:"SSL_KEYSTORE_TYPE" mm2:"ssl.keystore.type" defaultdoc:"from the file's content" desc:"JKS, PKCS12 or PEM"`
	SSLKeystoreKey              secret.Secret `envconfig:"SSL_KEYSTORE_KEY" mm2:"ssl.keystore.key" desc:"client private key, inline PEM (PKCS#8, encrypted with ssl.key.password or not) (secret)"`
	SSLKeystoreCertificateChain string        `envconfig:"SSL_KEYSTORE_CERTIFICATE_CHAIN" mm2:"ssl.keystore.certificate.chain" desc:"client certificate chain, inline PEM"`
	SSLKeyPassword              secret.Secret `envconfig:"SSL_KEY_PASSWORD" mm2:"ssl.key.password" desc:"password of the private key: an encrypted PKCS#8 PEM key, or a JKS key entry whose password differs from the store's (secret)"`
	// SSLEndpointIdentificationAlgorithm is "https" (verify the broker host
	// name) or empty (do not verify it; the chain is still verified).
	SSLEndpointIdentificationAlgorithm string `envconfig:"SSL_ENDPOINT_IDENTIFICATION_ALGORITHM" mm2:"ssl.endpoint.identification.algorithm" default:"https" desc:"https checks the broker host name; set empty to disable"`

	// EventHubsConnectionString is an Azure Event Hubs namespace connection
	// string (Endpoint=sb://...;SharedAccessKeyName=...;SharedAccessKey=...).
	// It implies SASL_SSL, PLAIN, user "$ConnectionString" and, when
	// BootstrapServers is empty, <namespace host>:9093.
	EventHubsConnectionString secret.Secret `envconfig:"EVENTHUBS_CONNECTION_STRING" mm2:"eventhubs.connection.string" desc:"Azure Event Hubs connection string; implies SASL_SSL/PLAIN (secret)"`

	// --- Azure AD and Event Hubs profile (azure.go, profile.go) ---

	// Azure is Azure AD (Microsoft Entra ID) sign-in, MM2_<CLUSTER>_AZURE_*
	// (<alias>.azure.*): SASL OAUTHBEARER over TLS with azidentity tokens.
	// It excludes EventHubsConnectionString and SASL credentials.
	Azure AzureConfig `envconfig:"AZURE" mm2:"azure"`
	// EventHubs is the Event Hubs profile, MM2_<CLUSTER>_EVENTHUBS_*
	// (<alias>.eventhubs.*): limits and behaviour for Event Hubs clusters.
	EventHubs ProfileConfig `envconfig:"EVENTHUBS" mm2:"eventhubs"`

	// --- end of the Azure block ---

	// OAuthBearer is Kafka's OIDC client-credentials login for OAUTHBEARER (oidc.go), with
	// Kafka's property names: <alias>.sasl.login.callback.handler.class,
	// <alias>.sasl.oauthbearer.token.endpoint.url, ... (MM2_<CLUSTER>_SASL_*).
	OAuthBearer OAuthBearerConfig `envconfig:"SASL" mm2:"sasl"`

	// ClientID is the client id of this cluster's clients; empty: DefaultClientID.
	ClientID string `envconfig:"CLIENT_ID" mm2:"client.id" desc:"client.id of this cluster's clients (default: mm2go-<alias>-<instance>, the instance from POD_NAME, CONTAINER_APP_REPLICA_NAME or HOSTNAME; mm2go-<alias> without one)"`
	// ConsumerAutoOffsetReset applies to partitions without a stored
	// position: earliest, latest or none.
	ConsumerAutoOffsetReset string `envconfig:"CONSUMER_AUTO_OFFSET_RESET" mm2:"consumer.auto.offset.reset" default:"earliest" desc:"earliest, latest or none"`
	// ConsumerIsolationLevel is read_uncommitted or read_committed.
	ConsumerIsolationLevel string `envconfig:"CONSUMER_ISOLATION_LEVEL" mm2:"consumer.isolation.level" default:"read_uncommitted" desc:"read_uncommitted or read_committed"`
	// ProducerCompressionType is none, gzip, snappy, lz4 or zstd.
	ProducerCompressionType string `envconfig:"PRODUCER_COMPRESSION_TYPE" mm2:"producer.compression.type" default:"none" desc:"none, gzip, snappy, lz4 or zstd"`
	// ProducerCompressionGzipLevel is Kafka's compression.gzip.level: 1 to 9, -1 (or 0) for
	// gzip's default (6).
	ProducerCompressionGzipLevel int `envconfig:"PRODUCER_COMPRESSION_GZIP_LEVEL" mm2:"producer.compression.gzip.level" default:"-1" desc:"gzip level with compression.type=gzip: 1 (fastest) to 9 (smallest), -1 gzip's default (6)"`
	// ProducerCompressionLz4Level is Kafka's compression.lz4.level: 1 to 17; 9 (or 0) is
	// lz4's fast mode, any other level its high-compression mode, as in Kafka's producer.
	ProducerCompressionLz4Level int `envconfig:"PRODUCER_COMPRESSION_LZ4_LEVEL" mm2:"producer.compression.lz4.level" default:"9" desc:"lz4 level with compression.type=lz4, 1 to 17: 9 is lz4's fast mode, any other its high-compression mode (franz-go's depths 1-9; 10-17 compress as 9)"`
	// ProducerCompressionZstdLevel is Kafka's compression.zstd.level: -131072 to 22, 3 by
	// default (0 means 3, as in zstd).
	ProducerCompressionZstdLevel int `envconfig:"PRODUCER_COMPRESSION_ZSTD_LEVEL" mm2:"producer.compression.zstd.level" default:"3" desc:"zstd level with compression.type=zstd, -131072 to 22; franz-go's zstd has four speeds: below 3 fastest, 3-5 default, 6-9 better, 10 and above best"`
	// ProducerLingerMS is how long the producer waits to fill a batch.
	ProducerLingerMS int `envconfig:"PRODUCER_LINGER_MS" mm2:"producer.linger.ms" default:"5" desc:"producer batching delay in milliseconds"`
}

// Accepted values.
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"

	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
	MechanismOAuthBearer = "OAUTHBEARER"
	MechanismGSSAPI      = "GSSAPI"

	// EventHubsUser is the SASL PLAIN user name Event Hubs expects with a
	// connection string as password.
	EventHubsUser = "$ConnectionString"
)

// SettingError is one invalid setting, named by its environment variable and
// MM2 property. Problem never contains a secret value.
type SettingError struct {
	Env      string // e.g. MM2_SOURCE_BOOTSTRAP_SERVERS
	Property string // e.g. source.bootstrap.servers
	Problem  string
}

func (e *SettingError) Error() string {
	if e.Property == "" {
		return e.Env + ": " + e.Problem
	}
	return fmt.Sprintf("%s (%s): %s", e.Env, e.Property, e.Problem)
}

// UsesSASL reports whether the (normalized) protocol is SASL_*.
func (s *Settings) UsesSASL() bool {
	return s.SecurityProtocol == ProtocolSASLPlaintext || s.SecurityProtocol == ProtocolSASLSSL
}

// UsesTLS reports whether the (normalized) protocol is SSL or SASL_SSL.
func (s *Settings) UsesTLS() bool {
	return s.SecurityProtocol == ProtocolSSL || s.SecurityProtocol == ProtocolSASLSSL
}

// SASLCredentials returns the PLAIN/SCRAM user and password: from the Event
// Hubs connection string, else from SASLJAASConfig's username/password
// options, else SASLUsername/SASLPassword.
func (s *Settings) SASLCredentials() (user string, password secret.Secret, err error) {
	switch {
	case s.EventHubsConnectionString.IsSet():
		return EventHubsUser, s.EventHubsConnectionString, nil
	case s.SASLJAASConfig.IsSet():
		entries, err := parseJAAS(s.SASLJAASConfig.Reveal())
		if err != nil {
			return "", secret.Secret{}, err
		}
		if len(entries) != 1 {
			return "", secret.Secret{}, fmt.Errorf("has %d login modules, want exactly 1", len(entries))
		}
		o := entries[0].options
		return o["username"], secret.New(o["password"]), nil
	}
	return s.SASLUsername, s.SASLPassword, nil
}

// Normalize validates s and fills derived values: upper-cased enums, the
// default security protocol, and Event Hubs' protocol, mechanism and
// bootstrap address. envPrefix ("MM2_SOURCE_") and propPrefix ("source.")
// name the settings in the returned problems. Normalize is idempotent.
func (s *Settings) Normalize(envPrefix, propPrefix string) []*SettingError {
	var errs []*SettingError
	bad := func(key, format string, args ...any) {
		errs = append(errs, &SettingError{
			Env:      envPrefix + strings.NewReplacer(".", "_", "-", "_").Replace(strings.ToUpper(key)),
			Property: propPrefix + key,
			Problem:  fmt.Sprintf(format, args...),
		})
	}

	s.SecurityProtocol = strings.ToUpper(strings.TrimSpace(s.SecurityProtocol))
	s.SASLMechanism = strings.ToUpper(strings.TrimSpace(s.SASLMechanism))
	hasSASLCreds := s.SASLUsername != "" || s.SASLPassword.IsSet() || s.SASLJAASConfig.IsSet() || s.OAuthBearer.Enabled()

	if s.EventHubsConnectionString.IsSet() {
		host, err := eventHubsHost(s.EventHubsConnectionString.Reveal())
		if err != nil {
			bad("eventhubs.connection.string", "%v", err)
		}
		if hasSASLCreds {
			bad("eventhubs.connection.string", "set either the Event Hubs connection string or SASL credentials (%sSASL_USERNAME/PASSWORD/JAAS_CONFIG), not both", envPrefix)
		}
		if s.SASLMechanism != "" && s.SASLMechanism != MechanismPlain {
			bad("sasl.mechanism", "must be PLAIN or empty with an Event Hubs connection string")
		}
		if s.SecurityProtocol != "" && s.SecurityProtocol != ProtocolSASLSSL {
			bad("security.protocol", "must be SASL_SSL or empty with an Event Hubs connection string")
		}
		s.SecurityProtocol, s.SASLMechanism = ProtocolSASLSSL, MechanismPlain
		if len(s.BootstrapServers) == 0 && host != "" {
			s.BootstrapServers = []string{host + ":9093"}
		}
	}

	s.normalizeAzure(hasSASLCreds, bad) // Azure AD: SASL_SSL + OAUTHBEARER (azure.go)
	s.normalizeOAuthBearer(bad)         // OIDC token endpoint: OAUTHBEARER (oidc.go)

	switch s.SecurityProtocol {
	case "":
		if hasSASLCreds {
			bad("security.protocol", "SASL credentials are set but the protocol is not: set SASL_SSL or SASL_PLAINTEXT")
		}
		s.SecurityProtocol = ProtocolPlaintext
	case ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
	default:
		bad("security.protocol", "unknown value %q (want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", s.SecurityProtocol)
	}

	if len(s.BootstrapServers) == 0 {
		bad("bootstrap.servers", "required")
	}
	for _, b := range s.BootstrapServers {
		if strings.Contains(b, "${") {
			bad("bootstrap.servers", "%q contains an unresolved config provider reference: check config.providers and the referenced file/key/variable", b)
			continue
		}
		host, port, err := net.SplitHostPort(b)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			bad("bootstrap.servers", "%q is not host:port", b)
		}
	}

	if s.UsesSASL() {
		switch s.SASLMechanism {
		case MechanismPlain, MechanismScramSHA256, MechanismScramSHA512:
			s.checkCredentials(bad)
		case MechanismOAuthBearer:
			if !s.Azure.Enabled() && !s.OAuthBearer.Enabled() {
				bad("sasl.mechanism", "%v", errNoTokenSource)
			}
		case MechanismGSSAPI:
			if _, err := parseKerberosLogin(*s); err != nil {
				var pe *propError
				if errors.As(err, &pe) {
					bad(pe.prop, "%v", pe.err)
				}
			}
		case "":
			bad("sasl.mechanism", "required with %s (Kafka's default is GSSAPI; here it must be named): PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or GSSAPI", s.SecurityProtocol)
		default:
			bad("sasl.mechanism", "unsupported value %q (want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or GSSAPI)", s.SASLMechanism)
		}
	}

	if s.SSLTruststoreLocation != "" && s.SSLTruststoreCertificates != "" {
		bad("ssl.truststore.certificates", "set either ssl.truststore.location or ssl.truststore.certificates, not both")
	}
	if s.SSLKeystoreLocation != "" && (s.SSLKeystoreKey.IsSet() || s.SSLKeystoreCertificateChain != "") {
		bad("ssl.keystore.key", "set either ssl.keystore.location or ssl.keystore.key/certificate.chain, not both")
	}
	if s.SSLKeystoreKey.IsSet() != (s.SSLKeystoreCertificateChain != "") {
		bad("ssl.keystore.certificate.chain", "ssl.keystore.key and ssl.keystore.certificate.chain must be set together")
	}
	for _, st := range []struct {
		key, inlineKey string
		v              *string
		inline         bool
	}{
		{"ssl.truststore.type", "ssl.truststore.certificates", &s.SSLTruststoreType, s.SSLTruststoreCertificates != ""},
		{"ssl.keystore.type", "ssl.keystore.key", &s.SSLKeystoreType, s.SSLKeystoreKey.IsSet()},
	} {
		*st.v = strings.ToUpper(strings.TrimSpace(*st.v))
		switch *st.v {
		case "", StoreJKS, StorePKCS12, StorePEM:
		default:
			bad(st.key, "%q is not supported (want JKS, PKCS12 or PEM)", *st.v)
		}
		if st.inline && *st.v != "" && *st.v != StorePEM {
			bad(st.key, "must be PEM (or empty) with %s", st.inlineKey)
		}
	}
	switch strings.ToLower(strings.TrimSpace(s.SSLEndpointIdentificationAlgorithm)) {
	case "":
		s.SSLEndpointIdentificationAlgorithm = ""
	case "https":
		s.SSLEndpointIdentificationAlgorithm = "https"
	default:
		bad("ssl.endpoint.identification.algorithm", "unknown value %q (want https, or empty to disable host name verification)", s.SSLEndpointIdentificationAlgorithm)
	}

	enum := func(key string, v *string, allowed ...string) {
		*v = strings.ToLower(strings.TrimSpace(*v))
		for _, a := range allowed {
			if *v == a {
				return
			}
		}
		bad(key, "unknown value %q (want %s)", *v, strings.Join(allowed, ", "))
	}
	enum("consumer.auto.offset.reset", &s.ConsumerAutoOffsetReset, "earliest", "latest", "none")
	enum("consumer.isolation.level", &s.ConsumerIsolationLevel, "read_uncommitted", "read_committed")
	enum("producer.compression.type", &s.ProducerCompressionType, "none", "gzip", "snappy", "lz4", "zstd")
	// 0 is a Settings built without the defaults: the codec's default level.
	for _, l := range []struct {
		key, want        string
		v, min, max, def int
	}{
		{"producer.compression.gzip.level", "1 to 9, or -1 for gzip's default", s.ProducerCompressionGzipLevel, 1, 9, -1},
		{"producer.compression.lz4.level", "1 to 17", s.ProducerCompressionLz4Level, 1, 17, 9},
		{"producer.compression.zstd.level", "-131072 to 22", s.ProducerCompressionZstdLevel, -131072, 22, 3},
	} {
		if l.v != 0 && l.v != l.def && (l.v < l.min || l.v > l.max) {
			bad(l.key, "%d is out of range (want %s)", l.v, l.want)
		}
	}
	if s.ProducerLingerMS < 0 {
		bad("producer.linger.ms", "must not be negative")
	}
	return errs
}

func (s *Settings) checkCredentials(bad func(key, format string, args ...any)) {
	if s.EventHubsConnectionString.IsSet() {
		return
	}
	if s.SASLJAASConfig.IsSet() {
		if s.SASLUsername != "" || s.SASLPassword.IsSet() {
			bad("sasl.jaas.config", "set either sasl.jaas.config or sasl.username/sasl.password, not both")
			return
		}
		user, pass, err := s.SASLCredentials()
		switch {
		case err != nil:
			bad("sasl.jaas.config", "%v", err)
		case user == "" || !pass.IsSet():
			bad("sasl.jaas.config", "needs username and password options for %s", s.SASLMechanism)
		}
		return
	}
	if s.SASLUsername == "" {
		bad("sasl.username", "required with %s %s (or set sasl.jaas.config)", s.SecurityProtocol, s.SASLMechanism)
	}
	if !s.SASLPassword.IsSet() {
		bad("sasl.password", "required with %s %s (or set sasl.jaas.config)", s.SecurityProtocol, s.SASLMechanism)
	}
}

// eventHubsHost returns the namespace host of an Event Hubs connection
// string. Errors never contain the string.
func eventHubsHost(cs string) (string, error) {
	var endpoint string
	var keyName, key, sas bool
	for _, part := range strings.Split(cs, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch strings.ToLower(k) {
		case "endpoint":
			endpoint = v
		case "sharedaccesskeyname":
			keyName = v != ""
		case "sharedaccesskey":
			key = v != ""
		case "sharedaccesssignature":
			sas = v != ""
		}
	}
	rest, ok := strings.CutPrefix(endpoint, "sb://")
	host, _, _ := strings.Cut(rest, "/")
	if !ok || host == "" {
		return "", fmt.Errorf("not an Event Hubs connection string: needs Endpoint=sb://<namespace>.servicebus.windows.net/")
	}
	if !sas && !(keyName && key) {
		return "", fmt.Errorf("not an Event Hubs connection string: needs SharedAccessKeyName and SharedAccessKey (or SharedAccessSignature)")
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return host, nil
}
