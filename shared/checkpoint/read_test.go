package checkpoint

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/shared/round"
	"github.com/mm2go/mm2go/test/testkit"
)

// TestReadPartitionLarge reads a large offset-syncs topic and checks that every record arrives
// once, in order, and that reading allocates per fetch, not per record (pooled records).
func TestReadPartitionLarge(t *testing.T) {
	c := testkit.Require(t)
	const n, partitions = 300_000, 16
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "syncs"), 1, nil)
	prod := testkit.Client(t, c.Source.Bootstrap, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(n))
	recs := make([]*kgo.Record, 0, n)
	for i := 0; i < n; i++ {
		k, v, err := mm2.OffsetSync{Topic: "orders", Partition: int32(i % partitions), UpstreamOffset: int64(i), DownstreamOffset: int64(2 * i)}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: k, Value: v})
	}
	if err := prod.ProduceSync(testkit.Context(t, 2*time.Minute), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	recs = nil

	dial := func(_ context.Context, extra ...kgo.Opt) (*kgo.Client, error) {
		return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Source.Bootstrap)}, extra...)...)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	next := int64(0)
	res, err := readPartition(testkit.Context(t, 2*time.Minute), dial, topic, 0, -1, kadm.TopicID{}, func(r *kgo.Record) error {
		if r.Offset != next {
			t.Fatalf("offset %d after %d", r.Offset, next-1)
		}
		next++
		return nil
	})
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != n || next != n || res.Incomplete {
		t.Fatalf("read %d records (%+v), want %d", next, res, n)
	}
	allocs := float64(after.Mallocs-before.Mallocs) / n
	t.Logf("read %d offset syncs in %s (%.0f/s), %.3f allocations per record (whole process)", n, elapsed.Round(time.Millisecond), n/elapsed.Seconds(), allocs)
	if allocs > 0.2 {
		t.Errorf("%.3f allocations per record: records are not pooled", allocs)
	}

	// The same topic through the round's decoder into MM2's 64-slot store.
	j := &Job{opts: Options{Flow: round.Flow{SourceAlias: "a", TargetAlias: "b"}}, source: dial, syncsTopic: topic}
	if err := j.opts.withDefaults(); err != nil {
		t.Fatal(err)
	}
	j.log = discardLogger()
	sum := &Summary{}
	start = time.Now()
	store, err := j.loadOffsetSyncs(testkit.Context(t, 2*time.Minute), sum, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("loaded %d offset syncs into the store in %s", sum.OffsetSyncsRead, time.Since(start).Round(time.Millisecond))
	last := int64(n - 1)
	if d, ok := store.Translate("orders", int32(last%partitions), last); !ok || d != 2*last {
		t.Errorf("translate newest sync: %d %v, want %d", d, ok, 2*last)
	}
}
