package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// sink is where a copy writes to the target: one interface, three implementations. The record
// sink (recordSink: franz-go's idempotent producer; bursts, serve's copies, payload mode), the
// batch sink (batchSink: the forwarder's produce lanes, whole source batches) and the
// transactional sink (txnSink: exactly-once, records and their position in one transaction).
// A copy hands a sink one partition's work at a time (a fetched run of records, a batch, a
// chunk), never one call per record; the sink's acknowledgements move that partition's ledger
// (partLedger) and feed the offset-sync rules, and every sink meets errors through classify
// and retries through backoff. Positions are stored by the committer (record and batch sinks)
// or inside the transaction (txnSink).
type sink interface {
	// write hands in, one partition's work, to the target for st. It returns the records
	// handed over, and an error if it stopped before all were: errSinkStopped when ctx ended,
	// otherwise what the copy or the partition ends with.
	write(ctx context.Context, st *partLedger, in sinkInput) (int64, error)
	// flush waits until everything the sink was handed is answered, or ctx ends.
	flush(ctx context.Context) error
}

// sinkInput is one partition's work for a sink: records for the record and transactional
// sinks, a batch for the batch sink.
type sinkInput struct {
	recs []*kgo.Record

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

// txnSink writes exactly-once (Options.ExactlyOnce): each partition has its own
// transactional producer (TransactionalID), whose open transaction takes the records the
// fetch loop hands in; a commit cycle (committer.commit, when commitPolicy says) ends every
// partition's transaction with its position inside it (the position record goes to the
// offsets topic in the same transaction, as Connect's exactly-once source tasks do), and only
// then are the records confirmed in the ledger and their offset syncs fed. A commit whose
// outcome is unknown is settled by fencing and reading the position back (eos.go).
//
// Ownership: parts (the map) and stop are set before the copy starts; cons by the fetch loop
// as it starts, read by commit cycles. A txnPart is touched by the fetch loop (write) and by
// the committer's cycle that ends its transaction, never at once: the fetch loop waits for
// its exactly-once cycles (committer.commit), and the finish's cycle runs after the loop. Its
// err is also set by its producer's promises (errMu).
type txnSink struct {
	c     *copier
	parts map[TP]*txnPart
	stop  context.Context // the run's context: a stop request ends the retries of a commit
	cons  *kgo.Client     // the fetch loop's consumer (nil before it runs)
}

// txnPart is one partition's transactional producer and its open transaction.
type txnPart struct {
	prod    *kgo.Client
	open    bool          // a transaction is begun
	last    int64         // newest upstream offset handed in (a record or a control record) not committed, -1 none
	written int64         // position last committed, -1 none
	recs    []*kgo.Record // records in the open transaction (their Offset is the target's once produced)
	ups     []int64       // their upstream offsets
	bytes   int64         // their bytes
	gone    bool          // given up (fenced, refused, abandoned): nothing more is written
	rt      *retrier      // unsettled commits since the last commit (eosCommitBackoff)

	errMu sync.Mutex
	err   error // the open transaction's first produce error
}

func (p *txnPart) setErr(err error) {
	p.errMu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.errMu.Unlock()
}

func (p *txnPart) error() error {
	p.errMu.Lock()
	defer p.errMu.Unlock()
	return p.err
}

func (p *txnPart) clearErr() {
	p.errMu.Lock()
	p.err = nil
	p.errMu.Unlock()
}

// reset empties p's transaction once it is settled (committed or given up).
func (p *txnPart) reset() {
	clear(p.recs)
	p.recs, p.ups, p.bytes, p.last = p.recs[:0], p.ups[:0], 0, -1
	p.clearErr()
}

// write produces in.recs, one partition's run of fetched records, into the partition's open
// transaction (begun by the first record), each once there is room under the in-flight
// bound; an acknowledgement frees its room, and the records count as copied when their
// transaction commits. Control records only move the position the next commit stores.
func (s *txnSink) write(ctx context.Context, st *partLedger, in sinkInput) (int64, error) {
	c, p, n := s.c, s.parts[st.w.tp], int64(0)
	for _, r := range in.recs {
		if p == nil || p.gone {
			return n, nil
		}
		if r.Attrs.IsControl() {
			p.last = r.Offset
			r.Recycle()
			continue
		}
		size := recordSize(r)
		if l := c.inflight.load(); l+size > c.bound() && l > 0 && !c.inflight.wait(ctx, size, c.bound) {
			return n, errSinkStopped
		}
		if !p.open {
			if err := p.prod.BeginTransaction(); err != nil {
				err = fmt.Errorf("beginning transaction for %s: %w", st.w.tp, err)
				c.fail(err)
				return n, err
			}
			p.open = true
		}
		c.inflight.add(size)
		c.txnBytes.Add(size)
		p.recs, p.ups, p.bytes, p.last = append(p.recs, r), append(p.ups, r.Offset), p.bytes+size, r.Offset
		up := r.Offset
		prepareCopy(r, st.w.remote)
		p.prod.Produce(st.ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				p.setErr(fmt.Errorf("writing %s offset %d to %q: %w", st.w.tp, up, st.w.remote, err))
			} else if !c.txnAcked.Load() {
				c.txnAcked.Store(true) // before the release below: it lifts the start bound
			}
			c.inflight.release(size)
		})
		n++
	}
	if p != nil {
		c.policy.transaction(p.bytes) // the fetch loop's, as write is
	}
	return n, nil
}

// flush: a transaction's records are awaited by the commit that ends it.
func (*txnSink) flush(context.Context) error { return nil }
