package engine

import (
	"time"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/filter"
	"github.com/mm2go/mm2go/shared/metrics"
	"github.com/mm2go/mm2go/shared/policy"
)

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

// EmitsOffsetSyncs reports emit.offset-syncs.enabled (true unless EmitOffsetSyncs says false).
func (o Options) EmitsOffsetSyncs() bool { return o.EmitOffsetSyncs == nil || *o.EmitOffsetSyncs }

// offsetSyncsTopic is the offset-syncs topic of a flow with opts, and its side.
func offsetSyncsTopic(opts Options) (string, Side) {
	if opts.OffsetSyncsTopicLocation == SyncsOnTarget {
		return opts.Policy.OffsetSyncsTopic(opts.SourceAlias), Target
	}
	return opts.Policy.OffsetSyncsTopic(opts.TargetAlias), Source
}
