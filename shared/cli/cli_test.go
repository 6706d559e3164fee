package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

// runApp is a mirror with run alone, running run, and a serve that is not there.
func runApp(run func(context.Context, Env) error) App {
	return App{Name: "mirror", Commands: map[string]Command{"run": {Run: run}, "serve": {}}}
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
			app := runApp(func(context.Context, Env) error { return tc.run })
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

func TestRunSeveralFlows(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/mm2.properties"
	props := "clusters=a,b\na.bootstrap.servers=127.0.0.1:1\nb.bootstrap.servers=127.0.0.1:2\na->b.enabled=true\nb->a.enabled=true\ntasks.max=2\n"
	if err := os.WriteFile(path, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"MM2_CONFIG_FILE": path, "MM2_LOG_FORMAT": "json"}
	var mu sync.Mutex
	var flows []string
	run := func(errs map[string]error) App {
		return runApp(func(_ context.Context, e Env) error {
			f := e.Config.SourceAlias + "->" + e.Config.TargetAlias
			mu.Lock()
			flows = append(flows, f)
			mu.Unlock()
			e.Logger.Info("ran")
			return errs[f]
		})
	}
	var stdout, stderr bytes.Buffer
	if code := Execute(context.Background(), run(nil), []string{"run"}, env(vars), &stdout, &stderr); code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	sort.Strings(flows)
	if strings.Join(flows, ",") != "a->b,b->a" {
		t.Errorf("flows run: %v", flows)
	}
	log := stderr.String()
	if !strings.Contains(log, `"flow":"a->b"`) || !strings.Contains(log, `"flow":"b->a"`) {
		t.Errorf("log lines do not name the flows:\n%s", log)
	}
	// The loader's WARN line reaches the configured logger, once.
	if n := strings.Count(log, `"level":"WARN","msg":"MM2 property ignored","function":"mirror","key":"tasks.max"`); n != 1 {
		t.Errorf("%d WARN lines for tasks.max:\n%s", n, log)
	}
	// The most serious exit code wins.
	stderr.Reset()
	if code := Execute(context.Background(), run(map[string]error{"b->a": fmt.Errorf("x: %w", ErrMoreToDo)}), []string{"run"}, env(vars), &stdout, &stderr); code != ExitMore {
		t.Errorf("exit %d, want %d", code, ExitMore)
	}
	if code := Execute(context.Background(), run(map[string]error{"a->b": errors.New("down"), "b->a": fmt.Errorf("x: %w", ErrMoreToDo)}), []string{"run"}, env(vars), &stdout, &stderr); code != ExitFailed {
		t.Errorf("exit %d, want %d", code, ExitFailed)
	}
	// serve runs one flow: it asks for MM2_FLOW.
	stderr.Reset()
	if code := Execute(context.Background(), App{Name: "mirror", Commands: map[string]Command{"serve": {Run: func(context.Context, Env) error { return nil }}}}, []string{"serve"}, env(vars), &stdout, &stderr); code != ExitConfig || !strings.Contains(stderr.String(), "choose one with MM2_FLOW") {
		t.Errorf("serve with two flows: exit %d\n%s", code, stderr.String())
	}
}

func TestRefusedKeyExit2(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/mm2.properties"
	props := "clusters=a,b\na.bootstrap.servers=127.0.0.1:1\nb.bootstrap.servers=127.0.0.1:2\na->b.enabled=true\na->b.transforms=mask\n"
	if err := os.WriteFile(path, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	ran := false
	app := runApp(func(context.Context, Env) error { ran = true; return nil })
	code := Execute(context.Background(), app, []string{"run"}, env(map[string]string{"MM2_CONFIG_FILE": path, "MM2_LOG_FORMAT": "json"}), &stdout, &stderr)
	if code != ExitConfig || ran || !strings.Contains(stderr.String(), "a->b.transforms: single message transforms") {
		t.Errorf("exit %d, ran %v\n%s", code, ran, stderr.String())
	}
}
