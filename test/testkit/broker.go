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
// retried with another range.
func StartExtraBroker(t testing.TB, c Clusters, prefix string, ports int, props func(base int) []string, env ...string) *ExtraBroker {
	t.Helper()
	home := c.KafkaHome
	if home == "" {
		home = filepath.Join(RepoRoot(t), "test", "kafka", "state")
	}
	for attempt := 0; attempt < 3; attempt++ {
		b := make([]byte, 3)
		_, _ = rand.Read(b)
		base := freeBase(t, ports)
		eb := &ExtraBroker{Name: prefix + hex.EncodeToString(b), Base: base, Plain: fmt.Sprintf("127.0.0.1:%d", base), Home: home}
		eb.LogFile = filepath.Join(home, eb.Name, "logs", "stdout.log")
		cmd := exec.Command(KafkaScript(t), append([]string{"start", eb.Name, fmt.Sprint(base)}, props(base)...)...)
		cmd.Env = append(append(os.Environ(), "MM2GO_KAFKA_HOME="+home), env...)
		if c.KafkaLib != "" {
			cmd.Env = append(cmd.Env, "MM2GO_KAFKA_LIB="+c.KafkaLib)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			log := eb.Log()
			_ = exec.Command(KafkaScript(t), "stop", eb.Name).Run()
			if attempt < 2 && strings.Contains(log, "Address already in use") {
				_ = os.RemoveAll(filepath.Join(home, eb.Name))
				continue
			}
			t.Fatalf("starting broker %s: %v\n%s\n%s", eb.Name, err, out, tail(log, 60))
		}
		t.Cleanup(func() {
			stop := exec.Command(KafkaScript(t), "stop", eb.Name)
			stop.Env = append(os.Environ(), "MM2GO_KAFKA_HOME="+home)
			if out, err := stop.CombinedOutput(); err != nil {
				t.Errorf("stopping broker %s: %v\n%s", eb.Name, err, out)
			}
			if !t.Failed() {
				_ = os.RemoveAll(filepath.Join(home, eb.Name))
			}
		})
		return eb
	}
	t.Fatal("unreachable")
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
