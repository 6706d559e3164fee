package cli

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestHelpPerFunction: each function's -h lists the settings it reads and no other (checkpoint
// lists neither MM2_FORWARD_BATCHES nor MM2_EVENT_MODE, which only mirror reads), and every
// function's lists the process settings (profiles, Go runtime, OTLP).
func TestHelpPerFunction(t *testing.T) {
	help := func(name string) string {
		var stdout, stderr bytes.Buffer
		if code := Execute(context.Background(), App{Name: name}, []string{"-h"}, env(nil), &stdout, &stderr); code != ExitOK {
			t.Fatalf("%s -h: exit %d\n%s", name, code, stderr.String())
		}
		return stdout.String()
	}
	for _, tc := range []struct {
		function   string
		has, hasNo []string
	}{
		{"mirror", []string{"MM2_FORWARD_BATCHES", "MM2_EVENT_MODE", "MM2_SOURCE_CONSUMER_FETCH_MAX_BYTES", "MM2_OFFSET_STORAGE_TOPIC"}, []string{"MM2_CHECKPOINT_TRANSLATION", "MM2_EMIT_HEARTBEATS_ENABLED"}},
		{"checkpoint", []string{"MM2_CHECKPOINT_TRANSLATION", "MM2_GROUPS", "MM2_BURST_MAX_DURATION"}, []string{"MM2_FORWARD_BATCHES", "MM2_EVENT_MODE", "MM2_BURST_MAX_RECORDS", "MM2_TARGET_PRODUCER_MAX_REQUEST_SIZE"}},
		{"heartbeat", []string{"MM2_EMIT_HEARTBEATS_ENABLED", "MM2_REVERSE_HEARTBEATS_ENABLED"}, []string{"MM2_FORWARD_BATCHES", "MM2_GROUPS", "MM2_CHECKPOINT_TRANSLATION"}},
	} {
		out := help(tc.function)
		lines := map[string]bool{}
		for _, l := range strings.Split(out, "\n") {
			name, _, _ := strings.Cut(l, " ")
			lines[name] = true
		}
		for _, n := range append(tc.has, "MM2_CPU_PROFILE", "MM2_ALLOC_PROFILE", "MM2_TRACE", "GOMEMLIMIT", "GOGC", "GOMAXPROCS", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL") {
			if !lines[n] {
				t.Errorf("%s -h does not list %s", tc.function, n)
			}
		}
		for _, n := range tc.hasNo {
			if lines[n] {
				t.Errorf("%s -h lists %s, which it does not read", tc.function, n)
			}
		}
	}
}

// TestUnreadVariableWarns: an MM2_* variable no function reads is named in a WARN line (with
// the other cluster's setting when that one exists); the run still runs.
func TestUnreadVariableWarns(t *testing.T) {
	environ := []string{"MM2_SOURCE_BOOTSTRAP_SERVERS=127.0.0.1:1", "MM2_TARGET_BOOTSTRAP_SERVERS=127.0.0.1:2", "MM2_LOG_FORMAT=json",
		"MM2_SOURCE_PRODUCER_MAX_REQUEST_SIZE=abc", "MM2_TOPIC=orders", "MM2_CPU_PROFILE=", "PATH=/bin"}
	var stdout, stderr bytes.Buffer
	ran := false
	app := runApp(func(context.Context, Env) error { ran = true; return nil })
	if code := ExecuteEnviron(context.Background(), app, []string{"run"}, environ, &stdout, &stderr); code != ExitOK || !ran {
		t.Fatalf("exit %d, ran %v\n%s", code, ran, stderr.String())
	}
	log := stderr.String()
	for _, want := range []string{
		`"level":"WARN","msg":"environment variable MM2_SOURCE_PRODUCER_MAX_REQUEST_SIZE is not an mm2go setting and is ignored (see mirror -h); the setting exists for the other cluster: MM2_TARGET_PRODUCER_MAX_REQUEST_SIZE"`,
		`"level":"WARN","msg":"environment variable MM2_TOPIC is not an mm2go setting and is ignored (see mirror -h)"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s\n%s", want, log)
		}
	}
	for _, not := range []string{"MM2_CPU_PROFILE", "MM2_SOURCE_BOOTSTRAP_SERVERS", "PATH", "abc"} {
		if strings.Contains(log, not) {
			t.Errorf("log names %s\n%s", not, log)
		}
	}
}

// TestRunAgainLaterLogsWhy: a run that exits 3 says why on stderr (a target refusing
// connections would otherwise leave only the JSON summary on stdout).
func TestRunAgainLaterLogsWhy(t *testing.T) {
	var stdout, stderr bytes.Buffer
	app := runApp(func(context.Context, Env) error {
		return fmt.Errorf("burst: creating topic %q: connection refused (%w)", "source.orders", ErrMoreToDo)
	})
	if code := Execute(context.Background(), app, []string{"run"}, env(valid), &stdout, &stderr); code != ExitMore {
		t.Fatalf("exit %d, want %d", code, ExitMore)
	}
	want := `"level":"WARN","msg":"not done; run again later","function":"mirror","err":"burst: creating topic \"source.orders\": connection refused (budget reached, more to do)","exit_code":3`
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("log lacks %s\n%s", want, stderr.String())
	}
}
