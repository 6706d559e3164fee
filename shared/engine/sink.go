package engine

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"
)

// sink is where a copy writes to the target: one interface, three implementations. The record
// sink (recordSink: franz-go's idempotent producer; bursts, serve's copies, payload mode), the
// batch sink (batchSink: the forwarder's produce lanes, whole source batches) and the
// exactly-once committer (eosCommitter, eos.go: records and their position in one transaction
// per partition). A copy hands a sink one partition's work at a time (a fetched run of records
// or a batch), never one call per record; the sink's acknowledgements (exactly-once: commits)
// move that partition's ledger (partLedger) and feed the offset-sync rules, and every sink
// meets errors through classify and retries through backoff. Positions are stored by the
// committer (record and batch sinks) or inside the transaction (eosCommitter).
type sink interface {
	// write hands in, one partition's work, to the target for st. It returns the records
	// handed over, and an error if it stopped before all were: errSinkStopped when ctx ended,
	// otherwise what the copy or the partition ends with.
	write(ctx context.Context, st *partLedger, in sinkInput) (int64, error)
	// flush waits until everything the sink was handed is answered, or ctx ends.
	flush(ctx context.Context) error
}

// sinkInput is one partition's work for a sink: records for the record sink and the
// exactly-once committer (ended: they reach the partition's end), a batch for the batch sink.
type sinkInput struct {
	recs  []*kgo.Record
	ended bool

	part *fwdPartition // batchSink: the partition and the batch
	item *fwdItem
}

// errSinkStopped: the sink's context ended while it waited (for room under the in-flight
// bound).
var errSinkStopped = errors.New("sink stopped")

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

// batchSink writes whole source batches through the forwarder's produce lanes, one batch in
// flight per partition; an acknowledged batch is confirmed in the ledger (confirmBatch) and
// its records fed to the offset-sync rules.
type batchSink struct{ f *forwarder }

// write produces in.item's batch to in.part's remote partition, riding out retriable errors
// and those of unknown outcome (forwardBackoff), and returns its records once acknowledged.
func (s batchSink) write(ctx context.Context, st *partLedger, in sinkInput) (int64, error) {
	f, p, it := s.f, in.part, in.item
	down, tries, err := f.produce(ctx, p, it.batch)
	f.c.resent.Add(int64(tries - 1))
	p.tries = tries
	if err != nil {
		return 0, err
	}
	f.acked(p, *it, down)
	return int64(it.batch.Count()), nil
}

// flush: the batch sink's write returns once its batch is answered.
func (batchSink) flush(context.Context) error { return nil }

// fetchGate decides which partitions a copy's source consumer fetches, where the copy's
// writer holds something per partition that must be bounded (exactly-once: eosCommitter, a
// transactional producer per partition being copied). admit returns where the consumer starts
// (of offs, the copy's start offsets); attach hands it the consumer, to which it adds
// partitions it admits later and on which it pauses or moves partitions; waiting says
// partitions are being admitted (an empty poll is then no stall).
type fetchGate interface {
	admit(ctx context.Context, offs map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error)
	attach(cons *kgo.Client)
	waiting() bool
}
