package engine

import (
	"context"

	"github.com/mm2go/mm2go/shared/cluster"
)

// profile returns the cluster profile (Event Hubs limits) of one side.
func (pn *topicPlanner) profile(side Side) cluster.Profile {
	if side == Source {
		return pn.opts.SourceProfile
	}
	return pn.opts.TargetProfile
}

// copyConfigs reports whether topic configs may be read from the source and written to the
// target: not where either side is Event Hubs (no AlterConfigs, DescribeConfigs only partly).
func (pn *topicPlanner) copyConfigs() bool {
	allows := func(p cluster.Profile) bool { return !p.EventHubs || p.SyncConfigs }
	return allows(pn.opts.SourceProfile) && allows(pn.opts.TargetProfile)
}

// internalTopicConfigs returns the configs of a created internal topic (positions, offset
// syncs) on side: compacted, unless the side is an Event Hubs tier without compaction.
func (pn *topicPlanner) internalTopicConfigs(side Side) map[string]*string {
	if p := pn.profile(side); p.EventHubs {
		return p.InternalTopicConfigs()
	}
	return map[string]*string{"cleanup.policy": strp("compact")}
}

// checkBudgets fails before anything is created when the remote topics of topics and the
// engine's internal topics would exceed an Event Hubs namespace's topic or partition budget.
func (pn *topicPlanner) checkBudgets(ctx context.Context, topics []Topic) error {
	syncs, syncsSide := offsetSyncsTopic(pn.opts)
	if p := pn.opts.TargetProfile; p.EventHubs {
		want := map[string]int32{pn.opts.OffsetStorageTopic: pn.opts.OffsetStoragePartitions}
		for _, t := range topics {
			want[t.Remote] = t.Partitions
		}
		if syncsSide == Target && pn.opts.EmitsOffsetSyncs() {
			want[syncs] = 1
		}
		if err := p.CheckBudget(ctx, pn.tgtAdm, want); err != nil {
			return err
		}
	}
	if p := pn.opts.SourceProfile; p.EventHubs && syncsSide == Source && pn.opts.EmitsOffsetSyncs() {
		if err := p.CheckBudget(ctx, pn.srcAdm, map[string]int32{syncs: 1}); err != nil {
			return err
		}
	}
	return nil
}

// logProfiles says once what an Event Hubs profile changes.
func (pn *topicPlanner) logProfiles() {
	for _, p := range []cluster.Profile{pn.opts.SourceProfile, pn.opts.TargetProfile} {
		if n := p.Notice(); n != "" {
			pn.log.Info(n)
		}
	}
}
