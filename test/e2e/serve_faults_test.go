package e2e

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/dispatcher"
)

// backgroundProducer writes uniquely valued records to topics until stopped and remembers them.
type backgroundProducer struct {
	mu   sync.Mutex
	recs []*kgo.Record
	err  error
	stop func()
	done chan struct{}
}

func startProducing(t *testing.T, bootstrap string, topics []string, partitions int32) *backgroundProducer {
	t.Helper()
	cl := testkit.Client(t, bootstrap, kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithCancel(context.Background())
	bp := &backgroundProducer{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(bp.done)
		for i := 0; ctx.Err() == nil; i++ {
			var batch []*kgo.Record
			for _, tp := range topics {
				for j := 0; j < 10; j++ {
					n := i*10 + j
					batch = append(batch, &kgo.Record{Topic: tp, Partition: int32(n) % partitions, Key: []byte(fmt.Sprintf("k-%d", n)),
						Value: []byte(fmt.Sprintf("%s-%d-\x00\xff", tp, n)), Headers: []kgo.RecordHeader{{Key: "n", Value: []byte(fmt.Sprint(n))}}})
				}
			}
			if err := cl.ProduceSync(context.Background(), batch...).FirstErr(); err != nil {
				bp.mu.Lock()
				bp.err = err
				bp.mu.Unlock()
				return
			}
			bp.mu.Lock()
			bp.recs = append(bp.recs, batch...)
			bp.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { bp.stop(); <-bp.done })
	return bp
}

func (bp *backgroundProducer) finish(t *testing.T) []*kgo.Record {
	t.Helper()
	bp.stop()
	<-bp.done
	if bp.err != nil {
		t.Fatalf("background producer: %v", bp.err)
	}
	return bp.recs
}

// assertNoLoss checks that every wanted record is on the target byte for byte, that each
// partition's records first appear in source order, and returns how many copies are duplicates
// (at-least-once after a SIGKILL).
func assertNoLoss(t *testing.T, want, got []*kgo.Record) int {
	t.Helper()
	type key struct {
		p int32
		v string
	}
	idx := map[key]int{}
	for i, w := range want {
		idx[key{w.Partition, string(w.Value)}] = i
	}
	seen := map[int]bool{}
	lastFirst := map[int32]int{}
	dups := 0
	for _, g := range got {
		i, ok := idx[key{g.Partition, string(g.Value)}]
		if !ok {
			t.Errorf("target record %q in partition %d is not a source record", g.Value, g.Partition)
			continue
		}
		if d := testkit.SameRecord(want[i], g); d != "" {
			t.Errorf("copy of %q: %s", g.Value, d)
		}
		if seen[i] {
			dups++
			continue
		}
		seen[i] = true
		if prev, ok := lastFirst[g.Partition]; ok && i < prev {
			t.Errorf("partition %d: %q first appears after a later record", g.Partition, g.Value)
		}
		lastFirst[g.Partition] = i
	}
	lost := 0
	for i, w := range want {
		if !seen[i] {
			if lost++; lost <= 5 {
				t.Errorf("lost: %s[%d] %q", w.Topic, w.Partition, w.Value)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d records lost", lost, len(want))
	}
	return dups
}

// TestServeGenuineDispatcherFaults: while records keep arriving, `mirror serve` (fetch mode) is
// SIGKILLed and restarted, its target cluster is stopped for 30 s, and a proxy in front of it
// answers every event 503 for a while (a 5xx storm). The genuine dispatcher, ordered and
// unordered, with the shipped delivery settings, gives events up during the faults (dead-letter
// sink); none of that loses a record: after the faults, the next events copy every record.
func TestServeGenuineDispatcherFaults(t *testing.T) {
	c := testkit.Require(t)
	_, tgt := faultPair(t) // a target of the fault tests' own, to stop it without disturbing others
	target := tgt.bootstrap
	const parts = 2
	topics := []string{testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "gxo"), parts, nil),
		testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "gxu"), parts, nil)}
	fn := startServe(t, c, target, topics[0]+","+topics[1])

	var storm atomic.Bool
	var stormed, proxied atomic.Int64
	u, err := url.Parse(fn.URL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0) // 502s while the function is down are expected
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if storm.Load() {
			stormed.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			http.Error(w, "storm", http.StatusServiceUnavailable)
			return
		}
		proxied.Add(1)
		rp.ServeHTTP(w, r) // 502 while the function is down
	}))
	t.Cleanup(proxy.Close)
	dls := dispatcher.NewSink(t, nil)
	var ds []*dispatcher.Dispatcher
	for i, tp := range topics {
		cfg := shippedDelivery(t, c.Source.Bootstrap, []string{tp}, proxy.URL+"/")
		cfg.Unordered, cfg.DeadLetter = i == 1, dls.URL
		ds = append(ds, dispatcher.New(t, cfg))
	}
	dispatcher.StartAll(t, ds...)
	remote := "source." + topics[0]
	onTarget := func() int64 { return EndOffsetsSum(testkit.Context(t, 20*time.Second), target, remote) }

	began := time.Now()
	bp := startProducing(t, c.Source.Bootstrap, topics, parts)
	waitTargetCount(t, target, remote, 50, 2*time.Minute)
	fn.kill()
	t.Logf("%s: SIGKILL with %d records of %s on the target", time.Since(began).Round(time.Second), onTarget(), remote)
	fn.start()

	waitTargetCount(t, target, remote, onTarget()+50, 2*time.Minute)
	paused := onTarget()
	tgt.kafka(t, "pause")
	time.Sleep(30 * time.Second) // the outage itself, not a synchronisation
	tgt.kafka(t, "resume")
	t.Logf("%s: target stopped 30 s with %d records of %s on it", time.Since(began).Round(time.Second), paused, remote)

	waitTargetCount(t, target, remote, onTarget()+50, 2*time.Minute)
	storm.Store(true)
	testkit.WaitFor(t, 2*time.Minute, "20 events answered 503 by the storm", func() bool { return stormed.Load() >= 20 })
	storm.Store(false)
	t.Logf("%s: 5xx storm: %d events answered 503", time.Since(began).Round(time.Second), stormed.Load())

	waitTargetCount(t, target, remote, onTarget()+50, 2*time.Minute)
	want := bp.finish(t)
	tails := append(tailRecords(topics[0], parts, topics[0]), tailRecords(topics[1], parts, topics[1])...)
	testkit.Produce(t, c.Source.Bootstrap, tails...)
	want = append(want, tails...)
	for _, tp := range topics {
		var w []*kgo.Record
		for _, r := range want {
			if r.Topic == tp {
				w = append(w, r)
			}
		}
		// Duplicates make a count useless as the end condition: wait for the tail records.
		var got []*kgo.Record
		testkit.WaitFor(t, 2*time.Minute, "the tail records on the target", func() bool {
			got, err = testkit.ReadAllErr(testkit.Context(t, time.Minute), target, "source."+tp)
			found := 0
			for _, g := range got {
				for _, tr := range tails {
					if tr.Topic == tp && tr.Partition == g.Partition && string(tr.Value) == string(g.Value) {
						found++
					}
				}
			}
			return err == nil && found >= parts
		})
		dups := assertNoLoss(t, w, got)
		t.Logf("%s: %s: %d records, all on the target, %d duplicate copies", time.Since(began).Round(time.Second), tp, len(w), dups)
	}
	t.Logf("%d events through the proxy, %d answered by the storm, %d dead-lettered", proxied.Load(), stormed.Load(), len(dls.Requests()))
}
