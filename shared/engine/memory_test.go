package engine

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
)

// TestBurstMemoryBounded copies a backlog and one 10 times larger and checks that the larger
// one's peak heap is not much larger: the engine's buffers (records in flight, fetches,
// exactly-once chunks) are bounded, so memory must not follow the backlog. It compares heap
// sizes sampled during the bursts, never durations.
func TestBurstMemoryBounded(t *testing.T) {
	c := testkit.Require(t)
	if testing.Short() {
		t.Skip("copies 220 MB")
	}
	const size = 1024
	small := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "small"), 8, nil)
	large := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "large"), 8, nil)
	seed(t, c.Source.Bootstrap, small, 20_000, size)
	seed(t, c.Source.Bootstrap, large, 200_000, size)

	for _, eos := range []bool{false, true} {
		t.Run(fmt.Sprintf("exactly-once=%v", eos), func(t *testing.T) {
			peak := map[string]uint64{}
			for _, topic := range []string{small, large} {
				f := newFlow(t, topic)
				f.opts.ExactlyOnce = eos
				e := f.engine()
				var s Summary
				peak[topic] = peakHeap(t, func() {
					var err error
					s, err = e.Burst(testkit.Context(t, 2*time.Minute), BurstOptions{})
					if err != nil {
						t.Fatalf("burst: %v", err)
					}
				})
				t.Logf("%s: %d records in %s, peak live heap %.1f MiB", topic, s.Records, s.Duration, float64(peak[topic])/(1<<20))
			}
			// Slack for the clients' own state (connections, metadata, producer batches, which
			// fill more when the copy runs at full speed without the race detector: 58-77 MiB
			// live for the large backlog then, 34-44 MiB under -race). A heap that followed the
			// backlog would be some 200 MiB larger.
			if limit := 2*peak[small] + 40<<20; peak[large] > limit {
				t.Errorf("peak live heap grew with the backlog: %.1f MiB for 200k records vs %.1f MiB for 20k (limit %.1f MiB)",
					float64(peak[large])/(1<<20), float64(peak[small])/(1<<20), float64(limit)/(1<<20))
			}
		})
	}
}

// seed writes n records of size bytes round-robin into topic, sharing one value buffer so the
// test's own memory stays small.
func seed(t *testing.T, bootstrap, topic string, n, size int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.MaxBufferedBytes(8<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	value := make([]byte, size)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	ctx := testkit.Context(t, time.Minute)
	var once sync.Once
	var perr error
	for range n {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				once.Do(func() { perr = err })
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if perr != nil {
		t.Fatalf("seeding %s: %v", topic, perr)
	}
}

// peakHeap runs fn and returns the largest live heap (the bytes the latest collection
// marked, /gc/heap/live:bytes) sampled while it ran, after a collection before it started.
// Live bytes do not depend on the collector's pacing, unlike the heap's total size.
func peakHeap(t *testing.T, fn func()) uint64 {
	t.Helper()
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan uint64)
	go func() {
		var peak uint64
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-ctx.Done():
				done <- peak
				return
			case <-tick.C:
			}
		}
	}()
	fn()
	cancel()
	return <-done
}
