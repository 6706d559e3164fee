// Package dispatcher runs the genuine Knative KafkaSource dispatcher (dispatcher-loom of
// knative-extensions/eventing-kafka-broker, from the team kit's knative-dispatcher directory) as a
// local process for a test: it writes the contract a KafkaSource would get from Knative's control
// plane, starts the dispatcher, and stops it when the test ends.
//
// The kit is found, in order: $MM2GO_KNATIVE_DISPATCHER (the directory holding
// run-dispatcher.sh), <repo root>/../shared/knative-dispatcher (the CI layout), then
// shared/knative-dispatcher beside any ancestor of the repository root (a worktree nested
// deeper). Without it a test is skipped on a developer machine and fails under CI=true. The
// dispatcher runs on Java 21+: $KDISP_JAVA, else the first java of /usr/lib/jvm/*/bin and
// PATH whose version is 21 or more (.ci/run installs one where the package manager has it);
// without one the test is skipped, saying so.
package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
)

// EnvDir overrides where the dispatcher kit is.
const EnvDir = "MM2GO_KNATIVE_DISPATCHER"

// Key types of a KafkaSource (label kafkasources.sources.knative.dev/key-type) as the contract
// names them.
const (
	KeyString    = "String"    // key-type string, the default
	KeyInteger   = "Integer"   // key-type int
	KeyDouble    = "Double"    // key-type float
	KeyByteArray = "ByteArray" // key-type byte-array
)

// NoRetries is a Config.Retry that asks for zero retries (0 means KafkaSource's default of 10).
const NoRetries = -1

// Config is a KafkaSource's spec as far as the dispatcher's contract carries it. Zero values are
// KafkaSource's defaults.
type Config struct {
	// Bootstrap is the source cluster (spec.bootstrapServers); Topics its topics.
	Bootstrap string
	Topics    []string
	// Sink is the function's URL (spec.sink).
	Sink string
	// Name of the KafkaSource; empty means a name unique to the test. The consumer group is
	// Group, or Name + "-group", so a new name starts from the earliest offsets.
	Name string
	// Group is spec.consumerGroup; empty means Name + "-group".
	Group string
	// Namespace of the KafkaSource; empty means "default".
	Namespace string
	// Unordered is spec.ordering: unordered instead of ordered.
	Unordered bool
	// KeyType is one of the Key* constants; empty means KeyString.
	KeyType string
	// Retry is delivery.retry (0: the default 10; NoRetries: none).
	Retry int
	// LinearBackoff is delivery.backoffPolicy linear instead of exponential.
	LinearBackoff bool
	// BackoffDelay is delivery.backoffDelay (0: 300 ms).
	BackoffDelay time.Duration
	// Timeout is delivery.timeout per request (0: 600 s).
	Timeout time.Duration
	// DeadLetter is delivery.deadLetterSink's URL; empty means none (records that run out of
	// retries are dropped and their offsets committed).
	DeadLetter string
	// CEOverrides is spec.ceOverrides.extensions.
	CEOverrides map[string]string
}

// Dispatcher is one running (or stopped) genuine dispatcher.
type Dispatcher struct {
	// Dir holds contract.json, dispatcher.log and pid.
	Dir string
	// Name is the KafkaSource's name, Group its consumer group.
	Name, Group string

	t          testing.TB
	script     string
	java       string // the Java 21+ runtime it runs on (KDISP_JAVA of run-dispatcher.sh)
	cfg        Config
	mu         sync.Mutex
	generation int
	running    bool
}

// Script returns the path of run-dispatcher.sh, or ends the test when the kit is not found
// (skip locally, fail under CI=true) or no Java 21+ runtime is (skip: Java returns it).
func Script(t testing.TB) string {
	t.Helper()
	if p, ok := find(testkit.RepoRoot(t)); ok {
		Java(t)
		return p
	}
	msg := "this test drives mirror serve with the genuine Knative KafkaSource dispatcher (dispatcher-loom of knative-extensions/eventing-kafka-broker, Java 21+), whose runner (run-dispatcher.sh) is not here: set $" + EnvDir + " to the directory holding it, or put it in ../shared/knative-dispatcher beside the repository. The rest of the suite does not need it"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + "; CI=true, so this is a failure, not a skip. To run the suite without it, unset CI (these tests then skip)")
	}
	t.Skip(msg)
	return ""
}

// minJava is the Java feature release the dispatcher needs (it is built with --release 21).
const minJava = 21

// Java returns a Java 21+ runtime for the dispatcher: $KDISP_JAVA (the test fails if it is
// older), else the first of /usr/lib/jvm/*/bin/java and java on PATH whose version is 21 or
// more. Without one the test is skipped, naming the versions found: the runner would fail
// with "no Java 21+ runtime found" or the JVM with UnsupportedClassVersionError.
func Java(t testing.TB) string {
	t.Helper()
	if j := os.Getenv("KDISP_JAVA"); j != "" {
		if v := javaVersion(j); v < minJava {
			t.Fatalf("KDISP_JAVA=%s is Java %d; the Knative dispatcher needs Java %d+", j, v, minJava)
		}
		return j
	}
	cands, _ := filepath.Glob("/usr/lib/jvm/*/bin/java")
	sort.Sort(sort.Reverse(sort.StringSlice(cands))) // newer names first: temurin-25 before openjdk-17
	if p, err := exec.LookPath("java"); err == nil {
		cands = append(cands, p)
	}
	j, seen := findJava(cands)
	if j == "" {
		t.Skipf("this test drives mirror serve with the genuine Knative KafkaSource dispatcher, which needs Java %d+, and no Java %d+ runtime was found (KDISP_JAVA unset; found: %s). Install one (e.g. openjdk-%d-jre-headless; .ci/run does where apt has it) or set KDISP_JAVA",
			minJava, minJava, strings.Join(seen, ", "), minJava)
	}
	return j
}

// findJava returns the first of cands that is Java minJava or newer ("" if none), and each
// candidate tried with its version.
func findJava(cands []string) (string, []string) {
	var seen []string
	for _, c := range cands {
		v := javaVersion(c)
		seen = append(seen, fmt.Sprintf("%s is Java %d", c, v))
		if v >= minJava {
			return c, seen
		}
	}
	return "", seen
}

// javaVersion is the feature release of the java binary at path (`openjdk version "17.0.15"`
// is 17, "25" 25, "1.8.0_412" 8), or 0 when it does not run or says no version.
func javaVersion(path string) int {
	out, err := exec.Command(path, "-version").CombinedOutput()
	if err != nil {
		return 0
	}
	_, v, ok := strings.Cut(string(out), "version \"")
	if !ok {
		return 0
	}
	v, _, _ = strings.Cut(v, "\"")
	v = strings.TrimPrefix(v, "1.")
	n, _ := strconv.Atoi(strings.FieldsFunc(v, func(r rune) bool { return r < '0' || r > '9' })[0])
	return n
}

func find(root string) (string, bool) {
	var cands []string
	if d := os.Getenv(EnvDir); d != "" {
		cands = append(cands, d)
	}
	for dir := filepath.Dir(root); ; dir = filepath.Dir(dir) {
		cands = append(cands, filepath.Join(dir, "shared", "knative-dispatcher"))
		if dir == filepath.Dir(dir) {
			break
		}
	}
	for _, d := range cands {
		p := filepath.Join(d, "run-dispatcher.sh")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, true
		}
	}
	return "", false
}

// Start writes cfg's contract and starts a dispatcher for it; it returns once the
// dispatcher's consumer has partitions assigned. The dispatcher is stopped when the test ends,
// and its log is printed (the tail) if the test failed.
func Start(t testing.TB, cfg Config) *Dispatcher {
	t.Helper()
	d := New(t, cfg)
	d.Start()
	return d
}

// New writes cfg's contract in a fresh directory without starting the dispatcher.
func New(t testing.TB, cfg Config) *Dispatcher {
	t.Helper()
	if cfg.Bootstrap == "" || len(cfg.Topics) == 0 || cfg.Sink == "" {
		t.Fatal("dispatcher: Config needs Bootstrap, Topics and Sink")
	}
	if cfg.Name == "" {
		cfg.Name = testkit.Name(t, "ks")
		if len(cfg.Name) > 60 {
			cfg.Name = cfg.Name[len(cfg.Name)-60:]
		}
		cfg.Name = strings.Trim(strings.ReplaceAll(cfg.Name, "_", "-"), "-")
	}
	group := cfg.Group
	if group == "" {
		group = cfg.Name + "-group"
	}
	script := Script(t)
	d := &Dispatcher{Dir: t.TempDir(), Name: cfg.Name, Group: group, t: t, script: script, java: Java(t), cfg: cfg, generation: 1}
	d.writeContract()
	t.Cleanup(func() {
		d.Stop()
		if t.Failed() {
			t.Logf("dispatcher %s log (tail):\n%s", d.Name, tail(d.Log(), 6000))
		}
	})
	return d
}

// Config returns the configuration of the current contract.
func (d *Dispatcher) Config() Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg
}

func (d *Dispatcher) contractArgs() []string {
	c := d.cfg
	ns := c.Namespace
	if ns == "" {
		ns = "default"
	}
	ordering := "ordered"
	if c.Unordered {
		ordering = "unordered"
	}
	keyType := c.KeyType
	if keyType == "" {
		keyType = KeyString
	}
	retry := c.Retry
	switch {
	case retry == 0:
		retry = 10
	case retry < 0:
		retry = 0
	}
	policy := "Exponential"
	if c.LinearBackoff {
		policy = "Linear"
	}
	delay, timeout := c.BackoffDelay, c.Timeout
	if delay <= 0 {
		delay = 300 * time.Millisecond
	}
	if timeout <= 0 {
		timeout = 600 * time.Second
	}
	args := []string{"contract",
		"bootstrap=" + c.Bootstrap, "topics=" + strings.Join(c.Topics, ","), "sink=" + c.Sink,
		"name=" + d.Name, "namespace=" + ns, "group=" + d.Group, "generation=" + strconv.Itoa(d.generation),
		"ordering=" + ordering, "keyType=" + keyType, "retry=" + strconv.Itoa(retry),
		"backoffPolicy=" + policy, "backoffDelayMs=" + strconv.FormatInt(delay.Milliseconds(), 10),
		"timeoutMs=" + strconv.FormatInt(timeout.Milliseconds(), 10),
	}
	if c.DeadLetter != "" {
		args = append(args, "dls="+c.DeadLetter)
	}
	if len(c.CEOverrides) > 0 {
		keys := make([]string, 0, len(c.CEOverrides))
		for k := range c.CEOverrides {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var kv []string
		for _, k := range keys {
			kv = append(kv, k+":"+c.CEOverrides[k])
		}
		args = append(args, "ceOverrides="+strings.Join(kv, ","))
	}
	return args
}

// writeContract writes the contract atomically (temp file + rename: the dispatcher watches it).
func (d *Dispatcher) writeContract() {
	d.t.Helper()
	out := d.run(d.contractArgs()...)
	tmp := filepath.Join(d.Dir, ".contract.json.tmp")
	if err := os.WriteFile(tmp, []byte(out), 0o600); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(d.Dir, "contract.json")); err != nil {
		d.t.Fatal(err)
	}
}

// Start starts the dispatcher (again, after Stop or Kill) and waits for its partition assignment.
func (d *Dispatcher) Start() {
	d.t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running {
		return
	}
	d.run("start", d.Dir)
	d.running = true
}

// Stop stops the dispatcher gracefully (SIGTERM: it commits what was delivered and leaves the
// group). Stopping a stopped dispatcher does nothing.
func (d *Dispatcher) Stop() {
	d.t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.running {
		return
	}
	d.run("stop", d.Dir)
	d.running = false
}

// Reconfigure writes a new contract generation from cfg (Name and the consumer group stay) and
// waits until the running dispatcher logged that it reconciled it.
func (d *Dispatcher) Reconfigure(cfg Config) {
	d.t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	cfg.Name, cfg.Group = d.Name, d.Group
	d.cfg = cfg
	d.generation++
	before := strings.Count(d.Log(), "Reconciled contract generation")
	d.writeContract()
	if !d.running {
		return
	}
	testkit.WaitFor(d.t, 60*time.Second, "the dispatcher to reconcile contract generation "+strconv.Itoa(d.generation), func() bool {
		return strings.Count(d.Log(), "Reconciled contract generation") > before
	})
}

// Log returns the dispatcher's log so far (empty if it never started).
func (d *Dispatcher) Log() string {
	b, _ := os.ReadFile(filepath.Join(d.Dir, "dispatcher.log"))
	return string(b)
}

// RSS returns the dispatcher's resident memory in KiB (0 if it is not running).
func (d *Dispatcher) RSS() int64 {
	d.mu.Lock()
	running := d.running
	d.mu.Unlock()
	if !running {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(d.run("rss", d.Dir)), 10, 64)
	return n
}

func (d *Dispatcher) run(args ...string) string {
	d.t.Helper()
	out, err := d.runErr(args...)
	if err != nil {
		d.t.Fatal(err)
	}
	return out
}

func (d *Dispatcher) runErr(args ...string) (string, error) {
	cmd := exec.Command(d.script, args...)
	cmd.Env = append(os.Environ(), "KDISP_JAVA="+d.java)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("run-dispatcher.sh %s: %w\n%s", args[0], err, stderr.String())
	}
	return string(out), nil
}

// StartAll starts several dispatchers (made with New) at once, so their JVM start-ups (4-7 s
// each) overlap, and returns once every one has its partitions assigned.
func StartAll(t testing.TB, ds ...*Dispatcher) {
	t.Helper()
	errs := make([]error, len(ds))
	var wg sync.WaitGroup
	for i, d := range ds {
		d.mu.Lock()
		if d.running {
			d.mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer d.mu.Unlock()
			if _, errs[i] = d.runErr("start", d.Dir); errs[i] == nil {
				d.running = true
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// Committed returns the dispatcher group's committed offsets for topic.
func (d *Dispatcher) Committed(ctx context.Context, topic string) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.Config().Bootstrap))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, d.Group)
	if err != nil {
		return nil, fmt.Errorf("offsets of group %s: %w", d.Group, err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out, nil
}

// WaitCommitted waits until the group committed at least ends (partition -> offset) on topic:
// every record before them was answered 2xx, dead-lettered or dropped. The dispatcher commits
// on a 5 s timer (auto.commit.interval.ms), so this trails delivery by up to 5 s.
func (d *Dispatcher) WaitCommitted(topic string, ends map[int32]int64, timeout time.Duration) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var got map[int32]int64
	var err error
	for {
		got, err = d.Committed(ctx, topic)
		if err == nil && covers(got, ends) {
			return
		}
		select {
		case <-ctx.Done():
			d.t.Fatalf("group %s did not commit %v on %s within %s: committed %v (%v)", d.Group, ends, topic, timeout, got, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func covers(got, want map[int32]int64) bool {
	for p, end := range want {
		if got[p] < end {
			return false
		}
	}
	return true
}

// ErrNotFound is returned by Available when the kit is absent.
var ErrNotFound = errors.New("knative dispatcher kit not found")

// Available reports the script's path without ending a test (for tools such as test/bench).
// root is the repository root.
func Available(root string) (string, error) {
	if p, ok := find(root); ok {
		return p, nil
	}
	return "", fmt.Errorf("%w: looked in $%s and shared/knative-dispatcher beside the ancestors of %s", ErrNotFound, EnvDir, root)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
