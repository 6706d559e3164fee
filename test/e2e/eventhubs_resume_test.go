package e2e

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/engine"
	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/test/testkit"
)

// fetchCounter counts what a client fetched, batch by batch.
type fetchCounter struct{ records, bytes atomic.Int64 }

func (f *fetchCounter) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	f.records.Add(int64(m.NumRecords))
	f.bytes.Add(int64(m.UncompressedBytes))
}

// TestResumeCostOnNonCompactedOffsetsTopic is the resume on Event Hubs tiers
// without compaction: the offsets topic keeps every position ever written
// (until retention). Reading positions must cost a bounded number of
// fetched records near the end of each partition, not the history.
func TestResumeCostOnNonCompactedOffsetsTopic(t *testing.T) {
	c := testkit.Require(t)
	const (
		parts   = 3
		history = 60_000 // position records already in the topic
	)
	const alias = "ehsrc"
	topic := createTopic(t, c.Target.Bootstrap, testkit.Name(t, "mm2-offsets"), parts,
		map[string]*string{"cleanup.policy": ptr("delete")})

	// A long history: every source partition's position rewritten many
	// times, as bursts do; the newest values come last.
	tps := []engine.TP{{Topic: "orders", Partition: 0}, {Topic: "orders", Partition: 1}, {Topic: "orders", Partition: 2},
		{Topic: "orders", Partition: 3}, {Topic: "payments", Partition: 0}}
	want := map[engine.TP]int64{}
	var recs []*kgo.Record
	for i := range history {
		tp := tps[i%len(tps)]
		key := mm2.SourceOffsetKey(alias, tp.Topic, tp.Partition)
		recs = append(recs, &kgo.Record{Topic: topic, Partition: mm2.KeyPartition(key, parts), Key: key, Value: mm2.OffsetValue(int64(i))})
		want[tp] = int64(i)
	}
	// Small batches, as bursts write them (one position per partition per flush): a fetch
	// returns whole batches, so 1 MB batches would make any read window cost a whole batch.
	cl := testkit.Client(t, c.Target.Bootstrap, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(20*time.Millisecond),
		kgo.MaxBufferedRecords(history), kgo.ProducerBatchMaxBytes(16<<10))
	ctx := testkit.Context(t, 2*time.Minute)
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var historyBytes int64
	for _, r := range recs {
		historyBytes += int64(len(r.Key) + len(r.Value))
	}

	var counted fetchCounter
	dial := func(ctx context.Context, side engine.Side, extra ...kgo.Opt) (*kgo.Client, error) {
		addr := c.Source.Bootstrap
		if side == engine.Target {
			addr = c.Target.Bootstrap
		}
		return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.WithHooks(&counted)}, extra...)...)
	}
	e, err := engine.New(ctx, engine.Options{SourceAlias: alias, TargetAlias: "target",
		OffsetStorageTopic: topic, OffsetStoragePartitions: parts}, dial, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	got, err := e.ReadPositions(ctx, tps, parts)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range tps {
		if got[tp] != want[tp] {
			t.Errorf("position of %s = %d, want %d", tp, got[tp], want[tp])
		}
	}
	t.Logf("read %d positions fetching %d records / %d bytes of a %d-record (%d-byte payload) history",
		len(got), counted.records.Load(), counted.bytes.Load(), history, historyBytes)
	// Bounded by the read windows near the end (plus whole-batch
	// granularity), independent of the history: well under 5% of it.
	if n := counted.records.Load(); n == 0 || n > history/20 {
		t.Fatalf("fetched %d records of a %d-record history to read %d positions", n, history, len(tps))
	}
	if b := counted.bytes.Load(); b > historyBytes/20 {
		t.Fatalf("fetched %d bytes of a %d-byte history", b, historyBytes)
	}
}

func ptr(s string) *string { return &s }
