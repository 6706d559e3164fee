package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/shared/offsetsync"
)

// syncEmitter feeds acknowledged (upstream, downstream) pairs to MM2's OffsetSyncWriter rules
// and writes the due syncs to partition 0 of the offset-syncs topic with its own
// non-transactional producer, as MirrorSourceTask does.
type syncEmitter struct {
	w     *offsetsync.Writer
	cl    *kgo.Client
	topic string
	// shared: cl belongs to the engine (CopyPartition calls): never closed here, and finish
	// waits for this emitter's syncs (pending) instead of flushing the client.
	shared  bool
	pending atomic.Int64
	// promote, if set, says whether finish promotes delayed syncs now (shared writers promote
	// at most about once a second, as a long-running MM2 task does on its commits); nil: always.
	promote func() bool

	mu   sync.Mutex
	err  error
	sent int64

	// ready is the offset-syncs topic: known at once unless a first burst creates it in the
	// background.
	ready *pendingTopic

	// off: emit.offset-syncs.enabled=false. The emitter takes every call and writes nothing
	// (w and cl are nil).
	off bool
}

// disabledEmitter is the emitter of a flow with emit.offset-syncs.enabled=false: no topic, no
// producer, no sync.
func disabledEmitter() *syncEmitter { return &syncEmitter{off: true, ready: readyTopic(1)} }

// newSyncEmitter creates the offset-syncs topic if missing (1 partition, compacted) and a
// producer for it. With inBackground the topic is created while the burst copies: the producer
// then holds syncs for a topic it does not know yet until the topic appears, and finish
// reports a creation that failed.
func (e *Engine) newSyncEmitter(ctx context.Context, inBackground bool) (*syncEmitter, error) {
	if !e.opts.EmitsOffsetSyncs() {
		return disabledEmitter(), nil
	}
	topic, side := e.OffsetSyncsTopic()
	if !inBackground {
		if err := e.ensureSyncsTopic(ctx); err != nil {
			return nil, err
		}
	}
	// A burst's syncs wait a little to travel together: the forwarder acknowledges a batch of
	// hundreds of records at a time, and a request per sync or two was a third of the requests
	// of a 50-topic copy. finish flushes without waiting for the linger.
	opts := syncProducerOpts(syncLinger)
	if inBackground {
		opts = append(opts, kgo.UnknownTopicRetries(-1))
	}
	cl, err := e.dial(ctx, side, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting offset-syncs producer to %s: %w", side, err)
	}
	s := newEmitter(e, cl, topic, false)
	if inBackground {
		s.ready = createInBackground(nil, func() (int32, error) { return 1, e.ensureSyncsTopic(ctx) })
	}
	return s, nil
}

func newEmitter(e *Engine, cl *kgo.Client, topic string, shared bool) *syncEmitter {
	if !e.opts.EmitsOffsetSyncs() {
		return disabledEmitter()
	}
	return &syncEmitter{w: offsetsync.NewWriter(e.opts.OffsetLagMax), cl: cl, topic: topic, shared: shared, ready: readyTopic(1)}
}

// syncLinger is how long a burst's offset-syncs producer waits to fill a request. A shared
// (mirror serve) one does not wait: a request's syncs are awaited before it is answered.
const syncLinger = 20 * time.Millisecond

// syncProducerOpts are an offset-syncs producer's options: partition 0 as given, linger.
func syncProducerOpts(linger time.Duration) []kgo.Opt {
	return []kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(linger)}
}

// ensureSyncsTopic creates the offset-syncs topic if missing (nothing with
// emit.offset-syncs.enabled=false, as MirrorSourceConnector.createOffsetSyncsTopic).
func (e *Engine) ensureSyncsTopic(ctx context.Context) error {
	if !e.opts.EmitsOffsetSyncs() {
		return nil
	}
	topic, side := e.OffsetSyncsTopic()
	cl := e.src
	if side == Target {
		cl = e.tgt
	}
	if _, _, err := cluster.EnsureTopic(ctx, cl, topic, 1, e.opts.OffsetSyncsTopicReplicationFactor,
		e.internalTopicConfigs(side)); err != nil {
		return fmt.Errorf("preparing offset-syncs topic on %s (offset-syncs.topic.replication.factor=%d): %w", side, e.opts.OffsetSyncsTopicReplicationFactor, err)
	}
	return nil
}

// record registers an acknowledged copy of upstream to downstream and sends a sync at once if
// one is due, as MirrorSourceTask.commitRecord does (it runs in producer promises: the
// offset-syncs producer is a different client, so producing here cannot deadlock).
func (s *syncEmitter) record(ctx context.Context, topic string, partition int32, upstream, downstream int64) {
	if s.off {
		return
	}
	s.recordAt(ctx, s.w.Partition(topic, partition), upstream, downstream)
}

// partition returns the handle of tp in the offset-sync rules (the zero handle when syncs
// are off), for recordAt.
func (s *syncEmitter) partition(tp TP) offsetsync.Partition {
	if s.off {
		return offsetsync.Partition{}
	}
	return s.w.Partition(tp.Topic, tp.Partition)
}

// recordAt is record through the partition's handle: the per-record path, with no lookup of
// the partition (two map lookups per record were 40% of the engine's own work per record).
func (s *syncEmitter) recordAt(ctx context.Context, p offsetsync.Partition, upstream, downstream int64) {
	if s.off || !p.Record(upstream, downstream) {
		return // nothing due: no second lock per record for an empty pending set
	}
	for _, sy := range s.w.TakePending() {
		s.produce(ctx, sy)
	}
}

func (s *syncEmitter) produce(ctx context.Context, sy mm2.OffsetSync) {
	k, v, err := sy.Encode()
	if err != nil {
		s.done(nil, fmt.Errorf("encoding offset sync %v: %w", sy, err))
		return
	}
	s.pending.Add(1)
	s.cl.Produce(ctx, &kgo.Record{Topic: s.topic, Partition: 0, Key: k, Value: v}, s.done)
}

// send writes the pending syncs asynchronously. With promote, delayed syncs are promoted
// first (MM2's commit()), so the newest position of every partition gets synced.
func (s *syncEmitter) send(ctx context.Context, promote bool) error {
	if s.off {
		return nil
	}
	if promote {
		s.w.PromoteDelayed()
	}
	for _, sy := range s.w.TakePending() {
		s.produce(ctx, sy)
	}
	return s.error()
}

func (s *syncEmitter) done(_ *kgo.Record, err error) {
	defer s.pending.Add(-1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil && s.err == nil {
		s.err = fmt.Errorf("writing offset sync to %q: %w", s.topic, err)
	}
	if err == nil {
		s.sent++
	}
}

func (s *syncEmitter) error() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// finish promotes and sends every remaining sync and waits for them.
func (s *syncEmitter) finish(ctx context.Context) error {
	if s.off {
		return nil
	}
	if _, err := s.ready.wait(ctx); err != nil {
		if s.ready.failed() != nil {
			return err
		}
		return fmt.Errorf("waiting for the offset-syncs topic %q: %w", s.topic, err)
	}
	if err := s.send(ctx, s.promote == nil || s.promote()); err != nil {
		return err
	}
	flush := s.cl.Flush
	if s.shared {
		flush = func(ctx context.Context) error { return waitZero(ctx, &s.pending) }
	}
	if err := flush(ctx); err != nil {
		return fmt.Errorf("flushing offset syncs: %w", err)
	}
	return s.error()
}

func (s *syncEmitter) close() {
	if !s.shared && s.cl != nil {
		s.cl.Close()
	}
	_, _ = s.ready.wait(context.Background()) // the background creation ends with the burst's context
}
