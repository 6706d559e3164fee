package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jcmturner/gokrb5/v8/krberror"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Options returns the franz-go options that reach the cluster of s: seed
// brokers, TLS, SASL (PLAIN, SCRAM-SHA-256/512, or an Event Hubs connection
// string), client id, consumer reset/isolation, producer compression/linger,
// Event Hubs tuning when a connection string is used, and a logger
// (KafkaLogger at DefaultKafkaLogLevel).
//
// s is validated with Settings.Normalize on a copy, so Options accepts both
// normalized settings and settings built in code; in the latter, empty
// ConsumerAutoOffsetReset, ConsumerIsolationLevel and ProducerCompressionType
// mean their documented defaults. Errors name the setting by environment
// variable and MM2 property and never contain a secret.
func Options(s Settings, logger *slog.Logger) ([]kgo.Opt, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	n, eh, err := normalized(s)
	if err != nil {
		return nil, err
	}
	log := logger.With("cluster", n.Alias)

	opts := []kgo.Opt{
		kgo.SeedBrokers(n.BootstrapServers...),
		kgo.ClientID(clientID(n)),
		kgo.WithLogger(KafkaLogger(logger, DefaultKafkaLogLevel, n)),
	}

	if n.UsesTLS() {
		cfg, err := TLSConfig(n)
		if err != nil {
			return nil, settingErr(n, err)
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	} else if tlsConfigured(n) {
		log.Warn("TLS settings are ignored: security.protocol does not use TLS", "security_protocol", n.SecurityProtocol)
	}

	if n.UsesSASL() {
		mech, err := saslMechanism(n, logger)
		if err != nil {
			return nil, settingErr(n, err)
		}
		opts = append(opts, kgo.SASL(mech))
	}

	opts = append(opts, consumerProducerOpts(n)...)

	if eh != nil {
		if eh.EntityPath != "" {
			log.Warn("the Event Hubs connection string is entity-level (has EntityPath): it reaches one event hub only and cannot create topics; use a namespace-level string to mirror")
		}
		if c := n.ProducerCompressionType; c != "none" && c != "gzip" {
			log.Warn("Event Hubs accepts only uncompressed or gzip batches", "compression", c)
		}
		if len(s.BootstrapServers) > 0 && !bootstrapReaches(s.BootstrapServers, eh.Host) {
			log.Warn("the bootstrap servers are not the Event Hubs namespace of the connection string, whose key signs in to that namespace only: set the bootstrap servers to <namespace>:9093 of the connection string, or leave them out",
				"bootstrap_servers", strings.Join(s.BootstrapServers, ","), "connection_string_namespace", eh.Host)
		}
		// The Event Hubs profile's request sizes and timeouts. When Settings
		// carries the profile settings, this becomes NewProfile(...).ClientOpts().
		opts = append(opts, Profile{Cluster: n.Alias, EventHubs: true}.ClientOpts()...)
	}
	return opts, nil
}

// NewClient returns a franz-go client for the cluster of s, with extra
// options applied after Options' (so they override single-valued ones such
// as ClientID or WithLogger; kgo.SASL adds rather than replaces). Like
// kgo.NewClient it does not connect: call Ping to check the settings up
// front. ctx bounds nothing yet; it is there for credential providers that
// need I/O to build the client (OAUTHBEARER).
func NewClient(ctx context.Context, s Settings, logger *slog.Logger, extra ...kgo.Opt) (*kgo.Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	opts, err := Options(s, logger)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, guardOf(s).err(fmt.Errorf("cluster %q: creating client: %w", s.Alias, err))
	}
	return cl, nil
}

// Ping checks that the client reaches its cluster and authenticates, with a
// metadata request. Its error names the cluster alias and bootstrap address
// and says what failed (TLS, SASL, the network), e.g.
//
//	connecting to cluster "target" at 127.0.0.1:29094: SASL authentication failed (PLAIN as "alice"): ...
//
// It never contains a secret.
func Ping(ctx context.Context, cl *kgo.Client, s Settings) error {
	err := cl.Ping(ctx)
	if err == nil {
		return nil
	}
	return ConnectError(s, err)
}

// ConnectError describes err, an error from reaching the cluster of s, with
// the cluster alias, the bootstrap address and what failed. It formats no
// secret; a cause whose text holds one is withheld whole (leakGuard). Ping uses it; so can callers whose first request failed.
func ConnectError(s Settings, err error) error {
	if err == nil {
		return nil
	}
	var done *connectError
	if errors.As(err, &done) {
		return err
	}
	n, _, nerr := normalized(s)
	if nerr != nil {
		n = s
		n.BootstrapServers, _ = Bootstrap(s)
	}
	// err's text comes from franz-go and the broker: guarded, never edited.
	cause := guardOf(s).text(err.Error())
	msg := fmt.Sprintf("connecting to cluster %q at %s: %s%s", n.Alias, strings.Join(n.BootstrapServers, ","), describeConnectErr(n, err), cause)
	return &connectError{msg: msg, err: err}
}

// connectError is ConnectError's result: the message, and the
// original error for errors.Is/As (kerr.SaslAuthenticationFailed, ...).
type connectError struct {
	msg string
	err error
}

func (e *connectError) Error() string { return e.msg }
func (e *connectError) Unwrap() error { return e.err }

// describeConnectErr returns a prefix naming the failing layer, or "".
func describeConnectErr(s Settings, err error) string {
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		header    tls.RecordHeaderError
		firstEOF  *kgo.ErrFirstReadEOF
		netErr    *net.OpError
		krbErr    krberror.Krberror
		krbErrPtr *krberror.Krberror
	)
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed) && s.OAuthBearer.Enabled():
		id, _, _, _ := s.oauthClient()
		return fmt.Sprintf("SASL OAUTHBEARER authentication failed (the broker refused the token from %s for client ID %q; check the broker's expected audience and issuer against the token's aud and iss): ", s.OAuthBearer.TokenEndpointURL, id)
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		user, _, _ := s.SASLCredentials()
		return fmt.Sprintf("SASL authentication failed (%s as %q): ", s.SASLMechanism, user)
	case s.SASLMechanism == MechanismGSSAPI && (errors.As(err, &krbErr) || errors.As(err, &krbErrPtr) || kerberosText(err.Error())):
		l, _ := parseKerberosLogin(s)
		return fmt.Sprintf("Kerberos (GSSAPI as %q, service %q) failed: ", l.user+"@"+l.realm, l.service)
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return fmt.Sprintf("the broker does not enable SASL mechanism %s on this listener: ", s.SASLMechanism)
	case errors.Is(err, kerr.IllegalSaslState):
		return "SASL handshake failed (is this listener SASL? check security.protocol): "
	case errors.As(err, &hostname):
		return "TLS: the broker certificate does not match the host name (ssl.endpoint.identification.algorithm= disables the check): "
	case errors.As(err, &unknownCA):
		return "TLS: broker certificate not signed by a trusted CA (set ssl.truststore.location or ssl.truststore.certificates): "
	case errors.As(err, &invalid), errors.As(err, &verify):
		return "TLS: broker certificate rejected: "
	case errors.As(err, &header):
		return "TLS handshake failed (the listener does not speak TLS? check security.protocol): "
	case errors.As(err, &firstEOF):
		return "connection closed by the broker (check security.protocol against the listener): "
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "no answer in time (unreachable, or a TLS/plaintext mismatch): "
	case errors.As(err, &netErr):
		return "network: "
	}
	return ""
}

// kerberosText reports whether an error's text comes from gokrb5, which
// does not always keep its error type when it wraps (AffirmLogin).
func kerberosText(t string) bool {
	return strings.Contains(t, "KDC_Error") || strings.Contains(t, "KRB Error") || strings.Contains(t, "TGT") || strings.Contains(t, "krb5")
}

// SASLMechanism returns the franz-go SASL mechanism for s (whose protocol is
// SASL_PLAINTEXT or SASL_SSL): PLAIN or SCRAM-SHA-256/512 with the
// credentials of Settings.SASLCredentials (for an Event Hubs connection
// string, PLAIN with user $ConnectionString and the string as password).
//
// OAUTHBEARER (Microsoft Entra ID) is delegated to oauthBearerMechanism
// (oauth.go), which is not implemented yet.
func SASLMechanism(s Settings) (sasl.Mechanism, error) { return saslMechanism(s, nil) }

func saslMechanism(s Settings, logger *slog.Logger) (sasl.Mechanism, error) {
	mech := strings.ToUpper(strings.TrimSpace(s.SASLMechanism))
	if s.EventHubsConnectionString.IsSet() && mech == "" {
		mech = MechanismPlain
	}
	switch mech {
	case MechanismPlain, MechanismScramSHA256, MechanismScramSHA512:
	case MechanismOAuthBearer:
		return oauthBearerMechanism(s, logger)
	case MechanismGSSAPI:
		return kerberosMechanism(s)
	case "":
		return nil, propErr("sasl.mechanism", errors.New("required with a SASL security.protocol (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"))
	default:
		return nil, propErr("sasl.mechanism", fmt.Errorf("unsupported value %q (want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or GSSAPI)", s.SASLMechanism))
	}
	user, pass, err := s.SASLCredentials()
	if err != nil {
		return nil, propErr("sasl.jaas.config", err)
	}
	if user == "" || !pass.IsSet() {
		return nil, propErr("sasl.password", fmt.Errorf("SASL %s needs a user and a password (sasl.username/sasl.password or sasl.jaas.config)", mech))
	}
	switch mech {
	case MechanismScramSHA256:
		return scram.Auth{User: user, Pass: pass.Reveal()}.AsSha256Mechanism(), nil
	case MechanismScramSHA512:
		return scram.Auth{User: user, Pass: pass.Reveal()}.AsSha512Mechanism(), nil
	}
	return plain.Auth{User: user, Pass: pass.Reveal()}.AsMechanism(), nil
}

// Bootstrap returns the seed brokers of s: BootstrapServers if set, else
// <namespace host>:9093 from the Event Hubs connection string.
func Bootstrap(s Settings) ([]string, error) {
	if len(s.BootstrapServers) > 0 {
		return s.BootstrapServers, nil
	}
	if s.EventHubsConnectionString.IsSet() {
		c, err := ParseEventHubsConnectionString(s.EventHubsConnectionString.Reveal())
		if err != nil {
			return nil, eventHubsErr(s, err)
		}
		return []string{c.Bootstrap()}, nil
	}
	return nil, settingErr(s, propErr("bootstrap.servers", errors.New("required")))
}

// eventHubsErr names the connection string setting in a parse error.
func eventHubsErr(s Settings, err error) error {
	return settingErr(s, propErr("eventhubs.connection.string", fmt.Errorf("the connection string %w", err)))
}

// bootstrapReaches reports whether one of the bootstrap servers is in the Event Hubs
// namespace of host: the same first DNS label (mynamespace.servicebus.windows.net and a
// private endpoint's mynamespace.privatelink.servicebus.windows.net both are).
func bootstrapReaches(servers []string, host string) bool {
	ns, _, _ := strings.Cut(host, ".")
	for _, b := range servers {
		h := b
		if hh, _, err := net.SplitHostPort(b); err == nil {
			h = hh
		}
		if first, _, _ := strings.Cut(h, "."); strings.EqualFold(first, ns) {
			return true
		}
	}
	return false
}

// normalized validates a copy of s with Settings.Normalize and returns it,
// with the parsed Event Hubs connection string if there is one.
func normalized(s Settings) (Settings, *EventHubsConnection, error) {
	var eh *EventHubsConnection
	if s.EventHubsConnectionString.IsSet() {
		c, err := ParseEventHubsConnectionString(s.EventHubsConnectionString.Reveal())
		if err != nil {
			return s, nil, eventHubsErr(s, err)
		}
		eh = &c
	}
	n := s
	n.BootstrapServers = append([]string(nil), s.BootstrapServers...)
	for _, d := range []struct {
		v   *string
		def string
	}{
		{&n.ConsumerAutoOffsetReset, "earliest"},
		{&n.ConsumerIsolationLevel, "read_uncommitted"},
		{&n.ProducerCompressionType, "none"},
	} {
		if strings.TrimSpace(*d.v) == "" {
			*d.v = d.def
		}
	}
	env, prop := prefixes(s.Role, s.Alias)
	if errs := n.Normalize(env, prop); len(errs) > 0 {
		joined := make([]error, len(errs))
		for i, e := range errs {
			joined[i] = e
		}
		return s, nil, guardOf(s).err(fmt.Errorf("cluster %q: %w", s.Alias, errors.Join(joined...)))
	}
	return n, eh, nil
}

// prefixes returns the environment variable and MM2 property prefixes of a
// cluster: MM2_SOURCE_ and primary. for role "source" and alias "primary".
// Without a role the alias stands for it.
func prefixes(role, alias string) (env, prop string) {
	if role == "" {
		role = alias
	}
	up := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, role)
	prop = alias + "."
	if alias == "" {
		prop = ""
	}
	if role == "" {
		return "MM2_", prop
	}
	return "MM2_" + up + "_", prop
}

// propError is a problem with one MM2 property (without the cluster
// prefix) of a cluster's settings.
type propError struct {
	prop string
	err  error
}

func propErr(prop string, err error) error { return &propError{prop: prop, err: err} }

func (e *propError) Error() string { return e.prop + ": " + e.err.Error() }
func (e *propError) Unwrap() error { return e.err }

// settingErr turns a *propError into a *SettingError naming the cluster's
// environment variable and property; other errors get the cluster alias.
func settingErr(s Settings, err error) error {
	var pe *propError
	if !errors.As(err, &pe) {
		return guardOf(s).err(fmt.Errorf("cluster %q: %w", s.Alias, err))
	}
	env, prop := prefixes(s.Role, s.Alias)
	return &SettingError{
		Env:      env + strings.NewReplacer(".", "_", "-", "_").Replace(strings.ToUpper(pe.prop)),
		Property: prop + pe.prop,
		Problem:  guardOf(s).text(pe.err.Error()),
	}
}

func clientID(s Settings) string {
	if s.ClientID != "" {
		return s.ClientID
	}
	return DefaultClientID(s.Alias, os.LookupEnv)
}

// DefaultClientID is the client.id of a cluster's clients when client.id is not set:
// mm2go-<alias>-<instance>, the instance named by the first variable lookupEnv finds set of
// POD_NAME (the downward API), CONTAINER_APP_REPLICA_NAME (Azure Container Apps) and HOSTNAME
// (the pod name in every Kubernetes container), or mm2go-<alias> when none is. Brokers apply
// client quotas per client id, so instances that copy side by side (one burst group, several
// pods of a Service) each get their own quota instead of sharing one.
func DefaultClientID(alias string, lookupEnv func(string) (string, bool)) string {
	id := "mm2go"
	if alias != "" {
		id += "-" + alias
	}
	for _, name := range []string{"POD_NAME", "CONTAINER_APP_REPLICA_NAME", "HOSTNAME"} {
		if v, ok := lookupEnv(name); ok && strings.TrimSpace(v) != "" {
			return id + "-" + strings.TrimSpace(v)
		}
	}
	return id
}

func tlsConfigured(s Settings) bool {
	return s.SSLTruststoreLocation != "" || s.SSLTruststoreCertificates != "" || s.SSLKeystoreLocation != "" ||
		s.SSLKeystoreKey.IsSet() || s.SSLKeystoreCertificateChain != "" ||
		s.SSLTruststorePassword.IsSet() || s.SSLKeystorePassword.IsSet() || s.SSLKeyPassword.IsSet()
}

func consumerProducerOpts(s Settings) []kgo.Opt {
	var opts []kgo.Opt
	switch s.ConsumerAutoOffsetReset {
	case "latest":
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	case "none":
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NoResetOffset()))
	default:
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	}
	if s.ConsumerIsolationLevel == "read_committed" {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	opts = append(opts,
		kgo.ProducerBatchCompression(producerCodec(s)),
		kgo.ProducerLinger(time.Duration(s.ProducerLingerMS)*time.Millisecond),
		// Kafka's max.request.size default, not franz-go's 1000012: a record of 1,000,000
		// bytes (which a Java producer, and so MM2, writes) fits, and batches fill 5% more.
		// producer.max.request.size and the Event Hubs profile override it.
		kgo.ProducerBatchMaxBytes(DefaultMaxRequestSize),
	)
	return opts
}

// DefaultMaxRequestSize is the largest record batch a producer writes unless
// producer.max.request.size says otherwise: Kafka's max.request.size default (the broker's
// message.max.bytes default, 1048588, takes it).
const DefaultMaxRequestSize = 1 << 20

// ClientFunc builds a franz-go client for one cluster, with extra options applied last.
type ClientFunc func(ctx context.Context, extra ...kgo.Opt) (*kgo.Client, error)

// Dialer returns the ClientFunc of one cluster: its settings, then its profile's client options
// (Event Hubs limits), then the caller's. The settings' options are worked out once, so every
// client of a Dialer shares one SASL mechanism: with Azure AD, one credential and one token
// cache per process instead of a token request per client.
func Dialer(s Settings, p Profile, logger *slog.Logger) ClientFunc {
	var (
		once sync.Once
		base []kgo.Opt
		err  error
	)
	return func(ctx context.Context, extra ...kgo.Opt) (*kgo.Client, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		once.Do(func() { base, err = Options(s, logger) })
		if err != nil {
			return nil, err
		}
		opts := append(append(append([]kgo.Opt{}, base...), p.ClientOpts()...), extra...)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, guardOf(s).err(fmt.Errorf("cluster %q: creating client: %w", s.Alias, err))
		}
		return cl, nil
	}
}

// lz4Depths are franz-go's (pierrec/lz4's) high-compression depths, for Kafka's lz4 levels 1 to 9.
var lz4Depths = [...]lz4.CompressionLevel{lz4.Level1, lz4.Level2, lz4.Level3, lz4.Level4, lz4.Level5, lz4.Level6, lz4.Level7, lz4.Level8, lz4.Level9}

// producerCodec is the target producer's codec for compression.type at Kafka's
// compression.<type>.level. Kafka's lz4 default (9) is lz4's fast mode and any other level its
// high-compression mode; franz-go has nine depths, so levels above 9 compress as 9. zstd levels
// map onto the encoder's four speeds as klauspost/compress maps them.
func producerCodec(s Settings) kgo.CompressionCodec {
	switch s.ProducerCompressionType {
	case "gzip":
		c := kgo.GzipCompression()
		if l := s.ProducerCompressionGzipLevel; l >= 1 && l <= 9 {
			c = c.WithLevel(l)
		}
		return c
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		c := kgo.Lz4Compression()
		if l := s.ProducerCompressionLz4Level; l >= 1 && l <= 17 && l != 9 {
			c = c.WithLevel(int(lz4Depths[min(l, 9)-1]))
		}
		return c
	case "zstd":
		l := s.ProducerCompressionZstdLevel
		if l == 0 {
			l = 3 // zstd's own meaning of 0
		}
		return kgo.ZstdCompression().WithLevel(int(zstd.EncoderLevelFromZstd(l)))
	}
	return kgo.NoCompression()
}
