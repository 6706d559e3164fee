package replay

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
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

// scaleFlow is a backlog of records of size bytes in parts partitions of one source topic, keyed
// %08d by their index i and written to partition i % parts in index order, and the clusters an
// instance copies it between.
type scaleFlow struct {
	c                    testkit.Clusters
	bin, topic           string
	records, size, parts int
	maxDuration          string
}

// produceBacklog writes the flow's backlog to a new source topic.
func (f *scaleFlow) produceBacklog(t *testing.T) {
	t.Helper()
	f.topic = testkit.CreateTopic(t, f.c.Source.Bootstrap, testkit.Name(t, "wide"), int32(f.parts), nil)
	cl := testkit.Client(t, f.c.Source.Bootstrap, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	val := []byte(strings.Repeat("x", f.size))
	for i := 0; i < f.records; i += 10_000 {
		recs := make([]*kgo.Record, 0, 10_000)
		for j := i; j < min(i+10_000, f.records); j++ {
			recs = append(recs, &kgo.Record{Topic: f.topic, Partition: int32(j % f.parts), Key: fmt.Appendf(nil, "%08d", j), Value: val})
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// member is one instance's run: its burst summary and, from its log, when it was assigned and
// revoked which partitions.
type member struct {
	pod        string
	start, end time.Time
	records    int64
	lag        int64
	reason     string
	duration   time.Duration
	events     []groupEvent
	err        error
}

// groupEvent is a log line of a burst group member: partitions assigned (planned, about to be
// fetched) or revoked (in-flight records written, positions stored).
type groupEvent struct {
	at       time.Time
	assigned bool
	tps      []string
}

// scaleRound is n instances copying the flow's backlog to a remote topic of their own.
type scaleRound struct {
	n          int
	took       time.Duration
	loadBefore string
	loadAfter  string
	members    []*member
	// The target's copy: records read, distinct keys, keys never copied, records of a partition
	// out of the source's order, and partitions two members held at once (from their logs).
	got, distinct, missing, outOfOrder int
	overlaps                           []string
}

// loadAvg returns the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// run starts n `mirror run` processes at once in one new burst group, as KEDA starts the Jobs of a
// ScaledJob (each its own pod name, so its own client id), waits for all and checks the copy.
func (f *scaleFlow) run(t *testing.T, n int) *scaleRound {
	t.Helper()
	sfx := suffix(t)
	env := []string{
		"MM2_SOURCE_ALIAS=s" + sfx, "MM2_TARGET_ALIAS=target", "MM2_SOURCE_BOOTSTRAP_SERVERS=" + f.c.Source.Bootstrap,
		"MM2_TARGET_BOOTSTRAP_SERVERS=" + f.c.Target.Bootstrap, "MM2_TOPICS=" + f.topic, "MM2_BURST_GROUP=scale-" + sfx,
		"MM2_REPLICATION_FACTOR=1", "MM2_OFFSET_STORAGE_REPLICATION_FACTOR=1", "MM2_OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR=1",
		"MM2_BURST_MAX_DURATION=" + f.maxDuration, "MM2_LOG_FORMAT=json", "PATH=" + os.Getenv("PATH"),
	}
	r := &scaleRound{n: n, loadBefore: loadAvg()}
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		m := &member{pod: fmt.Sprintf("mm2go-mirror-lag-%s-%d", sfx, i)}
		r.members = append(r.members, m)
		wg.Go(func() {
			cmd := exec.Command(filepath.Join(f.bin, "mirror"), "run")
			cmd.Env = append(env, "POD_NAME="+m.pod)
			m.start = time.Now()
			out, err := cmd.CombinedOutput()
			m.end = time.Now()
			if err != nil {
				m.err = fmt.Errorf("instance %d: %v: %s", i, err, errorLines(string(out)))
			}
			m.parse(string(out))
		})
	}
	wg.Wait()
	r.took = time.Since(start)
	r.loadAfter = loadAvg()
	r.check(t, f, "s"+sfx+"."+f.topic)
	return r
}

// parse reads the member's burst summary and group events from its JSON log.
func (m *member) parse(out string) {
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			Time     time.Time `json:"time"`
			Msg      string    `json:"msg"`
			Records  int64     `json:"records"`
			Lag      int64     `json:"lag"`
			Reason   string    `json:"reason"`
			Duration string    `json:"duration"`
			Assigned []string  `json:"assigned"`
			Revoked  []string  `json:"revoked"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		switch l.Msg {
		case "burst summary":
			m.records, m.lag, m.reason = l.Records, l.Lag, l.Reason
			m.duration, _ = time.ParseDuration(l.Duration)
		case "partitions assigned by burst group":
			m.events = append(m.events, groupEvent{at: l.Time, assigned: true, tps: l.Assigned})
		case "partitions revoked by burst group":
			m.events = append(m.events, groupEvent{at: l.Time, tps: l.Revoked})
		}
	}
}

// check reads the remote topic and the members' logs: every record once, each partition in the
// source's order, and no partition held by two members at once.
func (r *scaleRound) check(t *testing.T, f *scaleFlow, remote string) {
	t.Helper()
	got := testkit.ReadAll(t, f.c.Target.Bootstrap, remote)
	r.got = len(got)
	seen := map[string]bool{}
	last := map[int32]int{}
	for _, rec := range got {
		seen[string(rec.Key)] = true
		j, err := strconv.Atoi(string(rec.Key))
		if err != nil {
			r.outOfOrder++
			continue
		}
		if prev, ok := last[rec.Partition]; (ok && j <= prev) || j%f.parts != int(rec.Partition) {
			r.outOfOrder++
		}
		last[rec.Partition] = j
	}
	r.distinct = len(seen)
	for i := range f.records {
		if !seen[fmt.Sprintf("%08d", i)] {
			r.missing++
		}
	}
	// Each member holds a partition from its assignment to its revocation (or its exit); two
	// members' spans of one partition must not overlap.
	type span struct {
		pod      string
		from, to time.Time
	}
	spans := map[string][]span{}
	for _, m := range r.members {
		open := map[string]time.Time{}
		for _, ev := range m.events {
			for _, tp := range ev.tps {
				if ev.assigned {
					open[tp] = ev.at
				} else if from, ok := open[tp]; ok {
					spans[tp] = append(spans[tp], span{m.pod, from, ev.at})
					delete(open, tp)
				}
			}
		}
		for tp, from := range open {
			spans[tp] = append(spans[tp], span{m.pod, from, m.end})
		}
	}
	for tp, ss := range spans {
		sort.Slice(ss, func(i, j int) bool { return ss[i].from.Before(ss[j].from) })
		for i := 1; i < len(ss); i++ {
			if ss[i].from.Before(ss[i-1].to) {
				r.overlaps = append(r.overlaps, fmt.Sprintf("%s: %s from %s, %s from %s to %s", tp, ss[i].pod, ss[i].from.Format(time.StampMicro),
					ss[i-1].pod, ss[i-1].from.Format(time.StampMicro), ss[i-1].to.Format(time.StampMicro)))
			}
		}
	}
	for _, m := range r.members {
		if m.err != nil {
			t.Error(m.err)
		}
		if m.reason != "done" || m.lag != 0 {
			t.Errorf("%d instances: %s ended %q with lag %d, want done with lag 0", r.n, m.pod, m.reason, m.lag)
		}
	}
	if r.missing > 0 || r.got != f.records || r.distinct != f.records {
		t.Errorf("%d instances: %d records on the target, %d distinct, %d never copied; want %d once each", r.n, r.got, r.distinct, r.missing, f.records)
	}
	if r.outOfOrder > 0 {
		t.Errorf("%d instances: %d records of a remote partition out of the source partition's order", r.n, r.outOfOrder)
	}
	if len(r.overlaps) > 0 {
		t.Errorf("%d instances: partitions held by two members at once:\n%s", r.n, strings.Join(r.overlaps, "\n"))
	}
}

// TestScaleOutGroupChecks (CI): four `mirror run` instances started at once in one burst group
// copy a backlog together: each ends done with lag 0, every record is on the target once and in
// its partition's order, and no partition is held by two members at once (their logs). It
// times nothing; TestScaleOut measures the rates.
func TestScaleOutGroupChecks(t *testing.T) {
	t.Parallel()
	c := testkit.Require(t)
	f := &scaleFlow{c: c, bin: functionBinaries(t), records: 80_000, size: 512, parts: 8, maxDuration: "2m"}
	f.produceBacklog(t)
	r := f.run(t, 4)
	var copied []string
	for _, m := range r.members {
		copied = append(copied, fmt.Sprint(m.records))
	}
	t.Logf("4 instances copied %s records (%d on the target, %d distinct) in %v", strings.Join(copied, " + "), r.got, r.distinct, r.took.Round(10*time.Millisecond))
}

// envInt returns the integer in variable name, or def.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// TestScaleOut (MM2GO_REPLAY_SCALEOUT=1, not in CI): 1, 2 and 4 `mirror run` instances in one
// burst group, each with its own pod name as KEDA or Knative would start them, copy a backlog
// through a per-client produce quota on the target (one instance's bandwidth).
// docs/performance.md. MM2GO_SCALEOUT_QUOTA (bytes per second per client id, 0: no quota, the
// machine's own rate), MM2GO_SCALEOUT_RECORDS (of 512 B in 8 partitions) and
// MM2GO_SCALEOUT_ROUNDS (instances per round, interleaved: 1,2,4,1,2,4) set the run.
func TestScaleOut(t *testing.T) {
	if os.Getenv("MM2GO_REPLAY_SCALEOUT") == "" {
		t.Skip("set MM2GO_REPLAY_SCALEOUT=1 (docs/performance.md, scale-out)")
	}
	c := testkit.Require(t)
	quota := envInt(t, "MM2GO_SCALEOUT_QUOTA", 2<<20)
	f := &scaleFlow{c: c, bin: functionBinaries(t), records: envInt(t, "MM2GO_SCALEOUT_RECORDS", 400_000), size: 512, parts: 8, maxDuration: "10m"}
	var rounds []int
	for _, s := range strings.Split(envOr("MM2GO_SCALEOUT_ROUNDS", "1,2,4,1,2,4"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			t.Fatalf("MM2GO_SCALEOUT_ROUNDS: %q is not a number of instances", s)
		}
		rounds = append(rounds, n)
	}
	if quota > 0 {
		// A target of its own whose quota is measured over 2 one-second windows: with the default
		// 11 a new client id may send 10 s of its quota before the broker throttles it.
		tb := testkit.StartExtraBroker(t, c, "scale", 3, func(int) []string { return []string{"quota.window.num=2", "quota.window.size.seconds=1"} })
		f.c.Target.Bootstrap = tb.Addr(0)
		tgtAdm := testkit.Admin(t, f.c.Target.Bootstrap)
		// The default quota of every client id on the target.
		def := kadm.ClientQuotaEntityComponent{Type: "client-id"}
		if _, err := tgtAdm.AlterClientQuotas(context.Background(), []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{def},
			Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: float64(quota)}}}}); err != nil {
			t.Fatal(err)
		}
	}
	f.produceBacklog(t)
	mib := float64(f.records*f.size) / (1 << 20)
	var results []*scaleRound
	for _, n := range rounds {
		r := f.run(t, n)
		results = append(results, r)
		var per []string
		for _, m := range r.members {
			rate := 0.0
			if m.duration > 0 {
				rate = float64(m.records) * float64(f.size) / (1 << 20) / m.duration.Seconds()
			}
			per = append(per, fmt.Sprintf("%d in %v (%.2f MiB/s)", m.records, m.duration.Round(10*time.Millisecond), rate))
		}
		t.Logf("%d instance(s): %d x %d B in %v, %.2f MiB/s; load %s -> %s; per instance: %s; %d copied twice, %d never, %d out of order, %d overlaps",
			n, f.records, f.size, r.took.Round(10*time.Millisecond), mib/r.took.Seconds(), r.loadBefore, r.loadAfter,
			strings.Join(per, ", "), r.got-r.distinct, r.missing, r.outOfOrder, len(r.overlaps))
	}
	// The rate of one: the mean of the rounds of one instance.
	var one []float64
	for _, r := range results {
		if r.n == 1 {
			one = append(one, mib/r.took.Seconds())
		}
	}
	if len(one) == 0 {
		return
	}
	base := 0.0
	for _, v := range one {
		base += v
	}
	base /= float64(len(one))
	var lines []string
	for _, r := range results {
		rate := mib / r.took.Seconds()
		lines = append(lines, fmt.Sprintf("| %d | %.1f s | %.2f MiB/s | %.2fx | %s / %s |", r.n, r.took.Seconds(), rate, rate/base, r.loadBefore, r.loadAfter))
	}
	t.Logf("quota %s per client id, %d x %d B in %d partitions; rate of one %.2f MiB/s (mean of %d)\n| instances | time | rate | against one | load before / after |\n|---|---|---|---|---|\n%s",
		quotaText(quota), f.records, f.size, f.parts, base, len(one), strings.Join(lines, "\n"))
}

// quotaText is a produce quota for the log: MiB/s or none.
func quotaText(q int) string {
	if q <= 0 {
		return "none"
	}
	return strconv.FormatFloat(math.Round(float64(q)/(1<<20)*100)/100, 'f', -1, 64) + " MiB/s"
}

// envOr returns variable name, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
