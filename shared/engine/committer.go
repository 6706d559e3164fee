package engine

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// committer is an at-least-once copy's one writer of positions and offset syncs, in the shape
// of Kafka Connect's OffsetStorageWriter: each cycle (commit) takes a snapshot of the
// ledgers' positions, begins the flush by producing the positions that moved, and each
// position's answer either completes it (done: positions.known advances) or cancels it (the
// ledger's written mark goes back, so the next cycle writes it again, and the copy fails).
// On commitTick the pending offset syncs go out in the same cycle; at the end (finish)
// positions are awaited (flush) before the final offset syncs. commitPolicy decides when a
// cycle runs.
//
// Ownership: e, offsets, syncs, fail, ledgers and reuse are set at construction, prod by
// copier.open before the copy starts; then read-only. mu serializes cycles (and guards the
// ledger list's appends, with copier.mu: addWork). pending counts positions produced and not
// yet answered (atomic).
type committer struct {
	e       *Engine
	offsets *pendingTopic
	syncs   *syncEmitter
	// prod writes positions (its own client, or with reuse the engine's shared one, which this
	// committer must not Flush: it waits for its own positions instead).
	prod  *kgo.Client
	reuse bool
	// fail records the copy's first error; ledgers returns the ledgers to commit (called with
	// mu held). Each cycle also reports the copy's metrics (reportMetrics).
	fail    func(error)
	ledgers func() []*partLedger

	mu      sync.Mutex
	pending zeroCount
}

// commit runs one cycle for why: snapshot, begin flush (positions produced, answers handled
// in their promises) and, on commitTick, the pending offset syncs, whose error it returns.
// Before the offsets topic is ready (a first burst creates it while copying) it writes no
// position; a later cycle catches up.
func (k *committer) commit(ctx context.Context, why commitReason) error {
	k.mu.Lock()
	ledgers := k.ledgers()
	k.reportMetrics(ctx, ledgers)
	if parts, ok := k.offsets.ready(); ok {
		for _, st := range ledgers {
			prev, pos, moved := st.commitPos()
			if moved {
				k.begin(ctx, st, prev, pos, parts)
			}
		}
	}
	k.mu.Unlock()
	if why != commitTick {
		return nil
	}
	return k.syncs.send(ctx, false)
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

// flush waits until every position this committer produced was answered: the producer's
// Flush on a client of its own, its own count on the engine's shared one (whose Flush would
// also wait for other copies' positions).
func (k *committer) flush(ctx context.Context) error {
	if k.reuse {
		return k.pending.wait(ctx)
	}
	return k.prod.Flush(ctx)
}

// finish is the copy's last cycle: positions (on the target) are stored and awaited before
// the final offset syncs, which are on the source by default and may be slower.
func (k *committer) finish(ctx context.Context) {
	if _, err := k.offsets.wait(ctx); err != nil {
		k.fail(fmt.Errorf("positions not stored: waiting for the offsets topic: %w", err))
	}
	_ = k.commit(ctx, commitFinish)
	if err := k.flush(ctx); err != nil {
		k.fail(fmt.Errorf("writing positions: %w", err))
	}
	if err := k.syncs.finish(ctx); err != nil {
		k.fail(err)
	}
}
