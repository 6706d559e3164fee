package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// committer is a copy's one writer of positions and offset syncs, in the shape
// of Kafka Connect's OffsetStorageWriter and the SourceTaskOffsetCommitter that drives it: a
// goroutine of its own (run, started and stopped with the copy) runs one cycle at a time. A
// cycle takes a snapshot of the ledgers' positions (offset), produces the positions that moved
// (beginFlush, doFlush), sends the pending offset syncs when a tick asked for them, and waits
// until every position it produced is answered: each answer either completes it (done:
// positions.known advances) or cancels it (the ledger's written mark goes back, so the next
// cycle writes it again, and the copy fails). commitPolicy decides when a cycle is due.
//
// The fetch loop never waits for a cycle: request only asks for one (requests that arrive
// while a cycle runs make one more cycle, whose snapshot covers them all), so a slow offsets
// topic holds up positions, never copying, and at most one cycle's positions are in flight.
// Revoke, settle and finish wait for their cycle (commit, finish) and nothing else. An
// exactly-once copy has a committer of its own (eosCommitter, eos.go).
//
// Ownership: e, offsets, syncs, fail, ledgers and the channels are set at construction, prod
// by copier.open before start, cancel by start before the goroutine exists; then
// read-only. Everything a cycle does runs on the goroutine, so cycles need no lock: the
// requests are the channels (kick, reqs), syncsDue and pending are atomic, and the ledgers'
// own locks guard their snapshots (the ledger list is read under copier.mu).
type committer struct {
	e       *core
	offsets *pendingTopic
	syncs   *syncEmitter
	// prod writes positions (its own client, or with reuse the engine's shared one, which this
	// committer must not Flush: it waits for its own positions, pending).
	prod *kgo.Client
	// fail records the copy's first error; ledgers returns the ledgers to commit. Each cycle
	// also reports the copy's metrics (reportCopyMetrics).
	fail    func(error)
	ledgers func() []*partLedger

	// kick asks for a cycle without waiting for it (one slot: requests coalesce); syncsDue
	// says a tick among them asked for the pending offset syncs too.
	kick     chan struct{}
	syncsDue atomic.Bool
	// reqs carries the cycles a caller waits for.
	reqs chan commitRequest
	// pending counts positions produced and not yet answered.
	pending zeroCount

	cancel  context.CancelFunc
	stopped chan struct{} // closed when run has returned
}

// commitRequest is a cycle a caller waits for: why, the caller's context (the cycle waits for
// its answers no longer than the caller does) and where the outcome goes (one slot: run never
// waits for a caller that gave up).
type commitRequest struct {
	ctx  context.Context
	why  commitReason
	done chan error
}

// commitDriver is what a copy asks of its committer: committer (at-least-once: positions on a
// producer of their own, cycles on its goroutine that the fetch loop never waits for) or
// eosCommitter (exactly-once: a cycle ends the partitions' transactions, and the loop waits for
// its start and tick cycles). request asks for a cycle (commitStart, commitTick), commit runs
// one and waits within ctx (commitRevoke, commitSettle), finish is the last; start and stop
// run and end the committer's goroutine.
type commitDriver interface {
	start(ctx context.Context)
	stop()
	request(why commitReason)
	commit(ctx context.Context, why commitReason) error
	finish(ctx context.Context)
}

// errCommitterStopped answers a cycle asked for after the copy's committer stopped.
var errCommitterStopped = errors.New("the copy's committer has stopped")

// newCommitter returns a copy's committer; start runs it.
func newCommitter(e *core, offsets *pendingTopic, syncs *syncEmitter, fail func(error), ledgers func() []*partLedger) *committer {
	return &committer{e: e, offsets: offsets, syncs: syncs, fail: fail, ledgers: ledgers,
		kick: make(chan struct{}, 1), reqs: make(chan commitRequest), stopped: make(chan struct{})}
}

// start runs the committer's goroutine until ctx ends or stop; positions are produced under
// ctx (the copy's writes).
func (k *committer) start(ctx context.Context) {
	ctx, k.cancel = context.WithCancel(ctx)
	go k.run(ctx)
}

// stop ends the goroutine (a cycle in progress is abandoned: its positions not yet sent fail
// and are written by nobody, as when the copy's writes end) and waits until it has returned.
// Stopping a committer never started does nothing.
func (k *committer) stop() {
	if k.cancel == nil {
		return
	}
	k.cancel()
	<-k.stopped
}

// run serves requests one cycle at a time until ctx ends.
func (k *committer) run(ctx context.Context) {
	defer close(k.stopped)
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.kick:
			_ = k.cycle(ctx, ctx, k.syncsDue.Swap(false))
		case r := <-k.reqs:
			r.done <- k.serve(ctx, r)
		}
	}
}

// request asks for a cycle without waiting for it (the fetch loop's commitTick, commitStart);
// a tick also sends the pending offset syncs. Failures are the copy's (fail).
func (k *committer) request(why commitReason) {
	if why == commitTick {
		k.syncsDue.Store(true)
	}
	select {
	case k.kick <- struct{}{}:
	default: // a cycle is asked for already; its snapshot is taken when it starts
	}
}

// commit runs a cycle for why (commitRevoke, commitSettle) and waits, within ctx, until its
// positions are answered; it returns why they were not all stored.
func (k *committer) commit(ctx context.Context, why commitReason) error {
	return askCycle(ctx, k.reqs, k.stopped, why)
}

// askCycle sends a request for a cycle for why to a committer's goroutine (reqs; stopped is
// closed once it has returned) and waits, within ctx, for its outcome.
func askCycle(ctx context.Context, reqs chan<- commitRequest, stopped <-chan struct{}, why commitReason) error {
	r := commitRequest{ctx: ctx, why: why, done: make(chan error, 1)}
	select {
	case reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-stopped:
		return errCommitterStopped
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finish is the copy's last cycle (commitFinish): once the offsets topic is ready, positions
// (on the target) are stored and awaited before the final offset syncs, which are on the source
// by default and may be slower. Its failures are the copy's.
func (k *committer) finish(ctx context.Context) {
	if err := k.commit(ctx, commitFinish); err != nil {
		k.fail(fmt.Errorf("writing positions: %w", err))
	}
}

// serve runs the cycle r asks for, waiting for its answers within r's context and the
// committer's.
func (k *committer) serve(ctx context.Context, r commitRequest) error {
	wctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	if err := wctx.Err(); err != nil {
		return err // the caller gave up before its turn
	}
	if r.why != commitFinish {
		return k.cycle(ctx, wctx, false)
	}
	if _, err := k.offsets.wait(wctx); err != nil {
		k.fail(fmt.Errorf("positions not stored: waiting for the offsets topic: %w", err))
	}
	if err := k.cycle(ctx, wctx, false); err != nil {
		k.fail(err)
	}
	if err := k.syncs.finish(wctx); err != nil {
		k.fail(err)
	}
	return nil
}

// cycle takes the snapshot and produces the positions that moved (under ctx, the copy's
// writes), sends the pending offset syncs if syncs, and waits (within wait) until every
// position produced is answered. Before the offsets topic is ready (a first burst creates it
// while copying) it writes no position; a later cycle catches up.
func (k *committer) cycle(ctx, wait context.Context, syncs bool) error {
	ledgers := k.ledgers()
	parts, ok := k.offsets.ready()
	reportCopyMetrics(ctx, k.e.opts.Metrics, ledgers)
	if ok {
		for _, st := range ledgers {
			if prev, pos, moved := st.commitPos(); moved {
				k.begin(ctx, st, prev, pos, parts)
			}
		}
	}
	k.sendSyncs(ctx, syncs)
	if err := k.pending.wait(wait); err != nil {
		return fmt.Errorf("writing positions: %w", err)
	}
	return nil
}

// sendSyncs sends the pending offset syncs if syncs; a failure is the copy's.
func (k *committer) sendSyncs(ctx context.Context, syncs bool) {
	if !syncs {
		return
	}
	if err := k.syncs.send(ctx, false); err != nil {
		k.fail(err)
	}
}

// begin produces st's position pos (the one written before it was prev); its answer completes
// or cancels it.
func (k *committer) begin(ctx context.Context, st *partLedger, prev, pos int64, parts int32) {
	k.pending.Add(1)
	tp := st.w.tp
	k.prod.Produce(ctx, k.e.positions.record(tp, pos, parts), func(_ *kgo.Record, err error) {
		defer k.pending.Add(-1) // answered once its outcome is recorded (see copier.acked)
		if err != nil {
			st.uncommit(prev, pos)
			k.fail(fmt.Errorf("writing position of %s to %q: %w", tp, k.e.opts.OffsetStorageTopic, err))
			return
		}
		k.e.positions.known.advance(tp, pos+1)
	})
}
