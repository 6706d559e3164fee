package engine

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/recordbatch"
)

// BenchmarkRecordPath measures the engine's own work per record of an at-least-once burst,
// without the clients: tracking a fetched record (in-flight bytes, the FIFO of upstream
// offsets), turning it into the record to produce, and its acknowledgement (the FIFO check,
// position bookkeeping, counters, MM2's offset-sync rules). One op is one record: allocs/op is
// allocations per record. Offset syncs that fall due go to a producer that never connects
// (they stay buffered; one in offset.lag.max records, or one per record where the source's
// offsets skip, as in a compacted or transactional topic).
func BenchmarkRecordPath(b *testing.B) {
	for _, bc := range []struct {
		name    string
		headers int
		gaps    bool // every upstream offset skips one (compacted source): a sync per record
	}{
		{name: "plain"},
		{name: "headers", headers: 3},
		{name: "sync-per-record", gaps: true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.MaxBufferedRecords(1<<30), kgo.RecordRetries(0))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			e := bareEngine(Options{MaxBufferedBytes: 1 << 30, OffsetLagMax: 100})
			syncs := newEmitter(&e.core, cl, "mm2-offset-syncs.t.internal", false, nil, nil)
			w := &work{tp: TP{"topic", 3}, remote: "src.topic", end: 1 << 62, initPos: -2}
			c := newCopier(&e.core, BurstOptions{}, []*work{w}, readyTopic(25), syncs)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c.writeCtx = ctx
			st := c.states[0]
			st.ctx = ctx
			// A fetched record's Context is the fetch pool's (non-nil) when pools are in use.
			fetchCtx := context.WithValue(context.Background(), struct{ k int }{1}, 1)
			value := make([]byte, 512)
			var headers []kgo.RecordHeader
			for range bc.headers {
				headers = append(headers, kgo.RecordHeader{Key: "trace-id", Value: value[:16]})
			}
			now := time.Now()
			// One record, reused: franz-go hands the engine records it allocated (and pools);
			// the benchmark's own allocation must not count as the engine's.
			r := &kgo.Record{}
			b.ReportAllocs()
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				up := int64(i)
				if bc.gaps {
					up = 2 * int64(i)
				}
				*r = kgo.Record{Topic: "topic", Partition: 3, Key: value[:8], Value: value, Headers: headers, Offset: up, Timestamp: now, Context: fetchCtx}
				recordSink{c}.track(st, r, recordSize(r))
				r.Offset = int64(i) // the downstream offset the target acknowledged
				st.ack(r, nil)
			}
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N), "ns/record")
			if got := c.records.Load(); got != int64(b.N) {
				b.Fatalf("%d records acknowledged, want %d", got, b.N)
			}
		})
	}
}

// TestInflightFIFOReleased checks that a partition's FIFO of records in flight lets go of its
// memory once emptied after a large fetch (1,000 partitions each keeping the entries of their
// largest fetch were half a burst's live heap), and that acknowledgements still meet their
// records in order after it was released.
func TestInflightFIFOReleased(t *testing.T) {
	e := bareEngine(Options{MaxBufferedBytes: 1 << 30, OffsetLagMax: 100})
	w := &work{tp: TP{"topic", 0}, remote: "src.topic", end: 1 << 62, initPos: -2}
	c := newCopier(&e.core, BurstOptions{}, []*work{w}, readyTopic(25), disabledEmitter())
	c.writeCtx = context.Background()
	st := c.states[0]
	st.ctx = c.writeCtx
	next := int64(0)
	fetch := func(n int) []*kgo.Record {
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: "topic", Value: []byte("v"), Offset: next}
			next++
			recordSink{c}.track(st, recs[i], recordSize(recs[i]))
		}
		return recs
	}
	for round := range 2 {
		recs := fetch(1000)
		if cap(st.inflight) < 1000 {
			t.Fatalf("round %d: FIFO capacity %d with 1000 records in flight", round, cap(st.inflight))
		}
		for _, r := range recs {
			st.ack(r, nil)
		}
		if st.inflight != nil || st.head != 0 {
			t.Fatalf("round %d: emptied FIFO kept %d entries of memory (head %d)", round, cap(st.inflight), st.head)
		}
		if err := c.error(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if got := st.position(); got != next-1 {
			t.Fatalf("round %d: position %d, want %d", round, got, next-1)
		}
	}
	// A small FIFO is kept for reuse.
	for _, r := range fetch(10) {
		st.ack(r, nil)
	}
	if st.inflight == nil || len(st.inflight) != 0 {
		t.Fatalf("small emptied FIFO: len %d, nil %v; want kept, empty", len(st.inflight), st.inflight == nil)
	}
}

// BenchmarkForwardPath measures the engine's own work per record of a forwarded batch, without
// the clients: the checks of a fetched batch (its CRC, the walk over its records that counts
// their bytes), the new header and CRC, and the acknowledgement (position, counters, MM2's
// offset-sync rules per record). One op is one batch of 1,000 records of 512 B (franz-go's,
// from a kfake cluster); ns/record and allocations per op are reported.
func BenchmarkForwardPath(b *testing.B) {
	f := newFakeFlow(b, nil)
	src := fakeBatch(b, f, "bench", kgo.NoCompression(), 1000, 512)
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.MaxBufferedRecords(1<<30), kgo.RecordRetries(0))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	e := bareEngine(Options{MaxBufferedBytes: 1 << 30, OffsetLagMax: 100})
	w := &work{tp: TP{"bench", 0}, remote: "src.bench", end: 1 << 62, initPos: -2}
	c := newCopier(&e.core, BurstOptions{}, []*work{w}, readyTopic(25), newEmitter(&e.core, cl, "mm2-offset-syncs.t.internal", false, nil, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.writeCtx, c.states[0].ctx = ctx, ctx
	fwd := &forwarder{c: c, producerID: 1, maxBatch: 1 << 20}
	p := &fwdPartition{st: c.states[0]}
	batch := make(recordbatch.Batch, len(src))
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		copy(batch, src) // a fetched batch, its CRC the source's
		p.next = 0
		w.end = 1 << 62
		it, why := fwd.item(p, batch)
		if why != "" {
			b.Fatal(why)
		}
		it.batch.Rewrite(fwd.producerID, 0, p.seq)
		// The target's offsets go on from batch to batch, so the sync rules see a steady copy.
		fwd.acked(p, it, int64(i)*1000)
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N)/1000, "ns/record")
}
