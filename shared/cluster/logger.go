package cluster

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kslog"

	"github.com/mm2go/mm2go/shared/secret"
)

// DefaultKafkaLogLevel is the most verbose level at which Options lets
// franz-go log: its INFO and DEBUG output is per connection and per request.
const DefaultKafkaLogLevel = slog.LevelWarn

// KafkaLogger adapts logger for franz-go (kgo.WithLogger). Records carry
// cluster=<alias> and component=franz-go; franz-go logs at level and above
// (and only what logger's handler enables). Any secret of s that shows up in
// a message or value is replaced by [redacted], as a second line of defence:
// franz-go is not known to log credentials.
//
// Options uses DefaultKafkaLogLevel; to see franz-go's DEBUG output, pass
// kgo.WithLogger(cluster.KafkaLogger(logger, slog.LevelDebug, s)) as an extra
// option to NewClient.
func KafkaLogger(logger *slog.Logger, level slog.Level, s Settings) kgo.Logger {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &kafkaLogger{
		inner:   kslog.New(logger.With("cluster", s.Alias, "component", "franz-go")),
		max:     kgoLevel(level),
		secrets: secretsOf(s),
	}
}

type kafkaLogger struct {
	inner   kgo.Logger
	max     kgo.LogLevel
	secrets []string
}

func (l *kafkaLogger) Level() kgo.LogLevel { return min(l.inner.Level(), l.max) }

func (l *kafkaLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if level > l.Level() {
		return
	}
	if len(l.secrets) > 0 {
		msg = redactString(msg, l.secrets)
		keyvals = slices.Clone(keyvals)
		for i, v := range keyvals {
			keyvals[i] = redactValue(v, l.secrets)
		}
	}
	l.inner.Log(level, msg, keyvals...)
}

func kgoLevel(l slog.Level) kgo.LogLevel {
	switch {
	case l <= slog.LevelDebug:
		return kgo.LogLevelDebug
	case l <= slog.LevelInfo:
		return kgo.LogLevelInfo
	case l <= slog.LevelWarn:
		return kgo.LogLevelWarn
	case l <= slog.LevelError:
		return kgo.LogLevelError
	}
	return kgo.LogLevelNone
}

// redactValue returns v, or its text with the secrets replaced when the text
// contains one.
func redactValue(v any, secrets []string) any {
	var text string
	switch v := v.(type) {
	case nil, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return v
	case secret.Secret, slog.LogValuer:
		return v
	case string:
		text = v
	case error:
		text = v.Error()
	default:
		text = fmt.Sprint(v)
	}
	if r := redactString(text, secrets); r != text {
		return r
	}
	return v
}

// secretsOf returns every secret value of s, longest first, so that a
// secret containing another (a connection string and its key) is replaced
// whole.
func secretsOf(s Settings) []string {
	var out []string
	add := func(v string) {
		if v = strings.TrimSpace(v); v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	for _, sec := range []secret.Secret{s.SASLPassword, s.SASLJAASConfig, s.EventHubsConnectionString, s.SSLKeystoreKey, s.SSLKeyPassword} {
		add(sec.Reveal())
	}
	if _, pass, err := s.SASLCredentials(); err == nil {
		add(pass.Reveal())
	}
	for _, v := range s.oauthSecrets() { // OIDC client secret (oidc.go)
		add(v)
	}
	if cs := s.EventHubsConnectionString.Reveal(); cs != "" {
		for part := range strings.SplitSeq(cs, ";") {
			if k, v, ok := strings.Cut(strings.TrimSpace(part), "="); ok && strings.EqualFold(strings.TrimSpace(k), "SharedAccessKey") {
				add(v)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return out
}

func redactString(text string, secrets []string) string {
	for _, s := range secrets {
		if strings.Contains(text, s) {
			text = strings.ReplaceAll(text, s, secret.Redacted)
		}
	}
	return text
}

// redactedError is an error whose text has had secrets removed. Unwrap gives
// the original error for errors.Is/As; its text is the caller's to guard.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact returns err with every secret in its text replaced by [redacted].
func redact(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := redactString(err.Error(), secrets)
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}
