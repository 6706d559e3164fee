package checkpoint

import (
	"fmt"
	"strings"
	"time"

	"github.com/mm2go/mm2go/shared/filter"
	"github.com/mm2go/mm2go/shared/metrics"
	"github.com/mm2go/mm2go/shared/policy"
)

// SyncsOnSource and SyncsOnTarget are the offset-syncs.topic.location values.
const SyncsOnSource, SyncsOnTarget = policy.SyncsOnSource, policy.SyncsOnTarget

// Options configure a Job. Zero values mean the default named in each field's comment.
type Options struct {
	// SourceAlias and TargetAlias are MM2's source.cluster.alias and
	// target.cluster.alias. Required.
	SourceAlias, TargetAlias string

	// Policy names remote and internal topics. Nil means MM2's
	// DefaultReplicationPolicy.
	Policy policy.Policy
	// Topics selects source topics whose committed offsets are checkpointed.
	// Nil means MM2's default topic filter.
	Topics *filter.Filter
	// Groups selects source consumer groups. Nil means MM2's default group
	// filter (groups=.*, groups.exclude=console-consumer-.*, connect-.*, __.*).
	Groups *filter.Filter

	// OffsetSyncsTopicLocation is offset-syncs.topic.location: SyncsOnSource
	// (default) or SyncsOnTarget.
	OffsetSyncsTopicLocation string
	// CheckpointsTopicReplicationFactor for a created checkpoints topic;
	// 0 or -1 means the target broker's default.
	CheckpointsTopicReplicationFactor int16
	// CheckpointsTopicConfigs are the configs of a created checkpoints topic.
	// Nil means cleanup.policy=compact, as MM2 creates it; an Event Hubs
	// namespace without compaction gets an empty map (cluster.Profile).
	CheckpointsTopicConfigs map[string]*string

	// DisableCheckpoints is emit.checkpoints.enabled=false: like MM2, which
	// then runs no checkpoint task at all, a round does nothing (and syncs no
	// group offsets either).
	DisableCheckpoints bool
	// SyncGroupOffsets is sync.group.offsets.enabled (MM2's default false):
	// commit translated offsets to idle groups on the target.
	SyncGroupOffsets bool
	// WriteConnectOffsets writes MM2's MirrorCheckpointConnector source
	// offset (["MirrorCheckpointConnector",{"partition":p,"topic":t,"group":g}]
	// = {"offset":0}) for every checkpoint written, to OffsetStorageTopic when
	// that topic exists. Nothing reads them; real MM2 writes them.
	WriteConnectOffsets bool
	// OffsetStorageTopic is the Connect offsets topic on the target; ""
	// means mm2-offsets.<SourceAlias>.internal.
	OffsetStorageTopic string

	// PreciseTranslation translates with the closest offset sync still in
	// the offset-syncs topic (up to HistorySyncs per partition) when it is
	// closer than what MM2's 64-slot OffsetSyncStore retains: fewer records
	// read again after a failover, never a skipped one (see history). Off,
	// checkpoints are exactly MM2's. It is not used while the checkpoints
	// topic could not be read (MM2 then trusts only the newest syncs).
	PreciseTranslation bool
	// HistorySyncs bounds the syncs kept per partition for
	// PreciseTranslation; 0 means DefaultHistorySyncs.
	HistorySyncs int

	// Metrics records each written checkpoint and its latency (read of the
	// group's offsets to the checkpoint's acknowledgement, MM2's
	// checkpoint-latency-ms); nil records nothing.
	Metrics *metrics.Recorder

	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// ExplainConnectError, if set, explains a failed connection to the "source" or "target"
	// cluster (config.Config.ConnectError); nil leaves errors as they are.
	ExplainConnectError func(cluster string, err error) error
}

// Validate reports the first invalid option, as New would.
func (o Options) Validate() error { return o.withDefaults() }

func (o *Options) withDefaults() error {
	if err := policy.CheckAliases("checkpoint options", o.SourceAlias, o.TargetAlias); err != nil {
		return err
	}
	if o.Policy == nil {
		o.Policy = policy.NewDefault(policy.DefaultSeparator, true)
	}
	var err error
	if o.Topics, err = filter.TopicsOrDefault(o.Topics); err != nil {
		return err
	}
	if o.Groups == nil {
		f, err := filter.Groups(filter.DefaultGroups, filter.DefaultGroupsExclude)
		if err != nil {
			return err
		}
		o.Groups = f
	}
	switch strings.ToLower(strings.TrimSpace(o.OffsetSyncsTopicLocation)) {
	case "", SyncsOnSource:
		o.OffsetSyncsTopicLocation = SyncsOnSource
	case SyncsOnTarget:
		o.OffsetSyncsTopicLocation = SyncsOnTarget
	default:
		return fmt.Errorf("checkpoint options: offset-syncs.topic.location %q: want source or target", o.OffsetSyncsTopicLocation)
	}
	if o.CheckpointsTopicConfigs == nil {
		compact := "compact"
		o.CheckpointsTopicConfigs = map[string]*string{"cleanup.policy": &compact}
	}
	if o.CheckpointsTopicReplicationFactor == 0 {
		o.CheckpointsTopicReplicationFactor = -1
	}
	if o.OffsetStorageTopic == "" {
		o.OffsetStorageTopic = "mm2-offsets." + o.SourceAlias + ".internal"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}
