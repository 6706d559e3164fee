package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
)

// Exactly-once tuning: transactional producers initialized at once while fencing, partitions
// whose transactions end at once in a commit cycle, and the transaction timeout.
const (
	eosWorkers            = 4
	eosCommitters         = 16
	eosTransactionTimeout = time.Minute
)

// TransactionalID returns the transactional id used for a source partition in exactly-once
// mode. Any instance copying the same partition of the same flow uses the same id, so the
// newest one fences the older.
func (e *Engine) TransactionalID(tp TP) string {
	return fmt.Sprintf("%s-%s-%s-%s-%d", e.opts.TransactionalIDPrefix, e.opts.SourceAlias, e.opts.TargetAlias, tp.Topic, tp.Partition)
}

// eosCopier returns the copier of an exactly-once run over tps: the copier's fetch, stall and
// budget loop (copyLoop), writing through a txnSink. Every partition's transactional producer
// is initialized first, which fences any earlier copier of it (its open transaction is
// aborted at once), and only then are positions read and the copy planned: no instance can
// commit past the position planned from, so no record is committed twice.
func (e *Engine) eosCopier(ctx context.Context, bo BurstOptions, tps []TP, remote map[string]string, limit map[TP]int64, offsets *pendingTopic, syncs *syncEmitter) (*copier, error) {
	ts := &txnSink{parts: make(map[TP]*txnPart, len(tps))}
	if err := ts.fence(ctx, e, tps); err != nil {
		ts.close()
		return nil, err
	}
	works, err := e.planner.plan(ctx, tps, remote, limit, offsets.parts)
	if err != nil {
		ts.close()
		return nil, err
	}
	for _, w := range works {
		if p := ts.parts[w.tp]; p != nil && w.start >= w.end && w.initPos < 0 {
			p.prod.Close() // nothing to commit: its fencing is all it was for
			delete(ts.parts, w.tp)
		}
	}
	c := newCopier(e, bo, works, offsets, syncs)
	c.remote, c.tps = remote, tps
	c.txn, ts.c, ts.stop = ts, c, ctx
	return c, nil
}

// producer connects and initializes tp's transactional producer, fencing every earlier one
// with the same transactional id.
func (s *txnSink) producer(ctx context.Context, e *Engine, tp TP) (*kgo.Client, error) {
	prod, err := e.dial(ctx, Target, e.producerOpts(
		kgo.TransactionalID(e.TransactionalID(tp)),
		kgo.TransactionTimeout(eosTransactionTimeout),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedBytes(e.opts.producerBufferedBytes()),
		kgo.MaxBufferedRecords(maxBufferedRecords),
	)...)
	if err != nil {
		return nil, fmt.Errorf("connecting transactional producer for %s: %w", tp, err)
	}
	if _, _, err := prod.ProducerID(ctx); err != nil {
		prod.Close()
		return nil, fmt.Errorf("initializing transactional producer %q: %w", e.TransactionalID(tp), err)
	}
	return prod, nil
}

// fence initializes (and so fences) the transactional producer of every partition, a few at
// a time, and keeps them as the partitions' producers.
func (s *txnSink) fence(ctx context.Context, e *Engine, tps []TP) error {
	sem := make(chan struct{}, eosWorkers)
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, tp := range tps {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			prod, err := s.producer(ctx, e, tp)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("fencing earlier copiers of %s: %w", tp, err))
				return
			}
			s.parts[tp] = &txnPart{prod: prod, last: -1, written: -1}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// close closes every partition's producer.
func (s *txnSink) close() {
	for _, p := range s.parts {
		p.prod.Close()
	}
}

// commit is an exactly-once commit cycle (committer.commit): every partition with records
// or a position not yet committed ends its transaction with its position inside it, several
// partitions at once (a goroutine per partition, at most eosCommitters). It runs on the
// committer's goroutine while the fetch loop waits for it (or after the loop, at the finish),
// and holds no lock across its I/O.
func (s *txnSink) commit(ctx, wait context.Context, ledgers []*partLedger, parts int32) {
	sem := make(chan struct{}, eosCommitters)
	var wg sync.WaitGroup
	for _, st := range ledgers {
		p := s.parts[st.w.tp]
		if p == nil || p.gone {
			continue
		}
		pos := p.last
		if pos < 0 && p.written < 0 {
			pos = st.w.initPos // auto.offset.reset=latest: the position alone
		}
		if pos < 0 || pos <= p.written {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			s.end(ctx, wait, st, p, pos, parts)
		})
	}
	wg.Wait()
}

// end commits p's open transaction (begun for the position alone if none is) with position
// pos of st's partition inside it. A commit refused for good fails the copy; one fenced by a
// newer producer gives the partition up to it; one whose outcome is unknown (or that met a
// retriable error) is settled and, if it did not commit, written again (settle). Records (the
// position, offset syncs) are produced under ctx, the copy's writes; the waits end with wait.
func (s *txnSink) end(ctx, wait context.Context, st *partLedger, p *txnPart, pos int64, parts int32) {
	err := p.tryCommit(ctx, wait, s.c.e.positions.record(st.w.tp, pos, parts))
	for err != nil {
		if errors.Is(err, errGaveUp) {
			return
		}
		switch classify(err) {
		case errFenced:
			// Another instance took this partition over: its transactions win, ours were
			// aborted. That is the design working, not a failure; its records are left as lag.
			s.c.e.log.Warn("partition taken over by another instance (fenced)", "partition", st.w.tp.String(), "err", err)
			s.giveUp(st, p)
			return
		case errFatal:
			s.c.fail(fmt.Errorf("exactly-once copy of %s: %w", st.w.tp, err))
			s.giveUp(st, p)
			return
		}
		var settled bool
		if settled, err = s.settle(ctx, wait, st, p, pos, parts, err); settled {
			break
		}
	}
	s.committed(ctx, st, p, pos)
}

// tryCommit produces position into p's transaction (beginning one if none is open), waits
// for its records and commits it. On an error the transaction is aborted as far as it can be.
func (p *txnPart) tryCommit(ctx, wait context.Context, position *kgo.Record) error {
	if !p.open {
		if err := p.prod.BeginTransaction(); err != nil {
			return fmt.Errorf("beginning transaction: %w", err)
		}
		p.open = true
	}
	p.prod.Produce(ctx, position, func(_ *kgo.Record, err error) {
		if err != nil {
			p.setErr(fmt.Errorf("writing position: %w", err))
		}
	})
	err := p.prod.Flush(wait)
	if err == nil {
		err = p.error()
	}
	p.open = false
	if err != nil {
		if aerr := p.prod.EndTransaction(wait, kgo.TryAbort); aerr != nil {
			err = errors.Join(err, fmt.Errorf("aborting transaction: %w", aerr))
		}
		return err
	}
	if err := p.prod.EndTransaction(wait, kgo.TryCommit); err != nil {
		return fmt.Errorf("committing transaction: %w", err)
	}
	return nil
}

// settle settles a transaction of p that did not commit for sure (cause): after a wait
// (eosCommitBackoff, reset by every commit), a new producer with the same transactional id
// fences it, which completes or aborts it, and the stored position is read back (never the
// one kept in memory). If it shows the transaction committed, settle reports so. Otherwise
// the records the position does not cover are written again in a new transaction, which is
// committed: its error, if any, is settled the same way by the caller. A stop request or a
// spent budget fails the copy with the cause (the next run starts from the stored position).
func (s *txnSink) settle(ctx, wait context.Context, st *partLedger, p *txnPart, pos int64, parts int32, cause error) (committed bool, err error) {
	e, tp := s.c.e, st.w.tp
	if wait.Err() != nil {
		return false, s.abandon(st, p, &unsettledCommit{err: cause})
	}
	if p.rt == nil {
		p.rt = eosCommitBackoff.start()
	}
	delay, ok := p.rt.next()
	if !ok {
		return false, s.abandon(st, p, &cluster.RetryBudgetError{What: "exactly-once copy of " + tp.String(), Attempts: p.rt.attempts(), Elapsed: p.rt.elapsed(), Err: cause})
	}
	e.log.Warn("exactly-once copy: retriable error; copying again from the stored position",
		"partition", tp.String(), "attempt", p.rt.attempts(), "in", delay.Round(time.Millisecond).String(), "err", cause.Error())
	if !sleep(s.stop, delay) {
		return false, s.abandon(st, p, &unsettledCommit{err: cause})
	}
	prod, err := s.producer(wait, e, tp)
	if err != nil {
		return false, err
	}
	p.prod.Close()
	p.prod, p.open = prod, false
	p.clearErr()
	read, err := e.positions.read(wait, []TP{tp}, parts)
	if err != nil {
		return false, err
	}
	stored, ok := read[tp]
	if ok && stored >= pos {
		return true, nil
	}
	// Not committed: what the position covers (possibly written by an instance this
	// producer has just fenced) is on the target; the rest goes again.
	if ok && stored > p.written {
		p.written = stored
		s.c.txnBytes.Add(-p.drop(stored))
	}
	return false, p.rewrite(ctx, wait, st.w.remote, s.c.e.positions.record(tp, pos, parts))
}

// drop takes the records up to upstream offset through out of p's transaction (another
// instance, fenced since, committed them) and returns their bytes.
func (p *txnPart) drop(through int64) int64 {
	n, bytes := 0, int64(0)
	for i, r := range p.recs {
		if p.ups[i] <= through {
			bytes += recordSize(r)
			continue
		}
		p.recs[n], p.ups[n] = r, p.ups[i]
		n++
	}
	clear(p.recs[n:])
	p.recs, p.ups = p.recs[:n], p.ups[:n]
	p.bytes -= bytes
	return bytes
}

// rewrite writes the records of p's aborted transaction again in a new transaction, with
// position, and commits it.
func (p *txnPart) rewrite(ctx, wait context.Context, remote string, position *kgo.Record) error {
	if err := p.prod.BeginTransaction(); err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	p.open = true
	for i, r := range p.recs {
		prepareCopy(r, remote)
		p.prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				p.setErr(fmt.Errorf("writing offset %d to %q: %w", p.ups[i], remote, err))
			}
		})
	}
	return p.tryCommit(ctx, wait, position)
}

// errGaveUp: settle gave the partition up (abandon); nothing more to do for it.
var errGaveUp = errors.New("exactly-once partition given up")

// abandon ends p's retries: the copy fails with err and the partition's open records are
// dropped (the next run copies them from the stored position). It returns errGaveUp.
func (s *txnSink) abandon(st *partLedger, p *txnPart, err error) error {
	s.c.fail(fmt.Errorf("exactly-once copy of %s: %w", st.w.tp, err))
	s.giveUp(st, p)
	return errGaveUp
}

// giveUp drops p's transaction and takes the partition off the copy (fenced, refused, or
// abandoned): it copies nothing more and its records left are its lag.
func (s *txnSink) giveUp(st *partLedger, p *txnPart) {
	p.gone = true
	s.c.txnBytes.Add(-p.bytes)
	p.reset()
	c := s.c
	c.mu.Lock()
	if !st.done {
		st.done = true
		c.active--
	}
	closing := c.closing // the loop has ended: its consumer may be closed
	c.mu.Unlock()
	if s.cons != nil && !closing {
		s.cons.PauseFetchPartitions(map[string][]int32{st.w.tp.Topic: {st.w.tp.Partition}})
	}
}

// committed does what follows p's transaction committed with position pos: the ledger
// confirms its records, the position is known durable, the records' offset syncs are fed and
// the copy's counts and latency move.
func (s *txnSink) committed(ctx context.Context, st *partLedger, p *txnPart, pos int64) {
	c, tp := s.c, st.w.tp
	n, bytes := int64(len(p.recs)), p.bytes
	st.confirmBatch(pos, int32(n), bytes)
	p.written = pos
	c.e.positions.known.advance(tp, pos+1)
	for i, r := range p.recs {
		c.syncs.recordAt(ctx, st.sync, p.ups[i], r.Offset)
	}
	if n > 0 {
		c.records.Add(n)
		c.bytes.Add(bytes)
		c.firstAckNS.CompareAndSwap(0, time.Now().UnixNano())
		if m := c.e.opts.Metrics; m != nil {
			// Record age is not sampled in exactly-once mode: a record is only seen as
			// copied here, after its commit, where age and latency are the same figure.
			m.ReplicationLatency(ctx, tp.Topic, tp.Partition, time.Since(p.recs[0].Timestamp))
		}
	}
	c.txnBytes.Add(-bytes)
	if p.rt != nil {
		p.rt.reset() // progress: a later fault gets a whole budget
	}
	p.reset()
}

// unsettledCommit is the error of a copy stopped while a transaction of it was unsettled:
// whether it committed was unknown (a new producer with the same transactional id would have
// fenced it, completing or aborting it, and the stored position told; txnSink.settle). The
// next run reads the stored position after fencing, so it starts from what did commit.
type unsettledCommit struct{ err error }

func (u *unsettledCommit) Error() string { return u.err.Error() }
func (u *unsettledCommit) Unwrap() error { return u.err }
