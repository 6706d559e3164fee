package checkpoint

import "time"

// Summary reports one round, for logs and the JSON answer of serve.
type Summary struct {
	Source           string    `json:"source"`
	Target           string    `json:"target"`
	Started          time.Time `json:"started"`
	DurationMS       int64     `json:"duration_ms"`
	Disabled         bool      `json:"disabled,omitempty"` // emit.checkpoints.enabled=false
	OffsetSyncsTopic string    `json:"offset_syncs_topic"`
	// OffsetSyncsFrom is the offset the round started reading the
	// offset-syncs topic at: its start in a job's first round, where the
	// previous round stopped afterwards.
	OffsetSyncsFrom int64 `json:"offset_syncs_from"`
	// OffsetSyncsRead is the number of offset-sync records read.
	OffsetSyncsRead  int64  `json:"offset_syncs_read"`
	CheckpointsTopic string `json:"checkpoints_topic"`
	// CheckpointsLoaded is the number of (group, partition) checkpoints found
	// in the checkpoints topic at the start of the round.
	CheckpointsLoaded int `json:"checkpoints_loaded"`
	// CheckpointsLoadError says why they could not be loaded (the round then
	// starts empty and translates from the newest syncs only, as MM2 does).
	CheckpointsLoadError string `json:"checkpoints_load_error,omitempty"`

	// Translation is the offset translation used (MM2_CHECKPOINT_TRANSLATION): "mm2"
	// (MM2's own, checkpoints identical to MM2's) or "precise" (the closest offset sync
	// still in the offset-syncs topic).
	//
	// Options.PreciseTranslation selects "precise".
	Translation string `json:"translation"`

	// Groups is the number of source groups checkpointed: accepted by the
	// group filter, with committed offsets on accepted topics.
	Groups             int `json:"groups"`
	CheckpointsWritten int `json:"checkpoints_written"`
	// CheckpointsSkipped were translated but not more recent than the
	// stored checkpoint.
	CheckpointsSkipped int `json:"checkpoints_skipped"`
	// Untranslatable partitions had no offset sync yet or a committed offset
	// older than every retained sync.
	Untranslatable int `json:"untranslatable"`
	// SyncedOffsets is the number of partition offsets committed to target
	// groups (sync.group.offsets.enabled).
	SyncedOffsets int            `json:"synced_offsets"`
	PerGroup      []GroupSummary `json:"per_group"`
}

// GroupSummary reports one group of a round.
type GroupSummary struct {
	Group string `json:"group"`
	// Partitions with a committed offset on an accepted topic.
	Partitions     int `json:"partitions"`
	Written        int `json:"checkpoints_written"`
	Skipped        int `json:"checkpoints_skipped"`
	NoSync         int `json:"no_sync"`          // no offset sync for the partition (yet)
	OlderThanSyncs int `json:"older_than_syncs"` // committed offset older than every retained sync
	// PreciseGain is how many records fewer the group's target consumers
	// read again thanks to precise translation than with MM2's, summed over its partitions.
	PreciseGain int64 `json:"precise_gain,omitempty"`
	// Sync reports the target group offset sync; null when it is disabled
	// (sync.group.offsets.enabled).
	Sync *GroupSync `json:"sync,omitempty"`
}

// GroupSync reports the offset sync of one group on the target.
type GroupSync struct {
	// TargetState is the group's state on the target ("Dead" when unknown).
	TargetState string `json:"target_state"`
	Members     int    `json:"members"`
	// Committed partitions were written; Skipped ones already had a target
	// offset at or past the translated one; Failed ones were refused.
	Committed int `json:"committed"`
	Skipped   int `json:"skipped"`
	Failed    int `json:"failed,omitempty"`
	// Reason explains a group left alone, e.g. "active: 2 members".
	Reason string `json:"reason,omitempty"`
}

func (s *Summary) add(g GroupSummary) {
	s.CheckpointsSkipped += g.Skipped
	s.Untranslatable += g.NoSync + g.OlderThanSyncs
	s.PerGroup = append(s.PerGroup, g)
}

func (s *Summary) groupSummary(name string) *GroupSummary {
	for i := range s.PerGroup {
		if s.PerGroup[i].Group == name {
			return &s.PerGroup[i]
		}
	}
	s.PerGroup = append(s.PerGroup, GroupSummary{Group: name})
	return &s.PerGroup[len(s.PerGroup)-1]
}
