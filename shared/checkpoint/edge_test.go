package checkpoint_test

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/checkpoint"
	"github.com/mm2go/mm2go/shared/filter"
	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/shared/policy"
	"github.com/mm2go/mm2go/shared/round"
	"github.com/mm2go/mm2go/test/testkit"
)

// TestRoundTranslationEdgeCases covers the translation rules of MM2's
// OffsetSyncStore and the "more recent" rule of MirrorCheckpointTask through a
// whole round, one situation per source partition:
//
//	p0 no offset sync yet                      -> no checkpoint
//	p1 group older than every sync             -> no checkpoint (-1)
//	p2 group exactly on a sync                 -> the sync's downstream offset
//	p3 source truncated (upstream rewind)      -> translated from the new syncs only
//	p4 gaps (compacted/filtered upstream)      -> one past the closest older retained sync
//	p5 old position, syncs evicted             -> the verified MM2 figures (550->408, 999->908)
func TestRoundTranslationEdgeCases(t *testing.T) {
	f := newFlow(t, 6)
	other := testkit.CreateTopic(t, f.c.Source.Bootstrap, testkit.Name(t, "other"), 1, nil)

	var syncs []mm2.OffsetSync
	sync := func(p int32, up, down int64) {
		syncs = append(syncs, mm2.OffsetSync{Topic: f.topic, Partition: p, UpstreamOffset: up, DownstreamOffset: down})
	}
	sync(1, 50, 1050)
	sync(1, 60, 1060)
	sync(2, 0, 100)
	sync(2, 40, 140)
	for up := int64(0); up <= 1000; up += 100 {
		sync(3, up, up+7)
		sync(5, up, up+7)
	}
	sync(3, 20, 2000) // the source partition was truncated and refilled
	sync(4, 0, 0)
	sync(4, 10, 3)
	sync(4, 50, 4)
	f.writeSyncs(t, syncs...)

	g1, g2, g3 := testkit.Name(t, "g1"), testkit.Name(t, "g2"), testkit.Name(t, "g3")
	commit(t, f.c.Source.Bootstrap, g1, f.topic, map[int32]int64{0: 5, 1: 10, 2: 40, 3: 500, 4: 30, 5: 550}, "")
	commit(t, f.c.Source.Bootstrap, g1, other, map[int32]int64{0: 1}, "") // topic rejected by the filter
	commit(t, f.c.Source.Bootstrap, g2, f.topic, map[int32]int64{3: 10, 4: 50, 5: 999}, "")
	commit(t, f.c.Source.Bootstrap, g3, f.topic, map[int32]int64{2: 40, 5: 550}, "")

	// Checkpoints already in the topic (written by an earlier run of MM2 or
	// mm2go): g3/p2 is ahead downstream at the same upstream offset, so the
	// round must not rewind it; g3/p5 was at a higher upstream offset, so the
	// group rewound on the source and the round must follow. An undecodable
	// record is skipped, as MM2 does.
	compact := "compact"
	testkit.CreateTopic(t, f.c.Target.Bootstrap, f.checkpointsTopic, 1, map[string]*string{"cleanup.policy": &compact})
	pre := []mm2.Checkpoint{
		{Group: g3, Topic: f.remoteTopic, Partition: 2, UpstreamOffset: 40, DownstreamOffset: 150},
		{Group: g3, Topic: f.remoteTopic, Partition: 5, UpstreamOffset: 600, DownstreamOffset: 500},
	}
	recs := []*kgo.Record{{Topic: f.checkpointsTopic, Key: []byte{0, 9}, Value: []byte{1}}}
	for _, c := range pre {
		k, v, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: f.checkpointsTopic, Key: k, Value: v})
	}
	testkit.Produce(t, f.c.Target.Bootstrap, recs...)

	topics, err := filter.Topics(f.topic, "")
	if err != nil {
		t.Fatal(err)
	}
	groups, err := filter.Groups(g1+","+g2+","+g3, "")
	if err != nil {
		t.Fatal(err)
	}
	j, err := checkpoint.New(context.Background(), checkpoint.Options{
		Flow:                              round.Flow{SourceAlias: f.src, TargetAlias: f.tgt},
		Topics:                            topics,
		Groups:                            groups,
		CheckpointsTopicReplicationFactor: 1,
	}, dial(f.c.Source.Bootstrap), dial(f.c.Target.Bootstrap), slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	sum := runRound(t, j)

	want := map[cpKey]mm2.Checkpoint{}
	add := func(g string, p int32, up, down int64) {
		want[cpKey{g, f.remoteTopic, p}] = mm2.Checkpoint{Group: g, Topic: f.remoteTopic, Partition: p, UpstreamOffset: up, DownstreamOffset: down}
	}
	add(g1, 2, 40, 140)   // exactly on a sync
	add(g1, 3, 500, 2001) // after the rewind only 20->2000 is known
	add(g1, 4, 30, 1)     // gap: 10->3 is too old for slot 1 next to 50->4, so one past 0->0
	add(g1, 5, 550, 408)  // MM2 figure: 400->407 is the closest retained sync
	add(g2, 4, 50, 4)     // exactly on 50->4
	add(g2, 5, 999, 908)  // MM2 figure: one past 900->907
	add(g3, 2, 40, 150)   // kept: not more recent
	add(g3, 5, 550, 408)  // written: the group rewound upstream
	got, _, _ := f.readCheckpoints(t)
	for k, w := range want {
		if got[k] != w {
			t.Errorf("checkpoint %s/p%d: got %v, want %v", k.group[:2], k.partition, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d checkpoints, want %d: %v", len(got), len(want), got)
	}

	per := map[string]checkpoint.GroupSummary{}
	for _, g := range sum.PerGroup {
		per[g.Group] = g
	}
	for _, c := range []struct {
		g                                          string
		parts, written, skipped, noSync, olderSync int
	}{
		{g1, 6, 4, 0, 1, 1},
		{g2, 3, 2, 0, 0, 1},
		{g3, 2, 1, 1, 0, 0},
	} {
		s := per[c.g]
		if s.Partitions != c.parts || s.Written != c.written || s.Skipped != c.skipped || s.NoSync != c.noSync || s.OlderThanSyncs != c.olderSync {
			t.Errorf("summary of %s: %+v, want partitions %d written %d skipped %d no_sync %d older %d",
				c.g[:2], s, c.parts, c.written, c.skipped, c.noSync, c.olderSync)
		}
	}
	if sum.CheckpointsLoaded != 2 || sum.OffsetSyncsRead != int64(len(syncs)) {
		t.Errorf("loaded %d checkpoints and %d syncs, want 2 and %d", sum.CheckpointsLoaded, sum.OffsetSyncsRead, len(syncs))
	}
}

// TestRoundIdentityPolicySyncsOnTarget runs a round with IdentityReplicationPolicy (remote
// topics keep their names) and offset-syncs.topic.location=target (the syncs topic is
// mm2-offset-syncs.<source>.internal on the target).
func TestRoundIdentityPolicySyncsOnTarget(t *testing.T) {
	c := testkit.Require(t)
	src, tgt := testkit.Name(t, "s"), testkit.Name(t, "t")
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "orders"), 1, nil)
	testkit.CreateTopic(t, c.Target.Bootstrap, topic, 1, nil) // the remote topic has the same name
	syncsTopic := testkit.CreateTopic(t, c.Target.Bootstrap, "mm2-offset-syncs."+src+".internal", 1, nil)
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, src+".checkpoints.internal")
	var recs []*kgo.Record
	for _, s := range []mm2.OffsetSync{
		{Topic: topic, Partition: 0, UpstreamOffset: 0, DownstreamOffset: 10},
		{Topic: topic, Partition: 0, UpstreamOffset: 20, DownstreamOffset: 30},
	} {
		k, v, _ := s.Encode()
		recs = append(recs, &kgo.Record{Topic: syncsTopic, Key: k, Value: v})
	}
	testkit.Produce(t, c.Target.Bootstrap, recs...)
	g := testkit.Name(t, "g")
	commit(t, c.Source.Bootstrap, g, topic, map[int32]int64{0: 25}, "")

	groups, err := filter.Groups(g, "")
	if err != nil {
		t.Fatal(err)
	}
	j, err := checkpoint.New(context.Background(), checkpoint.Options{
		Flow:                              round.Flow{SourceAlias: src, TargetAlias: tgt, Policy: policy.NewIdentity(src, ".", true)},
		Groups:                            groups,
		OffsetSyncsTopicLocation:          checkpoint.SyncsOnTarget,
		SyncGroupOffsets:                  true,
		CheckpointsTopicReplicationFactor: 1,
	}, dial(c.Source.Bootstrap), dial(c.Target.Bootstrap), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if name, where := j.OffsetSyncsTopic(); name != syncsTopic || where != "target" {
		t.Fatalf("offset syncs topic %s on %s, want %s on target", name, where, syncsTopic)
	}
	sum := runRound(t, j)
	if sum.CheckpointsWritten != 1 || sum.SyncedOffsets != 1 {
		t.Fatalf("summary %+v", sum)
	}
	f := &flow{c: c, checkpointsTopic: src + ".checkpoints.internal"}
	got, _, _ := f.readCheckpoints(t)
	want := mm2.Checkpoint{Group: g, Topic: topic, Partition: 0, UpstreamOffset: 25, DownstreamOffset: 31}
	if got[cpKey{g, topic, 0}] != want || len(got) != 1 {
		t.Errorf("checkpoints %v, want only %v", got, want)
	}
	if off := committed(t, c.Target.Bootstrap, g, topic); off[0] != 31 {
		t.Errorf("target offsets %v, want 0:31", off)
	}
}
