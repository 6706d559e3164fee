package e2e

import (
	"fmt"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"

	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/dispatcher"
)

// serveProc is a `mirror serve` process on a fixed port (so a restart keeps its URL).
type serveProc struct {
	URL  string
	port int
	env  []string
	t    *testing.T

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan error
	out    *testkit.SyncBuffer
	logs   []string // output of earlier processes (before a kill or stop)
}

// startServe starts `mirror serve` replicating topics (a regex list) from the harness source to
// target, with extra MM2_* settings, and waits until /readyz answers 200.
func startServe(t *testing.T, c testkit.Clusters, target, topics string, extra ...string) *serveProc {
	t.Helper()
	port := freePort(t)
	env := MirrorEnv(c, topics, append([]string{"PORT=" + strconv.Itoa(port), "MM2_LOG_FORMAT=text", "MM2_TARGET_BOOTSTRAP_SERVERS=" + target}, extra...)...)
	s := &serveProc{URL: fmt.Sprintf("http://127.0.0.1:%d/", port), port: port, env: env, t: t}
	s.start()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("mirror serve output (tail):\n%s", tail(s.output(), 6000))
		}
	})
	return s
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (s *serveProc) start() {
	s.t.Helper()
	s.mu.Lock()
	cmd := exec.Command(MirrorBinary(s.t), "serve")
	cmd.Env = s.env
	s.out = &testkit.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = s.out, s.out
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		s.t.Fatal(err)
	}
	s.cmd, s.exited = cmd, make(chan error, 1)
	go func(ch chan error) { ch <- cmd.Wait() }(s.exited)
	s.mu.Unlock()
	testkit.WaitFor(s.t, 60*time.Second, "mirror serve to be ready", func() bool {
		resp, err := http.Get(strings.TrimSuffix(s.URL, "/") + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// kill SIGKILLs the process (no graceful anything).
func (s *serveProc) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.logs = append(s.logs, s.out.String())
	s.cmd = nil
}

// stop sends SIGTERM and fails the test unless the process exits 0 within 60 s.
func (s *serveProc) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.exited:
		if err != nil {
			s.t.Errorf("mirror serve exited with %v after SIGTERM", err)
		}
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		s.t.Errorf("mirror serve did not exit within 60 s of SIGTERM")
	}
	s.logs = append(s.logs, s.out.String())
	s.cmd = nil
}

func (s *serveProc) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := strings.Join(s.logs, "\n--- restart ---\n")
	if s.cmd != nil {
		all += "\n--- running ---\n" + s.out.String()
	}
	return all
}

// shippedDelivery returns a dispatcher configuration with the delivery settings and key type of
// knative/kafkasource.yaml (what the repository ships), for the given topics and sink.
func shippedDelivery(t *testing.T, bootstrap string, topics []string, sink string) dispatcher.Config {
	t.Helper()
	file := filepath.Join(testkit.RepoRoot(t), "knative", "kafkasource.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var ks struct {
		Metadata struct {
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Spec struct {
			Ordering string `yaml:"ordering"`
			Delivery struct {
				Retry         *int   `yaml:"retry"`
				BackoffPolicy string `yaml:"backoffPolicy"`
				BackoffDelay  string `yaml:"backoffDelay"`
				Timeout       string `yaml:"timeout"`
			} `yaml:"delivery"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &ks); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	d := ks.Spec.Delivery
	cfg := dispatcher.Config{Bootstrap: bootstrap, Topics: topics, Sink: sink, Namespace: "mirror",
		Unordered: ks.Spec.Ordering == "unordered", LinearBackoff: strings.EqualFold(d.BackoffPolicy, "linear"),
		BackoffDelay: isoDuration(t, d.BackoffDelay), Timeout: isoDuration(t, d.Timeout)}
	if d.Retry == nil {
		t.Fatalf("%s: spec.delivery.retry is not set", file)
	}
	cfg.Retry = *d.Retry
	if cfg.Retry == 0 {
		cfg.Retry = dispatcher.NoRetries
	}
	switch kt := ks.Metadata.Labels["kafkasources.sources.knative.dev/key-type"]; kt {
	case "", "string":
		cfg.KeyType = dispatcher.KeyString
	case "int":
		cfg.KeyType = dispatcher.KeyInteger
	case "float":
		cfg.KeyType = dispatcher.KeyDouble
	case "byte-array":
		cfg.KeyType = dispatcher.KeyByteArray
	default:
		t.Fatalf("%s: key-type label %q", file, kt)
	}
	return cfg
}

// retryWaits is the time the dispatcher waits between the attempts of one event under cfg:
// exponential delay x 2^n or linear delay x n, n = 1..retry.
func retryWaits(cfg dispatcher.Config) time.Duration {
	var total time.Duration
	for n := 1; n <= max(cfg.Retry, 0); n++ {
		if cfg.LinearBackoff {
			total += cfg.BackoffDelay * time.Duration(n)
		} else {
			total += cfg.BackoffDelay << n
		}
	}
	return total
}

// isoDuration reads the ISO 8601 durations the manifests use (PT<seconds>S, PT<minutes>M).
func isoDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	if s == "" {
		return 0
	}
	rest, ok := strings.CutPrefix(s, "PT")
	var unit time.Duration
	switch {
	case ok && strings.HasSuffix(rest, "S"):
		unit = time.Second
	case ok && strings.HasSuffix(rest, "M"):
		unit = time.Minute
	default:
		t.Fatalf("duration %q: want PT<n>S or PT<n>M", s)
	}
	f, err := strconv.ParseFloat(rest[:len(rest)-1], 64)
	if err != nil {
		t.Fatalf("duration %q: %v", s, err)
	}
	return time.Duration(f * float64(unit))
}

// endOffsets returns the end offset of every partition of topic.
func endOffsets(t testing.TB, bootstrap, topic string) map[int32]int64 {
	t.Helper()
	ends, err := testkit.Admin(t, bootstrap).ListEndOffsets(testkit.Context(t, 20*time.Second), topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// waitTargetCount waits until the remote topic's end offsets add up to at least n.
func waitTargetCount(t *testing.T, bootstrap, remote string, n int64, timeout time.Duration) {
	t.Helper()
	var last int64
	deadline := time.Now().Add(timeout)
	for {
		last = EndOffsetsSum(testkit.Context(t, 20*time.Second), bootstrap, remote)
		if last >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s on %s has %d records after %s, want %d", remote, bootstrap, last, timeout, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// payloadExpectation is the record payload mode writes for a source record delivered by the
// genuine dispatcher with key type byte-array, as measured and documented in docs/events.md:
//   - key: exact bytes; an empty key becomes null (the dispatcher sends no key for it);
//   - value: exact bytes, null and empty apart;
//   - headers: content-type first (value lower-cased), then one header per sanitized name
//     (lower-case [a-z0-9] only; the last duplicate wins) in name order; a value's UTF-8 text
//     is kept where its characters are at most U+00FF, any other character and any invalid
//     byte becomes '?'; whitespace around a value is trimmed;
//   - timestamp: milliseconds, as CreateTime.
//
// It applies to records the dispatcher can send (no control bytes, no null header value).
func payloadExpectation(r *kgo.Record) *kgo.Record {
	out := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Timestamp: r.Timestamp.Truncate(time.Millisecond), Value: r.Value}
	if len(r.Key) > 0 {
		out.Key = r.Key
	}
	var ct *kgo.RecordHeader
	byName := map[string][]byte{}
	for _, h := range r.Headers {
		if strings.EqualFold(h.Key, "content-type") {
			ct = &kgo.RecordHeader{Key: "content-type", Value: []byte(strings.ToLower(asLatin1Text(h.Value)))}
			continue
		}
		var name strings.Builder
		for _, c := range strings.ToLower(h.Key) {
			if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
				name.WriteRune(c)
			}
		}
		byName[name.String()] = []byte(asLatin1Text(h.Value))
	}
	if ct != nil {
		out.Headers = append(out.Headers, *ct)
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out.Headers = append(out.Headers, kgo.RecordHeader{Key: n, Value: byName[n]})
	}
	return out
}

// asLatin1Text is what survives the dispatcher's header writing: UTF-8 decoding (invalid bytes
// become U+FFFD), one byte per character (above U+00FF: '?'), Go's trimming of the value.
func asLatin1Text(b []byte) string {
	var sb strings.Builder
	for _, r := range string(b) { // invalid bytes decode as U+FFFD
		if r > 0xff {
			r = '?'
		}
		sb.WriteRune(r)
	}
	return strings.Trim(sb.String(), " \t")
}

// freePortBlock finds a port p with p, p+1 and p+2 free on loopback (a harness cluster uses all
// three).
func freePortBlock(t testing.TB) int {
	t.Helper()
	// Below Linux's ephemeral range (32768-60999): a port in it can be taken at any moment as
	// the local end of an outgoing connection, and the broker then fails to bind.
	for try := 0; try < 200; try++ {
		p := 20000 + mathrand.IntN(12000)
		ok := true
		for i := 0; i <= 2 && ok; i++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+i))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return p
		}
	}
	t.Fatal("no free port block")
	return 0
}
