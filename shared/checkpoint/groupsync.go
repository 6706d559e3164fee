package checkpoint

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/mm2go/mm2go/shared/cluster"
)

// Group states as the brokers report them.
const (
	stateEmpty = "Empty"
	stateDead  = "Dead"
)

// syncGroupOffsets is MM2's sync.group.offsets.enabled (MirrorCheckpointTask
// refreshIdleConsumerGroupOffset + syncGroupOffset): for every group of the
// round that has checkpoints, commit the checkpoints' downstream offsets to
// the same group on the target if that group has no active member, per
// partition only when the target has no offset or a lower one.
//
// MM2 also tries groups with members and relies on the broker refusing the
// commit; this job does not send anything for them. A group counts as idle
// when the target does not know it (Dead), reports it Empty, or reports no
// members (Event Hubs never reports Empty).
func (j *Job) syncGroupOffsets(ctx context.Context, groups []group, cps *checkpointStore, sum *Summary) error {
	listed, err := j.TgtAdm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("listing groups on target %q: %w", j.opts.TargetAlias, err)
	}
	for _, g := range groups {
		cs := cps.group(g.name)
		if len(cs) == 0 {
			continue
		}
		gs := sum.groupSummary(g.name)
		res := &GroupSync{TargetState: stateDead}
		gs.Sync = res
		if err := j.syncGroup(ctx, g.name, listed, cps, res); err != nil {
			return err
		}
		sum.SyncedOffsets += res.Committed
		j.log.Info("group offsets synced to target", "group", g.name, "target_state", res.TargetState,
			"members", res.Members, "committed", res.Committed, "skipped", res.Skipped,
			"failed", res.Failed, "reason", res.Reason)
	}
	return nil
}

func (j *Job) syncGroup(ctx context.Context, name string, listed kadm.ListedGroups, cps *checkpointStore, res *GroupSync) error {
	if lg, ok := listed[name]; ok {
		res.TargetState = lg.State
		if lg.State != stateEmpty && lg.State != stateDead {
			members, err := j.targetMembers(ctx, lg)
			if err != nil {
				return err
			}
			res.Members = members
			if members > 0 {
				res.Reason = fmt.Sprintf("active: %d members", members)
				return nil
			}
		}
	}

	current, err := j.TgtAdm.FetchOffsets(ctx, name)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return fmt.Errorf("fetching offsets of group %q on target %q: %w", name, j.opts.TargetAlias, err)
	}
	commit := kadm.Offsets{}
	for _, c := range cps.group(name) {
		if cur, ok := current.Lookup(c.Topic, c.Partition); ok && cur.Err == nil && cur.At >= 0 && cur.At >= c.DownstreamOffset {
			res.Skipped++ // never move a group backwards
			continue
		}
		commit.Add(kadm.Offset{Topic: c.Topic, Partition: c.Partition, At: c.DownstreamOffset, LeaderEpoch: -1, Metadata: c.Metadata})
	}
	if len(commit) == 0 {
		return nil
	}
	resp, err := j.TgtAdm.CommitOffsets(ctx, name, commit)
	if err != nil {
		if isActiveGroupErr(err) {
			res.Reason = "became active: " + err.Error()
			return nil
		}
		return fmt.Errorf("committing offsets of group %q on target %q: %w", name, j.opts.TargetAlias, err)
	}
	var retriable error // the first retriable refusal: the round is retried (round.Once)
	resp.Each(func(o kadm.OffsetResponse) {
		switch {
		case o.Err == nil:
			res.Committed++
		case isActiveGroupErr(o.Err):
			res.Failed++
			res.Reason = "became active: " + o.Err.Error()
		case cluster.Retriable(o.Err) && !cluster.TopicMissing(o.Err) && retriable == nil:
			res.Failed++
			retriable = fmt.Errorf("committing offsets of group %q on target %q: %s[%d]: %w", name, j.opts.TargetAlias, o.Topic, o.Partition, o.Err)
		default:
			res.Failed++
			j.log.Warn("target refused a group offset", "group", name, "topic", o.Topic,
				"partition", o.Partition, "offset", o.At, "err", o.Err)
		}
	})
	return retriable
}

// targetMembers counts the members of a target group through the describe
// API of its protocol.
func (j *Job) targetMembers(ctx context.Context, lg kadm.ListedGroup) (int, error) {
	var (
		n   int
		err error
	)
	if lg.GroupType == "consumer" {
		var d kadm.DescribedConsumerGroups
		if d, err = j.TgtAdm.DescribeConsumerGroups(ctx, lg.Group); err == nil {
			n, err = len(d[lg.Group].Members), d[lg.Group].Err
		}
	} else {
		var d kadm.DescribedGroups
		if d, err = j.TgtAdm.DescribeGroups(ctx, lg.Group); err == nil {
			n, err = len(d[lg.Group].Members), d[lg.Group].Err
		}
	}
	if err != nil {
		return 0, fmt.Errorf("describing group %q on target %q: %w", lg.Group, j.opts.TargetAlias, err)
	}
	return n, nil
}

// isActiveGroupErr reports the errors a broker answers a member-less commit
// to a group that has (gained) members.
func isActiveGroupErr(err error) bool {
	return errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.IllegalGeneration) ||
		errors.Is(err, kerr.RebalanceInProgress) || errors.Is(err, kerr.StaleMemberEpoch) ||
		errors.Is(err, kerr.FencedMemberEpoch)
}
