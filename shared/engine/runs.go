package engine

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/mm2go/mm2go/shared/cluster"
)

// maxConcurrentCopies is how many shared copies CopyPartition runs at once. Each has its own
// source consumer and fetch buffers; past a few, the engine's shared in-flight budget is the
// limit anyway.
const maxConcurrentCopies = 8

// maxPartitionsPerRun bounds the partitions one shared copy takes.
const maxPartitionsPerRun = 512

// copyRuns is the one layer that coalesces event-driven copies (CopyPartition). Event-driven
// callers ask for one partition per call, KafkaSource sends one event per record, and its
// dispatcher serves partitions one after another; a copy per call would connect its own source
// consumer, plan alone and store its positions alone. So:
//
//   - a call for an offset this process already made durable is answered at once, from
//     positionStore.known, without a copy;
//   - at most max copies run at once; when one stops fetching, the calls that queued meanwhile
//     go together into the next: one consumer, one plan, one position write for all. A copy
//     about to start first waits briefly (gatherMax) for calls still on their way;
//   - a copy also takes every other selected partition that has lag and is not being copied
//     (the sweep), so the target trails the source by about one copy whatever order, rate or
//     subset of events arrives: the events of the partitions it swept are then answered from
//     memory;
//   - a partition is in at most one running copy (busy): a call for a busy partition waits in
//     the queue until that copy has stored its positions, and is then usually answered from
//     memory.
//
// A shared copy answers its calls when it ends, all together. If it fails, its partitions are
// copied again one by one, so one partition's failure (a record the target refuses) does not
// fail the others. It stops early (positions stored) only when every call waiting for it
// has given up.
//
// It is the serve coordinator: besides the runs, it answers CopyPartition calls (copyPartition,
// prepareOne) and the payload events' checks (hold, sourceHolds).
//
// Ownership: the fields above mu are set by Engine.wire and read-only afterwards; srcEnds has
// its own lock (durable.mu, a leaf). mu guards every field below it, and the run and abandoned
// fields of the calls; it is never held across network I/O. Waiters sleep on channels closed
// under mu: arrived (no call on its way) and freed (a partition left busy).
type copyRuns struct {
	opts      Options
	log       *slog.Logger
	srcAdm    *kadm.Client
	positions *positionStore // what this process made durable: calls answered from memory
	planner   *topicPlanner  // topic selection and remote topics for prepareOne
	reuse     *reused        // prepared topics (prepareOne, the sweep) and the warm-up to wait for
	runner    *burstRunner   // runs the shared copies
	srcEnds   durable        // payload mode: the source partitions' ends last seen (sourceHolds)
	bg        *background    // runs the loops and copies; Engine.Close ends them

	mu       sync.Mutex
	queue    []*copyCall
	busy     map[TP]bool // partitions of running copies, until their positions are stored
	running  int         // loops running copies, at most max
	max      int
	arriving int           // calls on their way to the queue (checking and preparing their topic)
	arrived  chan struct{} // closed when arriving drops to 0 (nil: nobody waits)
	freed    chan struct{} // closed when partitions leave busy (nil: nobody waits)
}

// freedSignal returns the channel closed when partitions next leave busy. r.mu must be held.
func (r *copyRuns) freedSignal() <-chan struct{} {
	if r.freed == nil {
		r.freed = make(chan struct{})
	}
	return r.freed
}

// gatherMax is how long a copy about to start waits for calls on their way to the queue, so
// that events arriving together (a KafkaSource starting) are copied together.
const gatherMax = 25 * time.Millisecond

// arrive counts a call on its way to the queue; the returned func ends that, queueing call
// first if it is not nil, and reports whether a loop must be started for it. The call joins
// the queue in the same critical section that ends its arrival: a gather woken by the end of
// the last arrival must find it queued (it took a copy without it otherwise).
func (r *copyRuns) arrive() (left func(call *copyCall) (start bool)) {
	r.mu.Lock()
	r.arriving++
	r.mu.Unlock()
	var once sync.Once
	return func(call *copyCall) (start bool) {
		once.Do(func() {
			r.mu.Lock()
			if call != nil {
				r.queue = append(r.queue, call)
				if start = r.running < r.max; start {
					r.running++
				}
			}
			r.arriving--
			if r.arriving == 0 && r.arrived != nil {
				close(r.arrived)
				r.arrived = nil
			}
			r.mu.Unlock()
		})
		return start
	}
}

// gather waits, at most gatherMax, until no call is on its way to the queue; false if
// gatherMax passed first.
func (r *copyRuns) gather() bool {
	r.mu.Lock()
	if r.arriving == 0 {
		r.mu.Unlock()
		return true
	}
	if r.arrived == nil {
		r.arrived = make(chan struct{})
	}
	arrived := r.arrived
	r.mu.Unlock()
	t := time.NewTimer(gatherMax)
	defer t.Stop()
	select {
	case <-arrived:
		return true
	case <-t.C:
		return false
	}
}

// copyCall is one CopyPartition call, queued or in a shared copy.
type copyCall struct {
	tp     TP
	remote string
	limit  int64           // copy offsets below limit; < 0: up to the end seen when the copy plans
	need   int64           // the offset the caller needs durable; < 0: none in particular
	ctx    context.Context // the caller's, for its values only
	start  time.Time
	solo   bool // copy it alone (after a shared copy failed)

	// Under copyRuns.mu: the copy that took the call (nil while queued), and whether the
	// caller stopped waiting.
	run       *sharedRun
	abandoned bool

	done chan struct{} // closed once sum and err are set
	sum  Summary
	err  error
}

// sharedRun is one running shared copy.
type sharedRun struct {
	cancel  context.CancelFunc
	waiting int // calls still waiting for it, under copyRuns.mu
}

// copyPartition is CopyPartition copying offsets below limit (< 0: to the end seen when the
// copy plans) for a caller that needs offset need durable (< 0: nothing in particular): a call
// whose need this process already made durable is answered without a copy.
func (r *copyRuns) copyPartition(ctx context.Context, topic string, partition int32, limit, need int64) (Summary, error) {
	start := time.Now()
	if !r.planner.selected(topic) {
		return r.runner.failed(start, fmt.Errorf("topic %q is not replicated by this flow (filter, internal or cycle)", topic))
	}
	tp := TP{topic, partition}
	if n, ok := r.positions.known.get(tp); ok && need >= 0 && n > need {
		return r.answered(start, tp, r.opts.Policy.FormatRemoteTopic(r.opts.SourceAlias, topic)), nil
	}
	arrived := r.arrive()
	defer arrived(nil)
	if err := r.reuse.warmed(ctx); err != nil {
		return r.runner.failed(start, err)
	}
	t, err := r.prepareOne(ctx, topic, partition)
	if err != nil {
		return r.runner.failed(start, err)
	}
	return r.copyShared(ctx, &copyCall{tp: tp, remote: t.Remote, limit: limit, need: need, start: start}, arrived)
}

// prepareOne checks that the source partition exists and readies its remote topic, trusting
// a check made within reuseTTL (at start-up by Warm): that saves a metadata request per call; a
// partition beyond it means the topic grew, so it asks. A remote topic that cannot be made
// ready fails this call only.
func (r *copyRuns) prepareOne(ctx context.Context, topic string, partition int32) (Topic, error) {
	parts, ok := r.reuse.preparedPartitions(topic)
	if !ok || partition >= parts {
		md, err := r.srcAdm.Metadata(ctx, topic)
		if err != nil {
			return Topic{}, fmt.Errorf("describing source topic %q: %w", topic, err)
		}
		d, ok := md.Topics[topic]
		if !ok || d.Err != nil {
			if ok {
				err = d.Err
			}
			return Topic{}, fmt.Errorf("describing source topic %q: %v", topic, err)
		}
		parts = int32(len(d.Partitions))
	}
	if partition < 0 || partition >= parts {
		return Topic{}, fmt.Errorf("source topic %q has no partition %d", topic, partition)
	}
	t := Topic{Source: topic, Remote: r.opts.Policy.FormatRemoteTopic(r.opts.SourceAlias, topic), Partitions: parts}
	if !r.reuse.preparedRecently(topic, t.Partitions) {
		if err := r.planner.checkBudgets(ctx, []Topic{t}); err != nil {
			return Topic{}, err
		}
		if err := r.planner.prepareServed(ctx, []Topic{t}); err != nil {
			return Topic{}, err
		}
		r.reuse.rememberPrepared(topic, t.Partitions)
	}
	return t, nil
}

// copyShared queues call, makes sure a loop will take it, and waits for its outcome. If ctx
// ends first, the call leaves its copy; the last call to leave stops the copy and waits for
// it to store its positions, so the caller learns how far it got.
func (r *copyRuns) copyShared(ctx context.Context, call *copyCall, arrived func(*copyCall) bool) (Summary, error) {
	call.ctx, call.done = ctx, make(chan struct{})
	r.enqueue(call, arrived)
	select {
	case <-call.done:
		return call.sum, call.err
	case <-ctx.Done():
	}
	r.mu.Lock()
	last := false
	switch {
	case call.run == nil && !call.abandoned:
		if i := slices.Index(r.queue, call); i >= 0 {
			r.queue = slices.Delete(r.queue, i, i+1)
			r.mu.Unlock()
			return r.runner.failed(call.start, fmt.Errorf("waiting for a copy of %s: %w", call.tp, ctx.Err()))
		}
	case call.run != nil:
		call.run.waiting--
		if last = call.run.waiting == 0; last {
			call.run.cancel()
		}
	}
	call.abandoned = true
	r.mu.Unlock()
	if !last {
		select {
		case <-call.done:
			return call.sum, call.err
		default:
			return r.runner.failed(call.start, fmt.Errorf("copy of %s not finished: %w", call.tp, ctx.Err()))
		}
	}
	<-call.done // the copy stops at once and stores positions within its grace period
	return call.sum, call.err
}

// enqueue adds call to the queue (ending its arrival) and starts a loop if one is free.
func (r *copyRuns) enqueue(call *copyCall, arrived func(*copyCall) bool) {
	if arrived(call) {
		r.startLoop()
	}
}

// startLoop runs a loop of copies (runCopies) in the engine's background, counted in running
// by the caller. After Close it starts none, and answers the queued calls with errEngineClosed:
// no loop runs then (the background runs nothing any more) and none will take them.
func (r *copyRuns) startLoop() {
	if r.bg.goDo(r.runCopies) {
		return
	}
	r.mu.Lock()
	r.running--
	queued := r.queue
	r.queue = nil
	r.mu.Unlock()
	for _, c := range queued {
		c.sum, c.err = r.runner.failed(c.start, fmt.Errorf("copy of %s: %w", c.tp, errEngineClosed))
		close(c.done)
	}
}

// take removes the next copy's calls from the queue: a solo call alone, otherwise every
// queued call of a distinct partition that no running copy holds (up to maxPartitionsPerRun).
// Calls for offsets made durable meanwhile are answered on the way. The partitions taken become
// busy. Called under r.mu.
func (r *copyRuns) take() []*copyCall {
	var batch, rest []*copyCall
	seen := map[TP]bool{}
	solo := false
	for _, c := range r.queue {
		if c.need >= 0 {
			if n, ok := r.positions.known.get(c.tp); ok && n > c.need {
				c.sum, c.err = r.answered(c.start, c.tp, c.remote), nil
				close(c.done)
				continue
			}
		}
		switch {
		case solo, r.busy[c.tp], seen[c.tp], len(batch) == maxPartitionsPerRun,
			c.solo && len(batch) > 0, !c.solo && len(batch) > 0 && batch[0].solo:
			rest = append(rest, c)
			continue
		}
		seen[c.tp] = true
		batch = append(batch, c)
		solo = c.solo
	}
	r.queue = rest
	if r.busy == nil {
		r.busy = map[TP]bool{}
	}
	for _, c := range batch {
		r.busy[c.tp] = true
	}
	return batch
}

// answered is the outcome of a call answered from memory: nothing to copy.
func (r *copyRuns) answered(start time.Time, tp TP, remote string) Summary {
	return r.runner.finishSummary(start, []partResult{{tp: tp, remote: remote, next: -1}}, ReasonDone, nil)
}

// runCopies runs shared copies until the queue is empty. A copy holds the loop while it
// fetches; once it has fetched what it was asked for, the loop moves on while the copy waits
// for its last acknowledgements and stores its positions (on a flow's first start that means
// waiting for the offsets topic, which took a loaded broker a second: copies that had finished
// fetching held every loop meanwhile).
func (r *copyRuns) runCopies() {
	for {
		r.gather()
		r.mu.Lock()
		batch := r.take()
		if len(batch) == 0 {
			r.running--
			r.mu.Unlock()
			return
		}
		// The copy outlives its callers' contexts (the last to leave cancels it) but not the engine.
		ctx, cancel := r.bg.detach(batch[0].ctx)
		run := &sharedRun{cancel: cancel, waiting: len(batch)}
		for _, c := range batch {
			c.run = run
		}
		r.mu.Unlock()
		fetched := make(chan struct{})
		var once sync.Once
		release := func() { once.Do(func() { close(fetched) }) }
		r.bg.goDo(func() { // from a goroutine of r.bg: it starts
			defer cancel()
			defer release()
			r.runShared(ctx, batch, release)
		})
		<-fetched
	}
}

// runShared copies the partitions of batch, and the sweep (other lagging partitions), in one
// run and answers each call with its own partition's part of the outcome. fetched is called
// when the run stops fetching. Its partitions stop being busy once it has ended.
func (r *copyRuns) runShared(ctx context.Context, batch []*copyCall, fetched func()) {
	start := time.Now()
	tps := make([]TP, len(batch))
	remote := map[string]string{}
	limit := map[TP]int64{}
	for i, c := range batch {
		tps[i] = c.tp
		remote[c.tp.Topic] = c.remote
		if c.limit >= 0 {
			limit[c.tp] = c.limit
		}
	}
	var swept []TP
	if !batch[0].solo && !r.opts.NoSweep {
		swept = r.sweep(ctx, tps, remote)
		tps = append(tps, swept...)
	}
	settled := make(chan struct{})
	bo := BurstOptions{fetched: func() {
		r.log.Debug("shared copy fetched", "partitions", len(batch), "swept", len(swept), "elapsed", time.Since(start).String())
		fetched()
	}, settled: func() { close(settled) }}
	defer func() {
		select {
		case <-settled:
			r.release(tps)
		default:
			// Records still in flight: the copier settles them (at most settleMax). From a
			// goroutine of r.bg: it starts.
			r.bg.goDo(func() {
				<-settled
				r.release(tps)
			})
		}
	}()
	sum, err := r.runner.runWith(ctx, start, bo, tps, remote, limit, true, nil)
	if err != nil && len(batch) > 1 {
		r.log.Warn("shared copy failed; copying its partitions again one by one", "partitions", len(batch), "err", err)
		r.mu.Lock()
		for _, c := range slices.Backward(batch) {
			if c.abandoned {
				// Nobody waits for it, or its last caller waits for this outcome.
				c.sum, c.err = r.partSummary(sum, c, start, err)
				close(c.done)
				continue
			}
			// At the queue's head: a loop takes them next (once release made them free).
			c.solo, c.run = true, nil
			r.queue = slices.Insert(r.queue, 0, c)
		}
		r.mu.Unlock()
		return
	}
	for _, c := range batch {
		c.sum, c.err = r.partSummary(sum, c, start, err)
		close(c.done)
	}
}

// release frees the partitions of a copy that ended and starts a loop for calls that waited
// for them.
func (r *copyRuns) release(tps []TP) {
	r.mu.Lock()
	for _, tp := range tps {
		delete(r.busy, tp)
	}
	if r.freed != nil {
		close(r.freed)
		r.freed = nil
	}
	start := len(r.queue) > 0 && r.running < r.max
	if start {
		r.running++
	}
	r.mu.Unlock()
	if start {
		r.startLoop()
	}
}

// maxSwept bounds the partitions a shared copy adds to its calls' partitions.
const maxSwept = 2048

// sweep returns the selected partitions, besides have, that have lag and that no running copy
// holds, marked busy. They are those of the topics checked by the warm-up or by earlier calls
// whose end offset lies beyond what this process knows to be durable (or whose durable offset
// is unknown). It is best effort: a failure to list end offsets sweeps nothing.
func (r *copyRuns) sweep(ctx context.Context, have []TP, remote map[string]string) []TP {
	topics := r.reuse.preparedTopics()
	if len(topics) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(topics))
	_, ends, err := cluster.ListOffsets(ctx, r.srcAdm, r.opts.ExactlyOnce || r.opts.ReadCommitted, names...)
	if err != nil {
		r.log.Debug("sweep skipped: listing source end offsets", "err", err)
		return nil
	}
	skip := make(map[TP]bool, len(have))
	for _, tp := range have {
		skip[tp] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []TP
	for _, t := range names {
		for p := range topics[t] { // partitions 0..n-1
			tp := TP{t, p}
			o, ok := ends.Lookup(t, p)
			if !ok || o.Err != nil || skip[tp] || r.busy[tp] {
				continue
			}
			if n, known := r.positions.known.get(tp); known {
				if n > o.Offset {
					r.positions.known.forget(tp) // the partition is shorter than what was copied: it started over
				} else if n == o.Offset {
					continue
				}
			}
			if len(out) == maxSwept {
				return out
			}
			out = append(out, tp)
			r.busy[tp] = true
			remote[t] = r.opts.Policy.FormatRemoteTopic(r.opts.SourceAlias, t)
		}
	}
	return out
}

// partSummary is the part of a shared copy's summary that concerns call's partition, timed
// from the call's start. A copy that ended without a word on the partition failed for it.
func (r *copyRuns) partSummary(s Summary, call *copyCall, runStart time.Time, err error) (Summary, error) {
	var parts []partResult
	for _, p := range s.parts {
		if p.tp == call.tp {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 && err == nil {
		err = fmt.Errorf("copy of %s ended (%s) without an outcome for it", call.tp, s.Reason)
	}
	reason := s.Reason
	if err != nil {
		reason = ReasonFailed
	}
	out := r.runner.finishSummary(call.start, parts, reason, err)
	if out.Records > 0 && s.FirstRecordMS >= 0 {
		out.FirstRecordMS = runStart.Add(time.Duration(s.FirstRecordMS) * time.Millisecond).Sub(call.start).Milliseconds()
	}
	return out, err
}
