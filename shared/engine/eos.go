package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
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
		return e.failed(start, err)
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
	s := e.finishSummary(start, r.results, reason, r.err)
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

// copyPartition copies one partition in transactions. The producer's epoch is obtained before
// the position is read: that fences (and aborts the open transaction of) any older instance,
// so the position read is final and no record is committed twice.
func (r *eosRun) copyPartition(ctx, stopCtx context.Context, tp TP) (partResult, error) {
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
	works, err := e.plan(ctx, []TP{tp}, r.remote, r.limit, r.offsetsParts)
	if err != nil {
		return res, err
	}
	w := works[0]
	res.lag = max(0, w.end-w.start)
	if w.initPos >= 0 {
		if err := r.commit(wctx, prod, w, nil, w.initPos); err != nil {
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
	idle := 0
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
				idle++
			}
		} else {
			idle = 0
		}
		budgetLeft := r.bo.MaxRecords <= 0 || r.budget.Load() > 0
		if last >= 0 && (chunkBytes >= eosMaxChunkBytes || last >= w.end-1 || full || !budgetLeft || !polled || stopCtx.Err() != nil) {
			if err := r.commit(wctx, prod, w, chunk, last); err != nil {
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
		if idle >= 5 && !e.sourceAnswers(stopCtx, tp.Topic) {
			idle = 0 // the source is restarting or hung: wait within the burst's budget
		}
		if idle >= 5 || !budgetLeft || full {
			break
		}
	}
	if last >= 0 {
		// Stopped mid-chunk: commit what was gathered.
		if err := r.commit(wctx, prod, w, chunk, last); err != nil {
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
// syncs of the committed records.
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
	prod.Produce(ctx, e.positionRecord(w.tp, last, r.offsetsParts), func(_ *kgo.Record, err error) {
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
	if err != nil {
		if aerr := prod.EndTransaction(ctx, kgo.TryAbort); aerr != nil {
			err = errors.Join(err, fmt.Errorf("aborting transaction: %w", aerr))
		}
		return err
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("committing transaction for %s: %w", w.tp, err)
	}
	e.known.advance(w.tp, last+1)
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

// fenced reports whether err means a newer producer with our transactional id exists.
func fenced(err error) bool {
	return err != nil && (errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch))
}
