package check

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/mm2go/mm2go/test/testkit"
)

// dashboardFile is the Grafana dashboard for docs/metrics.md (relative to the repository root).
const dashboardFile = "deploy/grafana/mm2go.json"

var metricName = regexp.MustCompile(`\bmm2go_[a-z_]+\b`)

// histogramFamily strips the series suffixes Prometheus adds to a histogram family.
func histogramFamily(name string) string {
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if strings.HasSuffix(name, s) && strings.HasSuffix(strings.TrimSuffix(name, s), "_seconds") {
			return strings.TrimSuffix(name, s)
		}
	}
	return name
}

// dashboardQuery is one query of the dashboard and where it is.
type dashboardQuery struct{ where, expr string }

// dashboardVariable is one template variable of the dashboard.
type dashboardVariable struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Query any    `json:"query"`
}

type dashboardJSON struct {
	UID    string `json:"uid"`
	Panels []struct {
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []dashboardVariable `json:"list"`
	} `json:"templating"`
}

func readDashboard(t testing.TB) dashboardJSON {
	t.Helper()
	var d dashboardJSON
	if err := json.Unmarshal(mustReadTB(t, dashboardFile), &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// dashboardVariables returns the dashboard's template variables.
func dashboardVariables(t testing.TB) []dashboardVariable {
	t.Helper()
	return readDashboard(t).Templating.List
}

// dashboardQueriesWhere returns every query of the dashboard (panel targets and template
// variable queries), each with its panel or variable.
func dashboardQueriesWhere(t testing.TB) []dashboardQuery {
	t.Helper()
	d := readDashboard(t)
	var out []dashboardQuery
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource must be the ${datasource} variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, dashboardQuery{"panel " + strconv.Quote(p.Title), tg.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(map[string]any); ok && v.Type == "query" {
			out = append(out, dashboardQuery{"variable " + v.Name, fmt.Sprint(q["query"])})
		}
	}
	return out
}

func mustReadTB(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDashboardCoversMetrics: the dashboard queries exactly the metrics docs/metrics.md
// documents, each of them at least once.
func TestDashboardCoversMetrics(t *testing.T) {
	documented := documentedMetrics(t)
	used := map[string]bool{}
	for _, q := range parseDashboard(t) {
		for _, n := range q.metrics {
			used[histogramFamily(n)] = true
		}
	}
	for _, n := range keys(used) {
		if !documented[n] {
			t.Errorf("the dashboard queries %s, which docs/metrics.md does not document", n)
		}
	}
	for _, n := range keys(documented) {
		if !used[n] {
			t.Errorf("docs/metrics.md documents %s, which no dashboard panel shows", n)
		}
	}
}

var fnBuild struct {
	once sync.Once
	dir  string
	err  error
}

// functionBinaries builds the three functions once per test process, the way `make image`
// does, and returns the directory holding mirror, checkpoint and heartbeat.
func functionBinaries(t testing.TB) string {
	t.Helper()
	fnBuild.once.Do(func() {
		fnBuild.dir, fnBuild.err = os.MkdirTemp("", "mm2go-functions-")
		if fnBuild.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", fnBuild.dir+"/", "./functions/...")
		cmd.Dir = repoRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			fnBuild.err = fmt.Errorf("go build ./functions/...: %v\n%s", err, out)
		}
	})
	if fnBuild.err != nil {
		t.Fatal(fnBuild.err)
	}
	return fnBuild.dir
}

// servedFunction is one `<function> serve` process.
type servedFunction struct {
	name string
	base string
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startServe starts `<fn> serve` with env and waits for its probe (readyz, or healthz for a
// process whose cluster is meant to be unreachable). It gets SIGTERM when the test ends.
func startServe(t *testing.T, fn, probe string, env []string) *servedFunction {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(filepath.Join(functionBinaries(t), fn), "serve")
	cmd.Env = append(env, fmt.Sprintf("PORT=%d", port))
	var stderr strings.Builder
	var mu sync.Mutex
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			mu.Lock()
			stderr.WriteString(sc.Text() + "\n")
			mu.Unlock()
		}
	}()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		pw.Close()
		if t.Failed() {
			mu.Lock()
			t.Logf("%s serve stderr:\n%s", fn, stderr.String())
			mu.Unlock()
		}
	})
	s := &servedFunction{name: fn, base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	testkit.WaitFor(t, 60*time.Second, fn+" serve "+probe, func() bool {
		resp, err := http.Get(s.base + probe)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return s
}

// ping sends the CloudEvent a PingSource sends and returns the answer.
func (s *servedFunction) ping(t *testing.T, id string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.base+"/", strings.NewReader(""))
	for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": id, "ce-type": "dev.knative.sources.ping",
		"ce-source": "/apis/v1/namespaces/mm2go/pingsources/" + s.name} {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 3 * time.Minute}).Do(req)
	if err != nil {
		t.Fatalf("%s ping: %v", s.name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sampleNames returns the names of the samples GET /metrics shows.
func (s *servedFunction) sampleNames(t *testing.T) map[string]bool {
	t.Helper()
	return metricSampleNames(t, s.name, s.base+"/metrics")
}

// metricSampleNames returns the names of the samples a Prometheus text endpoint at url shows;
// who names it in a failure.
func metricSampleNames(t *testing.T, who, url string) map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s GET /metrics: %d", who, resp.StatusCode)
	}
	out := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			out[line[:i]] = true
		}
	}
	return out
}

// TestDashboardMetricsOnEndpoint runs the real functions against the harness clusters and
// checks that every metric the dashboard queries is on their /metrics: a heartbeat round, a
// mirror burst (PingSource event) that copies a topic and the heartbeats, a checkpoint round
// for a group committed on the source, a second heartbeat round (latency), and a checkpoint
// round against an unreachable target (the error counter).
func TestDashboardMetricsOnEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the functions and needs the Kafka clusters; skipped with -short")
	}
	c := testkit.Require(t)
	// The build first: the context bounds the test's Kafka work, and on a loaded runner the
	// build of the three functions (shared with the image tests) took most of 4 minutes.
	functionBinaries(t)
	ctx := testkit.Context(t, 4*time.Minute)
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	alias := "dash" + hex.EncodeToString(b) // own internal topics, no other test's positions
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "dash"), 2, nil)
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, alias+"."+topic, alias+".heartbeats", alias+".checkpoints.internal", "mm2-offsets."+alias+".internal")
	testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 2, 40)...)
	group := testkit.Name(t, "dashgroup")

	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"MM2_SOURCE_ALIAS=" + alias,
		"MM2_TARGET_ALIAS=target",
		"MM2_SOURCE_BOOTSTRAP_SERVERS=" + c.Source.Bootstrap,
		"MM2_TARGET_BOOTSTRAP_SERVERS=" + c.Target.Bootstrap,
		"MM2_TOPICS=" + topic,
		"MM2_GROUPS=" + group,
		"MM2_REPLICATION_FACTOR=1",
		"MM2_OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR=1",
		"MM2_OFFSET_STORAGE_REPLICATION_FACTOR=1",
		"MM2_CHECKPOINTS_TOPIC_REPLICATION_FACTOR=1",
		"MM2_HEARTBEATS_TOPIC_REPLICATION_FACTOR=1",
		"MM2_LOG_FORMAT=json",
	}
	heartbeat := startServe(t, "heartbeat", "/readyz", env)
	if code, body := heartbeat.ping(t, "hb-1"); code != http.StatusOK {
		t.Fatalf("heartbeat round: %d %s", code, body)
	}
	mirror := startServe(t, "mirror", "/readyz", env)
	// Without sender authentication a burst's answer names only its reason (docs/events.md),
	// so the copy is checked on the target.
	code, body := mirror.ping(t, "burst-1")
	var sum struct {
		Reason string `json:"reason"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &sum) != nil || sum.Reason != "done" {
		t.Fatalf("mirror burst: %d %s (want 200 and reason done)", code, body)
	}
	if got := testkit.ReadAll(t, c.Target.Bootstrap, alias+"."+topic); len(got) != 40 {
		t.Fatalf("mirror burst: the target holds %d records of %s, want the 40 written", len(got), alias+"."+topic)
	}
	// Records deleted on the source before they were mirrored (DeleteRecords past the stored
	// position): the next burst reports the gap (mm2go_source_gaps_total and
	// mm2go_source_gap_records_total).
	adm := testkit.Admin(t, c.Source.Bootstrap)
	testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 2, 10)...)
	lost, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	del := kadm.Offsets{}
	lost.Each(func(o kadm.ListedOffset) { del.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset}) })
	if resp, err := adm.DeleteRecords(ctx, del); err != nil || resp.Error() != nil {
		t.Fatalf("deleting records past the stored positions: %v %v", err, resp.Error())
	}
	if code, body := mirror.ping(t, "burst-2"); code != http.StatusOK {
		t.Fatalf("mirror burst after DeleteRecords: %d %s", code, body)
	}
	if n := mirror.sampleNames(t); !n["mm2go_source_gaps_total"] {
		t.Fatalf("mirror burst after DeleteRecords: no mm2go_source_gaps_total on /metrics (want the gap counted)")
	}
	// A consumer group at the end of the topic: the checkpoint round translates and writes it.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	offs := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) {
		offs.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset, LeaderEpoch: -1})
	})
	if err := adm.CommitAllOffsets(ctx, group, offs); err != nil {
		t.Fatal(err)
	}
	checkpoint := startServe(t, "checkpoint", "/readyz", env)
	if code, body := checkpoint.ping(t, "cp-1"); code != http.StatusOK {
		t.Fatalf("checkpoint round: %d %s", code, body)
	}
	if code, body := heartbeat.ping(t, "hb-2"); code != http.StatusOK {
		t.Fatalf("second heartbeat round: %d %s", code, body)
	}
	// A round that fails for real: the target address has no broker.
	badEnv := append([]string{}, env...)
	for i, e := range badEnv {
		if strings.HasPrefix(e, "MM2_TARGET_BOOTSTRAP_SERVERS=") {
			badEnv[i] = fmt.Sprintf("MM2_TARGET_BOOTSTRAP_SERVERS=127.0.0.1:%d", freePort(t))
		}
	}
	broken := startServe(t, "checkpoint", "/healthz", badEnv)
	if code, body := broken.ping(t, "cp-bad"); code == http.StatusOK {
		t.Fatalf("checkpoint round without a target broker answered 200: %s", body)
	}

	onEndpoint := map[string][]string{}
	for _, s := range []*servedFunction{heartbeat, mirror, checkpoint, broken} {
		for n := range s.sampleNames(t) {
			onEndpoint[n] = append(onEndpoint[n], s.name)
		}
	}
	queried := map[string]bool{}
	for _, q := range parseDashboard(t) {
		for _, n := range q.metrics {
			queried[n] = true
		}
	}
	if len(queried) < 11 {
		t.Fatalf("the dashboard queries only %d metric names: %v", len(queried), keys(queried))
	}
	for _, n := range keys(queried) {
		if onEndpoint[n] == nil {
			t.Errorf("the dashboard queries %s, which no function's /metrics shows after the rounds", n)
		}
	}
	t.Logf("dashboard metrics found on /metrics: %d of %d", len(queried)-countMissing(queried, onEndpoint), len(queried))
}

func countMissing(q map[string]bool, on map[string][]string) int {
	n := 0
	for k := range q {
		if on[k] == nil {
			n++
		}
	}
	return n
}

// TestMain removes the functions built for the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if fnBuild.dir != "" {
		os.RemoveAll(fnBuild.dir)
	}
	os.Exit(code)
}
