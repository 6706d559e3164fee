package engine

import (
	"context"

	"github.com/mm2go/mm2go/shared/cluster"
)

// profile returns the cluster profile (Event Hubs limits) of one side.
func (e *Engine) profile(side Side) cluster.Profile {
	if side == Source {
		return e.opts.SourceProfile
	}
	return e.opts.TargetProfile
}

// copyConfigs reports whether topic configs may be read from the source and written to the
// target: not where either side is Event Hubs (no AlterConfigs, DescribeConfigs only partly).
func (e *Engine) copyConfigs() bool {
	allows := func(p cluster.Profile) bool { return !p.EventHubs || p.SyncConfigs }
	return allows(e.opts.SourceProfile) && allows(e.opts.TargetProfile)
}

// internalTopicConfigs returns the configs of a created internal topic (positions, offset
// syncs) on side: compacted, unless the side is an Event Hubs tier without compaction.
func (e *Engine) internalTopicConfigs(side Side) map[string]*string {
	if p := e.profile(side); p.EventHubs {
		return p.InternalTopicConfigs()
	}
	return map[string]*string{"cleanup.policy": strp("compact")}
}

// checkBudgets fails before anything is created when the remote topics of topics and the
// engine's internal topics would exceed an Event Hubs namespace's topic or partition budget.
func (e *Engine) checkBudgets(ctx context.Context, topics []Topic) error {
	syncs, syncsSide := e.OffsetSyncsTopic()
	if p := e.opts.TargetProfile; p.EventHubs {
		want := map[string]int32{e.opts.OffsetStorageTopic: e.opts.OffsetStoragePartitions}
		for _, t := range topics {
			want[t.Remote] = t.Partitions
		}
		if syncsSide == Target && e.opts.EmitsOffsetSyncs() {
			want[syncs] = 1
		}
		if err := p.CheckBudget(ctx, e.tgtAdm, want); err != nil {
			return err
		}
	}
	if p := e.opts.SourceProfile; p.EventHubs && syncsSide == Source && e.opts.EmitsOffsetSyncs() {
		if err := p.CheckBudget(ctx, e.srcAdm, map[string]int32{syncs: 1}); err != nil {
			return err
		}
	}
	return nil
}

// logProfiles says once what an Event Hubs profile changes.
func (e *Engine) logProfiles() {
	for _, p := range []cluster.Profile{e.opts.SourceProfile, e.opts.TargetProfile} {
		if n := p.Notice(); n != "" {
			e.log.Info(n)
		}
	}
}
