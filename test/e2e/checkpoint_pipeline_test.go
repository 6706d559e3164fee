package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/checkpoint"
	"github.com/mm2go/mm2go/shared/engine"
	"github.com/mm2go/mm2go/shared/filter"
	"github.com/mm2go/mm2go/shared/round"
	"github.com/mm2go/mm2go/test/testkit"
)

// TestCheckpointAfterMirrorBurst is a failover with mm2go alone: the engine copies a topic
// (writing offset syncs by MM2's rules), the checkpoint round translates a source group from
// those syncs and commits it on the target, and a consumer of that group on the target goes on
// without skipping a record.
func TestCheckpointAfterMirrorBurst(t *testing.T) {
	c := testkit.Require(t)
	src, tgt := testkit.Name(t, "s"), testkit.Name(t, "t")
	const partitions, perPartition = 3, 500
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "orders"), partitions, nil)
	remote := src + "." + topic
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, remote, "mm2-offsets."+src+".internal", src+".checkpoints.internal")
	testkit.DeleteTopicsAtEnd(t, c.Source.Bootstrap, "mm2-offset-syncs."+tgt+".internal")
	var recs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for u := 0; u < perPartition; u++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("p%d-u%d", p, u))})
		}
	}
	testkit.Produce(t, c.Source.Bootstrap, recs...)

	topics, err := filter.Topics(topic, "")
	if err != nil {
		t.Fatal(err)
	}
	dialSide := func(_ context.Context, side engine.Side, extra ...kgo.Opt) (*kgo.Client, error) {
		b := c.Source.Bootstrap
		if side == engine.Target {
			b = c.Target.Bootstrap
		}
		return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b)}, extra...)...)
	}
	eng, err := engine.New(context.Background(), engine.Options{
		SourceAlias: src, TargetAlias: tgt, Topics: topics,
		ReplicationFactor: 1, OffsetSyncsTopicReplicationFactor: 1, OffsetStorageReplicationFactor: 1,
	}, dialSide, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if s, err := eng.Burst(testkit.Context(t, 2*time.Minute), engine.BurstOptions{}); err != nil || s.Records != partitions*perPartition {
		t.Fatalf("burst: %+v %v", s, err)
	}

	group := testkit.Name(t, "app")
	positions := map[int32]int64{0: perPartition, 1: 250, 2: 123}
	commitGroup(t, c.Source.Bootstrap, group, topic, positions, "")
	groups, err := filter.Groups(group, "")
	if err != nil {
		t.Fatal(err)
	}
	dial := func(b string) checkpoint.ClientFunc {
		return func(_ context.Context, extra ...kgo.Opt) (*kgo.Client, error) {
			return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b)}, extra...)...)
		}
	}
	j, err := checkpoint.New(context.Background(), checkpoint.Options{
		Flow:                              round.Flow{SourceAlias: src, TargetAlias: tgt},
		Topics:                            topics,
		Groups:                            groups,
		CheckpointsTopicReplicationFactor: 1,
		SyncGroupOffsets:                  true,
	}, dial(c.Source.Bootstrap), dial(c.Target.Bootstrap), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	sum, err := j.Round(testkit.Context(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if sum.CheckpointsWritten != partitions || sum.SyncedOffsets != partitions {
		t.Fatalf("round: %+v", sum)
	}
	t.Logf("engine wrote %d offset syncs for %d records", sum.OffsetSyncsRead, partitions*perPartition)

	// The group on the target, consuming as a group member from its committed offsets.
	cl := testkit.Client(t, c.Target.Bootstrap, kgo.ConsumerGroup(group), kgo.ConsumeTopics(remote),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	t.Cleanup(func() { _, _ = testkit.Admin(t, c.Target.Bootstrap).DeleteGroup(context.Background(), group) })
	got := map[int32][]int64{}
	done := func() bool {
		for p := int32(1); p < partitions; p++ { // partition 0 is consumed up to the end already
			if n := len(got[p]); n == 0 || got[p][n-1] != perPartition-1 {
				return false
			}
		}
		return true
	}
	ctx := testkit.Context(t, time.Minute)
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consuming %s as %s: got %v", remote, group, got)
		}
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], upstreamOffsetOf(t, r.Value)) })
	}
	cl.LeaveGroup()
	if len(got[0]) != 0 {
		t.Errorf("p0: group at the end on the source re-read %d records on the target", len(got[0]))
	}
	for p := int32(1); p < partitions; p++ {
		us := got[p]
		if us[0] > positions[p] {
			t.Errorf("p%d: resumed at upstream %d, after the source position %d: records skipped", p, us[0], positions[p])
		}
		for i := 1; i < len(us); i++ {
			if us[i] != us[i-1]+1 {
				t.Fatalf("p%d: gap after upstream %d: %d", p, us[i-1], us[i])
			}
		}
		t.Logf("p%d: source group at %d, target group resumed at %d (%d records read again)", p, positions[p], us[0], positions[p]-us[0])
	}
}
