package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

var valid = map[string]string{
	"MM2_SOURCE_BOOTSTRAP_SERVERS": "127.0.0.1:1",
	"MM2_TARGET_BOOTSTRAP_SERVERS": "127.0.0.1:2",
	"MM2_LOG_FORMAT":               "json",
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		vars map[string]string
		run  error
		want int
	}{
		{"help", []string{"-h"}, nil, nil, ExitOK},
		{"help word", []string{"help"}, nil, nil, ExitOK},
		{"no sub-command", nil, valid, nil, ExitConfig},
		{"unknown sub-command", []string{"jump"}, valid, nil, ExitConfig},
		{"missing bootstrap", []string{"run"}, map[string]string{"MM2_LOG_FORMAT": "json"}, nil, ExitConfig},
		{"bad log level", []string{"run"}, map[string]string{"MM2_SOURCE_BOOTSTRAP_SERVERS": "a:1", "MM2_TARGET_BOOTSTRAP_SERVERS": "b:1", "MM2_LOG_LEVEL": "loud"}, nil, ExitConfig},
		{"done", []string{"run"}, valid, nil, ExitOK},
		{"more to do", []string{"run"}, valid, fmt.Errorf("max-records: %w", ErrMoreToDo), ExitMore},
		{"failed", []string{"run"}, valid, errors.New("broker on fire"), ExitFailed},
		{"config error from run", []string{"run"}, valid, &ConfigError{errors.New("bad")}, ExitConfig},
		{"serve not there", []string{"serve"}, valid, nil, ExitFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			app := App{Name: "mirror", Run: func(context.Context, Env) error { return tc.run }}
			got := Execute(context.Background(), app, tc.args, env(tc.vars), &stdout, &stderr)
			if got != tc.want {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", got, tc.want, stdout.String(), stderr.String())
			}
			if tc.name == "help" && !strings.Contains(stdout.String(), "MM2_SOURCE_BOOTSTRAP_SERVERS") {
				t.Errorf("help does not list the settings:\n%s", stdout.String())
			}
		})
	}
}

func TestNewLogger(t *testing.T) {
	var b bytes.Buffer
	l, err := NewLogger(&b, "warn", "auto")
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hidden")
	l.Warn("shown", "k", "v")
	if out := b.String(); strings.Contains(out, "hidden") || !strings.HasPrefix(out, "{") {
		t.Errorf("warn level, JSON when not a terminal; got %q", out)
	}
	b.Reset()
	l, _ = NewLogger(&b, "debug", "text")
	l.Debug("dbg")
	if !strings.Contains(b.String(), "level=DEBUG") {
		t.Errorf("text handler at debug: got %q", b.String())
	}
	if _, err := NewLogger(&b, "info", "xml"); err == nil {
		t.Error("format xml accepted")
	}
}
