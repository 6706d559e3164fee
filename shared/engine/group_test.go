package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
)

// TestBurstGroup runs three bursts of one flow at once with a burst group: together they copy
// every record, and the group never gets committed offsets (positions stay in the offsets
// topic only).
func TestBurstGroup(t *testing.T) {
	c := testkit.Require(t)
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "grp"), 6, nil)
	const n = 60000
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i % 6), Key: []byte(fmt.Sprint(i)), Value: make([]byte, 300)}
	}
	testkit.Produce(t, c.Source.Bootstrap, recs...)
	f := newFlow(t, topic)
	group := testkit.Name(t, "burstgroup")

	var wg sync.WaitGroup
	counts := make([]int64, 3)
	ends := make([]string, 3) // each burst's reason and lag, for the log
	errs := make([]error, 3)
	for i := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			s, err := f.engine().Burst(ctx, BurstOptions{Group: group})
			counts[i], errs[i] = s.Records, err
			ends[i] = fmt.Sprintf("%s, lag %d", s.Reason, s.Lag)
		}()
	}
	wg.Wait()
	var total int64
	for i := range counts {
		if errs[i] != nil {
			t.Errorf("burst %d: %v", i, errs[i])
		}
		total += counts[i]
	}
	t.Logf("records copied per burst: %v (total %d for %d source records); ends: %q", counts, total, n, ends)
	got := testkit.ReadAll(t, c.Target.Bootstrap, f.remote(topic))
	seen := map[string]bool{}
	for _, r := range got {
		seen[string(r.Key)] = true
	}
	if len(seen) != n {
		t.Errorf("target has %d distinct records, want %d", len(seen), n)
	}
	// A later burst in the same group finds nothing left.
	if s := f.burst(BurstOptions{Group: group}); s.Records != 0 {
		t.Errorf("follow-up group burst copied %d, want 0", s.Records)
	}
	offs, err := testkit.Admin(t, c.Source.Bootstrap).FetchOffsets(testkit.Context(t, 10*time.Second), group)
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) != 0 {
		t.Errorf("burst group has committed offsets %v; it must only assign partitions", offs)
	}
}

// TestLagGroup: with a lag group, every successful copy (burst, exactly-once burst, shared
// event-driven copy) commits the next offset of each partition it planned to that source
// group, so consumer-lag tools see mm2go's lag: zero after a catch-up, the new records after
// more arrive. An empty partition is committed at its start. On kfake.
func TestLagGroup(t *testing.T) {
	for _, eos := range []bool{false, true} {
		t.Run(fmt.Sprintf("exactly-once=%v", eos), func(t *testing.T) {
			f := newFakeFlow(t, map[string]int32{"lag": 3})
			f.produce("lag", 2, 10) // partition 2 stays empty
			f.opts.ExactlyOnce = eos
			f.opts.LagGroup = "laggroup"
			e := f.engine()
			ctx := context.Background()
			committed := func() map[int32]int64 {
				offs, err := kadm.NewClient(f.client(Source)).FetchOffsets(ctx, f.opts.LagGroup)
				if err != nil {
					t.Fatal(err)
				}
				out := map[int32]int64{}
				offs.Each(func(o kadm.OffsetResponse) { out[o.Partition] = o.At })
				return out
			}
			if _, err := e.Burst(ctx, BurstOptions{}); err != nil {
				t.Fatal(err)
			}
			if got, want := committed(), map[int32]int64{0: 10, 1: 10, 2: 0}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("after the burst: committed %v, want %v", got, want)
			}
			late := &kgo.Record{Topic: "lag", Partition: 1, Value: []byte("late")}
			if err := f.client(Source, kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx, late).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if _, err := e.CopyPartition(ctx, "lag", 1, -1); err != nil {
				t.Fatal(err)
			}
			if got, want := committed(), map[int32]int64{0: 10, 1: 11, 2: 0}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("after the event-driven copy: committed %v, want %v", got, want)
			}
		})
	}
}
