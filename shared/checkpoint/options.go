package checkpoint

import (
	"github.com/mm2go/mm2go/shared/filter"
	"github.com/mm2go/mm2go/shared/policy"
	"github.com/mm2go/mm2go/shared/round"
)

// SyncsOnSource and SyncsOnTarget are the offset-syncs.topic.location values.
const SyncsOnSource, SyncsOnTarget = policy.SyncsOnSource, policy.SyncsOnTarget

// Options configure a Job. Zero values mean the default named in each field's comment.
type Options struct {
	// Flow names the flow and its topics; its WriteConnectOffsets writes MM2's
	// MirrorCheckpointConnector source offset
	// (["MirrorCheckpointConnector",{"partition":p,"topic":t,"group":g}] = {"offset":0})
	// for every checkpoint written.
	round.Flow

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
	// PreciseTranslation translates with the closest offset sync still in
	// the offset-syncs topic (up to HistorySyncs per partition) when it is
	// closer than what MM2's 64-slot OffsetSyncStore retains: fewer records
	// read again after a failover, never a skipped one (see history). Off,
	// checkpoints are exactly MM2's. It is not used while the checkpoints
	// topic could not be read (MM2 then trusts only the newest syncs).
	// The checkpoint function sets it unless MM2_CHECKPOINT_TRANSLATION=mm2:
	// on a 1:1 copy a group then re-reads at most offset.lag.max records per
	// partition (syncs are at most offset.lag.max+1 offsets apart), where
	// MM2's slots can leave thousands.
	PreciseTranslation bool
	// HistorySyncs bounds the syncs kept per partition for
	// PreciseTranslation; 0 means DefaultHistorySyncs.
	HistorySyncs int
}

// Validate reports the first invalid option, as New would.
func (o Options) Validate() error { return o.withDefaults() }

func (o *Options) withDefaults() error {
	if err := o.Flow.Defaults("checkpoint options"); err != nil {
		return err
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
	if o.OffsetSyncsTopicLocation, err = policy.SyncsLocation("checkpoint options", o.OffsetSyncsTopicLocation); err != nil {
		return err
	}
	if o.CheckpointsTopicConfigs == nil {
		compact := "compact"
		o.CheckpointsTopicConfigs = map[string]*string{"cleanup.policy": &compact}
	}
	if o.CheckpointsTopicReplicationFactor == 0 {
		o.CheckpointsTopicReplicationFactor = -1
	}
	return nil
}
