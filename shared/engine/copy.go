package engine

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// run copies until every partition reached its end, a budget is exhausted or ctx ends.
func (c *copier) run(ctx context.Context, start time.Time) (Summary, error) {
	e := c.e
	// Writes outlive a stop request by at most Grace (on shared producers: until settled).
	writeCtx, cancelWrites := context.WithCancel(context.WithoutCancel(ctx))
	settling := false
	defer func() {
		if !settling {
			// The copy ended before it wrote anything (it could not open its producers or
			// read the group's end offsets): nothing is in flight, its partitions are free.
			c.commits.stop()
			cancelWrites()
			if c.bo.settled != nil {
				c.bo.settled()
			}
		}
	}()
	defer func() {
		if c.early != nil {
			c.early.Close() // not used: the run failed before it fetched
		}
		if c.earlyProd != nil {
			c.earlyProd.Close()
		}
	}()
	c.started = start
	if c.bo.Group != "" {
		if err := c.snapshotEnds(ctx); err != nil {
			return e.failed(start, err)
		}
	}
	closeProducers, err := c.open(ctx, writeCtx)
	if err != nil {
		return e.failed(start, err)
	}
	defer closeProducers()
	// Positions chosen by auto.offset.reset=latest are stored at once (exactly-once: before the
	// loop writes into the partitions' transactions).
	c.commits.request(commitStart)

	reason := ReasonDone
	if c.forward && c.active > 0 {
		reason = c.forwardLoop(ctx, start)
	}
	var cons *kgo.Client
	if reason == ReasonDone && (c.bo.Group != "" || c.active > 0) {
		offs := c.startOffsets() // after forwarding: what it handed over
		if c.gate != nil {
			offs, err = c.gate.admit(ctx, offs)
		}
		switch {
		case err != nil:
			err = fmt.Errorf("readying partitions to copy: %w", err)
		case c.early != nil:
			cons, c.early = c.early, nil // started while the topics were prepared
		default:
			if cons, err = c.consumer(ctx, offs); err != nil {
				err = fmt.Errorf("connecting source consumer: %w", err)
			}
		}
		if err != nil {
			c.fail(err)
			reason = ReasonFailed
		} else {
			reason = c.copyLoop(ctx, start, cons)
		}
	}
	if cons != nil && c.bo.Group == "" {
		cons.Close() // nothing more to fetch; a group member leaves only once positions are stored
		cons = nil
	}
	if c.bo.fetched != nil {
		c.bo.fetched()
	}
	for {
		c.mu.Lock()
		c.closing = true
		c.mu.Unlock()
		if reason != ReasonDone || ctx.Err() != nil {
			c.stopRequested.Store(true)
		}
		c.finish(writeCtx)
		if cons == nil {
			break
		}
		if c.reopen(ctx, reason) {
			reason = c.copyLoop(ctx, start, cons)
			continue
		}
		c.mu.Lock()
		c.held = maps.Clone(c.byTP) // the partitions it leaves: its lag (summary)
		c.mu.Unlock()
		if c.bo.leaving != nil {
			c.bo.leaving()
		}
		// In group mode leave only now that positions are stored; a rebalance blocked since
		// the last poll must be allowed or leaving waits for it forever.
		cons.AllowRebalance()
		cons.Close()
		cons = nil
		if !c.rejoin(ctx, reason) {
			break
		}
		if cons, err = c.consumer(ctx, nil); err != nil {
			c.fail(fmt.Errorf("connecting source consumer: %w", err))
			reason = ReasonFailed
			continue // finish again: nothing was copied since, and cons is nil
		}
		reason = c.copyLoop(ctx, start, cons)
	}
	settling = true
	c.settle(cancelWrites)
	return c.summary(start, reason)
}

// settleMax bounds how long a copy on the engine's shared producers keeps its partitions after
// its end while records it produced are still unacknowledged.
const settleMax = 10 * time.Minute

// settle ends the copy's writes (cancelWrites, the context its records were produced with) and
// calls bo.settled once the copy has no record in flight. On the engine's shared producers
// (reuse) records the target has not acknowledged within the grace period stay in flight
// (they are retried, never dropped; their context stays alive): a copy waits for them in the
// background, then stores the positions of those acknowledged, and only then frees its
// partitions.
func (c *copier) settle(cancelWrites context.CancelFunc) {
	done := func() {
		c.commits.stop()
		cancelWrites()
		if c.bo.settled != nil {
			c.bo.settled()
		}
	}
	if !c.reuse || c.pending.Load() == 0 {
		done()
		return
	}
	c.e.log.Warn("records still in flight after the copy ended; its partitions stay reserved until the target acknowledges them",
		"records", c.pending.Load())
	ctx, stop := c.e.bg.detach(c.writeCtx) // the engine closing ends the wait
	if !c.e.bg.goDo(func() {
		defer done()
		defer stop()
		ctx, cancel := context.WithTimeout(ctx, settleMax)
		defer cancel()
		if err := c.pending.wait(ctx); err != nil {
			c.e.log.Error("records of an ended copy still unacknowledged; freeing its partitions", "records", c.pending.Load(), "err", err)
			return
		}
		if err := c.commits.commit(ctx, commitSettle); err != nil {
			c.e.log.Error("positions of an ended copy not stored", "err", err)
		}
	}) {
		stop()
		done()
	}
}

// open connects the copier's target producers (the engine's shared ones with reuse), starts
// its committer and readies its partitions' states for writing under writeCtx. The returned
// func closes producers of its own.
func (c *copier) open(ctx, writeCtx context.Context) (closeProducers func(), err error) {
	e := c.e
	closeProducers = func() {}
	switch {
	case c.sink != nil:
		// Exactly-once: the eosCommitter writes records and positions through transactional
		// producers of its own, and closes them when it stops.
	case c.reuse:
		if c.prod, c.alo.prod, err = e.reuse.producers(ctx); err != nil {
			return nil, fmt.Errorf("connecting target producer: %w", err)
		}
	default:
		if c.earlyProd != nil {
			c.prod, c.earlyProd = c.earlyProd, nil // warmed while the topics were prepared
		} else {
			c.throttle = newThrottleWatch(throttleMemory)
			if c.prod, err = e.dial(ctx, Target, append(e.dataProducerOpts(), kgo.WithHooks(c.throttle))...); err != nil {
				return nil, fmt.Errorf("connecting target producer: %w", err)
			}
		}
		if c.alo.prod, err = e.dial(ctx, Target, positionProducerOpts()...); err != nil {
			c.prod.Close()
			return nil, fmt.Errorf("connecting target producer: %w", err)
		}
		closeProducers = func() {
			c.prod.Close()
			c.alo.prod.Close()
		}
	}
	c.writeCtx = writeCtx
	if c.sink == nil {
		c.sink = recordSink{c}
	}
	c.commits.start(writeCtx) // until the copy's writes are settled (settle stops it)
	for _, st := range c.states {
		st.ctx = writeCtx
		if st.w.start >= st.w.end {
			st.done = true
			if st.w.initPos < 0 {
				// Nothing to copy: the stored position (or the log start) already covers
				// every record below start.
				e.positions.known.advance(st.w.tp, st.w.start)
			}
			continue
		}
		c.active++
	}
	return closeProducers, nil
}

// finish waits, within finishWait, for the records in flight, then stores the positions of
// everything acknowledged and, once they are answered, writes the final offset syncs
// (commits.finish: positions first, as the comment below says).
func (c *copier) finish(writeCtx context.Context) {
	fctx, cancel := context.WithTimeout(writeCtx, c.finishWait())
	defer cancel()
	if err := c.sink.flush(fctx); err != nil {
		c.fail(fmt.Errorf("waiting for in-flight records: %w", err))
	}
	// Positions (on the target) first: they do not wait for the offset-syncs topic, which is
	// on the source by default and may be slower.
	c.commits.finish(fctx)
}
