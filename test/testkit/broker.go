package testkit

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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

// StartExtraBrokers starts one cluster per prefix as StartExtraBroker does,
// all at once (a broker's start is mostly waiting on the JVM and the
// controller), and returns them in the order of prefixes.
func StartExtraBrokers(t testing.TB, c Clusters, prefixes []string, ports int, props func(base int) []string, env ...string) []*ExtraBroker {
	t.Helper()
	home, script := brokerHome(t, c), KafkaScript(t)
	brokers := make([]*ExtraBroker, len(prefixes))
	errs := make([]error, len(prefixes))
	var wg sync.WaitGroup
	for i, prefix := range prefixes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			brokers[i], errs[i] = startBroker(home, script, c.KafkaLib, prefix, ports, props, env)
		}()
	}
	wg.Wait()
	for _, eb := range brokers {
		if eb != nil {
			t.Cleanup(func() {
				if err := eb.Stop(!t.Failed()); err != nil {
					t.Error(err)
				}
			})
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return brokers
}

// StartLongLivedBroker starts a cluster as StartExtraBroker does, but leaves
// stopping it to the caller (Stop): a cluster several tests of a package
// share, stopped by its TestMain. t is only used to report a failed start.
func StartLongLivedBroker(t testing.TB, c Clusters, prefix string, ports int, props func(base int) []string, env ...string) *ExtraBroker {
	t.Helper()
	eb, err := startBroker(brokerHome(t, c), KafkaScript(t), c.KafkaLib, prefix, ports, props, env)
	if err != nil {
		t.Fatal(err)
	}
	return eb
}

func brokerHome(t testing.TB, c Clusters) string {
	if c.KafkaHome != "" {
		return c.KafkaHome
	}
	return filepath.Join(RepoRoot(t), "test", "kafka", "state")
}

// startBroker runs kafka.sh start for a cluster named prefix-<random> on a
// free port range, trying another range when one was taken before the bind.
func startBroker(home, script, lib, prefix string, ports int, props func(base int) []string, env []string) (*ExtraBroker, error) {
	for attempt := 0; attempt < 3; attempt++ {
		b := make([]byte, 3)
		_, _ = rand.Read(b)
		base, err := freeBase(ports)
		if err != nil {
			return nil, err
		}
		eb := &ExtraBroker{Name: prefix + hex.EncodeToString(b), Base: base, Plain: fmt.Sprintf("127.0.0.1:%d", base), Home: home, script: script}
		eb.LogFile = filepath.Join(home, eb.Name, "logs", "stdout.log")
		cmd := exec.Command(eb.script, append([]string{"start", eb.Name, fmt.Sprint(base)}, props(base)...)...)
		cmd.Env = append(append(os.Environ(), "MM2GO_KAFKA_HOME="+home), env...)
		if lib != "" {
			cmd.Env = append(cmd.Env, "MM2GO_KAFKA_LIB="+lib)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			log := eb.Log()
			stop := exec.Command(eb.script, "stop", eb.Name)
			stop.Env = cmd.Env
			_ = stop.Run()
			if attempt < 2 && strings.Contains(log, "Address already in use") {
				_ = os.RemoveAll(filepath.Join(home, eb.Name))
				continue
			}
			return nil, fmt.Errorf("starting broker %s: %w\n%s\n%s", eb.Name, err, out, tail(log, 60))
		}
		return eb, nil
	}
	return nil, fmt.Errorf("starting a broker %s*: every port range tried was taken at bind", prefix)
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
func freeBase(n int) (int, error) {
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
			return base, nil
		}
	}
	return 0, errors.New("no free port range for an extra broker")
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
