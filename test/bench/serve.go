package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/mm2go/mm2go/test/testkit/dispatcher"
)

// runServe measures fetch mode: `mirror serve` on a free port, driven by the genuine Knative
// KafkaSource dispatcher (../shared/knative-dispatcher, ordered, key type byte-array and the
// delivery settings of knative/kafkasource.yaml), with a KafkaSource of its own per workload (so
// a resumed workload's second run continues from the first's commits). The function is started
// and ready first (in Knative the activator holds the first request until then); the clock
// starts when the dispatcher is launched, so "done" includes the dispatcher's own start (its
// partition assignment, DispatcherStart). A counting proxy between the two gives the
// dispatcher's requests/s, over all its requests for the backlog or the first 30 s after done. With settle (a resumed workload's unmeasured first run) the
// dispatcher is stopped only once it has committed every record, as a KafkaSource does before
// its function scales to zero.
func (h *harness) runServe(ctx context.Context, w workload, topics []string, settle bool) (contender, error) {
	script, err := dispatcher.Available(h.root)
	if err != nil {
		return contender{}, err
	}
	port, err := freePort()
	if err != nil {
		return contender{}, err
	}
	cmd, logFile, remote, err := h.mm2goCmd(ctx, w, topics, "svsrc", "svtgt", "serve", []string{"serve"},
		fmt.Sprintf("PORT=%d", port), "MM2_HEARTBEATS_REPLICATION_ENABLED=false")
	if err != nil {
		return contender{}, err
	}
	defer logFile.Close()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	c := contender{Name: nameServe, BurstFirstRecordMS: -1, BurstTopicsReadyMS: -1, Processes: 1, remote: remote}
	want := int64(w.totalRecords())
	before := h.targetCount(ctx, remote)
	if err := cmd.Start(); err != nil {
		return c, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopFn := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	if err := waitReady(ctx, base+"/readyz", exited); err != nil {
		stopFn()
		return c, err
	}

	// Counting proxy: the dispatcher's requests and when they came.
	var requests atomic.Int64
	var mu sync.Mutex
	var firstReq, lastReq time.Time
	u, _ := url.Parse(base)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 200, IdleConnTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		stopFn()
		return c, err
	}
	proxy := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		now := time.Now()
		mu.Lock()
		if firstReq.IsZero() {
			firstReq = now
		}
		lastReq = now
		mu.Unlock()
		rp.ServeHTTP(rw, r)
	})}
	go func() { _ = proxy.Serve(ln) }()
	defer proxy.Close()

	dir := filepath.Join(h.home, "serve-"+w.Name, "dispatcher")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		stopFn()
		return c, err
	}
	name := "bench-" + strings.ReplaceAll(strings.ToLower(w.Name), "_", "-")
	if err := h.writeContract(ctx, script, dir, name, topics, "http://"+ln.Addr().String()+"/"); err != nil {
		stopFn()
		return c, err
	}
	stopDispatcher := func() { _ = h.cmd(context.Background(), script, "stop", dir).Run() }
	defer stopDispatcher()

	start := time.Now()
	if out, err := h.cmd(ctx, script, "start", dir).CombinedOutput(); err != nil {
		stopFn()
		return c, fmt.Errorf("starting the dispatcher: %w\n%s", err, out)
	}
	c.DispatcherStart = time.Since(start)
	deadline := time.Now().Add(15 * time.Minute)
	var hwm int64
	for {
		hwm = max(hwm, vmHWM(cmd.Process.Pid))
		n := h.targetCount(ctx, remote) - before
		if n > 0 && c.FirstRecord == 0 {
			c.FirstRecord = time.Since(start)
		}
		if n >= want {
			c.Done, c.Copied = time.Since(start), n
			break
		}
		if time.Now().After(deadline) {
			stopFn()
			return c, fmt.Errorf("mirror serve copied %d of %d records in 15 minutes (dispatcher log: %s)", n, want, filepath.Join(dir, "dispatcher.log"))
		}
		select {
		case err := <-exited:
			return c, fmt.Errorf("mirror serve exited after copying %d of %d records: %v", n, want, err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	// The dispatcher goes on sending one request per record after done (answered from memory):
	// its request rate is measured over all of them, or over at most 30 s more.
	for end := time.Now().Add(30 * time.Second); requests.Load() < want && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	c.DispatcherRequests = requests.Load()
	if span := lastReq.Sub(firstReq).Seconds(); span > 0 {
		c.DispatcherRPS = float64(c.DispatcherRequests) / span
	}
	mu.Unlock()
	if settle {
		h.waitCommitted(ctx, name+"-group", topics)
	}
	stopDispatcher()
	stopFn()
	c.PeakRSSKiB = c.rusage(cmd.ProcessState)
	if hwm > 0 {
		c.PeakRSSKiB = hwm
	}
	c.setRates(want, w.totalBytes())
	return c, nil
}

// writeContract writes into dir the dispatcher contract of a KafkaSource named name for topics
// with sink as its sink: ordered, key type byte-array and the delivery settings of
// knative/kafkasource.yaml (3 retries, exponential from 500 ms, 300 s timeout).
func (h *harness) writeContract(ctx context.Context, script, dir, name string, topics []string, sink string) error {
	contract, err := h.cmd(ctx, script, "contract", "bootstrap="+h.source, "topics="+strings.Join(topics, ","),
		"sink="+sink, "name="+name, "namespace=bench", "ordering=ordered", "keyType=ByteArray",
		"retry=3", "backoffPolicy=Exponential", "backoffDelayMs=500", "timeoutMs=300000").Output()
	if err != nil {
		return fmt.Errorf("dispatcher contract for %s: %w", name, err)
	}
	return os.WriteFile(filepath.Join(dir, "contract.json"), contract, 0o644)
}

// waitReady polls a readiness URL until it answers 200 (at most a minute).
func waitReady(ctx context.Context, u string, exited <-chan error) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(u); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-exited:
			return fmt.Errorf("mirror serve exited before it was ready: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("mirror serve not ready within a minute (%s)", u)
}

// freePort returns a TCP port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitCommitted waits (at most a minute) until group has committed the end of every source
// partition of topics.
func (h *harness) waitCommitted(ctx context.Context, group string, topics []string) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		ends, err := h.srcAdm.ListEndOffsets(ctx, topics...)
		offs, err2 := h.srcAdm.FetchOffsets(ctx, group)
		if err == nil && err2 == nil {
			done := true
			ends.Each(func(o kadm.ListedOffset) {
				if c, ok := offs.Lookup(o.Topic, o.Partition); !ok || c.At < o.Offset {
					done = false
				}
			})
			if done {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}
