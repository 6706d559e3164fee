package engine

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// recordSink writes records with the copier's idempotent producer (c.prod): each record is
// produced once there is room under the in-flight bound, and its promise (partLedger.ack,
// copier.acked) confirms it in the ledger.
type recordSink struct{ c *copier }

// write produces recs, one partition's run of fetched records in offset order (control
// records only move the ledger's fetch mark).
func (s recordSink) write(ctx context.Context, st *partLedger, in sinkInput) (int64, error) {
	c, n := s.c, int64(0)
	for _, r := range in.recs {
		if r.Attrs.IsControl() {
			st.seen(r.Offset)
			r.Recycle()
			continue
		}
		size := recordSize(r)
		if l := c.inflight.load(); l+size > c.bound() && l > 0 && !c.inflight.wait(ctx, size, c.bound) {
			return n, errSinkStopped
		}
		s.track(st, r, size)
		c.prod.Produce(st.ctx, r, st.ack)
		n++
	}
	return n, nil
}

// track registers a fetched record about to be produced (in-flight bytes, the upstream offset
// its acknowledgement will confirm) and turns it into the record to produce.
func (s recordSink) track(st *partLedger, r *kgo.Record, size int64) {
	s.c.inflight.add(size)
	s.c.pending.Add(1)
	st.push(r)
	prepareCopy(r, st.w.remote)
	// r.Context stays the fetch pool's (Recycle needs it).
}

// flush waits until every record this copier produced was acknowledged: the producer's Flush
// on a client of its own, its own count on the engine's shared one (whose Flush would also
// wait for other calls' records).
func (s recordSink) flush(ctx context.Context) error {
	if s.c.reuse {
		return s.c.pending.wait(ctx)
	}
	return s.c.prod.Flush(ctx)
}
