package checkpoint_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mm2go/mm2go/shared/checkpoint"
	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/shared/round"
)

// syncAndCommit writes one offset sync (orders-0: upstream 7 = downstream 3) to the source's
// mm2-offset-syncs.b.internal and commits group "app" at 7 on orders-0: one group with one
// translatable offset, for flow a->b.
func syncAndCommit(ctx context.Context, t *testing.T, src *kfake.Cluster) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	k, v, _ := mm2.OffsetSync{Topic: "orders", Partition: 0, UpstreamOffset: 7, DownstreamOffset: 3}.Encode()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "mm2-offset-syncs.b.internal", Key: k, Value: v}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 7, LeaderEpoch: -1})
	if err := kadm.NewClient(cl).CommitAllOffsets(ctx, "app", offs); err != nil {
		t.Fatal(err)
	}
}

// denyCreateTopics makes the cluster refuse every CreateTopics request as
// unauthorized (a user without CREATE on the cluster) and counts them.
func denyCreateTopics(c *kfake.Cluster) *atomic.Int32 {
	var n atomic.Int32
	c.ControlKey(int16(kmsg.CreateTopics), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		n.Add(1)
		req := r.(*kmsg.CreateTopicsRequest)
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic = t.Topic
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	return &n
}

func newFake(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// fakeRound runs one round of a new Job (a scheduled run's process) for flow a->b from src
// to tgt, with opts' other fields.
func fakeRound(ctx context.Context, t *testing.T, src, tgt *kfake.Cluster, opts checkpoint.Options) (*checkpoint.Summary, error) {
	t.Helper()
	opts.Flow = round.Flow{SourceAlias: "a", TargetAlias: "b"}
	j, err := checkpoint.New(ctx, opts, dial(src.ListenAddrs()[0]), dial(tgt.ListenAddrs()[0]), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	return j.Round(ctx)
}

// TestRoundWithoutCreateRights runs a round against a target that refuses to
// create topics: it works when the checkpoints topic exists (and does not
// even try to create it), and fails with a clear error when it does not.
func TestRoundWithoutCreateRights(t *testing.T) {
	for _, exists := range []bool{true, false} {
		name := "missing"
		if exists {
			name = "exists"
		}
		t.Run(name, func(t *testing.T) {
			src := newFake(t, kfake.SeedTopics(1, "orders", "mm2-offset-syncs.b.internal"))
			var tgtOpts []kfake.Opt
			if exists {
				tgtOpts = append(tgtOpts, kfake.SeedTopics(1, "a.checkpoints.internal"))
			}
			tgt := newFake(t, tgtOpts...)
			creates := denyCreateTopics(tgt)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			syncAndCommit(ctx, t, src)

			sum, err := fakeRound(ctx, t, src, tgt, checkpoint.Options{})
			if !exists {
				if err == nil || !strings.Contains(err.Error(), "creating topic") || !strings.Contains(err.Error(), "TOPIC_AUTHORIZATION_FAILED") {
					t.Fatalf("round without the topic and without create rights: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("round: %v", err)
			}
			if creates.Load() != 0 {
				t.Errorf("%d CreateTopics requests for an existing topic", creates.Load())
			}
			if sum.CheckpointsWritten != 1 {
				t.Errorf("summary %+v, want one checkpoint", sum)
			}
		})
	}
}
