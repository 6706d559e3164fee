package app

import (
	"bytes"
	"context"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mm2go/mm2go/shared/cli"
)

// subcommands are every function's sub-commands with the flags and exit codes their -h must
// give.
var subcommands = map[string]map[string]struct {
	flags []string
	exits []int
}{
	"mirror": {
		"run":     {nil, []int{0, 1, 2, 3}},
		"serve":   {nil, []int{0, 1, 2}},
		"status":  {[]string{"-o"}, []int{0, 1, 2}},
		"plan":    {[]string{"-o"}, []int{0, 1, 2}},
		"verify":  {[]string{"-o", "-topics", "-last", "-max-listed"}, []int{0, 1, 2}},
		"cutover": {[]string{"-o", "-groups", "-topics", "-timeout", "-watch", "-dry-run", "-allow-live"}, []int{0, 1, 2, 3, 4, 5, 6}},
	},
	"checkpoint": {"run": {nil, []int{0, 1, 2, 3}}, "serve": {nil, []int{0, 1, 2}}},
	"heartbeat":  {"run": {nil, []int{0, 1, 2, 3}}, "serve": {nil, []int{0, 1, 2}}},
}

// quietCluster is a listener standing in for both clusters' bootstrap and for serve's port:
// a sub-command that dials a cluster or starts serving touches it (serve cannot bind a port
// held here and fails).
type quietCluster struct {
	ln       net.Listener
	accepted atomic.Int64
}

func newQuietCluster(t *testing.T) *quietCluster {
	t.Helper()
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	q := &quietCluster{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			q.accepted.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return q
}

func (q *quietCluster) env() map[string]string {
	port := strconv.Itoa(q.ln.Addr().(*net.TCPAddr).Port)
	return map[string]string{"MM2_SOURCE_BOOTSTRAP_SERVERS": "127.0.0.1:" + port, "MM2_TARGET_BOOTSTRAP_SERVERS": "127.0.0.1:" + port,
		"PORT": port, "MM2_LOG_FORMAT": "json"}
}

// exitCodesListed returns the codes of the lines under "Exit codes:" in a -h text.
func exitCodesListed(help string) []int {
	var codes []int
	in := false
	code := regexp.MustCompile(`^\s+(\d+)\s`)
	for _, l := range strings.Split(help, "\n") {
		switch {
		case l == "Exit codes:":
			in = true
		case in && l == "":
			return codes
		case in:
			if m := code.FindStringSubmatch(l); m != nil {
				n, _ := strconv.Atoi(m[1])
				codes = append(codes, n)
			}
		}
	}
	return codes
}

// TestSubcommandHelp: every sub-command of every function answers -h, --help and `help <sub>`
// with its own usage line, its flags, its exit codes and the settings it reads, exit 0, with
// or without settings, and touches no cluster and no port (the bootstrap servers and PORT
// point at a listener that counts connections and holds the port).
func TestSubcommandHelp(t *testing.T) {
	q := newQuietCluster(t)
	for fn, subs := range subcommands {
		a := functionApp(t, fn)
		for sub, want := range subs {
			for _, args := range [][]string{{sub, "-h"}, {sub, "--help"}, {sub, "-help"}, {"help", sub}} {
				for _, vars := range []map[string]string{nil, q.env()} {
					var stdout, stderr bytes.Buffer
					code := cli.Execute(context.Background(), a, args, envOf(vars), &stdout, &stderr)
					out := stdout.String()
					name := fn + " " + strings.Join(args, " ")
					if code != cli.ExitOK {
						t.Errorf("%s: exit %d, want 0\nstdout: %s\nstderr: %s", name, code, out, stderr.String())
						continue
					}
					if first, _, _ := strings.Cut(out, "\n"); !strings.HasPrefix(first, "usage: "+fn+" "+sub) {
						t.Errorf("%s: first line %q, want the usage of %s %s", name, first, fn, sub)
					}
					for _, f := range want.flags {
						if !strings.Contains(out, "\n  "+f+" ") && !strings.Contains(out, "\n  "+f+"\n") {
							t.Errorf("%s: flag %s not described\n%s", name, f, out)
						}
					}
					if got := exitCodesListed(out); !slices.Equal(got, want.exits) {
						t.Errorf("%s: exit codes %v listed, want %v\n%s", name, got, want.exits, out)
					}
					if !strings.Contains(out, "\nMM2_SOURCE_BOOTSTRAP_SERVERS") {
						t.Errorf("%s: the settings it reads are not listed\n%s", name, out)
					}
					serveOnly := strings.Contains(out, "\nPORT")
					if serveOnly != (sub == "serve") {
						t.Errorf("%s: lists PORT: %v; serve alone reads it\n%s", name, serveOnly, out)
					}
				}
			}
		}
	}
	if n := q.accepted.Load(); n != 0 {
		t.Errorf("-h made %d connections to the clusters' bootstrap", n)
	}
}

// TestFunctionHelp: `<function> -h` names every sub-command in its usage line and lists them.
func TestFunctionHelp(t *testing.T) {
	for fn, subs := range subcommands {
		var stdout, stderr bytes.Buffer
		if code := cli.Execute(context.Background(), functionApp(t, fn), []string{"-h"}, envOf(nil), &stdout, &stderr); code != cli.ExitOK {
			t.Fatalf("%s -h: exit %d\n%s", fn, code, stderr.String())
		}
		first, rest, _ := strings.Cut(stdout.String(), "\n")
		for sub := range subs {
			if !strings.Contains(first, sub) {
				t.Errorf("%s -h: usage line %q does not name %s", fn, first, sub)
			}
			if !strings.Contains(rest, "\n  "+sub+" ") {
				t.Errorf("%s -h: %s is not listed\n%s", fn, sub, rest)
			}
		}
	}
}

// TestUnknownFlag: an unknown flag or a stray argument is a command-line error naming it
// (exit 2), before any setting is needed.
func TestUnknownFlag(t *testing.T) {
	for _, tc := range []struct {
		fn   string
		args []string
		want string
	}{
		{"mirror", []string{"run", "-bogus"}, "-bogus"},
		{"mirror", []string{"serve", "--port=1"}, "-port"},
		{"mirror", []string{"cutover", "-groups", "g", "-nope"}, "-nope"},
		{"mirror", []string{"status", "extra"}, `"extra"`},
		{"mirror", []string{"verify", "-last", "many"}, "-last"},
		{"checkpoint", []string{"run", "-x"}, "-x"},
		{"heartbeat", []string{"serve", "now"}, `"now"`},
		{"mirror", []string{"jump"}, `"jump"`},
	} {
		var stdout, stderr bytes.Buffer
		code := cli.Execute(context.Background(), functionApp(t, tc.fn), tc.args, envOf(nil), &stdout, &stderr)
		if code != cli.ExitConfig || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%s %s: exit %d, want 2 and a message naming %s\nstderr: %s", tc.fn, strings.Join(tc.args, " "), code, tc.want, stderr.String())
		}
	}
}

func envOf(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func functionApp(t *testing.T, fn string) cli.App {
	t.Helper()
	switch fn {
	case "mirror":
		return Mirror()
	case "checkpoint":
		return Checkpoint()
	case "heartbeat":
		return Heartbeat()
	}
	t.Fatalf("no function %s", fn)
	return cli.App{}
}
