package engine

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/offsetsync"
)

// newSyncEmitter creates the offset-syncs topic if missing (1 partition, compacted) and a
// producer for it. With inBackground the topic is created while the burst copies: the producer
// then holds syncs for a topic it does not know yet until the topic appears, and finish
// reports a creation that failed.
func (e *core) newSyncEmitter(ctx context.Context, inBackground bool) (*syncEmitter, error) {
	if !e.opts.EmitsOffsetSyncs() {
		return disabledEmitter(), nil
	}
	topic, side := offsetSyncsTopic(e.opts)
	if !inBackground {
		if err := e.ensureSyncsTopic(ctx); err != nil {
			return nil, err
		}
	}
	// A burst's syncs wait a little to travel together: the forwarder acknowledges a batch of
	// hundreds of records at a time, and a request per sync or two was a third of the requests
	// of a 50-topic copy. finish flushes without waiting for the linger.
	gate := newSyncGate(e.log)
	opts := syncProducerOpts(syncLinger, gate)
	if inBackground {
		opts = append(opts, kgo.UnknownTopicRetries(-1))
	}
	cl, err := e.dial(ctx, side, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting offset-syncs producer to %s: %w", side, err)
	}
	s := newEmitter(e, cl, topic, false, nil, gate.size(cl))
	if inBackground {
		s.ready = createInBackground(ctx, e.bg, nil, func(ctx context.Context) (int32, error) {
			return rideOut(ctx, e.log, topic, func(ctx context.Context) (int32, error) { return 1, e.ensureSyncsTopic(ctx) })
		})
	}
	return s, nil
}

// newEmitter returns an emitter writing to topic with cl: with a writer of its own (a burst),
// or, with shared, the given one (serve's copies on the engine's client); gate is cl's (nil: a
// gate of its own, for a client dialed without it as a hook).
func newEmitter(e *core, cl *kgo.Client, topic string, shared bool, w *offsetsync.Writer, gate *syncGate) *syncEmitter {
	if !e.opts.EmitsOffsetSyncs() {
		return disabledEmitter()
	}
	if w == nil {
		w = offsetsync.NewWriter(e.opts.OffsetLagMax)
	}
	if gate == nil {
		gate = newSyncGate(e.log).size(cl)
	}
	return &syncEmitter{w: w, cl: cl, topic: topic, shared: shared, gate: gate, owned: map[TP]*syncPartition{}, ready: readyTopic(1)}
}

// ensureSyncsTopic creates the offset-syncs topic if missing (nothing with
// emit.offset-syncs.enabled=false, as MirrorSourceConnector.createOffsetSyncsTopic).
func (e *core) ensureSyncsTopic(ctx context.Context) error {
	if !e.opts.EmitsOffsetSyncs() {
		return nil
	}
	topic, side := offsetSyncsTopic(e.opts)
	cl := e.src
	if side == Target {
		cl = e.tgt
	}
	if _, _, err := cluster.EnsureTopic(ctx, cl, topic, 1, e.opts.OffsetSyncsTopicReplicationFactor,
		e.planner.internalTopicConfigs(side)); err != nil {
		return fmt.Errorf("preparing offset-syncs topic on %s (offset-syncs.topic.replication.factor=%d): %w", side, e.opts.OffsetSyncsTopicReplicationFactor, err)
	}
	return nil
}
