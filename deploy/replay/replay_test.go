package replay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
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

	"github.com/mm2go/mm2go/test/testkit"
)

// compress is the clock's compression: one platform minute is one second here.
const compress = 60

// catchUpBound is how long a scenario may take to get every produced record onto the target.
const catchUpBound = 4 * time.Minute

func scaled(d time.Duration) time.Duration { return d / compress }

// idleWindow is the platform time the scenario waits without new records at its end.
const idleWindow = 6 * time.Minute

var fnBuild struct {
	once sync.Once
	dir  string
	err  error
}

// functionBinaries builds the three functions once per test binary.
func functionBinaries(t *testing.T) string {
	t.Helper()
	fnBuild.once.Do(func() {
		fnBuild.dir, fnBuild.err = os.MkdirTemp("", "mm2go-replay-")
		if fnBuild.err != nil {
			return
		}
		root, _ := filepath.Abs(RepoFile())
		// The flags and environment of deploy/check's build, so the two share the build cache.
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", fnBuild.dir+"/", "./functions/...")
		cmd.Dir = root
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

func suffix(t *testing.T) string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// run is one process a platform started.
type run struct {
	w          *Workload
	job        int // the execution (Job) the run is a pod of
	attempt    int // 0, then one more for each retry of a failed pod
	start, end time.Time
	// trigger is when the trigger that started the run's execution decided to (for a lag
	// trigger, just before it read the lag; a retried pod keeps its execution's), and lag what
	// that lag trigger read (-1: another trigger).
	trigger time.Time
	lag     int64
	exit    int
	killed  string // why the platform stopped it: "deadline", "rollout"; empty: it ended itself
	stderr  string
}

// platform starts workloads as their triggers say, on the compressed clock.
type platform struct {
	t        *testing.T
	bin      string
	clusters testkit.Clusters
	topic    string
	adm      *kadm.Client

	mu      sync.Mutex
	env     map[string]map[string]string // per workload name: the current settings
	runs    []*run
	live    map[string]map[*run]*exec.Cmd
	pending map[string]int // executions waiting to retry a failed pod (they still run)
	podSeq  int
	jobSeq  int
	wg      sync.WaitGroup
	stopped bool
}

// localize turns a derived environment into the one a user deploying against the harness
// clusters would write: their addresses without SASL (PLAINTEXT listeners), the scenario's
// topic, replication factor 1, names unique to this run, and the compressed burst budget.
func localize(t *testing.T, env map[string]string, c testkit.Clusters, topic, sfx string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		if strings.Contains(k, "_SASL_") || strings.Contains(k, "EVENTHUBS") || strings.Contains(k, "_AZURE_") || strings.Contains(k, "_SSL_") {
			continue
		}
		out[k] = v
	}
	out["MM2_SOURCE_BOOTSTRAP_SERVERS"], out["MM2_TARGET_BOOTSTRAP_SERVERS"] = c.Source.Bootstrap, c.Target.Bootstrap
	out["MM2_SOURCE_SECURITY_PROTOCOL"], out["MM2_TARGET_SECURITY_PROTOCOL"] = "PLAINTEXT", "PLAINTEXT"
	out["MM2_SOURCE_ALIAS"] = out["MM2_SOURCE_ALIAS"] + sfx
	out["MM2_TOPICS"] = topic
	// Single-broker clusters: every topic mm2go creates gets one replica.
	for _, k := range []string{"MM2_REPLICATION_FACTOR", "MM2_OFFSET_STORAGE_REPLICATION_FACTOR", "MM2_OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR",
		"MM2_CHECKPOINTS_TOPIC_REPLICATION_FACTOR", "MM2_HEARTBEATS_TOPIC_REPLICATION_FACTOR"} {
		out[k] = "1"
	}
	for _, k := range []string{"MM2_LAG_GROUP", "MM2_BURST_GROUP"} {
		if out[k] != "" {
			out[k] += "-" + sfx
		}
	}
	if d, err := time.ParseDuration(out["MM2_BURST_MAX_DURATION"]); err == nil && d > 0 {
		out["MM2_BURST_MAX_DURATION"] = scaled(d).String()
	} else if out["MM2_BURST_MAX_DURATION"] != "" {
		t.Fatalf("MM2_BURST_MAX_DURATION %q: %v", out["MM2_BURST_MAX_DURATION"], err)
	}
	return out
}

// start starts an execution of w (a Job, a Container Apps job execution) unless the platform
// lets no more run.
func (p *platform) start(w *Workload) { p.launch(w, 0, 0, time.Now(), -1) }

// startOnLag starts an execution of w that its lag trigger decided on at at, having read lag.
func (p *platform) startOnLag(w *Workload, at time.Time, lag int64) { p.launch(w, 0, 0, at, lag) }

// launch starts a pod of execution job (attempt 0: a new execution). A pod that fails (exit
// not 0, not stopped by the platform) is started again after the pod back-off (10 s doubling,
// Kubernetes') until the workload's RetryLimit is used up.
func (p *platform) launch(w *Workload, job, attempt int, trigger time.Time, lag int64) {
	p.mu.Lock()
	if attempt > 0 {
		p.pending[w.Name]--
	}
	if p.stopped || (attempt == 0 && w.MaxRunning > 0 && len(p.live[w.Name])+p.pending[w.Name] >= w.MaxRunning) {
		p.mu.Unlock()
		return
	}
	if attempt == 0 {
		p.jobSeq++
		job = p.jobSeq
	}
	p.podSeq++
	env := []string{fmt.Sprintf("POD_NAME=%s-%d", w.Name, p.podSeq), "PATH=" + os.Getenv("PATH")}
	for k, v := range p.env[w.Name] {
		env = append(env, k+"="+v)
	}
	cmd := exec.Command(filepath.Join(p.bin, w.Function), w.Args...)
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	r := &run{w: w, job: job, attempt: attempt, start: time.Now(), trigger: trigger, lag: lag}
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		p.t.Errorf("%s: %v", w.Name, err)
		return
	}
	if p.live[w.Name] == nil {
		p.live[w.Name] = map[*run]*exec.Cmd{}
	}
	p.live[w.Name][r] = cmd
	p.runs = append(p.runs, r)
	p.wg.Add(1)
	p.mu.Unlock()
	var deadline *time.Timer
	if w.Deadline > 0 {
		deadline = time.AfterFunc(scaled(w.Deadline), func() { p.stop(r, "deadline") })
	}
	go func() {
		defer p.wg.Done()
		err := cmd.Wait()
		if deadline != nil {
			deadline.Stop()
		}
		p.mu.Lock()
		r.end, r.stderr = time.Now(), stderr.String()
		if ee, ok := err.(*exec.ExitError); ok {
			r.exit = ee.ExitCode()
		} else if err != nil {
			r.exit = -1
		}
		delete(p.live[w.Name], r)
		retry := r.exit != 0 && r.killed == "" && attempt < w.RetryLimit && !p.stopped
		if retry {
			p.pending[w.Name]++
			p.wg.Add(1)
		}
		p.mu.Unlock()
		if retry {
			time.AfterFunc(scaled(10*time.Second<<attempt), func() { defer p.wg.Done(); p.launch(w, job, attempt+1, trigger, lag) })
		}
	}()
}

// stopGrace is the platform's grace period between SIGTERM and SIGKILL (Kubernetes'
// terminationGracePeriodSeconds default; Container Apps' too). It is not compressed: what a
// process does after SIGTERM (finish its writes, store its positions, leave its burst group,
// all bounded by the function's own 10 s) runs at the machine's speed. Compressed to 0.5 s it
// turned a slow stop on a loaded machine into a SIGKILL, and the killed run's burst-group
// member then held the group for franz-go's 45 s session timeout (real seconds: 45 platform
// minutes), so that the runs after it waited to join until their deadlines stopped them too.
const stopGrace = 30 * time.Second

// stop ends a run as the platform does: SIGTERM, then SIGKILL after stopGrace.
func (p *platform) stop(r *run, why string) {
	p.mu.Lock()
	cmd := p.live[r.w.Name][r]
	if cmd == nil {
		p.mu.Unlock()
		return
	}
	r.killed = why
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	time.AfterFunc(stopGrace, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.live[r.w.Name][r] != nil {
			_ = cmd.Process.Kill()
		}
	})
}

// lag is the lag KEDA's kafka scaler computes for the scenario's topic.
func (p *platform) lag(ctx context.Context, tr Trigger) (int64, error) {
	ends, err := p.adm.ListEndOffsets(ctx, p.topic)
	if err != nil {
		return 0, err
	}
	committed, err := p.adm.FetchOffsets(ctx, tr.Group)
	if err != nil {
		return 0, err
	}
	var lag int64
	ends.Each(func(o kadm.ListedOffset) {
		c, ok := committed.Lookup(o.Topic, o.Partition)
		switch {
		case ok && c.At >= 0:
			lag += o.Offset - c.At
		case tr.OffsetResetEarliest:
			lag += o.Offset
		default:
			lag++
		}
	})
	return lag, nil
}

// schedule runs w's trigger until ctx ends.
func (p *platform) schedule(ctx context.Context, w *Workload, group string) {
	tick := time.NewTicker(scaled(w.Trigger.Interval))
	defer tick.Stop()
	for {
		switch w.Trigger.Kind {
		case TriggerCron:
			p.start(w)
		case TriggerLag:
			tr := w.Trigger
			tr.Group = group
			at := time.Now()
			if l, err := p.lag(ctx, tr); err == nil && l > tr.Activation {
				p.startOnLag(w, at, l)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (p *platform) anyLive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.pending {
		if n > 0 {
			return true
		}
	}
	for _, l := range p.live {
		if len(l) > 0 {
			return true
		}
	}
	return false
}

// edit changes a setting of every workload, as editing the ConfigMap or the template does; a
// workload whose platform does not roll out gracefully has its running runs stopped.
func (p *platform) edit(key, value string) {
	p.mu.Lock()
	var stop []*run
	for name, env := range p.env {
		env[key] = value
		for r := range p.live[name] {
			if !r.w.GracefulRollout {
				stop = append(stop, r)
			}
		}
	}
	p.mu.Unlock()
	for _, r := range stop {
		p.stop(r, "rollout")
	}
}

func produce(t *testing.T, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	recs := make([]*kgo.Record, 0, n)
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 4), Key: []byte(fmt.Sprintf("%08d", i)), Value: []byte(strings.Repeat("v", 100))})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatalf("producing to %s: %v", topic, err)
	}
}

// scenario: a backlog, steady produce, a settings change, catch-up, then an idle window.
func scenario(t *testing.T, shape string, workloads []Workload) {
	scenarioWith(t, shape, workloads, scenarioOptions{})
}

// scenarioOptions vary the scenario.
type scenarioOptions struct {
	// outage: the target is a broker of its own, stopped from the 8th to the 24th of the 40
	// produce batches (3.2 platform minutes, plus the broker's restart) while the triggers keep
	// ticking, then started again with its data. The idle window is left out (the other cases
	// count the wake-ups).
	outage bool
}

func scenarioWith(t *testing.T, shape string, workloads []Workload, opts scenarioOptions) {
	if testing.Short() {
		t.Skip("-short: the replay builds the functions and needs the brokers")
	}
	c := testkit.Require(t)
	var downAt, upAt time.Time
	var targetCtl func(verb string)
	if opts.outage {
		eb := testkit.StartExtraBroker(t, c, "replay-tgt-", 3, func(int) []string { return nil })
		c.Target.Bootstrap = eb.Plain
		targetCtl = func(verb string) {
			cmd := exec.Command(eb.Script(), verb, eb.Name)
			cmd.Env = append(os.Environ(), "MM2GO_KAFKA_HOME="+eb.Home)
			if c.KafkaLib != "" {
				cmd.Env = append(cmd.Env, "MM2GO_KAFKA_LIB="+c.KafkaLib)
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("kafka.sh %s %s: %v\n%s", verb, eb.Name, err, out)
			}
		}
	}
	bin := functionBinaries(t)
	sfx := suffix(t)
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "orders"), 4, nil)
	srcCl := testkit.Client(t, c.Source.Bootstrap, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	p := &platform{t: t, bin: bin, clusters: c, topic: topic, adm: kadm.NewClient(srcCl),
		env: map[string]map[string]string{}, live: map[string]map[*run]*exec.Cmd{}, pending: map[string]int{}}
	var mirrors []*Workload
	var others []*Workload
	for i := range workloads {
		w := &workloads[i]
		p.env[w.Name] = localize(t, w.Env, c, topic, sfx)
		if w.Function == "mirror" {
			mirrors = append(mirrors, w)
		} else {
			others = append(others, w)
		}
	}
	if len(mirrors) == 0 {
		t.Fatalf("%s: no mirror workload derived", shape)
	}
	remote := p.env[mirrors[0].Name]["MM2_SOURCE_ALIAS"] + "." + topic

	const backlog, steadyBatches, perBatch = 20000, 40, 100
	produce(t, srcCl, topic, 0, backlog)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t0 := time.Now()
	var sched sync.WaitGroup
	for _, w := range mirrors {
		sched.Add(1)
		go func() { defer sched.Done(); p.schedule(ctx, w, p.env[w.Name]["MM2_LAG_GROUP"]) }()
	}
	// Steady produce for 8 platform minutes, with the settings changed half way.
	produced := backlog
	for i := 0; i < steadyBatches; i++ {
		produce(t, srcCl, topic, produced, perBatch)
		produced += perBatch
		switch {
		case opts.outage && i == 8:
			downAt = time.Now() // the broker's shutdown takes a while, and it answers nothing meanwhile
			targetCtl("pause")
		case opts.outage && i == 24:
			targetCtl("resume") // returns once the broker is started again
			upAt = time.Now()
		}
		if i == steadyBatches/2 {
			// The edit lands while a mirror run is going, as a real edit can.
			for until := time.Now().Add(5 * time.Second); !p.anyLive() && time.Now().Before(until); {
				time.Sleep(5 * time.Millisecond)
			}
			p.edit("MM2_BURST_MAX_RECORDS", "50000")
		}
		time.Sleep(scaled(12 * time.Second))
	}
	// Catch-up: the target holds every record (the triggers keep running).
	tgtAdm := testkit.Admin(t, c.Target.Bootstrap)
	// caughtUp says what is still missing, or "" once the target holds every record.
	caughtUp := func() string {
		ends, err := tgtAdm.ListEndOffsets(context.Background(), remote)
		if err != nil {
			return fmt.Sprintf("listing the end offsets of %s: %v", remote, err)
		}
		var n int64
		ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
		if n < int64(produced) {
			return fmt.Sprintf("%s holds %d records of %d produced", remote, n, produced)
		}
		// After an outage the target holds duplicates (a run stopped before it could store its
		// positions), so the count can reach the produced one early: count the records.
		if opts.outage {
			recs, err := testkit.ReadAllErr(testkit.Context(t, time.Minute), c.Target.Bootstrap, remote)
			if err != nil {
				return fmt.Sprintf("reading %s: %v", remote, err)
			}
			seen := map[string]bool{}
			for _, r := range recs {
				seen[string(r.Key)] = true
			}
			if len(seen) < produced {
				return fmt.Sprintf("%s holds %d distinct keys of %d produced (%d records)", remote, len(seen), produced, len(recs))
			}
		}
		// And every lag trigger reads 0 (the last run committed), so that the idle window
		// starts idle.
		for _, w := range mirrors {
			if w.Trigger.Kind != TriggerLag {
				continue
			}
			tr := w.Trigger
			tr.Group = p.env[w.Name]["MM2_LAG_GROUP"]
			if l, err := p.lag(context.Background(), tr); err != nil || l > 0 {
				return fmt.Sprintf("%s's lag trigger reads %d (err %v)", w.Name, l, err)
			}
		}
		return ""
	}
	// A bound on "eventually", not a figure: alone a scenario catches up in 10-20 s, but on a
	// loaded 2-core CI machine with four replay cases at once (two of them restarting a broker)
	// an outage case needed more than 90 s.
	for until := time.Now().Add(catchUpBound); ; time.Sleep(100 * time.Millisecond) {
		missing := caughtUp()
		if missing == "" {
			break
		}
		if time.Now().After(until) {
			p.mu.Lock()
			// The first runs and the last ones (after an outage, the runs that should catch up).
			for i, r := range p.runs {
				if i >= 3 && i < len(p.runs)-4 {
					continue
				}
				t.Logf("%s run at +%v: exit %d, stopped %q; errors: %s", r.w.Name, r.start.Sub(t0).Round(time.Millisecond), r.exit, r.killed, tail(errorLines(r.stderr), 3000))
				if i >= len(p.runs)-4 {
					t.Logf("its last log lines: %s", tail(r.stderr, 3000))
				}
			}
			p.mu.Unlock()
			if g := p.env[mirrors[0].Name]["MM2_BURST_GROUP"]; g != "" {
				if dg, err := p.adm.DescribeGroups(context.Background(), g); err == nil {
					for _, d := range dg {
						t.Logf("burst group %s: state %q, %d members", d.Group, d.State, len(d.Members))
					}
				}
			}
			t.Fatalf("%s: not caught up after %v: %s", shape, catchUpBound, missing)
		}
	}
	caught := time.Since(t0)
	// Idle: 6 platform minutes without new records; count the wake-ups: the executions whose
	// trigger decided after this point. An execution a lag trigger decided on before it (it read
	// the lag before the last run committed) that the platform started after it, or a failed
	// pod of an earlier execution retried after its back-off, is no wake-up while idle (CI at
	// 80ce6c8 beside two busy loops counted one such run as one).
	idleAt := time.Now()
	if !opts.outage {
		time.Sleep(scaled(idleWindow))
	}
	cancel()
	sched.Wait()
	p.mu.Lock()
	p.stopped = true
	idle := map[string]int{}
	var idleLag []string
	for _, r := range p.runs {
		if !r.trigger.After(idleAt) {
			continue
		}
		idle[r.w.Name]++
		if r.w.Trigger.Kind == TriggerLag {
			idleLag = append(idleLag, fmt.Sprintf("%s execution %d pod %d: lag %d read %v after the idle window began, started %v after it",
				r.w.Name, r.job, r.attempt, r.lag, r.trigger.Sub(idleAt).Round(time.Millisecond), r.start.Sub(idleAt).Round(time.Millisecond)))
		}
	}
	p.mu.Unlock()
	p.wg.Wait()

	// The other functions, once each as their trigger starts them: they must do their round.
	for _, w := range others {
		p.stopped = false
		p.start(w)
		p.stopped = true
		p.wg.Wait()
	}

	// Every run ended by itself with 0, or was stopped by the platform; while the target is
	// down (and until it is started again) a run may end with 3, "run again later", which the
	// platform reads as a failed pod.
	outageExits := map[int]int{}
	for _, r := range p.runs {
		if r.killed == "rollout" {
			t.Errorf("%s: editing the settings stopped a running %s (rollout not gradual)", shape, r.w.Name)
		}
		if r.exit != 0 && r.killed == "" {
			if opts.outage && r.start.Before(upAt) && r.end.After(downAt) {
				outageExits[r.exit]++
				if r.exit == 3 {
					continue
				}
			}
			t.Errorf("%s: %s exited %d: %s", shape, r.w.Name, r.exit, errorLines(r.stderr))
		}
	}
	// At most one copier per source partition at any moment, no record lost: every key once.
	eos := p.env[mirrors[0].Name]["MM2_EXACTLY_ONCE"] == "true"
	var readOpts []kgo.Opt
	if eos {
		readOpts = append(readOpts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	got := testkit.ReadAll(t, c.Target.Bootstrap, remote, readOpts...)
	seen := map[string]int{}
	for _, r := range got {
		seen[string(r.Key)]++
	}
	dups, missing := len(got)-len(seen), 0
	for i := 0; i < produced; i++ {
		if seen[fmt.Sprintf("%08d", i)] == 0 {
			missing++
		}
	}
	// A run that did not end with 0 may leave records it wrote without storing their positions:
	// at most the records it copied and those it sent without an acknowledgement (its summary's
	// records and unconfirmed), the at-least-once bound. A run with no summary (killed) leaves
	// the bound open.
	killed, overlaps, bound, bounded := 0, 0, int64(0), true
	for i, a := range p.runs {
		if a.killed != "" || a.exit != 0 {
			killed++
			if n, ok := summaryRecords(a); ok {
				bound += n
			} else if a.w.Function == "mirror" {
				bounded = false
			}
		}
		for _, b := range p.runs[i+1:] {
			if a.w.Function == "mirror" && b.w.Function == "mirror" && b.start.Before(a.end) && a.start.Before(b.end) {
				overlaps++
			}
		}
	}
	if missing > 0 {
		t.Errorf("%s: %d of %d records never reached the target", shape, missing, produced)
	}
	if eos && dups > 0 {
		t.Errorf("%s: exactly-once: %d records copied twice (committed) with %d runs stopped", shape, dups, killed)
	}
	if dups > 0 && killed == 0 {
		t.Errorf("%s: %d records copied twice with no run stopped: two runs copied one partition at once (%d overlapping mirror runs)", shape, dups, overlaps)
	}
	if bounded && int64(dups) > bound {
		logRuns(t, p.runs, t0, seen)
		t.Errorf("%s: %d records copied twice, more than the %d the stopped or failed runs copied: two runs copied one partition at once (%d overlapping mirror runs)", shape, dups, bound, overlaps)
	}
	if opts.outage {
		// What the platform shows for the executions that met the outage.
		type verdict struct {
			w     *Workload
			exits []int
		}
		jobs := map[int]*verdict{}
		var order []int
		met := map[int]bool{}
		for _, r := range p.runs {
			if r.w.Function == "mirror" && r.start.Before(upAt) && r.end.After(downAt) {
				met[r.job] = true
			}
		}
		for _, r := range p.runs {
			if !met[r.job] {
				continue
			}
			v := jobs[r.job]
			if v == nil {
				v = &verdict{w: r.w}
				jobs[r.job] = v
				order = append(order, r.job)
			}
			code := r.exit
			if r.killed != "" {
				code = -1
			}
			v.exits = append(v.exits, code)
		}
		failed, succeeded := 0, 0
		var desc []string
		for _, j := range order {
			v := jobs[j]
			last := v.exits[len(v.exits)-1]
			switch {
			case last == 0:
				succeeded++
			case last == -1: // stopped at its deadline: the execution failed, no retry
				failed++
			default:
				// A failed pod is started again until the retry limit is used up; then the
				// execution failed (Job Failed, BackoffLimitExceeded; execution Failed).
				failed++
				if len(v.exits) != v.w.RetryLimit+1 {
					t.Errorf("%s: a failed %s execution had %d pods %v, want %d (retry limit %d)", shape, v.w.Name, len(v.exits), v.exits, v.w.RetryLimit+1, v.w.RetryLimit)
				}
			}
			desc = append(desc, fmt.Sprintf("%v", v.exits))
		}
		if failed == 0 {
			t.Errorf("%s: no mirror execution failed while the target was down: the outage was not seen (%d executions met it: %s)", shape, len(order), strings.Join(desc, " "))
		}
		t.Logf("%s: target down %v (%.0f platform minutes) until started again; %d mirror executions met the outage, %d failed, %d succeeded; pod exits per execution (-1: stopped at its deadline) %s; exits of failed pods %v; duplicates %d (bound %d, open: %v)",
			shape, upAt.Sub(downAt).Round(time.Millisecond), upAt.Sub(downAt).Minutes()*compress, len(order), failed, succeeded, strings.Join(desc, " "), outageExits, dups, bound, !bounded)
	}
	var lines []string
	byName := map[string]int{}
	for _, r := range p.runs {
		byName[r.w.Name]++
	}
	for _, w := range workloads {
		perHour := "-"
		if w.Trigger.Kind == TriggerCron {
			perHour = fmt.Sprint(int(time.Hour / w.Trigger.Interval))
		}
		lines = append(lines, fmt.Sprintf("%s: %d runs, %d while idle (%v), schedule wake-ups per hour %s", w.Name, byName[w.Name], idle[w.Name], idleWindow, perHour))
		if w.Trigger.Kind == TriggerLag && idle[w.Name] > 0 {
			t.Errorf("%s: %s started %d times with no new record (the lag should be 0): %s", shape, w.Name, idle[w.Name], strings.Join(idleLag, "; "))
		}
	}
	sort.Strings(lines)
	// Trigger to first record, for the first run of each mirror workload (a cold start as the
	// platform does it: process start, settings, connections, the burst's first record).
	for _, w := range mirrors {
		for _, r := range p.runs {
			if r.w == w {
				if d, ok := firstRecord(r); ok {
					lines = append(lines, fmt.Sprintf("%s: trigger to first record on the target %v", w.Name, d.Round(time.Millisecond)))
				}
				break
			}
		}
	}
	t.Logf("%s: %d records (%d backlog), caught up after %v (%.0f platform minutes), %d duplicates, %d runs stopped or failed, %d overlapping mirror runs\n  %s",
		shape, produced, backlog, caught.Round(time.Millisecond), caught.Minutes()*compress, dups, killed, overlaps, strings.Join(lines, "\n  "))
}

// firstRecord is the time from a run's start to its burst's first acknowledged record, from the
// burst summary's log line (its time, duration and first_record_ms).
func firstRecord(r *run) (time.Duration, bool) {
	for _, l := range strings.Split(r.stderr, "\n") {
		if !strings.Contains(l, `"msg":"burst summary"`) {
			continue
		}
		var sum struct {
			Time          time.Time `json:"time"`
			Duration      string    `json:"duration"`
			FirstRecordMS int64     `json:"first_record_ms"`
		}
		if json.Unmarshal([]byte(l), &sum) != nil || sum.FirstRecordMS < 0 {
			return 0, false
		}
		d, err := time.ParseDuration(sum.Duration)
		if err != nil {
			return 0, false
		}
		burstStart := sum.Time.Add(-d)
		return burstStart.Add(time.Duration(sum.FirstRecordMS) * time.Millisecond).Sub(r.start), true
	}
	return 0, false
}

// summaryRecords is what a run's summary (the JSON line on stdout) says it may have left on the
// target: the records it copied plus those it sent without an acknowledgement (unconfirmed).
func summaryRecords(r *run) (int64, bool) {
	for _, l := range strings.Split(r.stderr, "\n") {
		var sum struct {
			Msg         *string `json:"msg"`
			Reason      *string `json:"reason"`
			Records     *int64  `json:"records"`
			Unconfirmed int64   `json:"unconfirmed"`
		}
		if json.Unmarshal([]byte(l), &sum) == nil && sum.Msg == nil && sum.Reason != nil && sum.Records != nil {
			return *sum.Records + sum.Unconfirmed, true
		}
	}
	return 0, false
}

// logRuns logs each mirror run (when, how it ended, its summary) and the records the target
// holds more than once, per partition: what a failed at-least-once bound needs to be read.
func logRuns(t *testing.T, runs []*run, t0 time.Time, seen map[string]int) {
	t.Helper()
	for i, r := range runs {
		if r.w.Function != "mirror" {
			continue
		}
		sum := ""
		for _, l := range strings.Split(r.stderr, "\n") {
			if strings.HasPrefix(l, "{") && !strings.Contains(l, `"msg"`) && strings.Contains(l, `"reason"`) {
				sum = tail(l, 400)
			}
		}
		msgs := map[string]int{}
		for _, l := range strings.Split(r.stderr, "\n") {
			var m struct{ Msg string }
			if json.Unmarshal([]byte(l), &m) == nil && m.Msg != "" {
				msgs[m.Msg]++
			}
		}
		t.Logf("run %d (%s, execution %d, attempt %d) +%v..+%v exit %d stopped %q: %s; its log messages %v", i, r.w.Name, r.job, r.attempt,
			r.start.Sub(t0).Round(time.Millisecond), r.end.Sub(t0).Round(time.Millisecond), r.exit, r.killed, sum, msgs)
	}
	// The keys are the produced sequence numbers, partition = number % 4.
	type span struct{ lo, hi, n int }
	spans := map[int]*span{}
	for k, n := range seen {
		if n < 2 {
			continue
		}
		i, err := strconv.Atoi(k)
		if err != nil {
			continue
		}
		sp := spans[i%4]
		if sp == nil {
			sp = &span{lo: i, hi: i}
			spans[i%4] = sp
		}
		sp.lo, sp.hi, sp.n = min(sp.lo, i), max(sp.hi, i), sp.n+1
	}
	for part, sp := range spans {
		t.Logf("partition %d: %d records held more than once, sequence numbers %d..%d", part, sp.n, sp.lo, sp.hi)
	}
}

// errorLines are the WARN and ERROR lines of a run's log.
func errorLines(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, `"level":"ERROR"`) || strings.Contains(l, `"level":"WARN"`) || strings.Contains(l, `"error":`) {
			out = append(out, tail(l, 600))
		}
	}
	return strings.Join(out, "\n")
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// kustomizeWorkloads renders a kustomization under deploy/ as `kubectl apply -k` does and
// derives its workloads, with the example Secret.
func kustomizeWorkloads(t *testing.T, dir string) []Workload {
	t.Helper()
	objs, err := KustomizeBuild(RepoFile("deploy", dir))
	if err != nil {
		t.Fatal(err)
	}
	ws, err := KubernetesWorkloads(dir, objs, RepoFile("deploy", "kubernetes", "secret.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// acaWorkloads evaluates the ARM template with its parameters file, deployEventJob=true (the
// scheduled and the lag-driven mirror job side by side) and the given extra parameters.
func acaWorkloads(t *testing.T, extra map[string]any) []Workload {
	t.Helper()
	params := map[string]any{"deployEventJob": true}
	for k, v := range extra {
		params[k] = v
	}
	ws, err := ACAWorkloads(RepoFile("deploy", "azure", "azuredeploy.json"), RepoFile("deploy", "azure", "azuredeploy.parameters.json"), params)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// TestReplayKubernetesCronJobs: deploy/kubernetes as `kubectl apply -k` renders it.
func TestReplayKubernetesCronJobs(t *testing.T) {
	t.Parallel()
	scenario(t, "kubernetes", kustomizeWorkloads(t, "kubernetes"))
}

// TestReplayKEDA: deploy/keda (the lag-driven ScaledJob beside the CronJobs).
func TestReplayKEDA(t *testing.T) {
	t.Parallel()
	scenario(t, "keda", kustomizeWorkloads(t, "keda"))
}

// TestReplayKubernetesCronJobsTargetOutage: deploy/kubernetes with the target stopped for
// about 5 platform minutes mid-scenario: the executions that meet it fail (pods exit 3, retried
// up to backoffLimit), the next ones catch up.
func TestReplayKubernetesCronJobsTargetOutage(t *testing.T) {
	t.Parallel()
	scenarioWith(t, "kubernetes target outage", kustomizeWorkloads(t, "kubernetes"), scenarioOptions{outage: true})
}

// TestReplayContainerAppsTargetOutage: the ARM template with deployEventJob=true and the target
// stopped mid-scenario: both mirror jobs keep being started, their executions fail (no retry,
// replicaRetryLimit 0) until it is back.
func TestReplayContainerAppsTargetOutage(t *testing.T) {
	t.Parallel()
	scenarioWith(t, "aca target outage", acaWorkloads(t, nil), scenarioOptions{outage: true})
}

// TestReplayContainerApps: the ARM template with its parameters file and deployEventJob=true
// (the scheduled and the lag-driven mirror job side by side).
func TestReplayContainerApps(t *testing.T) {
	t.Parallel()
	scenario(t, "aca", acaWorkloads(t, nil))
}

// TestReplayContainerAppsExactlyOnce: the same with exactlyOnce=true: the two mirror jobs' runs
// overlap in one burst group and the target must hold every record exactly once (read_committed).
func TestReplayContainerAppsExactlyOnce(t *testing.T) {
	t.Parallel()
	scenario(t, "aca exactly-once", acaWorkloads(t, map[string]any{"exactlyOnce": "true"}))
}
