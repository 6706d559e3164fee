package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/secret"
)

// With a one- or two-character password, every text that franz-go, the
// broker or this package writes must come out exactly as written: nothing
// formats a secret, and the guard does not edit text (the substring
// replacement it replaces turned "unable to open connection to broker"
// into "una[redacted]le to open connection to [redacted]roker").
func TestShortSecretsLeaveTextIntact(t *testing.T) {
	for _, pass := range []string{"b", "br", "o", "to"} {
		t.Run(pass, func(t *testing.T) {
			s := Settings{Alias: "source", BootstrapServers: []string{"broker-1:9093"}, SecurityProtocol: ProtocolSASLSSL,
				SASLMechanism: MechanismScramSHA512, SASLUsername: "bob", SASLPassword: secret.New(pass),
				SSLKeyPassword: secret.New(pass), SSLTruststorePassword: secret.New(pass)}

			// franz-go's log lines.
			var buf bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			kl := KafkaLogger(logger, slog.LevelDebug, s)
			kl.Log(kgo.LogLevelWarn, "unable to open connection to broker", "addr", "broker-1:9093", "broker", "seed_0",
				"err", errors.New("dial tcp: lookup broker-1: no such host"))
			line := buf.String()
			for _, want := range []string{`msg="unable to open connection to broker"`, `addr=broker-1:9093`, `broker=seed_0`, `err="dial tcp: lookup broker-1: no such host"`} {
				if !strings.Contains(line, want) {
					t.Errorf("log line lacks %s:\n%s", want, line)
				}
			}
			if strings.Contains(line, "redacted") || strings.Contains(line, "withheld") {
				t.Errorf("log line edited:\n%s", line)
			}

			// A connection error with the broker's own message.
			base := fmt.Errorf("broker closed the connection: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512: %w", kerr.SaslAuthenticationFailed)
			got := ConnectError(s, base).Error()
			want := `connecting to cluster "source" at broker-1:9093: SASL authentication failed (SCRAM-SHA-512 as "bob"): ` + base.Error()
			if got != want {
				t.Errorf("connect error\n got %q\nwant %q", got, want)
			}

			// Setting errors.
			bad := s
			bad.SASLUsername = ""
			_, err := Options(bad, nil)
			if want := `MM2_SOURCE_SASL_USERNAME (source.sasl.username): required with SASL_SSL SCRAM-SHA-512 (or set sasl.jaas.config)`; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("setting error %v, want %q", err, want)
			}
			if err != nil && (strings.Contains(err.Error(), "redacted") || strings.Contains(err.Error(), "withheld")) {
				t.Errorf("setting error edited: %v", err)
			}

			// fmt and slog on the settings print no value.
			for _, out := range []string{fmt.Sprintf("%v %+v %#v", s, s, s), fmt.Sprint(s.SASLPassword)} {
				if strings.Contains(out, "Reveal") || strings.Contains(out, `"`+pass+`"`) || strings.Contains(out, ":"+pass+" ") {
					t.Errorf("formatted settings show the secret: %s", out)
				}
			}
		})
	}
}

// A long secret that a foreign text does contain is withheld whole, with a
// notice naming the setting; the error chain is kept.
func TestLongSecretWithheldWhole(t *testing.T) {
	const pass = "correct-horse-battery"
	s := Settings{Alias: "target", BootstrapServers: []string{"b:9092"}, SecurityProtocol: ProtocolSASLPlaintext,
		SASLMechanism: MechanismPlain, SASLJAASConfig: secret.New(`org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="` + pass + `";`)}
	err := ConnectError(s, fmt.Errorf("proxy echoed %s: %w", pass, kerr.SaslAuthenticationFailed))
	want := `connecting to cluster "target" at b:9092: SASL authentication failed (PLAIN as "u"): [text withheld: it contained the value of sasl.jaas.config]`
	if err.Error() != want || !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("got %q (is SaslAuthenticationFailed: %v)\nwant %q", err, errors.Is(err, kerr.SaslAuthenticationFailed), want)
	}
}

// Every Secret field is guarded, nested ones included, under its property.
func TestGuardCoversEverySecretField(t *testing.T) {
	var s Settings
	var want []string
	i := 0
	secretFields(reflectValue(&s), "", func(prop, _ string) { want = append(want, prop) })
	setSecrets(&s, func() string { i++; return fmt.Sprintf("secret-value-%02d", i) })
	var got []string
	for _, g := range guardOf(s) {
		got = append(got, g.prop)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("guarded %v, want %v", got, want)
	}
	for _, p := range []string{"sasl.password", "sasl.jaas.config", "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password", "ssl.keystore.key", "azure.client.secret"} {
		if !slices.Contains(got, p) {
			t.Errorf("%s is not guarded (have %v)", p, got)
		}
	}
}

func reflectValue(s *Settings) reflect.Value { return reflect.ValueOf(*s) }

// setSecrets sets every Secret field of s to a distinct value.
func setSecrets(s *Settings, next func() string) {
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		for i := range v.NumField() {
			f := v.Field(i)
			switch {
			case !v.Type().Field(i).IsExported():
			case f.Type() == secretType:
				f.Set(reflect.ValueOf(secret.New(next())))
			case f.Kind() == reflect.Struct:
				walk(f)
			}
		}
	}
	walk(reflect.ValueOf(s).Elem())
}

// TestShortSecretAndSASTokenGuarded (F9): a short password is withheld where it stands as a
// value (password="pw1"), and an Event Hubs SharedAccessSignature connection string guards the
// token and its signature; prose that merely contains the short value is left alone.
func TestShortSecretAndSASTokenGuarded(t *testing.T) {
	s := Settings{Alias: "source", BootstrapServers: []string{"b:9093"}, SASLPassword: secret.New("pw1"),
		EventHubsConnectionString: secret.New("Endpoint=sb://ns.servicebus.windows.net/;SharedAccessSignature=SharedAccessSignature sr=ns.servicebus.windows.net&sig=c2lnbmF0dXJlLXZhbHVl&se=1900000000&skn=send")}
	g := guardOf(s)
	for _, text := range []string{`broker said: login failed user="bob" password="pw1"`, `password=pw1; retry`,
		`proxy echoed sig=c2lnbmF0dXJlLXZhbHVl`, `token SharedAccessSignature sr=ns.servicebus.windows.net&sig=c2lnbmF0dXJlLXZhbHVl&se=1900000000&skn=send`} {
		if got := g.text(text); !strings.Contains(got, "withheld") {
			t.Errorf("%q passed the guard as %q", text, got)
		}
	}
	for _, text := range []string{"upw1 is a word, apw12 too", "dial tcp: lookup b: no such host"} {
		if got := g.text(text); got != text {
			t.Errorf("%q edited to %q", text, got)
		}
	}
}
