package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
)

// burstRunner runs a copy from its start to its summary: the order of a burst's start (topics
// prepared beside the internal topics' checks, planning and the source consumer started early),
// the exactly-once or at-least-once copy, the lag group commit and the summary. Bursts and
// serve's shared copies both run through runWith.
//
// Ownership: it has no lock and no state of its own; Engine.wire sets its core, which the write
// pipeline's constructors (newCopier, eosCopier, newSyncEmitter, forwarding, dialConsumer,
// dataProducerOpts) take, and which is read-only afterwards. reuse (serve's long-lived
// producers and checks) is used only by runs with reuse.
type burstRunner struct {
	*core
}

// burst is Engine.Burst.
func (br *burstRunner) burst(ctx context.Context, bo BurstOptions) (Summary, error) {
	start := time.Now()
	topics, err := br.planner.discover(ctx)
	if err != nil {
		return br.failed(start, err)
	}
	br.log.Debug("topics discovered", "topics", len(topics), "elapsed", time.Since(start).String())
	if err := br.planner.checkBudgets(ctx, topics); err != nil {
		return br.failed(start, err)
	}
	tps, remote := partitionsOf(topics)
	if bo.Group != "" && br.opts.ExactlyOnce {
		// Overlapping exactly-once bursts are safe (fencing), they just do not split work.
		br.log.Warn("burst groups are not used in exactly-once mode: this burst takes every partition", "group", bo.Group)
		bo.Group = ""
	}
	prepare := func(ctx context.Context) ([]cluster.NewTopic, error) { return br.planner.prepareTargets(ctx, topics) }
	s, err := br.runWith(ctx, start, bo, tps, remote, nil, false, prepare)
	br.planner.syncACLs(ctx) // [h/config] MM2's sync.topic.acls: once per burst, after the copy
	return s, err
}

// runWith plans and copies the given partitions. limit optionally lowers the end offset of
// some. prepare, if not nil, readies the remote topics while the internal topics are checked
// and returns those it created. The partitions of new topics may not be served yet: a burst
// that forwards batches starts at once (each partition's first batch waits for its own, see
// servedWatch); one that copies record by record waits briefly for a few (awaitServing).
// With reuse (CopyPartition) it uses the engine's long-lived producers and recent checks of
// the internal topics instead of its own.
//
// On a flow's first burst the Connect offsets topic does not exist yet, so no position can be
// stored: a plain burst then starts copying as soon as the remote topics are ready and creates
// the offsets topic behind them (its many partitions would otherwise hold up the remote
// topics on the target broker); positions are written once it is ready. Exactly-once, group
// and reuse runs read positions first, so they wait for it.
func (br *burstRunner) runWith(ctx context.Context, start time.Time, bo BurstOptions, tps []TP, remote map[string]string, limit map[TP]int64, reuse bool, prepare func(ctx context.Context) ([]cluster.NewTopic, error)) (Summary, error) {
	if bo.Grace <= 0 {
		bo.Grace = 10 * time.Second
	}
	copying := false // the copier calls bo.settled; every other way out of here does it below
	defer func() {
		if !copying && bo.settled != nil {
			bo.settled()
		}
	}()
	ensureOffsets, newSyncs := br.positions.ensure, br.newSyncEmitter
	if reuse {
		ensureOffsets, newSyncs = br.positions.reusedTopic, br.reuse.syncEmitter
	}
	deferrable := !reuse && !br.opts.ExactlyOnce && bo.Group == "" && len(tps) > 0
	var (
		wg                   sync.WaitGroup
		syncs                *syncEmitter
		syncsErr, prepareErr error
		created              []cluster.NewTopic
		offsets              *pendingTopic
		offsetsErr           error
	)
	prepared := make(chan struct{})
	readyMS := int64(-1)
	forward := br.forwarding(bo, reuse, len(tps))
	wg.Go(func() { syncs, syncsErr = newSyncs(ctx, deferrable) })
	wg.Go(func() {
		defer close(prepared)
		if prepare != nil {
			created, prepareErr = prepare(ctx)
			if prepareErr == nil && !forward {
				br.planner.awaitServing(ctx, created)
			}
			readyMS = time.Since(start).Milliseconds()
			br.log.Debug("remote topics ready", "elapsed", time.Since(start).String())
		}
	})
	// Planning (and with it the source consumer's start) runs beside the preparation of the
	// topics, as soon as it is known whether positions can exist. Group runs plan as
	// partitions are assigned; exactly-once runs after fencing.
	early := earlyStart{warm: !reuse, forward: forward}
	planEarly := func(offsetsParts int32) {
		if bo.Group == "" && !br.opts.ExactlyOnce && len(tps) > 0 {
			wg.Go(func() { br.planEarly(ctx, tps, remote, limit, offsetsParts, &early) })
		}
	}
	if reuse && !br.opts.ExactlyOnce {
		if p := br.positions.creatingTopic(); p != nil {
			// A first start's warm-up is creating the offsets topic: no position exists.
			br.log.Debug("planning without positions: the offsets topic is being created", "partitions", len(tps))
			offsets = p
			planEarly(0)
		}
	}
	if deferrable && offsets == nil {
		var st cluster.TopicState
		if st, offsetsErr = cluster.DescribeTopic(ctx, br.tgt, br.opts.OffsetStorageTopic); offsetsErr == nil && !st.Exists {
			offsets = createInBackground(ctx, br.bg, prepared, func(ctx context.Context) (int32, error) {
				return rideOut(ctx, br.log, br.opts.OffsetStorageTopic, func(ctx context.Context) (int32, error) {
					n, _, err := ensureOffsets(ctx)
					return n, err
				})
			})
			defer func() { _, _ = offsets.wait(context.WithoutCancel(ctx)) }() // let it end with the run
			planEarly(0)                                                       // no position can be stored yet: plan from the source's offsets alone
		}
	}
	if offsets == nil && offsetsErr == nil {
		var (
			parts int32
			fresh bool
		)
		parts, fresh, offsetsErr = ensureOffsets(ctx)
		offsets = readyTopic(parts)
		if offsetsErr == nil {
			if fresh {
				parts = 0 // this run created the offsets topic: no position can be stored yet
			}
			planEarly(parts)
		}
	}
	wg.Wait()
	if syncsErr == nil && (offsetsErr != nil || prepareErr != nil) {
		syncs.close()
	}
	if err := errors.Join(prepareErr, offsetsErr, syncsErr); err != nil {
		early.close()
		return br.failed(start, err)
	}
	defer syncs.close()
	if len(tps) == 0 {
		s := br.finishSummary(start, nil, ReasonDone, nil)
		s.TopicsReadyMS = readyMS
		return s, nil
	}
	var c *copier
	if br.opts.ExactlyOnce {
		// The same copier and loop, writing through transactions (eosCopier fences, then plans).
		var err error
		if c, err = br.eosCopier(ctx, bo, tps, remote, limit, offsets, syncs); err != nil {
			return br.failed(start, err)
		}
	} else {
		// Group runs plan as partitions are assigned; every other run was planned above.
		works, err := early.works, early.err
		if err != nil {
			early.close()
			return br.failed(start, err)
		}
		br.log.Debug("positions read", "partitions", len(works), "elapsed", time.Since(start).String())
		c = newCopier(br.core, bo, works, offsets, syncs)
		if early.cons != nil {
			c.pool, c.early = early.pool, early.cons
		}
		c.earlyProd, c.throttle = early.prod, early.throttle
		c.remote = remote
		c.tps = tps
		c.forward = forward
		if reuse {
			c.shareEngineBudget()
		}
	}
	copying = true
	sum, err := c.run(ctx, start)
	sum.TopicsReadyMS = readyMS
	br.commitLagGroup(ctx, sum, err)
	return sum, err
}

// commitLagGroup commits the positions a successful copy stored (the next offset of every
// partition it planned) to the source consumer group Options.LagGroup, so that tools reading
// consumer lag (KEDA's kafka scaler, kafka-consumer-groups.sh) see mm2go's. The group is never
// read back: positions live in the offsets topic. A failed commit is logged, not fatal: the
// copy and its positions stand.
func (br *burstRunner) commitLagGroup(ctx context.Context, s Summary, err error) {
	if br.opts.LagGroup == "" || err != nil {
		return
	}
	offs := kadm.Offsets{}
	for _, p := range s.parts {
		if p.next >= 0 {
			offs.Add(kadm.Offset{Topic: p.tp.Topic, Partition: p.tp.Partition, At: p.next, LeaderEpoch: -1})
		}
	}
	if len(offs) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	resp, cerr := br.srcAdm.CommitOffsets(cctx, br.opts.LagGroup, offs)
	if cerr == nil {
		cerr = resp.Error()
	}
	if cerr != nil {
		br.log.Warn("positions not committed to the lag group (MM2_LAG_GROUP); lag-based scaling sees old offsets", "group", br.opts.LagGroup, "err", cerr)
	}
}

// earlyStart is a plan made beside the preparation of the topics, and the source consumer
// and target producer started with it: the consumer connects and fetches, and the producer
// connects and gets its producer ID, while the remote topics are still being created.
type earlyStart struct {
	works []*work
	err   error
	cons  *kgo.Client // nil if none was started
	pool  *fetchPool
	prod  *kgo.Client // the records' producer, nil if none was started
	// throttle watches prod's throttling by the target (copier.throttle).
	throttle *throttleWatch
	warm     bool // start prod (not for runs on the engine's shared producers)
	// forward: the run forwards batches first (see forwardLoop), so no consumer is started;
	// the record path dials one for the partitions it hands over.
	forward bool
}

// planEarly plans tps (from the positions in the offsets topic's offsetsParts partitions, or
// without positions if 0) and starts the source consumer of the partitions with work.
func (br *burstRunner) planEarly(ctx context.Context, tps []TP, remote map[string]string, limit map[TP]int64, offsetsParts int32, es *earlyStart) {
	if offsetsParts > 0 {
		es.works, es.err = br.planner.plan(ctx, tps, remote, limit, offsetsParts)
	} else {
		es.works, es.err = br.planner.planCopies(ctx, tps, remote, limit, nil, true)
	}
	br.log.Debug("planned", "partitions", len(es.works))
	if es.err != nil {
		return
	}
	offs := startOffsets(es.works)
	if len(offs) == 0 {
		return
	}
	if es.forward {
		if es.warm {
			es.prod, es.throttle = br.warmProducer(ctx)
		}
		return
	}
	pool := &fetchPool{}
	cons, err := br.dialConsumer(ctx, pool, len(es.works), kgo.ConsumePartitions(offs))
	if err != nil {
		return // the copier connects again and reports the failure
	}
	es.cons, es.pool = cons, pool
	if es.warm {
		es.prod, es.throttle = br.warmProducer(ctx)
	}
}

// warmProducer dials the records' producer and, in the background, has it connect to the
// target and get its idempotent producer ID. A first produce otherwise does both after the
// remote topics are ready: a new connection to a seed broker and one to the broker that
// answers InitProducerID, some 15 ms of a new flow's first record on a local broker (franz-go
// debug log). Only a plan with records to copy warms one, so an idle run sends nothing more.
// It returns nil if the client cannot be built: the copier dials again and reports that. The
// watch is the client's throttle hook (copier.throttle).
func (br *burstRunner) warmProducer(ctx context.Context) (*kgo.Client, *throttleWatch) {
	throttle := newThrottleWatch(throttleMemory)
	prod, err := br.dial(ctx, Target, append(br.dataProducerOpts(), kgo.WithHooks(throttle))...)
	if err != nil {
		return nil, nil
	}
	wctx, stop := br.bg.bind(ctx)
	if !br.bg.goDo(func() {
		defer stop()
		// A failure here is the first produce's to report: it loads the ID again.
		if _, _, err := prod.ProducerID(wctx); err != nil {
			br.log.Debug("target producer not warmed", "err", err)
		}
	}) {
		stop()
	}
	return prod, throttle
}

// close closes the clients started early that will not be used.
func (es *earlyStart) close() {
	if es.cons != nil {
		es.cons.Close()
		es.cons = nil
	}
	if es.prod != nil {
		es.prod.Close()
		es.prod = nil
	}
}
