package engine

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkRecordPath measures the engine's per-record work in an at-least-once burst without
// the clients: tracking a fetched record, turning it into the record to produce, and its
// acknowledgement (position bookkeeping, offset-sync rules). Offset syncs that fall due go to a
// producer that never connects (they stay buffered; one in offset.lag.max records).
func BenchmarkRecordPath(b *testing.B) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.MaxBufferedRecords(1<<30), kgo.RecordRetries(0))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	e := &Engine{opts: Options{MaxBufferedBytes: 1 << 30, OffsetLagMax: 100}}
	syncs := newEmitter(e, cl, "mm2-offset-syncs.t.internal", false)
	w := &work{tp: TP{"topic", 3}, remote: "src.topic", end: 1 << 62, initPos: -2}
	c := newCopier(e, BurstOptions{}, []*work{w}, readyTopic(25), syncs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.writeCtx = ctx
	st := c.states[0]
	st.ctx = ctx
	// A fetched record's Context is the fetch pool's (non-nil) when pools are in use.
	fetchCtx := context.WithValue(context.Background(), struct{ k int }{1}, 1)
	value := make([]byte, 512)
	now := time.Now()
	b.ReportAllocs()
	b.SetBytes(int64(len(value)))
	b.ResetTimer()
	for i := range b.N {
		r := kgo.Record{Topic: "topic", Partition: 3, Key: value[:8], Value: value, Offset: int64(i), Timestamp: now, Context: fetchCtx}
		c.track(st, &r, recordSize(&r))
		r.Offset = int64(i) // the downstream offset the target acknowledged
		st.ack(&r, nil)
	}
}
