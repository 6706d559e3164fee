package testkit

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ExtraBroker is a harness cluster started by a test, with listeners of its
// own, stopped (and its data removed) when the test ends.
type ExtraBroker struct {
	// Name is the harness name; Base is its first port: PLAINTEXT on Base,
	// the controller on Base+1, the harness SASL_SSL listener on Base+2,
	// and the test's own listeners from Base+3 on.
	Name string
	Base int
	// Plain is the PLAINTEXT listener (admin, reading results).
	Plain string
	// Home is the harness home; LogFile the broker's stdout log.
	Home, LogFile string
	script        string // kafka.sh
}

// Addr returns 127.0.0.1:Base+offset.
func (b *ExtraBroker) Addr(offset int) string { return fmt.Sprintf("127.0.0.1:%d", b.Base+offset) }

// Log returns what the broker has logged so far.
func (b *ExtraBroker) Log() string {
	out, _ := os.ReadFile(b.LogFile)
	return string(out)
}

// StartExtraBroker starts a cluster named prefix-<random> with ports free
// ports (at least 3) and the broker settings props(base) appended to the
// harness's server.properties; env adds variables for kafka.sh (e.g.
// MM2GO_KAFKA_OPTS). A port range taken between the check and the bind is
// retried with another range. The cluster is stopped when the test ends (its
// data kept if the test failed).
func StartExtraBroker(t testing.TB, c Clusters, prefix string, ports int, props func(base int) []string, env ...string) *ExtraBroker {
	t.Helper()
	eb := StartLongLivedBroker(t, c, prefix, ports, props, env...)
	t.Cleanup(func() {
		if err := eb.Stop(!t.Failed()); err != nil {
			t.Error(err)
		}
	})
	return eb
}

// StartLongLivedBroker starts a cluster as StartExtraBroker does, but leaves
// stopping it to the caller (Stop): a cluster several tests of a package
// share, stopped by its TestMain. t is only used to report a failed start.
func StartLongLivedBroker(t testing.TB, c Clusters, prefix string, ports int, props func(base int) []string, env ...string) *ExtraBroker {
	t.Helper()
	home := c.KafkaHome
	if home == "" {
		home = filepath.Join(RepoRoot(t), "test", "kafka", "state")
	}
	for attempt := 0; attempt < 3; attempt++ {
		b := make([]byte, 3)
		_, _ = rand.Read(b)
		base := freeBase(t, ports)
		eb := &ExtraBroker{Name: prefix + hex.EncodeToString(b), Base: base, Plain: fmt.Sprintf("127.0.0.1:%d", base), Home: home, script: KafkaScript(t)}
		eb.LogFile = filepath.Join(home, eb.Name, "logs", "stdout.log")
		cmd := exec.Command(eb.script, append([]string{"start", eb.Name, fmt.Sprint(base)}, props(base)...)...)
		cmd.Env = append(append(os.Environ(), "MM2GO_KAFKA_HOME="+home), env...)
		if c.KafkaLib != "" {
			cmd.Env = append(cmd.Env, "MM2GO_KAFKA_LIB="+c.KafkaLib)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			log := eb.Log()
			_ = exec.Command(eb.script, "stop", eb.Name).Run()
			if attempt < 2 && strings.Contains(log, "Address already in use") {
				_ = os.RemoveAll(filepath.Join(home, eb.Name))
				continue
			}
			t.Fatalf("starting broker %s: %v\n%s\n%s", eb.Name, err, out, tail(log, 60))
		}
		return eb
	}
	t.Fatal("unreachable")
	return nil
}

// Script returns the path of kafka.sh, for the verbs a test runs on the cluster (pause,
// resume, freeze, thaw).
func (b *ExtraBroker) Script() string { return b.script }

// Stop stops the cluster; with wipe its directory (data and logs) is removed
// too.
func (b *ExtraBroker) Stop(wipe bool) error {
	stop := exec.Command(b.script, "stop", b.Name)
	stop.Env = append(os.Environ(), "MM2GO_KAFKA_HOME="+b.Home)
	if out, err := stop.CombinedOutput(); err != nil {
		return fmt.Errorf("stopping broker %s: %v\n%s", b.Name, err, out)
	}
	if wipe {
		_ = os.RemoveAll(filepath.Join(b.Home, b.Name))
	}
	return nil
}

// freeBase finds a base port p in 12000-16990 (below the ephemeral range)
// with p..p+n-1 free.
func freeBase(t testing.TB, n int) int {
	t.Helper()
	b := make([]byte, 2)
	for range 200 {
		_, _ = rand.Read(b)
		base := 12000 + (int(b[0])<<8|int(b[1]))%500*10
		ok := true
		for p := base; p < base+n && ok; p++ {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				ok = false
				continue
			}
			ln.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free port range for an extra broker")
	return 0
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
