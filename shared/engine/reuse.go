package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/singleflight"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/offsetsync"
)

// reused is what CopyPartition keeps between calls, so event-driven callers (fetch mode, one
// call per partition and event) do not connect and check everything per call: the target
// producers for records and positions, the offset-syncs producer, and recent checks. Bursts
// do not use it (a burst is the process's only work, its clients live as long as it does).
//
// It also runs serve's warm-up (warm), which readies the topics those calls need and records
// them as prepared.
//
// Ownership: the fields above checks are set by Engine.wire and read-only afterwards: what
// reused depends on (the position store, the topic planner, a target client, the dial function
// and two functions of the offset-sync pipeline). checks is its own (singleflight).
//
// Lock: mu guards every field below it but inflight (its own), and is never held across
// network I/O: checks that do I/O run outside it, one at a time per kind (checks, a
// singleflight group: concurrent callers wait for the one running, each within its own ctx).
type reused struct {
	dial        DialFunc
	log         *slog.Logger
	tgt         *kgo.Client
	opts        Options
	positions   *positionStore
	planner     *topicPlanner
	dataOpts    func() []kgo.Opt                // the records' producer options (core.dataProducerOpts)
	ensureSyncs func(ctx context.Context) error // core.ensureSyncsTopic
	// emitter is newEmitter on the engine's core, for a shared producer of offset syncs.
	emitter func(cl *kgo.Client, topic string, shared bool, w *offsetsync.Writer, gate *syncGate) *syncEmitter
	bg      *background // runs the warm-up

	checks singleflight.Group

	mu                    sync.Mutex
	prod, posProd, syncCl *kgo.Client

	syncsChecked time.Time
	prepared     map[string]preparedTopic // source topic -> remote topic checked

	// inflight bounds the bytes in flight of all concurrent calls together (the engine's
	// sharedInflightBudget), so memory does not grow with the partitions copied at once.
	inflight inflightBytes

	// syncWriter applies MM2's offset-sync rules across all calls, as one long-running
	// MirrorSourceTask does (a writer per call would sync every call's first record); each
	// call's emitter takes the syncs of its own partitions only. syncGate is syncCl's: the
	// permits of all calls' syncs (maxProducerSyncs; each partition has its own
	// maxOutstandingSyncs too) and the broker's throttles. promoted is when each partition's
	// delayed sync was last promoted.
	syncWriter *offsetsync.Writer
	syncGate   *syncGate
	promoted   map[TP]time.Time

	// warming, while not nil and open, makes calls wait for WarmInBackground to end.
	warming chan struct{}
}

type preparedTopic struct {
	partitions int32
	at         time.Time
}

func (r *reused) close() {
	r.mu.Lock()
	prod, posProd, syncCl, w, gate := r.prod, r.posProd, r.syncCl, r.syncWriter, r.syncGate
	r.prod, r.posProd, r.syncCl = nil, nil, nil
	r.mu.Unlock()
	if syncCl != nil && w != nil {
		// The newest position of every partition gets its sync before the process ends.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		topic, _ := offsetSyncsTopic(r.opts)
		if err := r.emitter(syncCl, topic, true, w, gate).flushAll(ctx); err != nil {
			r.log.Warn("last offset syncs not written", "err", err)
		}
		cancel()
	}
	for _, cl := range []*kgo.Client{prod, posProd, syncCl} {
		if cl != nil {
			cl.Close()
		}
	}
}

// positionProducerOpts are the options of the producer of position records.
func positionProducerOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	}
}

// producers returns the long-lived record and position producers, connecting them on
// first use (outside r.mu: a client of a caller that lost the race is closed).
func (r *reused) producers(ctx context.Context) (prod, posProd *kgo.Client, err error) {
	r.mu.Lock()
	prod, posProd = r.prod, r.posProd
	r.mu.Unlock()
	if prod != nil && posProd != nil {
		return prod, posProd, nil
	}
	dialed := prod == nil
	if dialed {
		if prod, err = r.dial(ctx, Target, r.dataOpts()...); err != nil {
			return nil, nil, err
		}
	}
	if posProd == nil {
		if posProd, err = r.dial(ctx, Target, positionProducerOpts()...); err != nil {
			if dialed {
				prod.Close()
			}
			return nil, nil, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prod = keepFirst(r.prod, prod)
	r.posProd = keepFirst(r.posProd, posProd)
	return r.prod, r.posProd, nil
}

// keepFirst returns have if set (closing mine, when it is another client), else mine.
func keepFirst(have, mine *kgo.Client) *kgo.Client {
	if have == nil {
		return mine
	}
	if mine != have {
		mine.Close()
	}
	return have
}

// check runs do once for all concurrent callers of the same key (no lock held while it runs);
// a caller whose ctx ends stops waiting, the check goes on for the others.
func (r *reused) check(ctx context.Context, key string, do func() error) error {
	ch := r.checks.DoChan(key, func() (any, error) { return nil, do() })
	select {
	case res := <-ch:
		return res.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// syncEmitter is newSyncEmitter over the long-lived offset-syncs producer (the topic
// checked at most once per reuseTTL, outside r.mu). The emitter sends and waits for the syncs
// of its own partitions only.
func (r *reused) syncEmitter(ctx context.Context, _ bool) (*syncEmitter, error) {
	topic, side := offsetSyncsTopic(r.opts)
	r.mu.Lock()
	stale := r.syncCl == nil || time.Since(r.syncsChecked) >= reuseTTL
	r.mu.Unlock()
	if stale {
		// The check outlives a caller that gives up (others may wait for it), for at most
		// reuseTTL.
		err := r.check(ctx, "syncs", func() error {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reuseTTL)
			defer cancel()
			if err := r.ensureSyncs(cctx); err != nil {
				return err
			}
			r.mu.Lock()
			r.syncsChecked = time.Now()
			r.mu.Unlock()
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	r.mu.Lock()
	cl := r.syncCl
	r.mu.Unlock()
	if cl == nil {
		gate := newSyncGate(r.log)
		mine, err := r.dial(ctx, side, syncProducerOpts(0, gate)...)
		if err != nil {
			return nil, fmt.Errorf("connecting offset-syncs producer to %s: %w", side, err)
		}
		gate.size(mine)
		r.mu.Lock()
		if r.syncCl == nil {
			r.syncGate = gate
		}
		r.syncCl = keepFirst(r.syncCl, mine)
		cl = r.syncCl
		r.mu.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.syncWriter == nil {
		r.syncWriter = offsetsync.NewWriter(r.opts.OffsetLagMax)
	}
	return r.emitter(cl, topic, true, r.syncWriter, r.syncGate), nil
}

// promoteOften reports whether the delayed offset sync of tp in the shared writer may be
// promoted now: at most about once a second per partition, for callers that write a record at
// a time (payload mode).
func (r *reused) promoteOften(tp TP) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.promoted[tp]) < time.Second {
		return false
	}
	if r.promoted == nil {
		r.promoted = map[TP]time.Time{}
	}
	r.promoted[tp] = time.Now()
	return true
}

// preparedRecently reports whether the remote topic of topic was checked with this many
// partitions within reuseTTL; remember records a successful check. Configs are synced with
// that check, so event-driven calls sync a topic's configs at most every reuseTTL (MM2 does it
// every sync.topic.configs.interval.seconds, 600 s by default): checking on every call cost
// each first copy three admin round trips.
func (r *reused) preparedRecently(topic string, partitions int32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.prepared[topic]
	return ok && p.partitions == partitions && time.Since(p.at) < reuseTTL
}

// preparedPartitions returns the partition count of topic as last checked, if within
// reuseTTL.
func (r *reused) preparedPartitions(topic string) (int32, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.prepared[topic]
	if !ok || time.Since(p.at) >= reuseTTL {
		return 0, false
	}
	return p.partitions, true
}

// preparedTopics returns every topic checked so far (by the warm-up or a call) with its
// partition count as last seen, whatever its age: the topics a shared copy sweeps.
func (r *reused) preparedTopics() map[string]int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int32, len(r.prepared))
	for t, p := range r.prepared {
		out[t] = p.partitions
	}
	return out
}

func (r *reused) rememberPrepared(topic string, partitions int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.prepared == nil {
		r.prepared = map[string]preparedTopic{}
	}
	r.prepared[topic] = preparedTopic{partitions, time.Now()}
}

// warm is Warm; release, if not nil, is called once copies may start: on a flow's first start
// (no offsets topic yet, so no stored position anywhere) as soon as the remote and offset-syncs
// topics are ready, the offsets topic being created behind them as a first burst does;
// otherwise at the end.
func (r *reused) warm(ctx context.Context, release func()) error {
	start := time.Now()
	topics, err := r.planner.discover(ctx)
	if err != nil {
		return err
	}
	if err := r.planner.checkBudgets(ctx, topics); err != nil {
		return err
	}
	offsets, err := cluster.DescribeTopic(ctx, r.tgt, r.opts.OffsetStorageTopic)
	if err != nil {
		return fmt.Errorf("describing offsets topic %q on target: %w", r.opts.OffsetStorageTopic, err)
	}
	ready := func(ctx context.Context) (int32, error) {
		n, _, err := r.positions.reusedTopic(ctx)
		if err != nil {
			return 0, err
		}
		// A partition created a moment ago refuses ListOffsets for a while (hundreds of ms
		// here); copies read positions from the offsets topic, so wait here, once, until it
		// answers.
		if err := cluster.WaitForServing(ctx, r.tgt, r.opts.OffsetStorageTopic); err != nil {
			return 0, fmt.Errorf("offsets topic %q on target: %w", r.opts.OffsetStorageTopic, err)
		}
		r.log.Debug("warm-up: offsets topic answers", "elapsed", time.Since(start).String())
		return n, nil
	}
	var (
		wg                 sync.WaitGroup
		syncErr, offsetErr error
	)
	wg.Go(func() {
		// Beside the remote topics: the offset-syncs topic is on the source by default.
		s, err := r.syncEmitter(ctx, false)
		if err == nil {
			s.close()
		}
		syncErr = err
	})
	if offsets.Exists {
		// Nothing to create: check it beside the remote topics.
		wg.Go(func() { _, offsetErr = ready(ctx) })
	}
	err = r.planner.prepareServed(ctx, topics)
	wg.Wait()
	if err = errors.Join(err, syncErr, offsetErr); err != nil {
		return err
	}
	for _, t := range topics {
		r.rememberPrepared(t.Source, t.Partitions)
	}
	r.log.Debug("warm-up: remote and offset-syncs topics ready", "topics", len(topics), "elapsed", time.Since(start).String())
	if offsets.Exists {
		return nil
	}
	if r.opts.ExactlyOnce || release == nil {
		// Exactly-once copies read positions after fencing: they wait for the topic.
		_, err := ready(ctx)
		return err
	}
	p := createInBackground(ctx, r.bg, nil, ready)
	r.positions.setCreating(p)
	release()
	_, err = p.wait(ctx)
	return err
}

// warmInBackground is Engine.WarmInBackground.
func (r *reused) warmInBackground(ctx context.Context, done func(error)) {
	ch := make(chan struct{})
	r.mu.Lock()
	r.warming = ch
	r.mu.Unlock()
	var once sync.Once
	release := func() { once.Do(func() { close(ch) }) }
	ctx, stop := r.bg.bind(ctx)
	if !r.bg.goDo(func() {
		defer stop()
		err := r.warm(ctx, release)
		release()
		if done != nil {
			done(err)
		}
	}) {
		stop()
		release()
		if done != nil {
			done(fmt.Errorf("warming up: %w", errEngineClosed))
		}
	}
}

// warmed waits until a warm-up in progress has ended.
func (r *reused) warmed(ctx context.Context) error {
	r.mu.Lock()
	ch := r.warming
	r.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the start-up preparation of topics: %w", ctx.Err())
	}
}
