package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit/dispatcher"
	"github.com/mm2go/mm2go/test/testkit/oidcissuer"
)

// The freshness workload: producers write records of freshRecordBytes over freshPartitions
// partitions at fixed rates, and a consumer on the target reads every record the contender
// copies: each record's latency is its arrival on the target minus its timestamp (CreateTime,
// set by the producer when it made the record). One source topic per contender; the contender
// runs through all its rates, one phase each, without a restart.
const (
	freshPartitions  = 8
	freshRecordBytes = 512
	// freshWorkload names the workload for -only.
	freshWorkload = "freshness"
)

// freshOptions shape the freshness workload.
type freshOptions struct {
	rates     []int         // records/s of the phases, in order
	phase     time.Duration // length of each phase
	slowRate  int           // the 60 s schedule's one rate
	slowPhase time.Duration // and its phase's length
	heartbeat time.Duration // a `heartbeat run` round every this long beside every contender
	rows      []string      // contender keys to run (empty: all)
}

// freshContender is one way of keeping the target fresh.
type freshContender struct {
	key, name, trigger string
	// slow contenders run the one slow phase instead of the rates.
	slow bool
	// interval of the ticks (scheduled runs, PingSource), 0 for an always-on contender.
	interval time.Duration
	start    func(ctx context.Context, h *harness, topic string) (*freshRun, error)
}

func freshContenders() []freshContender {
	return []freshContender{
		{key: "mm2", name: nameMM2, trigger: "always on", start: startMM2Fresh(false)},
		{key: "mm2-tuned", name: nameMM2Tuned, trigger: "always on", start: startMM2Fresh(true)},
		{key: "serve-fetch", name: "mirror serve, fetch mode", trigger: "KafkaSource (genuine dispatcher)", start: startServeFresh("fetch")},
		{key: "serve-payload", name: "mirror serve, payload mode + sender auth", trigger: "KafkaSource (genuine dispatcher)", start: startServeFresh("payload")},
		{key: "serve-ping", name: "mirror serve", trigger: "PingSource every 10 s", interval: 10 * time.Second, start: startPingFresh(10 * time.Second)},
		{key: "run-10s", name: "mirror run", trigger: "schedule every 10 s", interval: 10 * time.Second, start: startScheduleFresh(10 * time.Second)},
		{key: "run-60s", name: "mirror run", trigger: "schedule every 60 s", interval: 60 * time.Second, slow: true, start: startScheduleFresh(60 * time.Second)},
	}
}

// freshRow is one contender at one rate.
type freshRow struct {
	Contender string  `json:"contender"`
	Trigger   string  `json:"trigger"`
	Rate      int     `json:"records_per_s"`
	PhaseS    float64 `json:"phase_s"`
	Produced  int     `json:"produced"`
	latencySummary
	// ProduceAckP50 is the median time from a record's timestamp to the source producer's
	// acknowledgement (acks=all): the part of each latency before the record was on the source.
	ProduceAckP50 time.Duration `json:"produce_ack_p50_ns"`
	// StampSkew is the largest difference between a copied record's timestamp and the
	// producer's clock in its value (Kafka keeps milliseconds: under 1 ms means kept).
	StampSkew time.Duration `json:"stamp_skew_ns"`
	// CPUSeconds of the replicator's processes during the phase (the dispatcher's JVM included
	// for the KafkaSource rows: DispatcherCPUSeconds of it); per 1e9 bytes of record values.
	CPUSeconds           float64 `json:"cpu_s"`
	DispatcherCPUSeconds float64 `json:"dispatcher_cpu_s,omitempty"`
	CPUPerGB             float64 `json:"cpu_s_per_gb"`
	// DispatcherRequests are the requests the dispatcher sent to the function (counted by the
	// proxy in front of it, payload mode) from the phase's start to the next phase's (the last
	// phase: to the end of the drain), DispatcherRequestsPerS the same per second: the rate
	// the dispatcher delivered at, the most a mode of one record per request can copy.
	DispatcherRequests     int64   `json:"dispatcher_requests,omitempty"`
	DispatcherRequestsPerS float64 `json:"dispatcher_requests_per_s,omitempty"`
	// ColdStarts are the replicator processes started during the phase; Ticks the triggers
	// fired (scheduled runs, PingSource), SkippedTicks those that found the previous run
	// still going (a CronJob with concurrencyPolicy: Forbid skips them), FailedTicks runs that
	// exited non-zero or pings answered non-2xx. TickRunP50 is the median run's own time.
	ColdStarts   int           `json:"cold_starts"`
	Ticks        int           `json:"ticks,omitempty"`
	SkippedTicks int           `json:"skipped_ticks,omitempty"`
	FailedTicks  int           `json:"failed_ticks,omitempty"`
	TickRunP50   time.Duration `json:"tick_run_p50_ns,omitempty"`
	// HeartbeatMS are the replication_latency_ms figures of the `heartbeat run` rounds beside
	// the phase, HeartbeatMedianMS their median.
	HeartbeatMS       []int64 `json:"heartbeat_replication_latency_ms"`
	HeartbeatMedianMS int64   `json:"heartbeat_median_ms"`
	// LoadStart and LoadEnd are /proc/loadavg at the phase's start and end.
	LoadStart string `json:"load_start"`
	LoadEnd   string `json:"load_end"`
	Error     string `json:"error,omitempty"`
}

// freshReport is the freshness table of one run.
type freshReport struct {
	Machine     map[string]string `json:"machine"`
	Started     time.Time         `json:"started"`
	Finished    time.Time         `json:"finished"`
	UptimeStart string            `json:"uptime_start"`
	UptimeEnd   string            `json:"uptime_end"`
	Settings    map[string]string `json:"settings"`
	Rows        []freshRow        `json:"rows"`
}

// freshRun is a started contender: what the harness reads and how to stop it.
type freshRun struct {
	remote             string
	srcAlias, tgtAlias string
	// procs are its long-running processes (CPU read from /proc), dispatcher the genuine
	// dispatcher's pid file (0 if none).
	procs      []int
	dispatcher func() int
	// requests counts the requests the dispatcher sent so far (nil when they are not counted).
	requests func() int64
	// kick makes a scheduled or ticked contender copy once (the warm-up); nil for always-on.
	kick func(ctx context.Context) error
	// ticks fires kick-like triggers every interval until stopped.
	ticks *ticker
	stop  func()
}

// cpu is the CPU seconds its processes used so far, and of them the dispatcher's.
func (r *freshRun) cpu() (total, disp float64) {
	for _, pid := range r.procs {
		total += procCPU(pid)
	}
	if r.dispatcher != nil {
		if pid := r.dispatcher(); pid > 0 {
			disp = procCPU(pid)
			total += disp
		}
	}
	if r.ticks != nil {
		total += r.ticks.cpu()
	}
	return total, disp
}

// procCPU is a process's user + system CPU seconds from /proc (its reaped children included);
// 0 once it is gone. Linux reports clock ticks of 1/100 s to user space (USER_HZ).
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	// The command name (field 2) is in parentheses and may hold spaces: fields count after it.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime, stime, cutime, cstime are fields 14-17.
	if len(f) < 15 {
		return 0
	}
	var ticks int64
	for _, v := range f[11:15] {
		n, _ := strconv.ParseInt(v, 10, 64)
		ticks += n
	}
	return float64(ticks) / 100
}

// tickRun is one trigger fired: when, and for a process its CPU, time and exit.
type tickRun struct {
	at      time.Time
	started bool // a process was started (a cold start)
	skipped bool
	failed  bool
	cpu     float64
	took    time.Duration
}

// ticker fires fire every interval from its start, one at a time unless overlap (PingSource
// does not wait for the previous answer; a CronJob with concurrencyPolicy: Forbid skips a tick
// while the previous run goes on).
type ticker struct {
	interval time.Duration
	overlap  bool
	// fire runs one trigger; it returns whether it started a process, that process's CPU
	// seconds, and whether it failed. running, if set, reads the CPU of a process in progress.
	fire    func(ctx context.Context) (started bool, cpu float64, failed bool)
	running func() float64

	mu   sync.Mutex
	runs []tickRun
	busy bool
	wg   sync.WaitGroup
	stop context.CancelFunc
	done chan struct{}
}

func (t *ticker) start(ctx context.Context) {
	ctx, t.stop = context.WithCancel(ctx)
	t.done = make(chan struct{})
	go func() {
		defer close(t.done)
		next := time.Now().Add(t.interval)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(next)):
			}
			at := next
			next = next.Add(t.interval)
			t.mu.Lock()
			if t.busy && !t.overlap {
				t.runs = append(t.runs, tickRun{at: at, skipped: true})
				t.mu.Unlock()
				continue
			}
			t.busy = true
			t.mu.Unlock()
			t.wg.Add(1)
			go func() {
				defer t.wg.Done()
				began := time.Now()
				// A fired run finishes even when the ticker stops (as a Job would).
				started, cpu, failed := t.fire(context.WithoutCancel(ctx))
				t.mu.Lock()
				t.runs = append(t.runs, tickRun{at: at, started: started, failed: failed, cpu: cpu, took: time.Since(began)})
				t.busy = false
				t.mu.Unlock()
			}()
		}
	}()
}

// halt stops firing and waits for the triggers in progress.
func (t *ticker) halt() {
	if t.stop == nil {
		return
	}
	t.stop()
	<-t.done
	t.wg.Wait()
}

// cpu is the CPU seconds of the finished runs plus the one in progress.
func (t *ticker) cpu() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var s float64
	for _, r := range t.runs {
		s += r.cpu
	}
	if t.busy && t.running != nil {
		s += t.running()
	}
	return s
}

func (t *ticker) snapshot() []tickRun {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]tickRun(nil), t.runs...)
}

// freshWorkloadDef names the freshness contenders' logs and flows (mm2goCmd, mm2Cmd).
var freshWorkloadDef = workload{Name: freshWorkload, Topics: 1, Partitions: freshPartitions, Size: freshRecordBytes}

func startMM2Fresh(tuned bool) func(ctx context.Context, h *harness, topic string) (*freshRun, error) {
	return func(ctx context.Context, h *harness, topic string) (*freshRun, error) {
		alias := "fmm2"
		if tuned {
			alias = "fmm2t"
		}
		alias += "-" + strings.TrimSuffix(topic, "-0")
		cmd, logFile, remote, err := h.mm2Cmd(ctx, freshWorkloadDef, []string{topic}, alias, "fresh-"+alias, tuned)
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			logFile.Close()
			return nil, err
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		return &freshRun{remote: remote[0], srcAlias: alias, tgtAlias: "target", procs: []int{cmd.Process.Pid},
			stop: func() { stopProcess(cmd, exited); logFile.Close() }}, nil
	}
}

// stopProcess sends SIGTERM and waits up to a minute, then kills.
func stopProcess(cmd *exec.Cmd, exited <-chan struct{}) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// startServeProc starts `mirror serve` for topic under the aliases fsrc/ftgt and the given
// settings and waits until it is ready.
func (h *harness) startServeProc(ctx context.Context, topic, logName string, env ...string) (url string, run *freshRun, err error) {
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	cmd, logFile, remote, err := h.mm2goCmd(ctx, freshWorkloadDef, []string{topic}, "fsrc", "ftgt", logName, []string{"serve"},
		append([]string{fmt.Sprintf("PORT=%d", port)}, env...)...)
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return "", nil, err
	}
	exited := make(chan error, 1)
	done := make(chan struct{})
	go func() { exited <- cmd.Wait(); close(done) }()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	run = &freshRun{remote: remote[0], procs: []int{cmd.Process.Pid},
		stop: func() { stopProcess(cmd, done); logFile.Close() }}
	run.srcAlias, _, _ = strings.Cut(remote[0], "."+topic)
	run.tgtAlias = "ftgt" + strings.TrimPrefix(run.srcAlias, "fsrc")
	if err := waitReady(ctx, base+"/readyz", exited); err != nil {
		run.stop()
		return "", nil, fmt.Errorf("mirror serve (%s): %w", logName, err)
	}
	return base, run, nil
}

// startServeFresh: `mirror serve` in fetch or payload mode under the genuine KafkaSource
// dispatcher (ordered, byte-array keys, the shipped delivery settings), whose topics are the
// workload's and the source's heartbeats topic (so that the heartbeat job beside it measures
// this path). Payload mode needs sender authentication: a real OIDC issuer
// (mock-oauth2-server) runs beside, and a proxy in front of the function adds the
// KafkaSource's token, which the dispatcher would get from the Kubernetes API.
func startServeFresh(mode string) func(ctx context.Context, h *harness, topic string) (*freshRun, error) {
	return func(ctx context.Context, h *harness, topic string) (*freshRun, error) {
		script, err := dispatcher.Available(h.root)
		if err != nil {
			return nil, err
		}
		var stops []func()
		stopAll := func() {
			for i := len(stops) - 1; i >= 0; i-- {
				stops[i]()
			}
		}
		env := []string{"MM2_EVENT_MODE=" + mode}
		var token string
		if mode == "payload" {
			iss, ca, tok, stopIss, err := h.startIssuer(ctx, filepath.Join(h.home, "fresh-oidc.log"), freshSubject, "mm2go")
			if err != nil {
				return nil, err
			}
			stops = append(stops, stopIss)
			token = tok
			env = append(env, "MM2_EVENT_KEY_TYPE=byte-array", "MM2_SERVE_OIDC_ISSUER="+iss, "MM2_SERVE_OIDC_CA_FILE="+ca,
				"MM2_SERVE_OIDC_AUDIENCE=mm2go", "MM2_SERVE_OIDC_ALLOWED_SUBJECTS="+freshSubject)
		}
		base, run, err := h.startServeProc(ctx, topic, "fresh-serve-"+mode, env...)
		if err != nil {
			stopAll()
			return nil, err
		}
		stops = append(stops, run.stop)
		sink := base + "/"
		if token != "" {
			proxyURL, sent, stopProxy, err := bearerProxy(base, token)
			if err != nil {
				stopAll()
				return nil, err
			}
			stops = append(stops, stopProxy)
			sink = proxyURL
			run.requests = sent.Load
		}
		dir := filepath.Join(h.home, "fresh-dispatcher-"+mode)
		_ = os.RemoveAll(dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			stopAll()
			return nil, err
		}
		name := "fresh-" + mode + "-" + strings.TrimSuffix(topic, "-0")
		if err := h.writeContract(ctx, script, dir, name, []string{topic, "heartbeats"}, sink); err != nil {
			stopAll()
			return nil, err
		}
		if out, err := h.cmd(ctx, script, "start", dir).CombinedOutput(); err != nil {
			stopAll()
			return nil, fmt.Errorf("starting the dispatcher: %w\n%s", err, out)
		}
		stops = append(stops, func() { _ = h.cmd(context.Background(), script, "stop", dir).Run() })
		run.dispatcher = func() int {
			b, _ := os.ReadFile(filepath.Join(dir, "pid"))
			n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			return n
		}
		run.stop = stopAll
		return run, nil
	}
}

// freshSubject is the OIDC subject of the KafkaSource in the payload row (the shipped one's).
const freshSubject = "system:serviceaccount:mm2go:mm2go-mirror-oidc-sources.knative.dev-kafkasource"

// bearerProxy serves on a free loopback port and forwards every request to target with
// Authorization: Bearer token; sent counts the requests answered.
func bearerProxy(target, token string) (proxyURL string, sent *atomic.Int64, stop func(), err error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", nil, nil, err
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 200, IdleConnTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, nil, err
	}
	sent = &atomic.Int64{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+token)
		rp.ServeHTTP(w, r)
		sent.Add(1)
	})}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/", sent, func() { _ = srv.Close() }, nil
}

// startIssuer runs mock-oauth2-server (the OIDC issuer the tests use, test/testkit/oidcissuer,
// from test/kafka/.cache/oidc-lib) on a free port, and returns its default issuer's URL and a
// token of that issuer for subject and audience.
func (h *harness) startIssuer(ctx context.Context, logPath, subject, audience string) (issuer, caFile, token string, stop func(), err error) {
	lib := filepath.Join(h.root, "test", "kafka", ".cache", "oidc-lib")
	port, err := freePort()
	if err != nil {
		return "", "", "", nil, err
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return "", "", "", nil, err
	}
	cmd := exec.CommandContext(ctx, "java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		"-cp", filepath.Join(lib, "*"), "no.nav.security.mock.oauth2.StandaloneMockOAuth2ServerKt")
	cmd.Env = append(os.Environ(), "SERVER_HOSTNAME=127.0.0.1", fmt.Sprintf("SERVER_PORT=%d", port),
		`JSON_CONFIG={"interactiveLogin":false,"httpServer":"NettyWrapper"}`)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return "", "", "", nil, fmt.Errorf("starting mock-oauth2-server from %s: %w", lib, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	// Payload mode needs an https issuer: the issuer is served through an HTTPS front (it
	// names itself https://<front>/default, in its tokens too).
	front, err := oidcissuer.NewFront(fmt.Sprintf("http://127.0.0.1:%d", port), oidcissuer.FrontOptions{}, filepath.Dir(logPath))
	if err != nil {
		_ = cmd.Process.Kill()
		<-exited
		logf.Close()
		return "", "", "", nil, err
	}
	stop = func() { front.Close(); _ = cmd.Process.Kill(); <-exited; logf.Close() }
	issuer = front.URL + "/default"
	deadline := time.Now().Add(time.Minute)
	for {
		form := url.Values{"grant_type": {"client_credentials"}, "client_id": {subject}, "client_secret": {"x"}, "scope": {audience}}
		resp, err := front.Client().PostForm(issuer+"/token", form)
		if err == nil {
			var tr struct {
				AccessToken string `json:"access_token"`
			}
			derr := json.NewDecoder(resp.Body).Decode(&tr)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && derr == nil && tr.AccessToken != "" {
				return issuer, front.CAFile, tr.AccessToken, stop, nil
			}
		}
		select {
		case <-exited:
			return "", "", "", nil, fmt.Errorf("mock-oauth2-server exited during start (log: %s)", logPath)
		case <-ctx.Done():
			stop()
			return "", "", "", nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return "", "", "", nil, fmt.Errorf("mock-oauth2-server gave no token within a minute (log: %s)", logPath)
		}
	}
}

// startPingFresh: one `mirror serve` (fetch mode, no KafkaSource), kept warm by PingSource
// ticks every interval (Knative keeps a pod that gets a request at least every 60-90 s):
// each tick is a PingSource-like CloudEvent (binary mode, type dev.knative.sources.ping) sent
// after a random 0-500 ms delay, as PingSource's adapter does, which runs one burst.
func startPingFresh(interval time.Duration) func(ctx context.Context, h *harness, topic string) (*freshRun, error) {
	return func(ctx context.Context, h *harness, topic string) (*freshRun, error) {
		base, run, err := h.startServeProc(ctx, topic, "fresh-serve-ping")
		if err != nil {
			return nil, err
		}
		client := &http.Client{Timeout: 5 * time.Minute}
		ping := func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/", strings.NewReader(`{"action":"drain"}`))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Ce-Specversion", "1.0")
			req.Header.Set("Ce-Type", "dev.knative.sources.ping")
			req.Header.Set("Ce-Source", "/apis/v1/namespaces/mm2go/pingsources/mm2go-mirror-burst")
			req.Header.Set("Ce-Id", strconv.FormatInt(time.Now().UnixNano(), 10))
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				return fmt.Errorf("ping answered %s", resp.Status)
			}
			return nil
		}
		run.kick = ping
		run.ticks = &ticker{interval: interval, overlap: true, fire: func(ctx context.Context) (bool, float64, bool) {
			time.Sleep(rand.N(500 * time.Millisecond))
			err := ping(ctx)
			if err != nil {
				h.logger.Warn("ping failed", "err", err)
			}
			return false, 0, err != nil
		}}
		return run, nil
	}
}

// startScheduleFresh: `mirror run` started every interval as a new process (a CronJob or a
// Container Apps scheduled job), skipped while the previous run goes on.
func startScheduleFresh(interval time.Duration) func(ctx context.Context, h *harness, topic string) (*freshRun, error) {
	return func(ctx context.Context, h *harness, topic string) (*freshRun, error) {
		logName := fmt.Sprintf("fresh-run-%s", interval)
		tmpl, logFile, remote, err := h.mm2goCmd(ctx, freshWorkloadDef, []string{topic}, "fsrc", "ftgt", logName, []string{"run"})
		if err != nil {
			return nil, err
		}
		var mu sync.Mutex
		var current int
		runOnce := func(ctx context.Context) (float64, error) {
			cmd := exec.CommandContext(ctx, tmpl.Path, tmpl.Args[1:]...)
			cmd.Env, cmd.Stdout, cmd.Stderr = tmpl.Env, logFile, logFile
			if err := cmd.Start(); err != nil {
				return 0, err
			}
			mu.Lock()
			current = cmd.Process.Pid
			mu.Unlock()
			err := cmd.Wait()
			mu.Lock()
			current = 0
			mu.Unlock()
			var cpu float64
			if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
			}
			return cpu, err
		}
		run := &freshRun{remote: remote[0], stop: func() { logFile.Close() }}
		run.srcAlias, _, _ = strings.Cut(remote[0], "."+topic)
		run.tgtAlias = "ftgt" + strings.TrimPrefix(run.srcAlias, "fsrc")
		run.kick = func(ctx context.Context) error { _, err := runOnce(ctx); return err }
		run.ticks = &ticker{interval: interval,
			fire: func(ctx context.Context) (bool, float64, bool) {
				cpu, err := runOnce(ctx)
				if err != nil {
					h.logger.Warn("scheduled mirror run failed", "err", err)
				}
				return true, cpu, err != nil
			},
			running: func() float64 {
				mu.Lock()
				defer mu.Unlock()
				if current == 0 {
					return 0
				}
				return procCPU(current)
			}}
		return run, nil
	}
}

// runFreshness runs the freshness workload for every selected contender, one after the other,
// and writes freshness.md and freshness.json into dir after each.
func (h *harness) runFreshness(ctx context.Context, fo freshOptions, dir string) error {
	heartbeatBin := filepath.Join(h.home, "bin", "heartbeat")
	if out, err := h.cmd(ctx, "go", "build", "-o", heartbeatBin, "./functions/heartbeat").CombinedOutput(); err != nil {
		return fmt.Errorf("building functions/heartbeat: %w\n%s", err, out)
	}
	// The heartbeats topic on the source exists before any contender (the dispatcher rows
	// subscribe to it).
	if _, err := h.srcAdm.CreateTopics(ctx, 1, 1, nil, "heartbeats"); err != nil {
		h.logger.Info("heartbeats topic on the source", "err", err)
	}
	rep := freshReport{Machine: machine(h.lib), Started: time.Now().UTC(), UptimeStart: uptime(), Settings: freshSettings(fo)}
	stamp := time.Now().Format("150405")
	for _, c := range freshContenders() {
		if len(fo.rows) > 0 && !contains(fo.rows, c.key) {
			continue
		}
		rates, phase := fo.rates, fo.phase
		if c.slow {
			rates, phase = []int{fo.slowRate}, fo.slowPhase
		}
		h.logger.Info("freshness contender", "name", c.name, "trigger", c.trigger, "rates", rates, "phase", phase)
		rows, err := h.freshContender(ctx, c, "f"+stamp+"-"+c.key+"-0", rates, phase, fo.heartbeat, heartbeatBin)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			h.logger.Error("freshness contender failed", "name", c.name, "trigger", c.trigger, "err", err)
			rows = append(rows, freshRow{Contender: c.name, Trigger: c.trigger, Error: err.Error()})
		}
		rep.Rows = append(rep.Rows, rows...)
		rep.Finished, rep.UptimeEnd = time.Now().UTC(), uptime()
		if err := rep.write(dir); err != nil {
			return err
		}
	}
	fmt.Println(rep.markdown())
	return nil
}

func uptime() string {
	out, _ := exec.Command("uptime").Output()
	return strings.TrimSpace(string(out))
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// freshContender runs one contender through its phases on a new source topic.
func (h *harness) freshContender(ctx context.Context, c freshContender, topic string, rates []int, phase, hbEvery time.Duration, heartbeatBin string) ([]freshRow, error) {
	if _, err := h.srcAdm.CreateTopics(ctx, freshPartitions, 1, nil, topic); err != nil {
		return nil, fmt.Errorf("creating %s: %w", topic, err)
	}
	// Topics are deleted without waiting for their files: nothing here measures a copy's rate.
	defer func() { _, _ = h.srcAdm.DeleteTopics(context.Background(), topic) }()
	run, err := c.start(ctx, h, topic)
	if err != nil {
		return nil, err
	}
	defer func() {
		run.stop()
		_, _ = h.tgtAdm.DeleteTopics(context.Background(), run.remote)
	}()

	acc := newArrivals()
	consumer, err := kgo.NewClient(kgo.SeedBrokers(h.target), kgo.ConsumeTopics(run.remote),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(time.Second))
	if err != nil {
		return nil, err
	}
	cctx, cancelConsume := context.WithCancel(ctx)
	consumed := make(chan struct{})
	go func() { defer close(consumed); acc.consume(cctx, consumer) }()
	defer func() { cancelConsume(); <-consumed; consumer.Close() }()

	producer, err := kgo.NewClient(kgo.SeedBrokers(h.source), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.MaxBufferedRecords(1<<20))
	if err != nil {
		return nil, err
	}
	defer producer.Close()

	// Warm-up: a record per partition, copied before the window starts (an always-on
	// contender is then running; a scheduled one has created its topics and positions).
	warm := make([]*kgo.Record, freshPartitions)
	for p := range warm {
		v := make([]byte, freshRecordBytes)
		now := time.Now()
		encodeProbe(v, warmPhase, uint64(p), now)
		warm[p] = &kgo.Record{Topic: topic, Partition: int32(p), Value: v, Timestamp: now}
	}
	if err := producer.ProduceSync(ctx, warm...).FirstErr(); err != nil {
		return nil, fmt.Errorf("warm-up records: %w", err)
	}
	if run.kick != nil {
		if err := run.kick(ctx); err != nil {
			return nil, fmt.Errorf("warm-up trigger: %w", err)
		}
	}
	if err := acc.waitWarm(ctx, freshPartitions, 3*time.Minute); err != nil {
		return nil, err
	}
	h.logger.Info("freshness contender warm", "name", c.name, "trigger", c.trigger, "remote", run.remote)

	// Heartbeat rounds beside, and the ticks, from the window's start.
	hbCtx, stopHB := context.WithCancel(ctx)
	defer stopHB()
	hb := &heartbeats{}
	hbDone := make(chan struct{})
	go func() { defer close(hbDone); hb.loop(hbCtx, h, heartbeatBin, run.srcAlias, run.tgtAlias, hbEvery) }()
	if run.ticks != nil {
		run.ticks.start(ctx)
	}

	starts := make([]time.Time, len(rates))
	cpus := make([]float64, 0, len(rates)+1)
	disps := make([]float64, 0, len(rates)+1)
	loads := make([]string, 0, len(rates)+1)
	sent := make([]int64, 0, len(rates)+1)
	requests := func() int64 {
		if run.requests == nil {
			return 0
		}
		return run.requests()
	}
	produced := make([]int, len(rates))
	acks := make([]*ackTally, len(rates))
	for k, rate := range rates {
		starts[k] = time.Now()
		total, disp := run.cpu()
		cpus, disps, loads, sent = append(cpus, total), append(disps, disp), append(loads, loadavg()), append(sent, requests())
		acks[k] = &ackTally{}
		produced[k], err = produceAt(ctx, producer, topic, uint32(k), rate, phase, acks[k])
		if err != nil {
			if run.ticks != nil {
				run.ticks.halt()
			}
			stopHB()
			<-hbDone
			return nil, fmt.Errorf("producing at %d records/s: %w", rate, err)
		}
	}
	if err := producer.Flush(ctx); err != nil {
		return nil, err
	}
	// Drain: every record produced should arrive; a scheduled contender needs its next tick.
	drain := 90*time.Second + c.interval
	all := acc.waitAll(ctx, produced, drain)
	if run.ticks != nil {
		run.ticks.halt()
	}
	stopHB()
	<-hbDone
	total, disp := run.cpu()
	cpus, disps, loads, sent = append(cpus, total), append(disps, disp), append(loads, loadavg()), append(sent, requests())
	ended := time.Now()
	if !all {
		h.logger.Warn("not every record arrived", "name", c.name, "trigger", c.trigger, "within", drain)
	}

	cpu, dcpu := phaseCPU(cpus), phaseCPU(disps)
	var ticks []tickRun
	if run.ticks != nil {
		ticks = run.ticks.snapshot()
	}
	rows := make([]freshRow, len(rates))
	for k, rate := range rates {
		r := freshRow{Contender: c.name, Trigger: c.trigger, Rate: rate, PhaseS: phase.Seconds(), Produced: produced[k],
			CPUSeconds: cpu[k], DispatcherCPUSeconds: dcpu[k], LoadStart: loads[k], LoadEnd: loads[k+1]}
		if run.requests != nil {
			until := ended
			if k+1 < len(starts) {
				until = starts[k+1]
			}
			r.DispatcherRequests = sent[k+1] - sent[k]
			r.DispatcherRequestsPerS = float64(r.DispatcherRequests) / until.Sub(starts[k]).Seconds()
		}
		r.latencySummary, r.StampSkew = acc.summary(uint32(k), produced[k])
		r.ProduceAckP50 = acks[k].p50()
		if b := float64(produced[k]) * freshRecordBytes; b > 0 {
			r.CPUPerGB = r.CPUSeconds / (b / 1e9)
		}
		var took []time.Duration
		for _, t := range ticks {
			if phaseOf(starts, t.at) != k {
				continue
			}
			r.Ticks++
			if t.skipped {
				r.SkippedTicks++
				continue
			}
			if t.started {
				r.ColdStarts++
				took = append(took, t.took)
			}
			if t.failed {
				r.FailedTicks++
			}
		}
		slices.Sort(took)
		r.TickRunP50 = percentile(took, 0.5)
		r.HeartbeatMS = hb.during(starts, k)
		r.HeartbeatMedianMS = medianInt64(r.HeartbeatMS)
		rows[k] = r
		h.logger.Info("freshness row", "contender", c.name, "trigger", c.trigger, "rate", rate, "produced", r.Produced,
			"p50", r.P50, "p99", r.P99, "max", r.Max, "missing", r.Missing, "cpu_s_per_gb", r.CPUPerGB,
			"cold_starts", r.ColdStarts, "heartbeat_median_ms", r.HeartbeatMedianMS)
	}
	return rows, nil
}

// produceAt writes rate records/s into topic's partitions in turn for d, each stamped with the
// producer's clock (CreateTime) and carrying its phase and sequence number, and returns how
// many it wrote.
func produceAt(ctx context.Context, cl *kgo.Client, topic string, phase uint32, rate int, d time.Duration, acks *ackTally) (int, error) {
	total := int(float64(rate) * d.Seconds())
	start := time.Now()
	var firstErr error
	var errMu sync.Mutex
	seq := 0
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for seq < total {
		due := min(int(float64(rate)*time.Since(start).Seconds())+1, total)
		for ; seq < due; seq++ {
			v := make([]byte, freshRecordBytes)
			now := time.Now()
			encodeProbe(v, phase, uint64(seq), now)
			r := &kgo.Record{Topic: topic, Partition: int32(seq % freshPartitions), Value: v, Timestamp: now}
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				if err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
					return
				}
				acks.add(time.Since(r.Timestamp))
			})
		}
		select {
		case <-ctx.Done():
			return seq, ctx.Err()
		case <-tick.C:
		}
	}
	errMu.Lock()
	defer errMu.Unlock()
	return seq, firstErr
}

// ackTally collects the source producer's acknowledgement times.
type ackTally struct {
	mu sync.Mutex
	d  []time.Duration
}

func (a *ackTally) add(d time.Duration) { a.mu.Lock(); a.d = append(a.d, d); a.mu.Unlock() }

func (a *ackTally) p50() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := append([]time.Duration(nil), a.d...)
	slices.Sort(s)
	return percentile(s, 0.5)
}

// arrivals is what the target's consumer has seen, by phase.
type arrivals struct {
	mu     sync.Mutex
	phases map[uint32]*tally
	warm   map[uint64]bool
	signal chan struct{}
}

func newArrivals() *arrivals {
	return &arrivals{phases: map[uint32]*tally{}, warm: map[uint64]bool{}, signal: make(chan struct{}, 1)}
}

func (a *arrivals) consume(ctx context.Context, cl *kgo.Client) {
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		now := time.Now()
		a.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			phase, seq, created, ok := decodeProbe(r.Value)
			if !ok {
				return
			}
			if phase == warmPhase {
				a.warm[seq] = true
				return
			}
			t := a.phases[phase]
			if t == nil {
				t = &tally{}
				a.phases[phase] = t
			}
			t.observe(seq, r.Timestamp, created, now)
		})
		a.mu.Unlock()
		select {
		case a.signal <- struct{}{}:
		default:
		}
	}
}

func (a *arrivals) waitWarm(ctx context.Context, n int, timeout time.Duration) error {
	deadline := time.After(timeout)
	for {
		a.mu.Lock()
		got := len(a.warm)
		a.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("%d of the %d warm-up records arrived on the target within %s", got, n, timeout)
		case <-a.signal:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitAll waits until every produced record of every phase arrived (true) or timeout passed.
func (a *arrivals) waitAll(ctx context.Context, produced []int, timeout time.Duration) bool {
	deadline := time.After(timeout)
	for {
		done := true
		a.mu.Lock()
		for k, n := range produced {
			t := a.phases[uint32(k)]
			if n > 0 && (t == nil || t.arrivedOf(n) < n) {
				done = false
				break
			}
		}
		a.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline:
			return false
		case <-a.signal:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (a *arrivals) summary(phase uint32, produced int) (latencySummary, time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.phases[phase]
	if t == nil {
		return latencySummary{Missing: produced}, 0
	}
	return t.summarize(produced), t.stampSkew
}

// heartbeats runs `heartbeat run` rounds for a flow and keeps their replication latency.
type heartbeats struct {
	mu  sync.Mutex
	at  []time.Time
	lat []int64
}

func (hb *heartbeats) loop(ctx context.Context, h *harness, bin, srcAlias, tgtAlias string, every time.Duration) {
	if every <= 0 {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		cmd := exec.CommandContext(ctx, bin, "run")
		cmd.Env = append(os.Environ(),
			"MM2_SOURCE_BOOTSTRAP_SERVERS="+h.source, "MM2_TARGET_BOOTSTRAP_SERVERS="+h.target,
			"MM2_SOURCE_ALIAS="+srcAlias, "MM2_TARGET_ALIAS="+tgtAlias,
			"MM2_HEARTBEATS_TOPIC_REPLICATION_FACTOR=1", "MM2_LOG_FORMAT=json", "MM2_LOG_LEVEL=warn")
		at := time.Now()
		out, err := cmd.Output()
		if err != nil {
			if ctx.Err() == nil {
				h.logger.Warn("heartbeat round failed", "err", err)
			}
			continue
		}
		var sum struct {
			ReplicationLatencyMS *int64 `json:"replication_latency_ms"`
		}
		if json.Unmarshal(lastJSONLine(out), &sum) != nil || sum.ReplicationLatencyMS == nil {
			continue
		}
		hb.mu.Lock()
		hb.at, hb.lat = append(hb.at, at), append(hb.lat, *sum.ReplicationLatencyMS)
		hb.mu.Unlock()
	}
}

// during returns the figures of the rounds started in phase k.
func (hb *heartbeats) during(starts []time.Time, k int) []int64 {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	out := []int64{}
	for i, at := range hb.at {
		if phaseOf(starts, at) == k {
			out = append(out, hb.lat[i])
		}
	}
	return out
}

func lastJSONLine(b []byte) []byte {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(strings.TrimSpace(lines[i]), "{") {
			return []byte(lines[i])
		}
	}
	return nil
}

func freshSettings(fo freshOptions) map[string]string {
	return map[string]string{
		"records":   fmt.Sprintf("%d B values, no key, %d partitions, written in turn; CreateTime set by the producer (franz-go, acks=all, linger 0) when it makes the record", freshRecordBytes, freshPartitions),
		"latency":   "arrival on the target (a franz-go consumer of the remote topic, the poll's return time) minus the record's timestamp; each record once (first arrival)",
		"phases":    fmt.Sprintf("rates %v records/s, %s each, one after the other without restarting the contender; the 60 s schedule: %d records/s for %s", fo.rates, fo.phase, fo.slowRate, fo.slowPhase),
		"cpu":       "user + system CPU of the replicator's processes during the phase (/proc; for scheduled runs each run's rusage, start included; the KafkaSource rows include the dispatcher JVM), per 1e9 bytes of record values produced in the phase",
		"heartbeat": fmt.Sprintf("`heartbeat run` every %s beside each contender for its flow; its replication_latency_ms", fo.heartbeat),
	}
}

func (r freshReport) write(dir string) error { return writeReport(dir, "freshness", r, r.markdown()) }

func (r freshReport) markdown() string {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "# Freshness: time from a record's append on the source to its arrival on the target\n\n")
	fmt.Fprintf(&b, "Run %s → %s. Machine: %s, %s CPUs, %s memory; both brokers, every contender and the harness share it. ",
		r.Started.Format(time.RFC3339), r.Finished.Format(time.RFC3339), m["cpu"], m["cpus"], m["memory"])
	fmt.Fprintf(&b, "mm2go %s, Kafka %s.\n\n", m["mm2go commit"], m["kafka"])
	fmt.Fprintf(&b, "`uptime` at the start: `%s`; at the end: `%s`.\n\n", r.UptimeStart, r.UptimeEnd)
	for _, k := range []string{"records", "latency", "phases", "cpu", "heartbeat"} {
		fmt.Fprintf(&b, "- %s: %s\n", k, r.Settings[k])
	}
	b.WriteString("\n| contender | trigger | records/s | records | p50 | p99 | max | CPU-s/GB | cold starts | heartbeat latency (median, rounds) | load 1/5/15 min at start | notes |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|\n")
	for _, row := range r.Rows {
		if row.Error != "" {
			fmt.Fprintf(&b, "| %s | %s | | | | | | | | | | failed: %s |\n", row.Contender, row.Trigger, strings.ReplaceAll(row.Error, "\n", " "))
			continue
		}
		hb := "none"
		if len(row.HeartbeatMS) > 0 {
			hb = fmt.Sprintf("%s (%d)", msDur(time.Duration(row.HeartbeatMedianMS)*time.Millisecond), len(row.HeartbeatMS))
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %s | %s | %.1f | %d | %s | %s | %s |\n", row.Contender, row.Trigger, row.Rate, row.Produced,
			msDur(row.P50), msDur(row.P99), msDur(row.Max), row.CPUPerGB, row.ColdStarts, hb, row.LoadStart, row.notes())
	}
	return b.String()
}

func (row freshRow) notes() string {
	var n []string
	if row.Missing > 0 {
		n = append(n, fmt.Sprintf("%d never arrived", row.Missing))
	}
	if row.Duplicates > 0 {
		n = append(n, fmt.Sprintf("%d duplicates", row.Duplicates))
	}
	if row.DispatcherCPUSeconds > 0 {
		n = append(n, fmt.Sprintf("dispatcher %.0f%% of the CPU", 100*row.DispatcherCPUSeconds/row.CPUSeconds))
	}
	if row.DispatcherRequests > 0 {
		n = append(n, fmt.Sprintf("dispatcher sent %d requests, %.0f/s (to the next phase, the last to the drain's end)", row.DispatcherRequests, row.DispatcherRequestsPerS))
	}
	if row.Ticks > 0 {
		t := fmt.Sprintf("%d ticks", row.Ticks)
		if row.TickRunP50 > 0 {
			t += ", run " + msDur(row.TickRunP50) + " (median)"
		}
		if row.SkippedTicks > 0 {
			t += fmt.Sprintf(", %d skipped", row.SkippedTicks)
		}
		if row.FailedTicks > 0 {
			t += fmt.Sprintf(", %d failed", row.FailedTicks)
		}
		n = append(n, t)
	}
	n = append(n, "source ack p50 "+msDur(row.ProduceAckP50))
	if row.StampSkew >= time.Millisecond {
		n = append(n, "timestamps changed by up to "+msDur(row.StampSkew))
	}
	return strings.Join(n, "; ")
}

// msDur prints a latency in ms below 10 s, in s above.
func msDur(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

var errNoRates = errors.New("-fresh-rates: no rate")

// parseRates reads a comma-separated list of positive records/s.
func parseRates(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-fresh-rates: %q is not a positive number of records/s", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errNoRates
	}
	return out, nil
}
