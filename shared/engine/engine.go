package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/filter"
	"github.com/mm2go/mm2go/shared/metrics"
	"github.com/mm2go/mm2go/shared/offsetsync"
	"github.com/mm2go/mm2go/shared/policy"
)

// Side names one of the two clusters of a flow.
type Side int

// The two clusters of a flow.
const (
	Source Side = iota
	Target
)

func (s Side) String() string {
	if s == Source {
		return "source"
	}
	return "target"
}

// DialFunc builds a franz-go client for one cluster of the flow. extra options are the
// engine's own (consumer, producer, transactional settings) and must be applied last.
// shared/cluster.NewClient fits it once bound to the cluster's settings.
type DialFunc func(ctx context.Context, side Side, extra ...kgo.Opt) (*kgo.Client, error)

// SyncsOnSource and SyncsOnTarget are the offset-syncs.topic.location values.
const SyncsOnSource, SyncsOnTarget = policy.SyncsOnSource, policy.SyncsOnTarget

// Options configure an Engine. Zero values mean the default named in each field's comment.
type Options struct {
	// SourceAlias and TargetAlias are MM2's source.cluster.alias and target.cluster.alias.
	// Required.
	SourceAlias, TargetAlias string

	// Policy names remote and internal topics. Nil means MM2's DefaultReplicationPolicy.
	Policy policy.Policy
	// Topics selects source topics. Nil means MM2's defaults (topics=.*, topics.exclude=
	// mm2.*\.internal, .*\.replica, __.*).
	Topics *filter.Filter
	// HeartbeatsReplication is heartbeats.replication.enabled: replicate "heartbeats" topics
	// even when Topics rejects them (MM2's default is true; the zero value here is false).
	HeartbeatsReplication bool

	// ReplicationFactor of created remote topics (MM2 replication.factor). 0 or -1 means the
	// target broker's default.
	ReplicationFactor int16
	// ConfigPropertiesExclude lists topic configs never copied (config.properties.exclude).
	// Nil means MM2's default list.
	ConfigPropertiesExclude *filter.List
	// SyncTopicConfigs is sync.topic.configs.enabled: bring existing remote topics' configs in
	// line with the source on every burst (CopyPartition: at most every 30 s per topic).
	SyncTopicConfigs bool

	// SyncTopicACLs is sync.topic.acls.enabled: copy the source's topic ACLs to the remote
	// topics once per burst (package acls). [h/config]
	SyncTopicACLs bool

	// OffsetSyncsTopicLocation is offset-syncs.topic.location: SyncsOnSource (default) or
	// SyncsOnTarget.
	OffsetSyncsTopicLocation string
	// OffsetSyncsTopicReplicationFactor for a created offset-syncs topic; 0 means broker default.
	OffsetSyncsTopicReplicationFactor int16
	// OffsetLagMax is offset.lag.max; 0 means MM2's default of 100.
	OffsetLagMax int64
	// EmitOffsetSyncs is emit.offset-syncs.enabled (KIP-1031); nil means true. When false no
	// offset-syncs topic is created and no sync is written (MirrorSourceTask then has no
	// OffsetSyncWriter), so checkpoints cannot translate offsets for this flow.
	EmitOffsetSyncs *bool

	// OffsetStorageTopic is the Connect offsets topic on the target; "" means
	// mm2-offsets.<SourceAlias>.internal (MM2 dedicated mode's default).
	OffsetStorageTopic string
	// OffsetStoragePartitions for a created offsets topic; 0 means Connect's 25.
	OffsetStoragePartitions int32
	// OffsetStorageReplicationFactor for a created offsets topic; 0 means broker default.
	OffsetStorageReplicationFactor int16

	// AutoOffsetResetLatest starts partitions without a position at their end instead of
	// their start (consumer auto.offset.reset=latest; MM2 defaults to earliest).
	AutoOffsetResetLatest bool

	// ReadCommitted reads the source with isolation.level=read_committed in at-least-once mode
	// too (records of aborted transactions are then not copied; MM2's default copies them).
	// Exactly-once mode always reads read_committed.
	ReadCommitted bool

	// ExactlyOnce copies with transactions (see the package documentation).
	ExactlyOnce bool
	// LagGroup, if set, is a source consumer group to which every successful copy commits the
	// positions it stored (next offset to copy), for tools that read consumer lag. Never read.
	LagGroup string
	// TransactionalIDPrefix prefixes transactional ids; "" means "mm2go".
	TransactionalIDPrefix string

	// MaxBufferedBytes bounds the bytes of records read but not yet acknowledged by the
	// target. 0 sizes it to the copy (inflightBudget): 8 MiB for a burst over up to 16
	// partitions, tapering to 2 MiB from 64, and 2 MiB shared by concurrent CopyPartition calls.
	// Memory use does not grow with the backlog beyond this and the fetch buffers
	// (FetchMaxBytes per source broker).
	MaxBufferedBytes int
	// FetchMaxBytes per fetch response; 0 sizes it to the partitions consumed (fetchBudget):
	// 512 KiB up to 128 partitions, 4 KiB more per partition up to 4 MiB. Compressed batches count at their
	// compressed size here, so a fetch may hold many times this once decompressed.
	FetchMaxBytes int32
	// ProducerLinger, if set, overrides how long the target producer waits to fill batches
	// (otherwise the dial function's options decide, e.g. the target's producer.linger.ms).
	ProducerLinger time.Duration

	// DecodeRecords turns batch forwarding off: bursts copy record by record (franz-go's
	// consumer and producer) even where the source's batches could be produced as they are
	// (see forwardLoop).
	DecodeRecords bool

	// NoSweep makes CopyPartition copy only the partitions asked for. By default a shared copy
	// also takes every other lagging partition (payload mode, whose records come from events,
	// turns that off).
	NoSweep bool

	// Metrics receives copy metrics (records and bytes copied, record age, replication
	// latency, lag per partition). Nil records nothing.
	Metrics *metrics.Recorder

	// SourceProfile and TargetProfile are what each cluster allows (cluster.SettingsProfile):
	// on Event Hubs, no topic config sync, internal topics compacted only where the tier
	// compacts, and topic/partition budgets checked before anything is created. The zero
	// value is a plain Kafka cluster.
	SourceProfile, TargetProfile cluster.Profile
}

func (o *Options) withDefaults() error {
	var err error
	if o.Policy, err = policy.CheckFlow("engine options", o.SourceAlias, o.TargetAlias, o.Policy); err != nil {
		return err
	}
	if o.Topics, err = filter.TopicsOrDefault(o.Topics); err != nil {
		return err
	}
	if o.ConfigPropertiesExclude == nil {
		l, err := filter.NewList(filter.Setting{Property: "config.properties.exclude", Env: "MM2_CONFIG_PROPERTIES_EXCLUDE"}, DefaultConfigPropertiesExclude)
		if err != nil {
			return err
		}
		o.ConfigPropertiesExclude = l
	}
	if o.ReplicationFactor == 0 {
		o.ReplicationFactor = -1
	}
	if o.OffsetSyncsTopicLocation, err = policy.SyncsLocation("engine options", o.OffsetSyncsTopicLocation); err != nil {
		return err
	}
	if o.OffsetSyncsTopicReplicationFactor == 0 {
		o.OffsetSyncsTopicReplicationFactor = -1
	}
	if o.EmitOffsetSyncs == nil {
		o.EmitOffsetSyncs = new(true)
	}
	if o.OffsetLagMax == 0 {
		o.OffsetLagMax = 100
	}
	if o.OffsetStorageTopic == "" {
		o.OffsetStorageTopic = "mm2-offsets." + o.SourceAlias + ".internal"
	}
	if o.OffsetStoragePartitions <= 0 {
		o.OffsetStoragePartitions = 25
	}
	if o.OffsetStorageReplicationFactor == 0 {
		o.OffsetStorageReplicationFactor = -1
	}
	if o.TransactionalIDPrefix == "" {
		o.TransactionalIDPrefix = "mm2go"
	}
	if o.MaxBufferedBytes < 0 {
		o.MaxBufferedBytes = 0
	}
	if o.FetchMaxBytes < 0 {
		o.FetchMaxBytes = 0
	}
	return nil
}

// DefaultConfigPropertiesExclude is MM2's default config.properties.exclude.
const DefaultConfigPropertiesExclude = `follower\.replication\.throttled\.replicas, leader\.replication\.throttled\.replicas, message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, unclean\.leader\.election\.enable, min\.insync\.replicas`

// Engine replicates one flow. It is safe for one Burst or CopyPartition at a time per
// partition; concurrent calls on distinct partitions are allowed.
type Engine struct {
	opts Options
	dial DialFunc
	log  *slog.Logger

	src, tgt       *kgo.Client // metadata/admin clients
	srcAdm, tgtAdm *kadm.Client

	// The parts, each owning its state and lock (docs/design.md, "the engine's parts"), wired
	// by wire.
	planner   *topicPlanner  // topics: selection, plan, creation, configs, ACLs, gaps
	positions *positionStore // the offsets topic and what this process made durable
	reuse     reused         // serve's long-lived producers, recent checks and warm-up
	runs      copyRuns       // the serve coordinator: CopyPartition calls, copied together
	runner    *burstRunner   // a copy from its start to its summary (bursts and shared copies)

	bg *background // the goroutines the engine starts beyond a call; Close waits for them
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
	e := &Engine{
		opts: opts, dial: dial, log: logger,
		src: src, tgt: tgt, srcAdm: kadm.NewClient(src), tgtAdm: kadm.NewClient(tgt),
	}
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
	e.runner = &burstRunner{opts: e.opts, log: e.log, dial: e.dial, tgt: e.tgt, srcAdm: e.srcAdm,
		planner: e.planner, positions: e.positions, reuse: &e.reuse, pipe: e, bg: e.bg}
	e.reuse.dial, e.reuse.log, e.reuse.tgt, e.reuse.opts = e.dial, e.log, e.tgt, e.opts
	e.reuse.positions, e.reuse.planner, e.reuse.bg = e.positions, e.planner, e.bg
	e.reuse.dataOpts, e.reuse.ensureSyncs = e.dataProducerOpts, e.ensureSyncsTopic
	e.reuse.emitter = func(cl *kgo.Client, topic string, shared bool, w *offsetsync.Writer, gate *syncGate) *syncEmitter {
		return newEmitter(e, cl, topic, shared, w, gate)
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

// withClientDefaults returns dial with two options before the caller's. Metadata is refreshed
// at most 50 ms apart instead of franz-go's 5 s: the admin clients must see topics created a
// moment ago, and a KRaft broker names a new partition's leader a moment before it serves it,
// so the first batch to a new remote topic can meet NOT_LEADER_FOR_PARTITION and must not wait
// 5 s for the next refresh. Retries back off like Java clients (retry.backoff.ms=100 doubling
// to retry.backoff.max.ms=1000, ±20% jitter) instead of franz-go's 250 ms doubling to 5 s: a
// burst waiting 4 s to retry a partition that became ready meanwhile only loses time.
func withClientDefaults(dial DialFunc) DialFunc {
	return func(ctx context.Context, side Side, extra ...kgo.Opt) (*kgo.Client, error) {
		return dial(ctx, side, append([]kgo.Opt{
			kgo.MetadataMinAge(50 * time.Millisecond),
			kgo.RetryBackoffFn(clientBackoff.delay),
		}, extra...)...)
	}
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

// EmitsOffsetSyncs reports emit.offset-syncs.enabled (true unless EmitOffsetSyncs says false).
func (o Options) EmitsOffsetSyncs() bool { return o.EmitOffsetSyncs == nil || *o.EmitOffsetSyncs }

// OffsetSyncsTopic returns the offset-syncs topic name and the cluster it lives on.
func (e *Engine) OffsetSyncsTopic() (string, Side) { return offsetSyncsTopic(e.opts) }

// offsetSyncsTopic is the offset-syncs topic of a flow with opts, and its side.
func offsetSyncsTopic(opts Options) (string, Side) {
	if opts.OffsetSyncsTopicLocation == SyncsOnTarget {
		return opts.Policy.OffsetSyncsTopic(opts.SourceAlias), Target
	}
	return opts.Policy.OffsetSyncsTopic(opts.TargetAlias), Source
}

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

// TP is a source topic-partition.
type TP struct {
	Topic     string
	Partition int32
}

func (tp TP) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// producerOpts returns opts plus the ProducerLinger override, if any.
func (e *Engine) producerOpts(opts ...kgo.Opt) []kgo.Opt {
	if e.opts.ProducerLinger > 0 {
		opts = append(opts, kgo.ProducerLinger(e.opts.ProducerLinger))
	}
	return opts
}

// isolation is the source isolation level of a copy: read_committed under exactly-once or
// Options.ReadCommitted.
func (e *Engine) isolation() kgo.Opt {
	if e.opts.ReadCommitted || e.opts.ExactlyOnce {
		return kgo.FetchIsolationLevel(kgo.ReadCommitted())
	}
	return kgo.FetchIsolationLevel(kgo.ReadUncommitted())
}
