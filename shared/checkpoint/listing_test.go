package checkpoint_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mm2go/mm2go/shared/checkpoint"
	"github.com/mm2go/mm2go/shared/mm2"
)

// TestRoundFetchesKnownGroupsMissingFromListing runs a second round (a new process, as each
// scheduled run is) against a source whose ListGroups answers an empty list, as a broker that
// has just restarted does until it leads its __consumer_offsets partitions again. The group
// that already has a checkpoint on the target is fetched anyway and its new position is
// checkpointed, instead of the round ending with nothing done.
func TestRoundFetchesKnownGroupsMissingFromListing(t *testing.T) {
	src := newFake(t, kfake.SeedTopics(1, "orders", "mm2-offset-syncs.b.internal"))
	tgt := newFake(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	syncAndCommit(ctx, t, src) // app at 7 on orders-0; sync 7 -> 3

	round1 := func() *checkpoint.Summary {
		t.Helper()
		sum, err := fakeRound(ctx, t, src, tgt, checkpoint.Options{})
		if err != nil {
			t.Fatalf("round: %v", err)
		}
		return sum
	}
	if sum := round1(); sum.Groups != 1 || sum.CheckpointsWritten != 1 {
		t.Fatalf("first round: groups %d, written %d; want 1, 1", sum.Groups, sum.CheckpointsWritten)
	}

	// The group moves on to 9 (translated: one past the sync, 4), and the source stops
	// listing it.
	cl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 9, LeaderEpoch: -1})
	if err := kadm.NewClient(cl).CommitAllOffsets(ctx, "app", offs); err != nil {
		t.Fatal(err)
	}
	src.ControlKey(int16(kmsg.ListGroups), func(r kmsg.Request) (kmsg.Response, error, bool) {
		src.KeepControl()
		return r.(*kmsg.ListGroupsRequest).ResponseKind(), nil, true
	})

	if sum := round1(); sum.Groups != 1 || sum.CheckpointsWritten != 1 {
		t.Fatalf("round with the group missing from the listing: groups %d, written %d; want 1, 1", sum.Groups, sum.CheckpointsWritten)
	}
	tcl, err := kgo.NewClient(kgo.SeedBrokers(tgt.ListenAddrs()...), kgo.ConsumeTopics("a.checkpoints.internal"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer tcl.Close()
	var got []mm2.Checkpoint
	for len(got) < 2 && ctx.Err() == nil {
		tcl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			c, err := mm2.DecodeCheckpoint(r.Key, r.Value)
			if err != nil {
				t.Errorf("checkpoint at offset %d: %v", r.Offset, err)
			}
			got = append(got, c)
		})
	}
	want := []mm2.Checkpoint{
		{Group: "app", Topic: "a.orders", Partition: 0, UpstreamOffset: 7, DownstreamOffset: 3},
		{Group: "app", Topic: "a.orders", Partition: 0, UpstreamOffset: 9, DownstreamOffset: 4},
	}
	if len(got) != len(want) {
		t.Fatalf("checkpoints %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("checkpoint %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
