package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
)

// Event-driven entry points (mirror serve): a record event asks that its offset be durable on
// the target; in payload mode the event also carries the record. Both go through the same
// copier as bursts: same producers, same timestamp rule, same position records and offset-sync
// rules.

// ErrNoSuchRecord means an event named an offset at or beyond the end of its source partition:
// no such record exists (a forged event, or a topic recreated since the event was sent).
var ErrNoSuchRecord = errors.New("no such record in the source partition")

// ErrBehind means a payload record cannot be written yet: records before it are not on the
// target (the caller copies them from the source first).
var ErrBehind = errors.New("records before this offset are not on the target yet")

// CopyThrough makes offset of the source partition durable on the target and returns the
// partition's next offset to copy, which then lies beyond offset. An offset this process
// already made durable is answered at once; otherwise it joins a shared copy (copyRuns) that
// copies the partition to its current end, with every other lagging partition.
func (e *Engine) CopyThrough(ctx context.Context, topic string, partition int32, offset int64) (int64, error) {
	tp := TP{topic, partition}
	if n, ok := e.positions.known.get(tp); ok && n > offset {
		return n, nil
	}
	sum, err := e.runs.copyPartition(ctx, topic, partition, -1, offset)
	if err != nil {
		return 0, fmt.Errorf("copying %s through %d: %w", tp, offset, err)
	}
	n, ok := e.positions.known.get(tp)
	switch {
	case ok && n > offset:
		return n, nil
	case sum.Reason == ReasonDone && sum.Lag == 0:
		// The copy reached the end it planned with, which was read after the event arrived.
		return 0, fmt.Errorf("offset %d of %s: %w (end %d)", offset, tp, ErrNoSuchRecord, n)
	default:
		return 0, fmt.Errorf("copy of %s stopped (%s) with %d records left before offset %d", tp, sum.Reason, sum.Lag, offset)
	}
}

// Next returns the next offset to copy of a source partition: from memory if this process made
// it durable, otherwise from the stored position. ok is false when no position is stored (or a
// stored one is beyond the partition's end, so it belongs to an earlier incarnation of the
// topic and says nothing about these offsets).
func (e *Engine) Next(ctx context.Context, topic string, partition int32) (next int64, ok bool, err error) {
	tp := TP{topic, partition}
	if n, ok := e.positions.known.get(tp); ok {
		return n, true, nil
	}
	if e.NoPositionsYet() {
		return 0, false, nil
	}
	parts, _, err := e.positions.reusedTopic(ctx)
	if err != nil {
		return 0, false, err
	}
	pos, err := e.ReadPositions(ctx, []TP{tp}, parts)
	if err != nil {
		return 0, false, fmt.Errorf("reading position of %s: %w", tp, err)
	}
	last, has := pos[tp]
	if !has {
		return 0, false, nil
	}
	_, ends, err := cluster.ListOffsets(ctx, e.srcAdm, e.opts.ExactlyOnce || e.opts.ReadCommitted, topic)
	if err != nil {
		return 0, false, fmt.Errorf("source: %w", err)
	}
	end, found := ends.Lookup(topic, partition)
	if !found || end.Err != nil {
		return 0, false, fmt.Errorf("end offset of source partition %s: %v", tp, end.Err)
	}
	if last+1 > end.Offset {
		e.log.Warn("stored position is beyond the source partition's end (topic recreated?); ignoring it",
			"partition", tp.String(), "position", last, "end", end.Offset)
		return 0, false, nil
	}
	e.positions.known.advance(tp, last+1)
	return last + 1, true, nil
}

// WriteRecordAt writes rec (payload mode: a record that arrived in an event, not read from the
// source) as the copy of source offset rec.Offset of topic/partition, then its offset sync and
// position, and returns once they are durable. It writes nothing if that offset is already on
// the target (a redelivered event), and returns ErrBehind if earlier offsets are not. No copy
// of the partition runs meanwhile.
func (e *Engine) WriteRecordAt(ctx context.Context, topic string, partition int32, rec *kgo.Record) error {
	start := time.Now()
	tp := TP{topic, partition}
	if !e.planner.selected(topic) {
		return fmt.Errorf("topic %q is not replicated by this flow (filter, internal or cycle)", topic)
	}
	release, err := e.runs.hold(ctx, tp)
	if err != nil {
		return err
	}
	held := true // until the copier below takes over releasing it (once settled)
	defer func() {
		if held {
			release()
		}
	}()
	next, ok, err := e.Next(ctx, topic, partition)
	if err != nil {
		return err
	}
	switch {
	case ok && next > rec.Offset:
		return nil
	case !ok || next < rec.Offset:
		return fmt.Errorf("writing %s offset %d (next to copy: %d, known %v): %w", tp, rec.Offset, next, ok, ErrBehind)
	}
	if err := e.runs.sourceHolds(ctx, tp, rec.Offset); err != nil {
		return err
	}
	remote := e.opts.Policy.FormatRemoteTopic(e.opts.SourceAlias, topic)
	if _, err := e.runs.prepareOne(ctx, topic, partition); err != nil {
		return err
	}
	parts, _, err := e.positions.reusedTopic(ctx)
	if err != nil {
		return err
	}
	syncs, err := e.reuse.syncEmitter(ctx, false)
	if err != nil {
		return err
	}
	defer syncs.close()
	syncs.promote = e.reuse.promoteOften
	w := &work{tp: tp, remote: remote, start: rec.Offset, end: rec.Offset + 1, initPos: -2}
	held = false
	c := newCopier(&e.core, BurstOptions{Grace: 10 * time.Second, settled: release}, []*work{w}, readyTopic(parts), syncs)
	c.shareEngineBudget()
	writeCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	closeProducers, err := c.open(ctx, writeCtx)
	if err != nil {
		cancel()
		release()
		return err
	}
	defer closeProducers()
	out := &kgo.Record{Key: rec.Key, Value: rec.Value, Headers: rec.Headers, Timestamp: rec.Timestamp,
		Partition: partition, Offset: rec.Offset}
	if _, err := c.sink.write(ctx, c.states[0], sinkInput{recs: []*kgo.Record{out}}); err != nil {
		c.commits.stop()
		cancel()
		release()
		return fmt.Errorf("writing %s offset %d: %w", tp, rec.Offset, ctx.Err())
	}
	c.finish(writeCtx)
	c.settle(cancel)
	_, err = c.summary(start, ReasonDone)
	return err
}

// sourceHolds returns an error wrapping ErrNoSuchRecord unless the source partition's end lies
// beyond offset: a payload event may not stand for a record the source does not hold (yet), as
// fetch mode refuses such an offset. Ends only grow, so the last end seen answers most calls
// without a request.
func (r *copyRuns) sourceHolds(ctx context.Context, tp TP, offset int64) error {
	if end, ok := r.srcEnds.get(tp); ok && end > offset {
		return nil
	}
	_, ends, err := cluster.ListOffsets(ctx, r.srcAdm, r.opts.ExactlyOnce || r.opts.ReadCommitted, tp.Topic)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	end, found := ends.Lookup(tp.Topic, tp.Partition)
	if !found || end.Err != nil {
		return fmt.Errorf("end offset of source partition %s: %v", tp, end.Err)
	}
	if end.Offset <= offset {
		r.srcEnds.forget(tp) // the partition may have started over
		return fmt.Errorf("offset %d of %s: %w (end %d)", offset, tp, ErrNoSuchRecord, end.Offset)
	}
	r.srcEnds.advance(tp, end.Offset)
	return nil
}

// hold makes tp busy (no shared copy takes or sweeps it) until release is called, waiting while
// a copy holds it.
func (r *copyRuns) hold(ctx context.Context, tp TP) (release func(), err error) {
	for {
		r.mu.Lock()
		if !r.busy[tp] {
			if r.busy == nil {
				r.busy = map[TP]bool{}
			}
			r.busy[tp] = true
			r.mu.Unlock()
			return func() { r.release([]TP{tp}) }, nil
		}
		freed := r.freedSignal()
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the copy of %s to end: %w", tp, ctx.Err())
		case <-freed:
		}
	}
}
