package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
)

// Exactly-once tuning: partitions copied at once (each has its own transactional producer and
// consumer), the record bytes that close a chunk committed in one transaction, and the
// fetch size (compressed bytes) of each worker's consumer.
const (
	eosWorkers            = 4
	eosMaxChunkBytes      = 2 << 20
	eosFetchBytes         = 128 << 10
	eosTransactionTimeout = time.Minute
)

// TransactionalID returns the transactional id used for a source partition in exactly-once
// mode. Any instance copying the same partition of the same flow uses the same id, so the
// newest one fences the older.
func (e *Engine) TransactionalID(tp TP) string {
	return fmt.Sprintf("%s-%s-%s-%s-%d", e.opts.TransactionalIDPrefix, e.opts.SourceAlias, e.opts.TargetAlias, tp.Topic, tp.Partition)
}

// eosRun is the shared state of an exactly-once burst.
type eosRun struct {
	e            *Engine
	bo           BurstOptions
	offsetsParts int32
	syncs        *syncEmitter
	remote       map[string]string
	limit        map[TP]int64

	budget     atomic.Int64 // records still allowed (if MaxRecords > 0)
	records    atomic.Int64
	bytes      atomic.Int64
	firstAckNS atomic.Int64
	timeUp     atomic.Bool

	mu      sync.Mutex
	results []partResult
	err     error
}

func (e *Engine) runExactlyOnce(ctx context.Context, start time.Time, bo BurstOptions, tps []TP, remote map[string]string, limit map[TP]int64, offsetsParts int32, syncs *syncEmitter) (Summary, error) {
	r := &eosRun{e: e, bo: bo, offsetsParts: offsetsParts, syncs: syncs, remote: remote, limit: limit}
	r.budget.Store(bo.MaxRecords)
	stopCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if bo.MaxDuration > 0 {
		t := time.AfterFunc(bo.MaxDuration, func() { r.timeUp.Store(true); cancel() })
		defer t.Stop()
	}
	// Fence every earlier copier of these partitions first: that aborts their open
	// transactions at once, so position reads below need not wait for them to time out.
	if err := r.fenceAll(ctx, tps); err != nil {
		return e.runner.failed(start, err)
	}
	queue := make(chan TP)
	var wg sync.WaitGroup
	for range min(eosWorkers, len(tps)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tp := range queue {
				res, err := r.copyPartition(ctx, stopCtx, tp)
				if fenced(err) {
					// Another instance took this partition over: its transactions win, ours
					// were aborted. That is the design working, not a failure.
					e.log.Warn("partition taken over by another instance (fenced)", "partition", tp.String(), "err", err)
					err = nil
				}
				r.mu.Lock()
				r.results = append(r.results, res)
				if err != nil && r.err == nil {
					r.err = err
					cancel()
				}
				r.mu.Unlock()
			}
		}()
	}
	done := make(chan struct{})
	if bo.Progress != nil {
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					bo.Progress(Progress{Records: r.records.Load(), Bytes: r.bytes.Load(), Lag: -1, Elapsed: time.Since(start)})
				}
			}
		}()
	}
feed:
	for _, tp := range tps {
		select {
		case queue <- tp:
		case <-stopCtx.Done():
			r.mu.Lock()
			r.results = append(r.results, partResult{tp: tp, remote: remote[tp.Topic], lag: -1, next: -1})
			r.mu.Unlock()
			continue feed
		}
	}
	close(queue)
	wg.Wait()
	close(done)

	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), max(bo.Grace, time.Second))
	defer fcancel()
	if err := syncs.finish(fctx); err != nil && r.err == nil {
		r.err = err
	}
	reason := ReasonDone
	switch {
	case r.err != nil:
		reason = ReasonFailed
	case bo.MaxRecords > 0 && r.budget.Load() <= 0:
		reason = ReasonMaxRecords
	case r.timeUp.Load():
		reason = ReasonMaxDuration
	case ctx.Err() != nil:
		reason = ReasonStopped
	}
	// Partitions never started (stopped early) report an unknown lag; count them from offsets.
	for i, p := range r.results {
		if p.lag < 0 {
			r.results[i].lag = 0
		}
	}
	s := e.runner.finishSummary(start, r.results, reason, r.err)
	if ns := r.firstAckNS.Load(); ns > 0 {
		s.FirstRecordMS = time.Duration(ns - start.UnixNano()).Milliseconds()
	}
	return s, r.err
}

// fenceAll initializes (and so fences) the transactional id of every partition, a few at a
// time.
func (r *eosRun) fenceAll(ctx context.Context, tps []TP) error {
	sem := make(chan struct{}, eosWorkers)
	errs := make(chan error, len(tps))
	var wg sync.WaitGroup
	for _, tp := range tps {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			cl, err := r.e.dial(ctx, Target, kgo.TransactionalID(r.e.TransactionalID(tp)), kgo.TransactionTimeout(eosTransactionTimeout))
			if err == nil {
				_, _, err = cl.ProducerID(ctx)
				cl.Close()
			}
			if err != nil {
				errs <- fmt.Errorf("fencing earlier copiers of %s: %w", tp, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// unsettledCommit is a transaction of one partition that failed with a retriable error while
// being flushed or committed: whether it committed is unknown until a new producer with the
// same transactional id has fenced it (which completes or aborts it) and the stored position
// has been read back.
type unsettledCommit struct {
	last    int64 // the source offset whose position the transaction stores
	end     int64 // the end (exclusive) the copy was planned to
	budget  int64 // chunk records taken from the MaxRecords budget
	records int64 // the chunk's records and bytes, counted if it committed
	bytes   int64
	// committed does what follows a confirmed commit (durable position, offset syncs,
	// counts), for when the stored position shows that the transaction did commit.
	committed func(context.Context) error
	err       error
}

func (u *unsettledCommit) Error() string { return u.err.Error() }
func (u *unsettledCommit) Unwrap() error { return u.err }

// copyPartition copies one partition in transactions (copyAttempt). A transaction that met a
// retriable error while it was committed (EndTransaction: connection refused by a restarting
// target) is not retried with TryCommit, which franz-go refuses once the outcome is unknown:
// the copy starts over with a new producer of the same transactional id, whose fencing
// completes or aborts the transaction, reads the stored position back (never the one kept in
// memory), and copies again from there. Each record is thus committed once whatever the
// outcome was. After such a commit, every retriable error is retried this way, with
// eosCommitBackoff, until the burst is stopped or the budget is spent; the error is then
// returned (the run says "retry later").
func (r *eosRun) copyPartition(ctx, stopCtx context.Context, tp TP) (partResult, error) {
	res, err := r.copyAttempt(ctx, stopCtx, tp, nil)
	var pending *unsettledCommit
	if !errors.As(err, &pending) {
		return res, err
	}
	rt := eosCommitBackoff.start()
	for {
		wait, ok := rt.next()
		if !ok {
			return res, &cluster.RetryBudgetError{What: "exactly-once copy of " + tp.String(), Attempts: rt.attempts(), Elapsed: rt.elapsed(), Err: err}
		}
		r.e.log.Warn("exactly-once copy: retriable error; copying again from the stored position",
			"partition", tp.String(), "attempt", rt.attempts(), "in", wait.Round(time.Millisecond).String(), "err", err.Error())
		if !sleep(stopCtx, wait) {
			return res, err
		}
		more, aerr := r.copyAttempt(ctx, stopCtx, tp, pending)
		res.records += more.records
		res.bytes += more.bytes
		if more.next >= 0 {
			res.next, res.lag = more.next, more.lag
		}
		if more.records > 0 {
			rt.reset() // progress: a later fault gets a whole budget
		}
		var u *unsettledCommit
		switch {
		case aerr == nil:
			return res, nil
		case errors.As(aerr, &u):
			pending = u
		case classify(aerr) == errFatal, classify(aerr) == errFenced:
			return res, aerr
		}
		err = aerr
	}
}

// copyAttempt copies one partition in transactions. The producer's epoch is obtained before
// the position is read: that fences (and aborts the open transaction of) any older instance,
// so the position read is final and no record is committed twice. With pending (a transaction
// whose outcome was unknown) the position is read from the offsets topic, pending is settled
// by it (see settle).
func (r *eosRun) copyAttempt(ctx, stopCtx context.Context, tp TP, pending *unsettledCommit) (partResult, error) {
	e := r.e
	res := partResult{tp: tp, remote: r.remote[tp.Topic], next: -1}
	wctx := context.WithoutCancel(ctx)
	prod, err := e.dial(ctx, Target, e.producerOpts(
		kgo.TransactionalID(e.TransactionalID(tp)),
		kgo.TransactionTimeout(eosTransactionTimeout),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedBytes(2*eosMaxChunkBytes+(16<<20)),
		kgo.MaxBufferedRecords(maxBufferedRecords),
	)...)
	if err != nil {
		return res, fmt.Errorf("connecting transactional producer for %s: %w", tp, err)
	}
	defer prod.Close()
	if _, _, err := prod.ProducerID(ctx); err != nil {
		return res, fmt.Errorf("initializing transactional producer %q: %w", e.TransactionalID(tp), err)
	}
	var works []*work
	if pending == nil {
		works, err = e.planner.plan(ctx, []TP{tp}, r.remote, r.limit, r.offsetsParts)
	} else {
		works, res.records, res.bytes, err = r.settle(wctx, tp, pending)
	}
	if err != nil {
		return res, err
	}
	w := works[0]
	// The partition's ledger and its sink: records and position commit together.
	st := &partLedger{w: w, ctx: wctx, lastAcked: -1, lastSeen: -1, written: -1, sampleUp: -1, next: w.start}
	var out sink = txnSink{r: r, prod: prod, w: w}
	res.lag = max(0, w.end-w.start)
	if w.initPos >= 0 {
		if _, err := out.write(wctx, st, sinkInput{last: w.initPos}); err != nil {
			return res, err
		}
	}
	res.next = w.start
	if w.start >= w.end {
		return res, nil
	}
	cons, err := newFetchSizer(eosFetchBytes, eosFetchBytes).dial(ctx, e.dial, Source,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tp.Topic: {tp.Partition: kgo.NewOffset().At(w.start)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(250*time.Millisecond),
	)
	if err != nil {
		return res, fmt.Errorf("connecting source consumer for %s: %w", tp, err)
	}
	defer cons.Close()
	next := w.start
	var stall stallWatch
	giveUp := false
	answers := func(ctx context.Context) bool { return sourceAnswers(ctx, e.srcAdm, e.log, tp.Topic) }
	// A chunk gathers records over several (small) fetches up to eosMaxChunkBytes of record
	// bytes, so transactions stay large while the fetched (decompressed) data held at once
	// stays small.
	var chunk []*kgo.Record
	var chunkBytes int64
	last := int64(-1)
	for next < w.end && stopCtx.Err() == nil {
		pctx, cancel := context.WithTimeout(stopCtx, time.Second)
		fs := cons.PollFetches(pctx)
		cancel()
		if ferr := fetchError(fs); ferr != nil {
			return res, ferr
		}
		full := false
		polled := false
		fs.EachRecord(func(rec *kgo.Record) {
			if full || rec.Offset >= w.end || rec.Offset < next || rec.Offset <= last {
				return
			}
			polled = true
			if !rec.Attrs.IsControl() {
				if r.bo.MaxRecords > 0 && r.budget.Add(-1) < 0 {
					full = true // the position must not pass a record left uncopied
					return
				}
				chunk = append(chunk, rec)
				chunkBytes += recordSize(rec)
			}
			last = rec.Offset
		})
		if !polled {
			if stopCtx.Err() == nil && fs.NumRecords() == 0 {
				giveUp = stall.empty(stopCtx, answers)
			}
		} else {
			stall.progress()
		}
		budgetLeft := r.bo.MaxRecords <= 0 || r.budget.Load() > 0
		if last >= 0 && (chunkBytes >= eosMaxChunkBytes || last >= w.end-1 || full || !budgetLeft || !polled || stopCtx.Err() != nil) {
			if _, err := out.write(wctx, st, sinkInput{recs: chunk, last: last}); err != nil {
				return res, err
			}
			for _, rec := range chunk {
				res.records++
				res.bytes += recordSize(rec)
			}
			next = last + 1
			res.lag, res.next = max(0, w.end-next), next
			chunk, chunkBytes, last = nil, 0, -1
		}
		if giveUp || !budgetLeft || full {
			break
		}
	}
	if last >= 0 {
		// Stopped mid-chunk: commit what was gathered.
		if _, err := out.write(wctx, st, sinkInput{recs: chunk, last: last}); err != nil {
			return res, err
		}
		for _, rec := range chunk {
			res.records++
			res.bytes += recordSize(rec)
		}
		res.lag, res.next = max(0, w.end-(last+1)), last+1
	}
	return res, nil
}

// commit copies chunk and stores position last in one transaction, then feeds the offset
// syncs of the committed records (txnSink.write).
func (r *eosRun) commit(ctx context.Context, prod *kgo.Client, w *work, chunk []*kgo.Record, last int64) error {
	e := r.e
	if err := prod.BeginTransaction(); err != nil {
		return fmt.Errorf("beginning transaction for %s: %w", w.tp, err)
	}
	type pair struct{ up, down int64 }
	pairs := make([]pair, len(chunk))
	var errMu sync.Mutex
	var firstErr error
	setErr := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
	}
	for i, rec := range chunk {
		pairs[i].up = rec.Offset
		prepareCopy(rec, w.remote)
		rec.Context = nil
		prod.Produce(ctx, rec, func(rec *kgo.Record, err error) {
			if err != nil {
				setErr(fmt.Errorf("writing %s offset %d to %q: %w", w.tp, pairs[i].up, w.remote, err))
				return
			}
			pairs[i].down = rec.Offset
		})
	}
	prod.Produce(ctx, e.positions.record(w.tp, last, r.offsetsParts), func(_ *kgo.Record, err error) {
		if err != nil {
			setErr(fmt.Errorf("writing position of %s: %w", w.tp, err))
		}
	})
	if err := prod.Flush(ctx); err != nil {
		setErr(err)
	}
	errMu.Lock()
	err := firstErr
	errMu.Unlock()
	committed := func(ctx context.Context) error {
		e.positions.known.advance(w.tp, last+1)
		var bytes int64
		for i, p := range pairs {
			r.syncs.record(ctx, w.tp.Topic, w.tp.Partition, p.up, p.down)
			bytes += recordSize(chunk[i])
		}
		if len(chunk) > 0 {
			r.records.Add(int64(len(chunk)))
			r.bytes.Add(bytes)
			r.firstAckNS.CompareAndSwap(0, time.Now().UnixNano())
			if err := r.syncs.send(ctx, false); err != nil {
				return err
			}
		}
		r.observeCommit(ctx, w, chunk, bytes, last)
		return nil
	}
	unsettled := func(err error) error {
		if c := classify(err); c == errFatal || c == errFenced {
			return err // refused, or aborted by a newer producer: nothing to settle
		}
		u := &unsettledCommit{last: last, end: w.end, committed: committed, err: err, records: int64(len(chunk))}
		for _, rec := range chunk {
			u.bytes += recordSize(rec)
		}
		if r.bo.MaxRecords > 0 {
			u.budget = u.records
		}
		return u
	}
	if err != nil {
		if aerr := prod.EndTransaction(ctx, kgo.TryAbort); aerr != nil {
			err = errors.Join(err, fmt.Errorf("aborting transaction: %w", aerr))
		}
		return unsettled(err)
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return unsettled(fmt.Errorf("committing transaction for %s: %w", w.tp, err))
	}
	return committed(ctx)
}

// settle reads tp's stored position once the transaction of pending has been fenced by this
// attempt's producer, settles pending by it (if the position shows that it committed, its
// follow-up runs and its records and bytes are returned to be counted; otherwise its records
// go back to the MaxRecords budget) and plans the copy from the stored position to the end
// planned at first. The position kept in memory is not used: it does not include pending's
// transaction, which may have committed.
func (r *eosRun) settle(ctx context.Context, tp TP, pending *unsettledCommit) (works []*work, records, bytes int64, err error) {
	read, err := r.e.positions.read(ctx, []TP{tp}, r.offsetsParts)
	if err != nil {
		return nil, 0, 0, err
	}
	if pending.committed != nil { // not settled by an earlier attempt
		if pos, ok := read[tp]; ok && pos >= pending.last {
			if err := pending.committed(ctx); err != nil {
				return nil, 0, 0, err
			}
			records, bytes = pending.records, pending.bytes
		} else {
			r.budget.Add(pending.budget)
		}
		pending.committed = nil
	}
	limit := map[TP]int64{tp: pending.end}
	if l, ok := r.limit[tp]; ok && l < pending.end {
		limit[tp] = l
	}
	works, err = r.e.planner.planCopies(ctx, []TP{tp}, r.remote, limit, read, true)
	return works, records, bytes, err
}

// fenced reports whether err means a newer producer with our transactional id exists and our
// transaction was aborted (classify: errFenced).
func fenced(err error) bool {
	return classify(err) == errFenced
}
