package replay

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
)

func freePort(t *testing.T) int {
	t.Helper()
	l := listen(t)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// listen opens a listener on a free loopback port.
func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// pod is one revision pod of a Knative Service: the process and Knative's view of it.
type pod struct {
	svc     Service
	base    string
	started time.Time
	ready   time.Duration // from start to the first probe that answered 200
	probes  int
	cmd     *exec.Cmd
	log     *strings.Builder
	exited  chan struct{} // closed once the process exited, with its Wait's error in waitErr
	waitErr error
}

// startPod starts the Service's container with PORT set, and probes it as Knative does: with
// no periodSeconds every 25 ms until ready (the queue-proxy's start-up probing), else every
// periodSeconds (the kubelet's probe).
func startPod(t *testing.T, bin string, svc Service, env map[string]string) *pod {
	t.Helper()
	p, err := startPodErr(t, bin, svc, env)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startPodErr is startPod returning its failure, for a goroutine other than the test's.
func startPodErr(t *testing.T, bin string, svc Service, env map[string]string) (*pod, error) {
	port := freePort(t)
	cmd := exec.Command(filepath.Join(bin, svc.Function), svc.Args...)
	cmd.Env = []string{fmt.Sprintf("PORT=%d", port), "POD_NAME=" + svc.Name + "-00001-deployment-1", "PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	log := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = log, log
	p := &pod{svc: svc, base: fmt.Sprintf("http://127.0.0.1:%d", port), started: time.Now(), cmd: cmd, log: log, exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", svc.Name, err)
	}
	go func() { p.waitErr = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.stop()
		if t.Failed() {
			t.Logf("%s log:\n%s", svc.Name, tail(log.String(), 3000))
		}
	})
	period := svc.ReadinessPeriod
	if period == 0 {
		period = 25 * time.Millisecond
	}
	for until := time.Now().Add(60 * time.Second); ; time.Sleep(period) {
		p.probes++
		if code, _ := get(p.base + svc.ReadinessPath); code == http.StatusOK {
			p.ready = time.Since(p.started)
			return p, nil
		}
		if time.Now().After(until) {
			return nil, fmt.Errorf("%s: readiness probe %s never answered 200 in 60 s", svc.Name, svc.ReadinessPath)
		}
	}
}

func get(url string) (int, string) {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// stop sends the process SIGTERM, as the kubelet does, waits for it to exit (killing it after
// 30 s) and returns how it ended (nil: exit 0). Stopping a stopped pod returns the same.
func (p *pod) stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	return p.waitErr
}

// ping sends what a PingSource sends on a tick.
func (p *pod) ping(t *testing.T, source string) (int, string) {
	t.Helper()
	return pingAt(t, p.base, source)
}

// pingAt sends what a PingSource sends on a tick to the address base.
func pingAt(t *testing.T, base, source string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/", strings.NewReader(""))
	for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": suffix(t), "ce-type": "dev.knative.sources.ping",
		"ce-source": "/apis/v1/namespaces/mm2go/pingsources/" + source} {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Minute}).Do(req)
	if err != nil {
		t.Fatalf("%s: PingSource %s: %v", base, source, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestReplayKnative: knative/ as `kubectl apply -k` renders it. Each Service's pod starts as
// Knative starts it and is probed with its own readiness probe; during a target outage the
// probe must still see it ready (an unready pod makes the activator hold every event); the
// burst PingSource's tick on a cold mirror copies a backlog; the schedules give each Service
// idle time to reach zero.
func TestReplayKnative(t *testing.T) {
	t.Parallel()
	objs, err := KustomizeBuild(RepoFile("knative"))
	if err != nil {
		t.Fatal(err)
	}
	knativeReplay(t, objs, RepoFile("knative", "secret.example.yaml"))
}

// knativeReplay replays a rendered Knative shape's Services and PingSources (TestReplayKnative).
func knativeReplay(t *testing.T, objs []map[string]any, secretFile string) {
	if testing.Short() {
		t.Skip("-short: the replay builds the functions and needs the brokers")
	}
	c := testkit.Require(t)
	svcs, pings, err := KnativeServices(objs, secretFile)
	if err != nil {
		t.Fatal(err)
	}
	bin := functionBinaries(t)
	sfx := suffix(t)
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "orders"), 4, nil)
	byName := map[string]Service{}
	for _, s := range svcs {
		byName[s.Name] = s
	}
	mirror, ok := byName["mm2go-mirror"]
	if !ok {
		t.Fatalf("no mm2go-mirror Service in %v", svcs)
	}

	// Wake-ups: a pod stays the stable window and grace period (and the retention period)
	// after a request; a tick within that keeps it.
	for _, p := range pings {
		t.Logf("PingSource %s (%s) wakes %s %d times an hour", p.Name, p.Schedule, p.Sink, int(time.Hour/p.Interval))
	}

	// A target outage: the target's address answers nothing.
	down := localize(t, mirror.Env, c, topic, sfx)
	down["MM2_TARGET_BOOTSTRAP_SERVERS"] = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := startPod(t, bin, mirror, down)
	if code, body := get(p.base + "/readyz"); code == http.StatusOK {
		t.Errorf("target down: /readyz answered 200 (%s); the outage is not seen", body)
	}
	t.Logf("target down: %s ready for Knative after %v (%d probes of %s)", mirror.Name, p.ready.Round(time.Millisecond), p.probes, mirror.ReadinessPath)

	// A cold mirror woken by the burst tick copies a backlog.
	const backlog = 5000
	srcCl := testkit.Client(t, c.Source.Bootstrap, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce(t, srcCl, topic, 0, backlog)
	env := localize(t, mirror.Env, c, topic, sfx)
	p = startPod(t, bin, mirror, env)
	code, body := p.ping(t, "mm2go-mirror-burst")
	if code/100 != 2 {
		t.Fatalf("burst tick: %d %s", code, body)
	}
	took := time.Since(p.started)
	remote := env["MM2_SOURCE_ALIAS"] + "." + topic
	ends, err := kadm.NewClient(testkit.Client(t, c.Target.Bootstrap)).ListEndOffsets(context.Background(), remote)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	if n != backlog {
		t.Errorf("after the burst tick the target holds %d of %d records", n, backlog)
	}
	t.Logf("cold start: ready after %v (%d probes), burst tick answered %d after %v from process start", p.ready.Round(time.Millisecond), p.probes, code, took.Round(time.Millisecond))

	// The other Services answer their tick.
	for _, pg := range pings {
		if pg.Sink == mirror.Name {
			continue
		}
		s := byName[pg.Sink]
		sp := startPod(t, bin, s, localize(t, s.Env, c, topic, sfx))
		if code, body := sp.ping(t, pg.Name); code/100 != 2 {
			t.Errorf("%s tick to %s: %d %s", pg.Name, s.Name, code, body)
		}
	}
}
