package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// snapshotEnds (group mode) records the source's end offsets at the start of the burst: the
// records a burst group member checks for when it is the last one out (rejoin).
func (c *copier) snapshotEnds(ctx context.Context) error {
	e := c.e
	topics := slices.Sorted(maps.Keys(c.remote))
	_, ends, err := listOffsets(ctx, e.srcAdm, e.opts.ExactlyOnce || e.opts.ReadCommitted, topics...)
	if err != nil {
		return fmt.Errorf("source end offsets of the burst group's topics: %w", err)
	}
	c.ends = make(map[TP]int64, len(c.tps))
	for _, tp := range c.tps {
		if o, ok := ends.Lookup(tp.Topic, tp.Partition); ok {
			c.ends[tp] = o.Offset
		}
	}
	return nil
}

// consumer returns the source consumer: direct assignment of offs, or in group mode a group
// member whose assignment decides the partitions (positions come from the offsets topic,
// never from the group).
func (c *copier) consumer(ctx context.Context, offs map[string]map[int32]kgo.Offset) (*kgo.Client, error) {
	e := c.e
	if c.bo.Group == "" {
		return e.dialConsumer(ctx, c.pool, len(c.states), kgo.ConsumePartitions(offs))
	}
	topics := make([]string, 0, len(c.remote))
	for t := range c.remote {
		topics = append(topics, t)
	}
	return e.dialConsumer(ctx, c.pool, len(c.states),
		kgo.ConsumerGroup(c.bo.Group),
		// Eager: every rebalance hands each member its whole new assignment at once. With a
		// cooperative balancer a member joining while another copies first gets nothing (the
		// other gives partitions up in a second round), took that for its share and ended,
		// and the partitions given up could be left to nobody.
		kgo.Balancers(kgo.StickyBalancer()),
		// A member learns of a rebalance (a member joining or leaving) at its next heartbeat;
		// the others wait for it: every second, not franz-go's 3 s.
		kgo.HeartbeatInterval(groupHeartbeatInterval),
		kgo.ConsumeTopics(topics...),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.AdjustFetchOffsetsFn(c.assign),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
			c.mu.Lock()
			// Partitions assigned are planned afterwards (assign, franz-go's offset
			// adjustment): until then the burst must not take "no partition active" for
			// "done". Only an empty assignment is complete here.
			c.assigned = len(m) == 0
			pause := map[string][]int32{}
			for t, ps := range m {
				for _, p := range ps {
					if st := c.byTP[TP{t, p}]; st != nil && st.done {
						pause[t] = append(pause[t], p)
					}
				}
			}
			c.mu.Unlock()
			cl.PauseFetchPartitions(pause)
		}),
		kgo.OnPartitionsRevoked(c.revoke),
		kgo.OnPartitionsLost(c.revoke),
	)
}

// groupHeartbeatInterval is how often a burst group member heartbeats, and so how late at most
// it learns that a rebalance began.
const groupHeartbeatInterval = time.Second

// assign (group mode) plans newly assigned partitions: positions from the offsets topic (never
// from this process's memory, see planStored), end offsets as of now.
//
// A member that is finishing (closing) plans them too: if any has records left, the burst copies
// them before it leaves (reopen) instead of leaving them to members that may all be ending.
func (c *copier) assign(ctx context.Context, offs map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	var tps []TP
	for t, ps := range offs {
		for p := range ps {
			tps = append(tps, TP{t, p})
		}
	}
	// From the offsets topic only: another member may have copied a partition further since this
	// one last held it (revoke stores positions before the group moves on, so what is stored
	// there is where the previous holder stopped).
	works, err := c.e.planner.planStored(ctx, tps, c.remote, nil, c.offsets.parts) // group runs know the topic
	if err != nil {
		c.mu.Lock()
		closing := c.closing
		c.mu.Unlock()
		switch {
		case ctx.Err() != nil:
			// The group moved on (another member joined) before this assignment started:
			// franz-go rejoins and assigns again, so it is no failure.
		case closing:
			// What this member copied is stored; the partitions go to the member that gets
			// them next, or to the next burst.
			c.e.log.Warn("partitions assigned while this burst group member finished could not be planned; leaving them to the group", "group", c.bo.Group, "partitions", len(tps), "err", err)
		default:
			c.fail(err)
		}
		return nil, err
	}
	out := map[string]map[int32]kgo.Offset{}
	assigned := map[string][]int32{}
	for _, w := range works {
		c.addWork(w)
		assigned[w.tp.Topic] = append(assigned[w.tp.Topic], w.tp.Partition)
		if out[w.tp.Topic] == nil {
			out[w.tp.Topic] = map[int32]kgo.Offset{}
		}
		out[w.tp.Topic][w.tp.Partition] = kgo.NewOffset().At(w.start)
	}
	c.mu.Lock()
	c.assigned = true // planned: active counts their work
	c.mu.Unlock()
	c.e.log.Info("partitions assigned by burst group", "group", c.bo.Group, "partitions", len(works), "assigned", tpNames(assigned))
	return out, nil
}

// tpNames returns the partitions of m as sorted topic-partition names, for a log line.
func tpNames(m map[string][]int32) []string {
	var names []string
	for t, ps := range m {
		for _, p := range ps {
			names = append(names, TP{t, p}.String())
		}
	}
	slices.Sort(names)
	return names
}

// revoke (group mode) finishes revoked partitions before another member takes them: waits
// for in-flight records and stores their positions, also while the member is finishing
// (closing: the loop has ended and finish stores positions, or the member is leaving), and
// takes them off its books, so that a reopened loop does not copy a partition it no longer
// owns.
func (c *copier) revoke(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	if len(m) == 0 {
		return
	}
	// Finishing or not, the partitions reach the group only once their records in flight are
	// written and their positions stored: the member that gets them next starts from there.
	// (A finishing member used to return at once; the next member started from the positions
	// stored before and copied the records in flight a second time.) While finishing it waits
	// as finish does, not on franz-go's context, which a leave ends.
	wctx := ctx
	if closing {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), c.finishWait())
		defer cancel()
	}
	// A member still copying leaves the records it has not sent yet to the group (abandon):
	// under a produce quota its in-flight budget is seconds of sending, and the member that
	// joined waited that long for its share (scale-out, docs/performance.md). The records
	// already sent are waited for, and the positions stored are those acknowledged.
	abandon := !closing && c.abandon(m)
	c.e.log.Debug("burst group revoking partitions: waiting for their records in flight and storing their positions", "group", c.bo.Group, "revoking", tpNames(m), "finishing", closing, "unsent_left", abandon)
	if abandon {
		if err := c.prod.AbortBufferedRecords(wctx); err != nil {
			c.fail(fmt.Errorf("leaving the unsent records of partitions %v revoked by burst group %q: %w", tpNames(m), c.bo.Group, err))
		}
	} else if err := c.sink.flush(wctx); err != nil {
		c.fail(fmt.Errorf("waiting for in-flight records of partitions %v revoked by burst group %q: %w", tpNames(m), c.bo.Group, err))
	}
	if err := c.commits.commit(wctx, commitRevoke); err != nil {
		c.fail(fmt.Errorf("writing positions of partitions %v revoked by burst group %q: %w", tpNames(m), c.bo.Group, err))
	}
	c.mu.Lock()
	// A revocation is followed by a new assignment (possibly of other partitions): the burst
	// must not end before it arrives, or partitions could be left to nobody.
	c.assigned = false
	for t, ps := range m {
		for _, p := range ps {
			if st := c.byTP[TP{t, p}]; st != nil {
				delete(c.byTP, TP{t, p})
				if !st.done {
					st.done = true
					c.active--
				}
			}
		}
	}
	c.mu.Unlock()
	cl.ResumeFetchPartitions(m) // a partition paused here must not stay paused if it comes back
	c.e.log.Info("partitions revoked by burst group", "group", c.bo.Group, "topics", len(m), "revoked", tpNames(m))
}

// abandon (group mode, revoke) marks the partitions of m abandoned, so that the producer's
// aborted records are dropped, not failures, and reports whether it did: only on the copy's
// own producer (AbortBufferedRecords fails every record it holds) and only when m holds every
// partition with records in flight (an eager rebalance revokes them all).
func (c *copier) abandon(m map[string][]int32) bool {
	if c.reuse || c.prod == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	revoked := map[TP]bool{}
	for t, ps := range m {
		for _, p := range ps {
			revoked[TP{t, p}] = true
		}
	}
	for _, st := range c.states {
		st.mu.Lock()
		busy := st.head < len(st.inflight)
		st.mu.Unlock()
		if busy && (!revoked[st.w.tp] || c.byTP[st.w.tp] != st) {
			return false
		}
	}
	for tp := range revoked {
		if st := c.byTP[tp]; st != nil {
			st.mu.Lock()
			st.abandoned = true
			st.mu.Unlock()
		}
	}
	return true
}

// reopen (group mode) reports whether the burst copies again before it leaves the group, and
// if so lets the group callbacks plan again: partitions with records left were assigned to it
// while it finished. Eager rebalancing hands every partition out afresh (franz-go's eager
// members rejoin without their previous assignment, so the sticky balancer has none to keep),
// so a partition another member was copying can land on a member that is finishing. Members
// that end at about the same time would otherwise pass such a partition between them, each
// leaving it to the next, and the group would end with it unfinished. Not after a failure, a
// stop, a budget, or a loop that gave up on partitions that stopped yielding records.
//
// A rebalance that revoked its partitions and has not planned its new assignment yet (assigned
// false) is waited for in the loop too: that assignment may hold partitions with records left,
// and a member leaving before it arrives left them to nobody (its check as the last one out,
// rejoin, looks only at the end offsets of its start), while its summary said "done, lag 0".
func (c *copier) reopen(ctx context.Context, reason string) bool {
	if !c.mayGoOn(ctx, reason) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.stalled:
		return false
	case c.active > 0:
		c.e.log.Info("partitions with records left were assigned to this burst group member while it finished; copying them before leaving", "group", c.bo.Group, "partitions", c.active)
	case !c.assigned:
		c.e.log.Info("a rebalance is assigning partitions to this burst group member while it finished; waiting for it before leaving", "group", c.bo.Group)
	default:
		return false
	}
	c.closing = false
	return true
}

// rejoin (group mode, called once this member has left the group) reports whether the burst
// joins the group again to copy records left of the end offsets seen at its start (ends). A
// member that decided it was done can still be handed a partition with records left before it
// has left (another member leaving hands partitions out afresh), and so can every member after
// it: without this check the last of them left the records to nobody and all reported done
// (docs/performance.md, scale-out). Only a member that finds the group empty once it has left
// checks: members still in the group make the same check when they leave, and the last one out
// finds the group empty. Joining again goes through the group, so at most one member copies a
// partition at a time. Not after a failure, a stop, a budget, or a loop that gave up on
// partitions that stopped yielding records.
func (c *copier) rejoin(ctx context.Context, reason string) bool {
	if !c.mayGoOn(ctx, reason) || c.ends == nil {
		return false
	}
	c.mu.Lock()
	stalled := c.stalled
	c.mu.Unlock()
	if stalled {
		return false
	}
	e := c.e
	groups, err := e.srcAdm.DescribeGroups(ctx, c.bo.Group)
	if err == nil {
		err = groups.Error()
	}
	if err == nil && len(groups[c.bo.Group].Members) > 0 {
		return false // a member still in the group checks when it leaves
	}
	if err != nil {
		e.log.Warn("burst group not described after leaving it; checking for records left as the last member out", "group", c.bo.Group, "err", err)
	}
	positions, err := e.positions.read(ctx, c.tps, c.offsets.parts)
	if err != nil {
		e.log.Warn("positions not read after leaving the burst group; records left, if any, are copied by the next burst", "group", c.bo.Group, "err", err)
		return false
	}
	works, err := e.planner.planCopies(ctx, c.tps, c.remote, c.ends, positions, false)
	if err != nil {
		e.log.Warn("end offsets not read after leaving the burst group; records left, if any, are copied by the next burst", "group", c.bo.Group, "err", err)
		return false
	}
	left := 0
	for _, w := range works {
		if w.start < w.end {
			left++
		}
	}
	if left == 0 {
		return false
	}
	e.log.Info("last member out of the burst group found records left of the end offsets seen at its start; joining the group again to copy them", "group", c.bo.Group, "partitions", left)
	c.mu.Lock()
	for tp, st := range c.byTP { // left with the group: none is assigned any more
		if !st.done {
			st.done = true
			c.active--
		}
		delete(c.byTP, tp)
	}
	c.closing, c.assigned = false, false
	c.mu.Unlock()
	return true
}
