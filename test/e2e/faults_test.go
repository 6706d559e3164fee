package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
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
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/dispatcher"
)

// faultBroker is a single-node cluster of the fault tests' own, so that restarting or hanging
// it never disturbs the other tests, which use the harness clusters.
type faultBroker struct {
	eb        *testkit.ExtraBroker
	role      string // "source" or "target": how the functions name the cluster in their errors
	name      string
	bootstrap string
	home      string
	lib       string
}

// faultBrokerProps are the fault clusters' settings beyond kafka.sh's defaults. A quota's rate
// is measured over at least (quota.window.num - 1) windows: with the default 11 one-second
// windows a burst of a few megabytes is never throttled; with 2, a quota (throttleProducers)
// holds from the first second.
var faultBrokerProps = []string{"quota.window.num=2", "quota.window.size.seconds=1"}

// faultClusters is the fault tests' source and target, one pair per package run: started by
// the first test that asks for them (faultPair) and stopped by TestMain. The fault tests hang
// and restart them, so they run one after another (never t.Parallel), each getting the pair
// back running and answering, and each uses topics, groups and flow aliases of its own.
var faultClusters struct {
	once     sync.Once
	src, tgt *faultBroker
}

// faultPair returns the fault clusters (source, target), started on first use, once both
// answer; when the test ends, a cluster it left hung or stopped is thawed and restarted.
func faultPair(t *testing.T) (src, tgt *faultBroker) {
	t.Helper()
	c := testkit.Require(t)
	fc := &faultClusters
	fc.once.Do(func() {
		start := func(n, role string) *faultBroker {
			eb := testkit.StartLongLivedBroker(t, c, "fault-"+n+"-", 3, func(int) []string { return faultBrokerProps })
			return &faultBroker{eb: eb, role: role, name: eb.Name, bootstrap: eb.Plain, home: eb.Home, lib: c.KafkaLib}
		}
		src := start("src", "source")
		fc.src, fc.tgt = src, start("tgt", "target")
	})
	if fc.src == nil || fc.tgt == nil {
		t.Fatal("the fault clusters did not start (see the first fault test's failure)")
	}
	for _, b := range []*faultBroker{fc.src, fc.tgt} {
		b.heal(t)
		t.Cleanup(func() { _, _ = b.script("thaw"), b.script("resume") })
	}
	return fc.src, fc.tgt
}

// stopFaultClusters stops the fault clusters if a test started them, keeping their logs when
// the package failed.
func stopFaultClusters(failed bool) {
	for _, b := range []*faultBroker{faultClusters.src, faultClusters.tgt} {
		if b != nil {
			if err := b.eb.Stop(!failed); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
	}
}

// heal thaws and restarts b if an earlier test left it hung or stopped, and waits until it
// creates topics again: after a restart or a hang, a KRaft broker is fenced for a moment and
// refuses them.
func (b *faultBroker) heal(t *testing.T) {
	t.Helper()
	_ = b.script("thaw") // fails when it is stopped: resume starts it then
	b.kafka(t, "resume")
	probe := "fault-probe-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	adm := testkit.Admin(t, b.bootstrap)
	testkit.WaitFor(t, 2*time.Minute, b.name+" to create topics", func() bool {
		resp, err := adm.CreateTopic(testkit.Context(t, 10*time.Second), 1, 1, nil, probe)
		return err == nil && (resp.Err == nil || errors.Is(resp.Err, kerr.TopicAlreadyExists))
	})
	_, _ = adm.DeleteTopics(testkit.Context(t, 10*time.Second), probe)
}

// freshTarget makes sure the target has never been a group coordinator (no __consumer_offsets
// yet, as on a brand-new cluster): if an earlier test used it so, it is started again empty.
func (b *faultBroker) freshTarget(t *testing.T) {
	t.Helper()
	topics, err := testkit.Admin(t, b.bootstrap).ListTopicsWithInternal(testkit.Context(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if !topics.Has("__consumer_offsets") {
		return
	}
	t.Logf("%s was a group coordinator already: starting it again empty", b.name)
	if _, err := b.run("stop", b.name); err != nil {
		t.Fatal(err)
	}
	if _, err := b.run(append([]string{"start", b.name, strconv.Itoa(b.eb.Base)}, faultBrokerProps...)...); err != nil {
		t.Fatal(err)
	}
	b.heal(t)
}

func (b *faultBroker) run(args ...string) (string, error) {
	cmd := exec.Command(b.eb.Script(), args...)
	cmd.Env = append(os.Environ(), "MM2GO_KAFKA_HOME="+b.home)
	if b.lib != "" {
		cmd.Env = append(cmd.Env, "MM2GO_KAFKA_LIB="+b.lib)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("kafka.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (b *faultBroker) script(verb string) error {
	_, err := b.run(verb, b.name)
	return err
}

// kafka runs a kafka.sh verb on the broker (pause, resume, freeze, thaw).
func (b *faultBroker) kafka(t testing.TB, verb string) {
	t.Helper()
	if err := b.script(verb); err != nil {
		t.Fatal(err)
	}
}

// fault is what a test does to a broker: a restart (the process stops and starts again, its
// port refusing connections in between) or a hang (SIGSTOP: connections stay open and
// nothing answers) for a while.
type fault struct {
	name string
	hold time.Duration
}

var (
	restartFault = fault{"restart", 3 * time.Second}
	hangFault    = fault{"hang", 10 * time.Second}
)

// inject applies f to b for f.hold and returns when the broker answers again.
func (f fault) inject(t testing.TB, b *faultBroker) {
	t.Helper()
	began := time.Now()
	f.down(t, b)
	time.Sleep(f.hold) // the time the broker is down: what the fault is made of
	f.up(t, b)
	t.Logf("%s of %s: %s", f.name, b.name, time.Since(began).Round(100*time.Millisecond))
}

// down starts f on b: a restart stops the broker's process (its port refuses connections), a
// hang stops it with SIGSTOP (connections stay open and nothing answers). up ends it.
func (f fault) down(t testing.TB, b *faultBroker) {
	t.Helper()
	b.kafka(t, map[string]string{"restart": "pause", "hang": "freeze"}[f.name])
}

// up ends f on b: the broker runs again.
func (f fault) up(t testing.TB, b *faultBroker) {
	t.Helper()
	b.kafka(t, map[string]string{"restart": "resume", "hang": "thaw"}[f.name])
}

// process is a function run as a process (`<bin> run`).
type process struct {
	cmd            *exec.Cmd
	stdout, stderr testkit.SyncBuffer // read while the process runs
	exited         chan struct{}
	code           int
}

func startProcess(t testing.TB, bin string, env []string, args ...string) *process {
	t.Helper()
	p := &process{exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
		} else if err != nil {
			p.code = -1
		}
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// wait waits for the process to end (at most d) and returns its exit code.
func (p *process) wait(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.code
	case <-time.After(d):
		_ = p.cmd.Process.Signal(syscall.SIGQUIT) // goroutine dump on stderr
		time.Sleep(time.Second)
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Fatalf("%s did not exit within %s\n%s", filepath.Base(p.cmd.Path), d, tail(p.stderr.String(), 6000))
		return -1
	}
}

func (p *process) retries() int { return strings.Count(p.stderr.String(), "retriable error; retrying") }

// functionEnv is the environment of the checkpoint and heartbeat functions on a flow from
// source to target.
func functionEnv(source, target string, extra ...string) []string {
	return append([]string{
		"PATH=" + os.Getenv("PATH"),
		"MM2_SOURCE_BOOTSTRAP_SERVERS=" + source,
		"MM2_TARGET_BOOTSTRAP_SERVERS=" + target,
		"MM2_CHECKPOINTS_TOPIC_REPLICATION_FACTOR=1",
		"MM2_HEARTBEATS_TOPIC_REPLICATION_FACTOR=1",
		"MM2_LOG_FORMAT=json",
	}, extra...)
}

// TestFaultsCheckpointHeartbeat runs `checkpoint run` and `heartbeat run` as processes on the
// fault clusters. The first checkpoint round runs on a brand-new target (its group
// coordinator is not there yet: COORDINATOR_NOT_AVAILABLE until __consumer_offsets exists) and
// succeeds; then each round starts while the target, or the source, hangs or is stopped, reports
// the fault (a retry naming the error) while the broker is down, and once it is back ends with
// exit 0 and its work done: the checkpoint or heartbeat record on the target, byte for byte.
func TestFaultsCheckpointHeartbeat(t *testing.T) {
	src, tgt := faultPair(t)
	tgt.freshTarget(t)
	topic := testkit.CreateTopic(t, src.bootstrap, testkit.Name(t, "orders"), 1, nil)
	testkit.Produce(t, src.bootstrap, testkit.SampleRecords(topic, 1, 20)...)
	// The target holds the remote topic only, as after a first `mirror run` that wrote no
	// group offsets: the group coordinator has never been used.
	remote := "source." + topic
	testkit.CreateTopic(t, tgt.bootstrap, remote, 1, nil)
	// A target alias of this test's own: its offset-syncs topic is no other test's.
	alias := "tgt" + strconv.FormatInt(time.Now().UnixNano()%1_000_000, 36)
	syncs := testkit.CreateTopic(t, src.bootstrap, "mm2-offset-syncs."+alias+".internal", 1, nil)
	cpBin, hbBin := buildFunction(t, "checkpoint"), buildFunction(t, "heartbeat")
	env := functionEnv(src.bootstrap, tgt.bootstrap, "MM2_TARGET_ALIAS="+alias, "MM2_GROUPS=app1", "MM2_TOPICS="+topic, "MM2_SYNC_GROUP_OFFSETS_ENABLED=true")

	committed := int64(0)
	// checkpointRound writes an offset sync u -> u, commits offset u of app1 on the source and
	// runs one checkpoint round, through fault f of broker b if f is not nil; the round must end
	// with exit 0, its last checkpoint of app1 must be u -> u byte for byte, and the group's
	// offset on the target must be u (the translation).
	checkpointRound := func(t *testing.T, f *fault, b *faultBroker) {
		committed += 3
		k, v, err := mm2.OffsetSync{Topic: topic, Partition: 0, UpstreamOffset: committed, DownstreamOffset: committed}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		testkit.Produce(t, src.bootstrap, &kgo.Record{Topic: syncs, Key: k, Value: v})
		commitGroupOffset(t, src.bootstrap, "app1", topic, committed)
		var p *process
		if f != nil {
			p = runThroughFault(t, cpBin, env, *f, b)
		} else {
			p = startProcess(t, cpBin, env, "run")
		}
		code := p.wait(t, 3*time.Minute)
		t.Logf("checkpoint run: exit %d after %d retries; %s", code, p.retries(), strings.TrimSpace(p.stdout.String()))
		if code != 0 {
			t.Fatalf("checkpoint run: exit %d, want 0\n%s", code, tail(p.stderr.String(), 4000))
		}
		var sum struct {
			Written int `json:"checkpoints_written"`
			Synced  int `json:"synced_offsets"`
		}
		if err := json.Unmarshal([]byte(p.stdout.String()), &sum); err != nil || sum.Written != 1 || sum.Synced != 1 {
			t.Errorf("summary %s (%v): want 1 checkpoint written, 1 offset synced", p.stdout.String(), err)
		}
		// The round's checkpoint: the last of app1 on the remote topic (a retried round may
		// write it twice), u -> u; the one before has u-3.
		wantKey, wantValue, err := mm2.Checkpoint{Group: "app1", Topic: remote, UpstreamOffset: committed, DownstreamOffset: committed}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		var last *kgo.Record
		for _, r := range testkit.ReadAll(t, tgt.bootstrap, "source.checkpoints.internal") {
			if cp, err := mm2.DecodeCheckpoint(r.Key, r.Value); err == nil && cp.Group == "app1" && cp.Topic == remote {
				last = r
			}
		}
		if last == nil || !bytes.Equal(last.Key, wantKey) || !bytes.Equal(last.Value, wantValue) {
			t.Errorf("last checkpoint of app1 on %s: %s, want %x/%x (%d -> %d)", remote, describeCheckpoint(last), wantKey, wantValue, committed, committed)
		}
		got, err := testkit.Admin(t, tgt.bootstrap).FetchOffsets(testkit.Context(t, 30*time.Second), "app1")
		o, ok := got.Lookup(remote, 0)
		if err != nil || !ok || o.At != committed {
			t.Errorf("app1 on the target: %+v %v, want offset %d on %s[0]", o, err, committed, remote)
		}
	}
	t.Run("checkpoint_new_target", func(t *testing.T) { checkpointRound(t, nil, nil) })

	// heartbeatRound runs one heartbeat round through fault f of broker b (the target): exit 0,
	// and the heartbeat the summary names is on the target, source -> target, stamped while the
	// round ran.
	heartbeatRound := func(t *testing.T, f fault, b *faultBroker) {
		began := time.Now().UnixMilli()
		p := runThroughFault(t, hbBin, functionEnv(src.bootstrap, tgt.bootstrap), f, b)
		code := p.wait(t, 3*time.Minute)
		ended := time.Now().UnixMilli()
		t.Logf("heartbeat run: exit %d after %d retries; %s", code, p.retries(), strings.TrimSpace(p.stdout.String()))
		if code != 0 {
			t.Fatalf("heartbeat run: exit %d, want 0\n%s", code, tail(p.stderr.String(), 4000))
		}
		var sum struct {
			Written []struct {
				Cluster, Topic string
				Offset         int64
			} `json:"written"`
		}
		if err := json.Unmarshal([]byte(p.stdout.String()), &sum); err != nil || len(sum.Written) == 0 || sum.Written[0].Cluster != "target" {
			t.Fatalf("summary %s (%v): want the heartbeat written to the target", p.stdout.String(), err)
		}
		w := sum.Written[0]
		var rec *kgo.Record
		for _, r := range testkit.ReadAll(t, tgt.bootstrap, w.Topic) {
			if r.Offset == w.Offset {
				rec = r
			}
		}
		if rec == nil {
			t.Fatalf("no record at %s@%d on the target, where the summary says the heartbeat is", w.Topic, w.Offset)
		}
		hb, err := mm2.DecodeHeartbeat(rec.Key, rec.Value)
		wantKey, wantValue, _ := mm2.Heartbeat{SourceAlias: "source", TargetAlias: "target", Timestamp: hb.Timestamp}.Encode()
		if err != nil || !bytes.Equal(rec.Key, wantKey) || !bytes.Equal(rec.Value, wantValue) || hb.Timestamp < began || hb.Timestamp > ended {
			t.Errorf("heartbeat at %s@%d: %x/%x (%v, %v), want %x/%x stamped between %d and %d", w.Topic, w.Offset, rec.Key, rec.Value, hb, err, wantKey, wantValue, began, ended)
		}
	}
	for _, b := range []*faultBroker{tgt, src} {
		side := map[*faultBroker]string{tgt: "target", src: "source"}[b]
		for _, f := range []fault{hangFault, restartFault} {
			t.Run(fmt.Sprintf("checkpoint_%s_%s", side, f.name), func(t *testing.T) { checkpointRound(t, &f, b) })
			if side == "target" {
				// A round needs only the target: a source fault costs the reverse heartbeat.
				t.Run(fmt.Sprintf("heartbeat_%s_%s", side, f.name), func(t *testing.T) { heartbeatRound(t, f, b) })
			}
		}
	}
	// A hang longer than the run's budget: the round stops and exits 3 ("run again later"),
	// naming the cluster that did not answer.
	t.Run("checkpoint_budget_runs_out", func(t *testing.T) {
		tgt.kafka(t, "freeze")
		defer tgt.kafka(t, "thaw")
		p := startProcess(t, cpBin, append(env, "MM2_BURST_MAX_DURATION=5s"), "run")
		code := p.wait(t, 2*time.Minute)
		t.Logf("checkpoint run with the target hung: exit %d", code)
		if code != 3 || !strings.Contains(p.stderr.String(), `target cluster \"`+alias+`\" unavailable`) {
			t.Errorf("exit %d, want 3 with the target named\n%s", code, tail(p.stderr.String(), 3000))
		}
	})
}

// runThroughFault starts `<bin> run` while fault f holds broker b down and ends the fault once
// the process has reported it: a "retriable error; retrying" line naming b's cluster as
// unavailable. The fault has then landed on the round. A process that ends while b is down
// fails the test, as does one that reports nothing of the kind within 3 minutes (another
// retry, such as COORDINATOR_NOT_AVAILABLE from a new target, does not count).
func runThroughFault(t *testing.T, bin string, env []string, f fault, b *faultBroker) *process {
	t.Helper()
	fn := filepath.Base(bin)
	f.down(t, b)
	p := startProcess(t, bin, env, "run")
	var met string
	testkit.WaitFor(t, 3*time.Minute, fmt.Sprintf("%s run to report the %s of the %s", fn, f.name, b.role), func() bool {
		select {
		case <-p.exited:
			f.up(t, b)
			t.Fatalf("%s run ended (exit %d) while the %s was down (%s) without a retry naming it: the fault did not land on the round\n%s",
				fn, p.code, b.role, f.name, tail(p.stderr.String(), 3000))
		default:
		}
		met = faultRetry(p.stderr.String(), b.role)
		return met != ""
	})
	f.up(t, b)
	t.Logf("%s of the %s met by the round: %s", f.name, b.role, met)
	return p
}

// faultRetry returns the first retry line of a function's log that names the role's cluster
// ("source" or "target") as unavailable, or "".
func faultRetry(log, role string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "retriable error; retrying") && strings.Contains(l, role+` cluster \"`) && strings.Contains(l, `unavailable`) {
			return l
		}
	}
	return ""
}

// describeCheckpoint formats a checkpoints record for a failure message.
func describeCheckpoint(r *kgo.Record) string {
	if r == nil {
		return "none"
	}
	cp, err := mm2.DecodeCheckpoint(r.Key, r.Value)
	return fmt.Sprintf("%x/%x (%v, %v)", r.Key, r.Value, cp, err)
}

// commitGroupOffset commits offset at of topic[0] for group.
func commitGroupOffset(t *testing.T, bootstrap, group, topic string, at int64) {
	t.Helper()
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1})
	if err := testkit.Admin(t, bootstrap).CommitAllOffsets(testkit.Context(t, 30*time.Second), group, os); err != nil {
		t.Fatalf("committing %d for %s: %v", at, group, err)
	}
}

// throttleProducers sets a produce quota of bytesPerSecond on b for every client (the default
// user's, which the clients of a plaintext listener share) until the test ends: a burst then
// lasts seconds on any machine, so that a fault injected once it has started always meets it.
func throttleProducers(t *testing.T, b *faultBroker, bytesPerSecond float64) {
	t.Helper()
	alter := func(remove bool) error {
		res, err := testkit.Admin(t, b.bootstrap).AlterClientQuotas(testkit.Context(t, 30*time.Second), []kadm.AlterClientQuotaEntry{{
			Entity: kadm.ClientQuotaEntity{{Type: "user"}},
			Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: bytesPerSecond, Remove: remove}},
		}})
		if err == nil && len(res) > 0 {
			err = res[0].Err
		}
		return err
	}
	if err := alter(false); err != nil {
		t.Fatalf("setting a produce quota on %s: %v", b.name, err)
	}
	t.Cleanup(func() {
		b.heal(t)
		if err := alter(true); err != nil {
			t.Errorf("removing the produce quota on %s: %v", b.name, err)
		}
	})
}

// countKeys reads topic (read_committed when committed) and returns how many records it holds
// and how many distinct keys.
func countKeys(t testing.TB, bootstrap, topic string, committed bool) (records, distinct int) {
	t.Helper()
	var opts []kgo.Opt
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	got := testkit.ReadAll(t, bootstrap, topic, opts...)
	seen := make(map[string]struct{}, len(got))
	for _, r := range got {
		seen[string(r.Key)] = struct{}{}
	}
	return len(got), len(seen)
}

// TestFaultsMirrorRun runs `mirror run` bursts on the fault clusters while the source
// or the target hangs (SIGSTOP) or restarts mid-burst: each burst waits, retries and finishes
// (exit 0); nothing is lost, and in exactly-once mode a read_committed reader sees every record
// once.
func TestFaultsMirrorRun(t *testing.T) {
	src, tgt := faultPair(t)
	c := testkit.Clusters{Source: testkit.Cluster{Name: "source", Bootstrap: src.bootstrap}, Target: testkit.Cluster{Name: "target", Bootstrap: tgt.bootstrap}}
	bin := MirrorBinary(t)
	for _, tc := range []struct {
		b   *faultBroker
		f   fault
		eos bool
	}{
		{src, hangFault, true}, {src, restartFault, false}, {tgt, hangFault, false}, {tgt, restartFault, true},
	} {
		side := map[*faultBroker]string{tgt: "target", src: "source"}[tc.b]
		t.Run(fmt.Sprintf("%s_%s_exactly_once=%v", side, tc.f.name, tc.eos), func(t *testing.T) {
			// Unthrottled, a burst copies these records (1.7-1.8 MB on the wire, snappy) in
			// 0.2-0.34 s, over before a fault lands; at 256 KiB/s into the target they take
			// about 7 s on any machine.
			n := 60000
			throttleProducers(t, tgt, 256<<10)
			topic := bigTopic(t, c, 4, n, 200)
			remote := "source." + topic
			// bigTopic's batches are franz-go's snappy ones: with the same codec on the target, an
			// at-least-once burst forwards them whole (engine.forwardLoop), so the fault meets
			// the forwarder's retries and, if they run out, its handover to the record path.
			env := MirrorEnv(c, topic, fmt.Sprintf("MM2_EXACTLY_ONCE=%v", tc.eos), "MM2_TARGET_PRODUCER_COMPRESSION_TYPE=snappy")
			p := startProcess(t, bin, env, "run")
			ctx := testkit.Context(t, 2*time.Minute)
			for EndOffsetsSum(ctx, tgt.bootstrap, remote) < int64(n/10) {
				select {
				case <-p.exited:
					t.Fatalf("the burst ended before the fault: exit %d\n%s", p.code, tail(p.stderr.String(), 4000))
				case <-ctx.Done():
					t.Fatal("no records on the target")
				case <-time.After(20 * time.Millisecond):
				}
			}
			tc.f.inject(t, tc.b)
			code := p.wait(t, 4*time.Minute)
			t.Logf("mirror run: exit %d (%d exactly-once copies started over after a commit met the fault); %s", code,
				strings.Count(p.stderr.String(), "exactly-once copy: retriable error; copying again from the stored position"), strings.TrimSpace(p.stdout.String()))
			var sum struct {
				Lag       int64  `json:"lag"`
				Reason    string `json:"reason"`
				Forwarded int64  `json:"forwarded_records"`
				Duration  int64  `json:"duration_ms"`
			}
			_ = json.Unmarshal([]byte(p.stdout.String()), &sum)
			switch {
			case code != 0:
				t.Errorf("burst through the %s of the %s: exit %d, want 0\n%s", tc.f.name, side, code, tail(p.stderr.String(), 4000))
			case sum.Lag != 0:
				t.Errorf("burst through the %s of the %s: exit 0 (reason %q) with %d records left", tc.f.name, side, sum.Reason, sum.Lag)
			case sum.Duration < tc.f.hold.Milliseconds():
				t.Errorf("the burst took %d ms, less than the %s of the %s: it did not meet the fault", sum.Duration, tc.f.name, side)
			case !tc.eos && sum.Forwarded == 0:
				t.Errorf("burst through the %s of the %s: no batch forwarded, so the fault did not meet the forwarder; why:\n%s", tc.f.name, side, linesWith(p.stderr.String(), "record by record"))
			}
			// One more run: it must find nothing left; if the burst above failed, it finishes
			// the copy so that what the fault cost can be counted.
			r := RunMirror(t, env)
			t.Logf("the run after: exit %d, %d records", r.Code, r.Records())
			if r.Code != 0 {
				t.Fatalf("the run after: exit %d\n%s", r.Code, tail(r.Stderr, 4000))
			}
			records, distinct := countKeys(t, tgt.bootstrap, remote, tc.eos)
			t.Logf("target holds %d records, %d distinct, %d duplicates", records, distinct, records-distinct)
			if distinct != n {
				t.Errorf("target has %d distinct records, want %d (lost %d)", distinct, n, n-distinct)
			}
			if tc.eos && records != distinct {
				t.Errorf("exactly-once: a read_committed reader sees %d records more than once", records-distinct)
			}
		})
	}
}

// eventAnswer is one event the dispatcher sent to the function and the function's answer.
type eventAnswer struct {
	partition         int32
	offset            int64
	arrived, answered time.Time
	code              int // 0 while unanswered
}

// answerProxy sits between the dispatcher and the function and records every answer.
type answerProxy struct {
	URL     string
	mu      sync.Mutex
	answers []*eventAnswer
}

func newAnswerProxy(t *testing.T, function string) *answerProxy {
	t.Helper()
	u, err := url.Parse(function)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	ap := &answerProxy{}
	idRE := regexp.MustCompile(`^partition:(\d+)/offset:(\d+)$`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := &eventAnswer{partition: -1, offset: -1, arrived: time.Now()}
		if m := idRE.FindStringSubmatch(r.Header.Get("Ce-Id")); m != nil {
			p, _ := strconv.Atoi(m[1])
			a.partition = int32(p)
			a.offset, _ = strconv.ParseInt(m[2], 10, 64)
		}
		ap.mu.Lock()
		ap.answers = append(ap.answers, a)
		ap.mu.Unlock()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		rp.ServeHTTP(sw, r)
		ap.mu.Lock()
		a.code, a.answered = sw.code, time.Now()
		ap.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	ap.URL = srv.URL + "/"
	return ap
}

// snapshot returns a copy of the answers so far.
func (ap *answerProxy) snapshot() []eventAnswer {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	out := make([]eventAnswer, len(ap.answers))
	for i, a := range ap.answers {
		out[i] = *a
	}
	return out
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// TestFaultsMirrorServe runs `mirror serve` (fetch mode, exactly-once) as a process fed by the
// genuine KafkaSource dispatcher through a proxy that records every answer, on the fault
// clusters, while records keep arriving: the target hangs, then the source hangs, then the target
// restarts. Each fault lasts until it has landed: the function's /readyz answers 503 and its log
// says the cluster is unreachable, and for a target fault an event waits on the function or is
// answered 503; after it /readyz answers 200 again. Meanwhile the function answers only 2xx and 503,
// never 2xx for a record produced during a target fault before the target is back; the
// dispatcher gives up no event (its dead-letter sink gets none) and the function gives up no
// partition. Afterwards every record is on the target once (read_committed), byte for byte, the
// dispatcher's offsets and the function's stored positions are the source's ends.
func TestFaultsMirrorServe(t *testing.T) {
	src, tgt := faultPair(t)
	c := testkit.Clusters{Source: testkit.Cluster{Name: "source", Bootstrap: src.bootstrap}, Target: testkit.Cluster{Name: "target", Bootstrap: tgt.bootstrap}}
	const parts = 2
	topic := testkit.CreateTopic(t, src.bootstrap, testkit.Name(t, "orders"), parts, nil)
	remote := "source." + topic
	port := freePortBlock(t)
	env := append(MirrorEnv(c, topic, "MM2_EXACTLY_ONCE=true"), "PORT="+strconv.Itoa(port))
	fn := startProcess(t, MirrorBinary(t), env, "serve")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	ready := func() bool {
		select {
		case <-fn.exited:
			t.Fatalf("mirror serve exited: %d\n%s", fn.code, tail(fn.stderr.String(), 4000))
		default:
		}
		code, _ := httpGet(base + "/readyz")
		return code == 200
	}
	testkit.WaitFor(t, 60*time.Second, "mirror serve to be ready", ready)
	proxy := newAnswerProxy(t, base+"/")
	dls := dispatcher.NewSink(t, nil)
	d := dispatcher.Start(t, dispatcher.Config{Bootstrap: src.bootstrap, Topics: []string{topic}, Sink: proxy.URL,
		Retry: 60, BackoffDelay: 500 * time.Millisecond, LinearBackoff: true, Timeout: 60 * time.Second, DeadLetter: dls.URL})

	// answeredAfter waits until the function has answered 2xx to an event that arrived after at.
	answeredAfter := func(at time.Time, what string) {
		testkit.WaitFor(t, 3*time.Minute, what, func() bool {
			for _, a := range proxy.snapshot() {
				if a.code/100 == 2 && a.arrived.After(at) {
					return true
				}
			}
			return false
		})
	}
	// A steady trickle of records through all three faults.
	bp := startProducing(t, src.bootstrap, []string{topic}, parts)
	answeredAfter(time.Now(), "the function to copy a record")
	type window struct {
		name     string
		target   bool
		ends     map[int32]int64 // the source's ends as the fault began
		down, up time.Time
		waiting  int // events waiting on the function as the broker came back
	}
	var windows []window
	for _, fs := range []struct {
		f fault
		b *faultBroker
	}{{hangFault, tgt}, {hangFault, src}, {restartFault, tgt}} {
		side := fs.b.role
		w := window{name: fs.f.name + " of the " + side, target: fs.b == tgt, ends: endOffsets(t, src.bootstrap, topic), down: time.Now()}
		// The function logs "not ready" naming the cluster at each change of its readiness.
		unreachable := side + " cluster unreachable"
		seen := strings.Count(fn.stderr.String(), unreachable)
		fs.f.down(t, fs.b)
		testkit.WaitFor(t, 2*time.Minute, "/readyz to answer 503 naming the "+side+" in the log during the "+w.name, func() bool {
			return !ready() && strings.Count(fn.stderr.String(), unreachable) > seen
		})
		if w.target {
			// The dispatcher keeps sending events (the source answers): one waits on a copy
			// the target cannot take, or is answered 503.
			testkit.WaitFor(t, 2*time.Minute, "an event waiting on the function, or answered 503, during the "+w.name, func() bool {
				w.waiting = 0
				for _, a := range proxy.snapshot() {
					if a.code == 0 || (a.code == http.StatusServiceUnavailable && a.answered.After(w.down)) {
						w.waiting++
					}
				}
				return w.waiting > 0
			})
		}
		w.up = time.Now()
		fs.f.up(t, fs.b)
		t.Logf("%s: %s, /readyz 503 (%q logged), %d events waiting or answered 503 before it ended", w.name, w.up.Sub(w.down).Round(100*time.Millisecond), unreachable, w.waiting)
		windows = append(windows, w)
		testkit.WaitFor(t, 2*time.Minute, "/readyz to answer 200 after the "+w.name, ready)
		answeredAfter(time.Now(), "the function to copy again after the "+w.name)
	}
	want := bp.finish(t)
	d.WaitCommitted(topic, endOffsets(t, src.bootstrap, topic), 3*time.Minute)
	d.Stop()

	// The answers: 2xx or 503 only; none 2xx for a record produced during a target fault before
	// the target was back.
	codes := map[int]int{}
	for _, a := range proxy.snapshot() {
		codes[a.code]++
		if a.code/100 != 2 && a.code != http.StatusServiceUnavailable {
			t.Errorf("event %d@%d answered %d, want 2xx or 503", a.partition, a.offset, a.code)
		}
		for _, w := range windows {
			if end, ok := w.ends[a.partition]; ok && w.target && a.code/100 == 2 && a.offset >= end && a.answered.Before(w.up) {
				t.Errorf("event %d@%d, a record produced during the %s, answered %d before the target was back", a.partition, a.offset, w.name, a.code)
			}
		}
	}
	// Give-ups: the dispatcher's (dead-lettered events) and the function's (a partition's copy
	// stopped with records left: fenced, not settled or stalled).
	gaveUp := strings.Count(fn.stderr.String(), "records left before offset")
	t.Logf("answers by status: %v; %d events dead-lettered; %d copies given up", codes, len(dls.Requests()), gaveUp)
	if n := len(dls.Requests()); n != 0 {
		t.Errorf("the dispatcher gave up %d events (dead-letter sink), want 0", n)
	}
	if gaveUp != 0 {
		t.Errorf("the function gave up %d copies, want 0\n%s", gaveUp, tail(fn.stderr.String(), 4000))
	}

	// The records, byte for byte, each once for a read_committed reader.
	got := testkit.ReadAll(t, tgt.bootstrap, remote, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	dups := assertNoLoss(t, want, got)
	t.Logf("%d produced; the target holds %d records (read_committed), %d duplicates", len(want), len(got), dups)
	if dups != 0 {
		t.Errorf("exactly-once: a read_committed reader sees %d records twice", dups)
	}
	// The offsets: the function's stored positions are the source's last offsets (mirror status).
	code, out, stderr := runMirrorCmd(t, env, "status", "-o", "json")
	var st struct {
		Partitions []struct {
			Partition int32
			Position  *int64
			SourceEnd int64 `json:"source_end"`
			Lag       int64
		}
	}
	if code != 0 {
		t.Fatalf("mirror status: exit %d\n%s", code, stderr)
	}
	decodeJSON(t, out, &st)
	if len(st.Partitions) != parts {
		t.Errorf("mirror status: %d partitions, want %d\n%s", len(st.Partitions), parts, out)
	}
	for _, p := range st.Partitions {
		if p.Position == nil || *p.Position != p.SourceEnd-1 || p.Lag != 0 {
			t.Errorf("partition %d: stored position %v, source end %d, lag %d; want the last offset, lag 0", p.Partition, p.Position, p.SourceEnd, p.Lag)
		}
	}
}

func httpGet(url string) (int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
