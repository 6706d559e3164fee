package cluster

import (
	"log/slog"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kslog"
)

// DefaultKafkaLogLevel is the most verbose level at which Options lets
// franz-go log: its INFO and DEBUG output is per connection and per request.
const DefaultKafkaLogLevel = slog.LevelWarn

// KafkaLogger adapts logger for franz-go (kgo.WithLogger). Records carry
// cluster=<alias> and component=franz-go; franz-go logs at level and above
// (and only what logger's handler enables). franz-go is not known to log
// credentials; as a second line of defence, a message or value that contains
// a secret of s (of at least minGuardedSecret characters) is replaced whole
// by a notice naming the setting, never edited (see leakGuard).
//
// Options uses DefaultKafkaLogLevel; to see franz-go's DEBUG output, pass
// kgo.WithLogger(cluster.KafkaLogger(logger, slog.LevelDebug, s)) as an extra
// option to NewClient.
func KafkaLogger(logger *slog.Logger, level slog.Level, s Settings) kgo.Logger {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &kafkaLogger{
		inner: kslog.New(logger.With("cluster", s.Alias, "component", "franz-go")),
		max:   kgoLevel(level),
		guard: guardOf(s),
	}
}

type kafkaLogger struct {
	inner kgo.Logger
	max   kgo.LogLevel
	guard leakGuard
}

func (l *kafkaLogger) Level() kgo.LogLevel { return min(l.inner.Level(), l.max) }

func (l *kafkaLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if level > l.Level() {
		return
	}
	if len(l.guard) > 0 {
		msg = l.guard.text(msg)
		keyvals = slices.Clone(keyvals)
		for i, v := range keyvals {
			keyvals[i] = l.guard.value(v)
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
