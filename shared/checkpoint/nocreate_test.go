package checkpoint_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/mm2go/mm2go/shared/checkpoint"
	"github.com/mm2go/mm2go/shared/filter"
	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/shared/round"
	"github.com/mm2go/mm2go/test/testkit"
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

// TestRoundWithoutCreateRightsOnBroker repeats TestRoundWithoutCreateRights on a broker of its
// own with Kafka's StandardAuthorizer, where the job's principal (alice, over SASL_SSL) may do
// everything but create topics (DENY CREATE on the cluster and on every topic): the round
// works when the checkpoints topic exists, and fails naming the topic and
// TOPIC_AUTHORIZATION_FAILED when it does not. The source is the harness source cluster.
func TestRoundWithoutCreateRightsOnBroker(t *testing.T) {
	c := testkit.Require(t)
	eb := testkit.StartExtraBroker(t, c, "cpnocreate", 3, func(int) []string {
		return []string{"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
			"super.users=User:ANONYMOUS", "allow.everyone.if.no.acl.found=false"}
	})
	ctx := testkit.Context(t, 3*time.Minute)
	adm := testkit.Admin(t, eb.Plain) // ANONYMOUS: a super user
	acls := []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics("*").Groups("*").Clusters().Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Deny("User:alice").DenyHosts("*").Topics("*").Clusters().Operations(kadm.OpCreate).ResourcePatternType(kadm.ACLPatternLiteral),
	}
	for _, b := range acls {
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("creating ACL: %v", r.Err)
			}
		}
	}
	pem, err := os.ReadFile(c.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	asAlice := func(_ context.Context, extra ...kgo.Opt) (*kgo.Client, error) {
		return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(eb.Addr(2)),
			kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}),
			kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())}, extra...)...)
	}
	// The authorizer applies the ACLs once the broker has their metadata: wait until alice's
	// creations are refused.
	alice, err := asAlice(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	probe := testkit.Name(t, "probe")
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("last probe: %s", last)
		}
	}()
	testkit.WaitFor(t, 30*time.Second, "the broker to refuse alice's topic creations", func() bool {
		resp, err := kadm.NewClient(alice).CreateTopic(ctx, 1, 1, nil, probe)
		last = fmt.Sprintf("%v / %v", err, resp.Err)
		if err == nil && resp.Err == nil {
			_, _ = adm.DeleteTopics(ctx, probe)
		}
		return errors.Is(resp.Err, kerr.TopicAuthorizationFailed)
	})

	for _, exists := range []bool{true, false} {
		name := "missing"
		if exists {
			name = "exists"
		}
		t.Run(name, func(t *testing.T) {
			src, tgt := testkit.Name(t, "s"), testkit.Name(t, "t")
			compact := "compact"
			syncs := testkit.CreateTopic(t, c.Source.Bootstrap, "mm2-offset-syncs."+tgt+".internal", 1, map[string]*string{"cleanup.policy": &compact})
			topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "orders"), 1, nil)
			checkpoints := src + ".checkpoints.internal"
			if exists {
				testkit.CreateTopic(t, eb.Plain, checkpoints, 1, map[string]*string{"cleanup.policy": &compact})
			}
			k, v, _ := mm2.OffsetSync{Topic: topic, Partition: 0, UpstreamOffset: 7, DownstreamOffset: 3}.Encode()
			testkit.Produce(t, c.Source.Bootstrap, &kgo.Record{Topic: syncs, Key: k, Value: v})
			group := testkit.Name(t, "app")
			offs := kadm.Offsets{}
			offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 7, LeaderEpoch: -1})
			if err := testkit.Admin(t, c.Source.Bootstrap).CommitAllOffsets(ctx, group, offs); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_, _ = testkit.Admin(t, c.Source.Bootstrap).DeleteGroup(testkit.Context(t, 10*time.Second), group)
			})

			groups, err := filter.Groups(group, "")
			if err != nil {
				t.Fatal(err)
			}
			j, err := checkpoint.New(ctx, checkpoint.Options{Flow: round.Flow{SourceAlias: src, TargetAlias: tgt}, Groups: groups, CheckpointsTopicReplicationFactor: 1},
				dial(c.Source.Bootstrap), asAlice, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			sum, err := j.Round(ctx)
			if !exists {
				if err == nil || !strings.Contains(err.Error(), checkpoints) || !strings.Contains(err.Error(), "TOPIC_AUTHORIZATION_FAILED") {
					t.Fatalf("round without the topic and without create rights: %v; want an error naming %s and TOPIC_AUTHORIZATION_FAILED", err, checkpoints)
				}
				topics, lerr := adm.ListTopics(ctx, checkpoints)
				if lerr != nil || topics.Has(checkpoints) {
					t.Errorf("%s exists after the refused round (%v)", checkpoints, lerr)
				}
				return
			}
			if err != nil {
				t.Fatalf("round: %v", err)
			}
			if sum.CheckpointsWritten != 1 {
				t.Errorf("summary %+v, want one checkpoint", sum)
			}
			recs := testkit.ReadAll(t, eb.Plain, checkpoints)
			if len(recs) != 1 {
				t.Fatalf("%s holds %d records, want 1", checkpoints, len(recs))
			}
			cp, err := mm2.DecodeCheckpoint(recs[0].Key, recs[0].Value)
			if err != nil || cp.Group != group || cp.Topic != src+"."+topic || cp.UpstreamOffset != 7 || cp.DownstreamOffset != 3 {
				t.Errorf("checkpoint %+v (%v), want %s %s.%s-0 7 -> 3", cp, err, group, src, topic)
			}
		})
	}
}
