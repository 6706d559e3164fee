package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/offsetsync"
)

// Engine replicates one flow. It is safe for one Burst or CopyPartition at a time per
// partition; concurrent calls on distinct partitions are allowed.
type Engine struct {
	// core is what the copies share with the engine: its options, clients, logger, background
	// and the parts below the copy (planner, position store, serve's reuse).
	core

	// The parts on top, each owning its state and lock (docs/design.md, "the engine's parts"),
	// wired by wire.
	runs   copyRuns     // the serve coordinator: CopyPartition calls, copied together
	runner *burstRunner // a copy from its start to its summary (bursts and shared copies)
}

// New returns an Engine for the flow described by opts, dialling clusters with dial. It
// connects lazily: no request is sent before the first burst.
func New(ctx context.Context, opts Options, dial DialFunc, logger *slog.Logger) (*Engine, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	if dial == nil {
		return nil, errors.New("engine: a dial function is required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// Every client of the engine refreshes metadata at most 50 ms apart and retries with
	// Java's backoff (see withClientDefaults).
	dial = withClientDefaults(dial)
	src, err := dial(ctx, Source)
	if err != nil {
		return nil, fmt.Errorf("connecting to source cluster: %w", err)
	}
	tgt, err := dial(ctx, Target)
	if err != nil {
		src.Close()
		return nil, fmt.Errorf("connecting to target cluster: %w", err)
	}
	if err := checkDialOpts(src, tgt, opts); err != nil {
		src.Close()
		tgt.Close()
		return nil, err
	}
	e := &Engine{core: core{
		opts: opts, dial: dial, log: logger,
		src: src, tgt: tgt, srcAdm: kadm.NewClient(src), tgtAdm: kadm.NewClient(tgt),
	}}
	e.wire()
	e.planner.logProfiles()
	return e, nil
}

// wire builds the engine's parts from its options, clients and logger, each given only the
// parts it depends on.
func (e *Engine) wire() {
	if e.bg == nil {
		e.bg = newBackground()
	}
	e.planner = &topicPlanner{opts: e.opts, src: e.src, tgt: e.tgt, srcAdm: e.srcAdm, tgtAdm: e.tgtAdm, log: e.log}
	e.planner.creates.bg = e.bg
	e.positions = newPositionStore(e.opts, e.tgt, e.tgtAdm, e.dial, e.planner.internalTopicConfigs(Target), e.log)
	e.planner.positions = e.positions
	e.runner = &burstRunner{core: &e.core}
	e.reuse.dial, e.reuse.log, e.reuse.tgt, e.reuse.opts = e.dial, e.log, e.tgt, e.opts
	e.reuse.positions, e.reuse.planner, e.reuse.bg = e.positions, e.planner, e.bg
	e.reuse.dataOpts, e.reuse.ensureSyncs = e.dataProducerOpts, e.ensureSyncsTopic
	e.reuse.emitter = func(cl *kgo.Client, topic string, shared bool, w *offsetsync.Writer, gate *syncGate) *syncEmitter {
		return newEmitter(&e.core, cl, topic, shared, w, gate)
	}
	e.runs.opts, e.runs.log, e.runs.srcAdm = e.opts, e.log, e.srcAdm
	e.runs.positions, e.runs.planner, e.runs.reuse, e.runs.runner = e.positions, e.planner, &e.reuse, e.runner
	e.runs.max, e.runs.bg = maxConcurrentCopies, e.bg
}

// Dial builds a client of one side as the engine builds its own (its dial function with the
// engine's client defaults), for callers that need clients beside the engine's, such as mirror
// serve's payload writes.
func (e *Engine) Dial(ctx context.Context, side Side, extra ...kgo.Opt) (*kgo.Client, error) {
	return e.dial(ctx, side, extra...)
}

// Close ends the work the engine runs in the background (the warm-up, serve's copies, copies
// settling their last records, topic creations), waits until all of it has returned, then
// releases the engine's clients. Calls still running fail.
func (e *Engine) Close() {
	e.bg.close()
	e.reuse.close()
	e.src.Close()
	e.tgt.Close()
}

// Options returns the engine's options with defaults filled in.
func (e *Engine) Options() Options { return e.opts }

// OffsetSyncsTopic returns the offset-syncs topic name and the cluster it lives on.
func (e *Engine) OffsetSyncsTopic() (string, Side) { return offsetSyncsTopic(e.opts) }

// OffsetsTopic returns the Connect offsets topic (on the target) holding positions.
func (e *Engine) OffsetsTopic() string { return e.opts.OffsetStorageTopic }

// ReadPositions returns the stored position (last copied upstream offset) of each tp that has
// one, reading the offsets topic's offsetsPartitions partitions that hold the wanted keys,
// backwards from their ends in growing windows (so its cost does not grow with the topic's
// history). Records of other connectors are skipped; a tombstone means "no position"; it reads
// read_committed.
func (e *Engine) ReadPositions(ctx context.Context, tps []TP, offsetsPartitions int32) (map[TP]int64, error) {
	return e.positions.read(ctx, tps, offsetsPartitions)
}

// Plan works out what a burst would do now: it reads metadata, configs, offsets and positions
// and writes nothing. Budgets (BurstOptions) are not applied.
func (e *Engine) Plan(ctx context.Context) (*Plan, error) { return e.planner.dryRun(ctx) }

// Selected reports whether MirrorSourceConnector would replicate source topic t: accepted by
// the topic filter (or a heartbeats topic with heartbeats replication on), not internal and
// not a replication cycle back to the target.
func (e *Engine) Selected(t string) bool { return e.planner.selected(t) }

// Explain is Selected with the reason, for a dry run; kafkaInternal is the broker's flag for
// its own internal topics (__consumer_offsets, __transaction_state), never replicated.
func (e *Engine) Explain(topic string, kafkaInternal bool) (bool, string) {
	return e.planner.explain(topic, kafkaInternal)
}

// DiscoverTopics lists the source topics this flow replicates, sorted by name.
func (e *Engine) DiscoverTopics(ctx context.Context) ([]Topic, error) { return e.planner.discover(ctx) }

// PrepareTargets creates missing remote topics (same partition count, replication.factor,
// the source's copyable non-default configs), adds partitions where the source grew and, with
// SyncTopicConfigs, syncs the configs of existing remote topics.
func (e *Engine) PrepareTargets(ctx context.Context, topics []Topic) error {
	return e.planner.prepare(ctx, topics)
}

// Burst copies every selected partition up to the end offsets seen at its start, or until a
// budget in bo is reached or ctx is canceled, then commits positions and offset syncs. The
// returned error is non-nil only if the burst failed; the Summary is filled in either case.
func (e *Engine) Burst(ctx context.Context, bo BurstOptions) (Summary, error) {
	return e.runner.burst(ctx, bo)
}

// CopyPartition copies one source partition up to and including offset through (or up to
// its current end if through < 0 or beyond the end), resuming from and committing its
// position like a burst. It creates or grows the remote topic if needed. It is the entry
// point for event-driven callers that learn about one partition at a time. Calls that arrive
// while earlier ones copy are copied together (see copyRuns); each gets its own partition's
// outcome.
func (e *Engine) CopyPartition(ctx context.Context, topic string, partition int32, through int64) (Summary, error) {
	limit := int64(-1)
	if through >= 0 {
		limit = through + 1
	}
	return e.runs.copyPartition(ctx, topic, partition, limit, through)
}

// Warm readies what CopyPartition calls will need, before the first event: every selected
// topic's remote topic (all missing ones in one request), the offset-syncs topic with its
// producer, and the offsets topic, which it waits for until it answers. mirror serve runs it
// at start, beside serving (WarmInBackground), so the first events of many new topics do not
// each wait for their own topic.
func (e *Engine) Warm(ctx context.Context) error { return e.reuse.warm(ctx, nil) }

// WarmInBackground runs Warm beside the caller and makes CopyPartition calls wait until the
// topics they need are ready (on a flow's first start, all but the offsets topic; see warm),
// so the first events neither repeat its work nor meet partitions that are not served yet.
// A call released by a warm-up that failed prepares what it needs itself. done, if not nil,
// gets Warm's error.
func (e *Engine) WarmInBackground(ctx context.Context, done func(error)) {
	e.reuse.warmInBackground(ctx, done)
}

// TransactionalID returns the transactional id used for a source partition in exactly-once
// mode. Any instance copying the same partition of the same flow uses the same id, so the
// newest one fences the older.
func (e *Engine) TransactionalID(tp TP) string { return e.transactionalID(tp) }

// NoPositionsYet reports whether no position can be stored anywhere yet: a first start's
// warm-up (WarmInBackground) found no offsets topic and is still creating it. Callers can then
// skip reading positions.
func (e *Engine) NoPositionsYet() bool { return e.positions.creatingTopic() != nil }
