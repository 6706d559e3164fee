package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mm2go/mm2go/shared/checkpoint"
)

// reportGroup makes the target answer ListGroups and DescribeGroups for group "app" with the
// given state and number of members, as brokers that never report Empty (Event Hubs) do.
func reportGroup(c *kfake.Cluster, state string, members int) {
	c.ControlKey(int16(kmsg.ListGroups), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		resp := r.(*kmsg.ListGroupsRequest).ResponseKind().(*kmsg.ListGroupsResponse)
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState = "app", "consumer", state
		resp.Groups = append(resp.Groups, g)
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.DescribeGroups), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.DescribeGroupsRequest)
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, name := range req.Groups {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.State, g.ProtocolType = name, state, "consumer"
			for i := 0; i < members; i++ {
				m := kmsg.NewDescribeGroupsResponseGroupMember()
				m.MemberID = "member"
				g.Members = append(g.Members, m)
			}
			resp.Groups = append(resp.Groups, g)
		}
		return resp, nil, true
	})
}

// TestGroupSyncIdleDetection checks which target group states count as idle: Dead, Empty, or
// any state with zero members; a group with members is left alone.
func TestGroupSyncIdleDetection(t *testing.T) {
	for _, tc := range []struct {
		state      string
		members    int
		wantCommit bool
	}{
		{"Stable", 0, true}, // Event Hubs: no Empty state, no members
		{"Empty", 0, true},
		{"Dead", 0, true},
		{"Stable", 2, false},
		{"PreparingRebalance", 1, false},
	} {
		t.Run(fmt.Sprintf("%s-%d-members", tc.state, tc.members), func(t *testing.T) {
			src := newFake(t, kfake.SeedTopics(1, "orders", "mm2-offset-syncs.b.internal"))
			tgt := newFake(t, kfake.SeedTopics(1, "a.orders", "a.checkpoints.internal"))
			reportGroup(tgt, tc.state, tc.members)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			syncAndCommit(ctx, t, src)
			sum, err := fakeRound(ctx, t, src, tgt, checkpoint.Options{SyncGroupOffsets: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(sum.PerGroup) != 1 || sum.PerGroup[0].Sync == nil {
				t.Fatalf("summary %+v", sum)
			}
			gs := sum.PerGroup[0].Sync
			if committed := gs.Committed == 1; committed != tc.wantCommit {
				t.Errorf("state %s with %d members: sync %+v, want commit %v", tc.state, tc.members, *gs, tc.wantCommit)
			}
			tgtCl, err := kgo.NewClient(kgo.SeedBrokers(tgt.ListenAddrs()...))
			if err != nil {
				t.Fatal(err)
			}
			defer tgtCl.Close()
			got, err := kadm.NewClient(tgtCl).FetchOffsets(ctx, "app")
			at := int64(-1)
			if err == nil {
				if o, ok := got.Lookup("a.orders", 0); ok {
					at = o.At
				}
			} else if !errors.Is(err, kerr.GroupIDNotFound) {
				t.Fatal(err)
			}
			want := int64(-1) // nothing committed
			if tc.wantCommit {
				want = 3 // exactly on the sync 7->3
			}
			if at != want {
				t.Errorf("target offset %d, want %d", at, want)
			}
		})
	}
}
