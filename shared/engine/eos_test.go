package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
)

var readCommitted = kgo.FetchIsolationLevel(kgo.ReadCommitted())

// TestExactlyOnce copies a topic holding committed and aborted transactions in exactly-once
// mode: a read_committed reader of the target sees exactly the committed source records.
func TestExactlyOnce(t *testing.T) {
	c := testkit.Require(t)
	src := c.Source.Bootstrap
	topic := testkit.CreateTopic(t, src, testkit.Name(t, "eos"), 2, nil)
	testkit.Produce(t, src, testkit.SampleRecords(topic, 2, 30)...)
	produceTxn(t, src, testkit.SampleRecords(topic, 2, 10), true)
	produceTxn(t, src, testkit.SampleRecords(topic, 2, 10), false)
	testkit.Produce(t, src, testkit.SampleRecords(topic, 2, 6)...)

	f := newFlow(t, topic)
	f.opts.ExactlyOnce = true
	s := f.burst(BurstOptions{MaxRecords: 20})
	if s.Records != 20 || s.Reason != ReasonMaxRecords {
		t.Errorf("budget burst: %d records, reason %q; want 20, max-records", s.Records, s.Reason)
	}
	s = f.burst(BurstOptions{})
	if s.Records != 26 || s.Reason != ReasonDone || !s.ExactlyOnce {
		t.Errorf("second burst: %d records, reason %q, eos %v; want 26, done, true", s.Records, s.Reason, s.ExactlyOnce)
	}
	if s := f.burst(BurstOptions{}); s.Records != 0 {
		t.Errorf("third burst copied %d, want 0", s.Records)
	}
	want := sourceRecords(t, src, topic, readCommitted)
	if len(want) != 46 {
		t.Fatalf("source has %d committed records, want 46", len(want))
	}
	testkit.AssertSameRecords(t, want, testkit.ReadAll(t, c.Target.Bootstrap, f.remote(topic), readCommitted))
	// Positions are committed with the records; the last one points at the last data record.
	pos := f.positions()
	for p := int32(0); p < 2; p++ {
		if pos[TP{topic, p}] < 25 {
			t.Errorf("position of %s-%d = %d, want >= 25", topic, p, pos[TP{topic, p}])
		}
	}
}

// TestExactlyOnceOverlappingBursts runs several exactly-once bursts of the same flow at once.
// Per-partition transactional ids fence older copiers, so whatever each burst reports, a
// read_committed reader of the target sees every source record exactly once.
func TestExactlyOnceOverlappingBursts(t *testing.T) {
	c := testkit.Require(t)
	src := c.Source.Bootstrap
	topic := testkit.CreateTopic(t, src, testkit.Name(t, "overlap"), 3, nil)
	const n = 30000
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i % 3), Key: []byte(fmt.Sprint(i)), Value: make([]byte, 200)}
	}
	testkit.Produce(t, src, recs...)
	f := newFlow(t, topic)
	f.opts.ExactlyOnce = true

	var wg sync.WaitGroup
	results := make([]string, 3)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := f.engine()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			s, err := e.Burst(ctx, BurstOptions{})
			results[i] = fmt.Sprintf("%d records, reason %s, err %v", s.Records, s.Reason, err)
		}()
		time.Sleep(150 * time.Millisecond)
	}
	wg.Wait()
	for i, r := range results {
		t.Logf("overlapping burst %d: %s", i, r)
	}
	// Whatever was fenced, a final burst completes the copy.
	if s := f.burst(BurstOptions{}); s.Lag != 0 {
		t.Errorf("final burst left lag %d", s.Lag)
	}
	got := testkit.ReadAll(t, c.Target.Bootstrap, f.remote(topic), readCommitted)
	seen := map[string]int{}
	for _, r := range got {
		seen[string(r.Key)]++
	}
	dups := 0
	for k, v := range seen {
		if v > 1 {
			if dups++; dups < 5 {
				t.Errorf("record %s committed %d times", k, v)
			}
		}
	}
	if len(seen) != n || len(got) != n {
		t.Errorf("target has %d records (%d distinct), want %d", len(got), len(seen), n)
	}
}
