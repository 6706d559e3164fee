//go:build soak

// Package soak is mm2go's bounded soak (`make soak`, not part of `make test`): minutes of steady
// produce while the functions are SIGKILLed every minute and the target broker restarts once,
// for `mirror run` started on a schedule and for `mirror serve` fed by the genuine Knative
// KafkaSource dispatcher. It asserts that nothing is lost, counts the duplicates, and compares
// the functions' resident memory in the first and the last minute.
//
// Settings: MM2GO_SOAK_DURATION (default 10m), MM2GO_SOAK_RATE (records/s per flow, default
// 200: an ordered KafkaSource sends one request per record, and on a small shared machine the
// dispatcher delivers a few hundred a second), MM2GO_KNATIVE_DISPATCHER (the directory of run-dispatcher.sh; default
// ../shared/knative-dispatcher from the repository root).
package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/kafkasource"
)

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

func freePortBlock(t *testing.T) int {
	// Below Linux's ephemeral range (32768-60999), where outgoing connections take ports.
	for try := 0; try < 200; try++ {
		p := 20000 + rand.IntN(12000)
		ok := true
		for i := 0; ok && i <= 2; i++ {
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

// broker is a cluster of the soak's own, started with test/kafka/kafka.sh.
type broker struct {
	name, bootstrap string
	script          string
}

func startBroker(t *testing.T, name string) *broker {
	b := &broker{name: name, script: testkit.KafkaScript(t)}
	port := freePortBlock(t)
	if out, err := exec.Command(b.script, "start", name, strconv.Itoa(port)).CombinedOutput(); err != nil {
		t.Fatalf("kafka.sh start %s: %v\n%s", name, err, out)
	}
	b.bootstrap = fmt.Sprintf("127.0.0.1:%d", port)
	t.Cleanup(func() { _ = exec.Command(b.script, "stop", name).Run() })
	return b
}

func (b *broker) do(t *testing.T, verb string) {
	if out, err := exec.Command(b.script, verb, b.name).CombinedOutput(); err != nil {
		t.Errorf("kafka.sh %s %s: %v\n%s", verb, b.name, err, out)
	}
}

func build(t *testing.T) string {
	bin := filepath.Join(t.TempDir(), "mirror")
	cmd := exec.Command("go", "build", "-o", bin, "./functions/mirror")
	cmd.Dir = testkit.RepoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building functions/mirror: %v\n%s", err, out)
	}
	return bin
}

func mirrorEnv(src, tgt, topic string, extra ...string) []string {
	return append([]string{
		"PATH=" + os.Getenv("PATH"),
		"MM2_SOURCE_BOOTSTRAP_SERVERS=" + src,
		"MM2_TARGET_BOOTSTRAP_SERVERS=" + tgt,
		"MM2_TOPICS=" + topic,
		"MM2_HEARTBEATS_REPLICATION_ENABLED=false",
		"MM2_REPLICATION_FACTOR=1",
		"MM2_OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR=1",
		"MM2_OFFSET_STORAGE_REPLICATION_FACTOR=1",
		"MM2_LOG_FORMAT=json",
	}, extra...)
}

// rssSample is a resident memory figure (KiB) taken at an offset from the soak's start.
type rssSample struct {
	at  time.Duration
	kib int64
}

type rssLog struct {
	mu      sync.Mutex
	samples []rssSample
}

func (l *rssLog) add(at time.Duration, kib int64) {
	if kib <= 0 {
		return
	}
	l.mu.Lock()
	l.samples = append(l.samples, rssSample{at, kib})
	l.mu.Unlock()
}

// window returns the largest sample in [from, to).
func (l *rssLog) window(from, to time.Duration) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var m int64
	for _, s := range l.samples {
		if s.at >= from && s.at < to && s.kib > m {
			m = s.kib
		}
	}
	return m
}

func procRSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// proc is the function process currently running in one flow, for the killer.
type proc struct {
	mu  sync.Mutex
	cmd *exec.Cmd
}

func (p *proc) set(c *exec.Cmd) { p.mu.Lock(); p.cmd = c; p.mu.Unlock() }

// kill SIGKILLs the running process, waiting up to d for one; it reports whether it killed.
func (p *proc) kill(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		p.mu.Lock()
		c := p.cmd
		p.mu.Unlock()
		if c != nil && c.Process != nil && syscall.Kill(c.Process.Pid, syscall.SIGKILL) == nil {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

func TestSoak(t *testing.T) {
	dur := envDuration(t, "MM2GO_SOAK_DURATION", 10*time.Minute)
	rate := 200
	if v := os.Getenv("MM2GO_SOAK_RATE"); v != "" {
		rate, _ = strconv.Atoi(v)
	}
	script := dispatcherScript(t)
	suffix := strconv.FormatInt(time.Now().Unix()%100000, 36)
	var src, tgt *broker
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); src = startBroker(t, "soak-src-"+suffix) }()
	go func() { defer wg.Done(); tgt = startBroker(t, "soak-tgt-"+suffix) }()
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	bin := build(t)
	runTopic := testkit.CreateTopic(t, src.bootstrap, "soak-run", 4, nil)
	serveTopic := testkit.CreateTopic(t, src.bootstrap, "soak-serve", 4, nil)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	since := func() time.Duration { return time.Since(start) }
	var errMu sync.Mutex
	var bgErrs []string
	bgErr := func(format string, a ...any) {
		errMu.Lock()
		bgErrs = append(bgErrs, fmt.Sprintf("%s: ", since().Round(time.Second))+fmt.Sprintf(format, a...))
		errMu.Unlock()
	}

	// Steady produce: rate records/s to each topic, every key unique.
	var produced [2]atomic.Int64
	prodCtx, stopProduce := context.WithCancel(ctx)
	prodDone := make(chan struct{})
	go func() {
		defer close(prodDone)
		cl, err := kgo.NewClient(kgo.SeedBrokers(src.bootstrap), kgo.ProducerLinger(5*time.Millisecond))
		if err != nil {
			bgErr("producer: %v", err)
			return
		}
		defer cl.Close()
		value := make([]byte, 200)
		for i := range value {
			value[i] = byte('a' + rand.IntN(26))
		}
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		per := max(rate/100, 1)
		for {
			select {
			case <-prodCtx.Done():
				if err := cl.Flush(context.Background()); err != nil {
					bgErr("producer flush: %v", err)
				}
				return
			case <-tick.C:
			}
			for i, topic := range []string{runTopic, serveTopic} {
				for j := 0; j < per; j++ {
					k := produced[i].Add(1)
					cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(strconv.FormatInt(k, 10)), Value: value}, func(_ *kgo.Record, err error) {
						if err != nil {
							bgErr("produce to %s: %v", topic, err)
						}
					})
				}
			}
		}
	}()

	var runRSS, serveRSS rssLog
	var runProc, serveProc proc
	var runExits [5]atomic.Int64 // exit codes 0..3 and other (killed)
	var runsStarted atomic.Int64

	// `mirror run` on a schedule: a new run 2 s after the previous one ended, each bounded by a
	// 30 s budget, as a CronJob or a scheduler would start them.
	runEnv := mirrorEnv(src.bootstrap, tgt.bootstrap, runTopic, "MM2_BURST_MAX_DURATION=30s")
	schedDone := make(chan struct{})
	runOnce := func() int {
		cmd := exec.Command(bin, "run")
		cmd.Env = runEnv
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			bgErr("starting mirror run: %v", err)
			return -1
		}
		runsStarted.Add(1)
		runProc.set(cmd)
		err := cmd.Wait()
		runProc.set(nil)
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			runRSS.add(since(), ru.Maxrss)
		}
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		if code == 1 {
			errLine := ""
			for _, l := range strings.Split(stderr.String(), "\n") {
				if strings.Contains(l, `"level":"ERROR"`) {
					errLine = l
				}
			}
			t.Logf("%s: mirror run exit 1: %s", since().Round(time.Second), errLine)
		}
		return code
	}
	go func() {
		defer close(schedDone)
		for ctx.Err() == nil && prodCtx.Err() == nil {
			code := runOnce()
			switch {
			case code >= 0 && code <= 3:
				runExits[code].Add(1)
			default:
				runExits[4].Add(1)
			}
			select {
			case <-prodCtx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}()

	// `mirror serve`, restarted at once when it dies (as a Knative revision's pod would be),
	// fed by the genuine KafkaSource dispatcher.
	port := freePortBlock(t)
	serveEnv := mirrorEnv(src.bootstrap, tgt.bootstrap, serveTopic, "PORT="+strconv.Itoa(port))
	serveDone := make(chan struct{})
	var serveStarts atomic.Int64
	serveLog, err := os.Create(filepath.Join(t.TempDir(), "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(serveDone)
		for ctx.Err() == nil {
			cmd := exec.Command(bin, "serve")
			cmd.Env = serveEnv
			cmd.Stderr = serveLog
			if err := cmd.Start(); err != nil {
				bgErr("starting mirror serve: %v", err)
				return
			}
			serveStarts.Add(1)
			serveProc.set(cmd)
			_ = cmd.Wait()
			serveProc.set(nil)
			time.Sleep(500 * time.Millisecond)
		}
	}()
	t.Cleanup(func() {
		cancel()
		serveProc.kill(0)
		<-serveDone
	})
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
	ddir := t.TempDir()
	contract, err := exec.Command(script, "contract", "bootstrap="+src.bootstrap, "topics="+serveTopic,
		fmt.Sprintf("sink=http://127.0.0.1:%d/", port), "name=soak-"+suffix).Output()
	if err != nil {
		t.Fatalf("dispatcher contract: %v", err)
	}
	if err := os.WriteFile(filepath.Join(ddir, "contract.json"), contract, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(script, "start", ddir).CombinedOutput(); err != nil {
		t.Fatalf("starting the dispatcher: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(script, "stop", ddir).Run() })
	group := "soak-" + suffix + "-group"

	// Resident memory of the serving process every 5 s.
	go func() {
		for ctx.Err() == nil {
			if pid := serveProc.pid(); pid != 0 {
				serveRSS.add(since(), procRSS(pid))
			}
			if pid := runProc.pid(); pid != 0 {
				runRSS.add(since(), procRSS(pid))
			}
			time.Sleep(5 * time.Second)
		}
	}()

	// The faults: a SIGKILL of both functions every minute, one target restart half-way.
	kills := [2]int{}
	restarted := false
	for next := time.Minute; next < dur; next += time.Minute {
		time.Sleep(time.Until(start.Add(next)))
		if runProc.kill(20 * time.Second) {
			kills[0]++
		}
		if serveProc.kill(5 * time.Second) {
			kills[1]++
		}
		t.Logf("%s: killed; produced %d + %d, runs %d", since().Round(time.Second), produced[0].Load(), produced[1].Load(), runsStarted.Load())
		if !restarted && next+30*time.Second >= dur/2 {
			time.Sleep(30 * time.Second)
			began := time.Now()
			tgt.do(t, "pause")
			time.Sleep(3 * time.Second)
			tgt.do(t, "resume")
			restarted = true
			t.Logf("%s: target broker restarted in %s", since().Round(time.Second), time.Since(began).Round(100*time.Millisecond))
		}
	}
	time.Sleep(time.Until(start.Add(dur)))
	stopProduce()
	<-prodDone
	<-schedDone
	// Catch up: runs until one ends with everything copied.
	final := -1
	for i := 0; i < 10 && final != 0; i++ {
		final = runOnce()
	}
	if final != 0 {
		t.Errorf("no final `mirror run` ended with exit 0 (last %d)", final)
	}
	ends := map[int32]int64{}
	adm := testkit.Admin(t, src.bootstrap)
	lo, err := adm.ListEndOffsets(testkit.Context(t, 30*time.Second), serveTopic)
	if err != nil {
		t.Fatal(err)
	}
	lo.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	if err := kafkasource.WaitDelivered(testkit.Context(t, 10*time.Minute), src.bootstrap, group, serveTopic, ends); err != nil {
		t.Errorf("dispatcher did not deliver everything: %v", err)
	}
	cancel()
	serveProc.kill(0)
	<-serveDone

	errMu.Lock()
	for _, e := range bgErrs {
		t.Error(e)
	}
	errMu.Unlock()
	report := func(name, topic string, n int64, rss *rssLog, k int) {
		got := testkit.ReadAll(t, tgt.bootstrap, "source."+topic)
		seen := make(map[string]struct{}, len(got))
		for _, r := range got {
			seen[string(r.Key)] = struct{}{}
		}
		lost := int64(0)
		for i := int64(1); i <= n; i++ {
			if _, ok := seen[strconv.FormatInt(i, 10)]; !ok {
				lost++
			}
		}
		first, last := rss.window(0, time.Minute), rss.window(dur-time.Minute, dur+time.Hour)
		t.Logf("SOAK %s: %s, %d produced, %d on the target, %d lost, %d duplicates (%.2f%%), %d SIGKILLs, 1 target restart, max RSS first minute %d KiB, last minute %d KiB",
			name, dur, n, len(got), lost, len(got)-len(seen), 100*float64(len(got)-len(seen))/float64(max(n, 1)), k, first, last)
		if lost != 0 {
			t.Errorf("%s: %d records lost", name, lost)
		}
		if first > 0 && last > first*3/2+10*1024 {
			t.Errorf("%s: resident memory grew from %d KiB (first minute) to %d KiB (last minute)", name, first, last)
		}
	}
	report("mirror run (scheduled)", runTopic, produced[0].Load(), &runRSS, kills[0])
	report("mirror serve (KafkaSource dispatcher)", serveTopic, produced[1].Load(), &serveRSS, kills[1])
	t.Logf("mirror run: %d runs; exit codes 0:%d 1:%d 2:%d 3:%d other(killed):%d; mirror serve started %d times",
		runsStarted.Load(), runExits[0].Load(), runExits[1].Load(), runExits[2].Load(), runExits[3].Load(), runExits[4].Load(), serveStarts.Load())
	if t.Failed() {
		b, _ := os.ReadFile(serveLog.Name())
		t.Logf("mirror serve log (tail):\n%s", tail(string(b), 6000))
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func waitHTTP(t *testing.T, url string) {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s not ready", url)
}

// dispatcherScript finds run-dispatcher.sh: $MM2GO_KNATIVE_DISPATCHER, or shared/knative-dispatcher
// beside the repository root or any of its ancestors.
func dispatcherScript(t *testing.T) string {
	var cands []string
	if d := os.Getenv("MM2GO_KNATIVE_DISPATCHER"); d != "" {
		cands = append(cands, d)
	}
	for dir := filepath.Dir(testkit.RepoRoot(t)); ; dir = filepath.Dir(dir) {
		cands = append(cands, filepath.Join(dir, "shared", "knative-dispatcher"))
		if dir == filepath.Dir(dir) {
			break
		}
	}
	for _, d := range cands {
		p := filepath.Join(d, "run-dispatcher.sh")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("run-dispatcher.sh not found in %v (set MM2GO_KNATIVE_DISPATCHER)", cands)
	return ""
}
