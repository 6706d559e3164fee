package heartbeat_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/engine"
	"github.com/mm2go/mm2go/shared/filter"
	"github.com/mm2go/mm2go/shared/heartbeat"
	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/shared/round"
	"github.com/mm2go/mm2go/test/testkit"
)

func dial(bootstrap string) heartbeat.ClientFunc {
	return func(_ context.Context, extra ...kgo.Opt) (*kgo.Client, error) {
		return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bootstrap)}, extra...)...)
	}
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time)     { c.mu.Lock(); c.t = t; c.mu.Unlock() }
func (c *clock) add(d time.Duration) { c.set(c.now().Add(d)) }

// readAt reads the record at offset of topic partition 0.
func readAt(t *testing.T, bootstrap, topic string, offset int64) *kgo.Record {
	t.Helper()
	cl := testkit.Client(t, bootstrap, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(offset)}}))
	ctx := testkit.Context(t, 30*time.Second)
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s@%d: %v", topic, offset, ctx.Err())
		}
		for _, r := range fs.Records() {
			if r.Offset == offset {
				return r
			}
		}
	}
}

// TestRound writes forward and reverse heartbeats, replicates the reverse
// one with the engine (as a burst of the mirror function would) and checks
// the reported replication latency.
func TestRound(t *testing.T) {
	c := testkit.Require(t)
	src, tgt := testkit.Name(t, "s"), testkit.Name(t, "t")
	remote := src + ".heartbeats"
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, remote, "mm2-offsets."+src+".internal")
	testkit.DeleteTopicsAtEnd(t, c.Source.Bootstrap, "mm2-offset-syncs."+tgt+".internal")

	// Heartbeats of concurrent tests share the source's "heartbeats" topic;
	// the round prefers this flow's own reverse heartbeat, so the test's
	// clock decides the latency exactly.
	clk := &clock{t: time.Now().Truncate(time.Millisecond)}
	t0 := clk.now()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	j, err := heartbeat.New(context.Background(), heartbeat.Options{
		Flow:                             round.Flow{SourceAlias: src, TargetAlias: tgt, Now: clk.now, WriteConnectOffsets: true}, // once the engine has created the Connect offsets topic
		HeartbeatsTopicReplicationFactor: 1,
	}, dial(c.Source.Bootstrap), dial(c.Target.Bootstrap), logger)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()

	sum, err := j.Round(testkit.Context(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if sum.ReplicationLatencyMS != nil || sum.Newest != nil {
		t.Errorf("latency before any replication: %v %+v, want none", sum.ReplicationLatencyMS, sum.Newest)
	}
	js, _ := json.Marshal(sum)
	if !strings.Contains(string(js), `"replication_latency_ms":null`) {
		t.Errorf("summary JSON %s lacks replication_latency_ms null", js)
	}
	if len(sum.Written) != 2 {
		t.Fatalf("written %+v, want forward and reverse heartbeats", sum.Written)
	}
	for _, w := range sum.Written {
		bootstrap, want := c.Target.Bootstrap, mm2.Heartbeat{SourceAlias: src, TargetAlias: tgt, Timestamp: t0.UnixMilli()}
		if w.Cluster == "source" {
			bootstrap, want = c.Source.Bootstrap, mm2.Heartbeat{SourceAlias: tgt, TargetAlias: src, Timestamp: t0.UnixMilli()}
		}
		r := readAt(t, bootstrap, "heartbeats", w.Offset)
		got, err := mm2.DecodeHeartbeat(r.Key, r.Value)
		if err != nil {
			t.Fatalf("%s heartbeat: %v", w.Cluster, err)
		}
		if got != want || r.Partition != 0 || len(r.Headers) != 0 || !r.Timestamp.Equal(t0) {
			t.Errorf("%s heartbeat: %v (partition %d, %d headers, timestamp %v), want %v in partition 0, no headers, timestamp %v",
				w.Cluster, got, r.Partition, len(r.Headers), r.Timestamp, want, t0)
		}
	}

	// Replicate the source's heartbeats topic up to the reverse heartbeat.
	none, err := filter.Topics("", "")
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(context.Background(), engine.Options{
		SourceAlias: src, TargetAlias: tgt, Topics: none, HeartbeatsReplication: true,
		ReplicationFactor: 1, OffsetSyncsTopicReplicationFactor: 1, OffsetStorageReplicationFactor: 1,
	}, func(_ context.Context, side engine.Side, extra ...kgo.Opt) (*kgo.Client, error) {
		b := c.Source.Bootstrap
		if side == engine.Target {
			b = c.Target.Bootstrap
		}
		return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b)}, extra...)...)
	}, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	// A burst, not CopyPartition: CopyPartition answers a request and gives its writes the
	// engine's 10 s grace, which a CI broker busy creating the topics of parallel packages
	// overran twice (the new offsets topic not served in time). The latency rules, not the
	// copy's entry point, are under test here; the burst copies the shared topic to its end,
	// the reverse heartbeat included.
	if es, err := eng.Burst(testkit.Context(t, time.Minute), engine.BurstOptions{}); err != nil || es.Records == 0 {
		t.Fatalf("replicating heartbeats: %+v, %v", es, err)
	}

	clk.add(1500 * time.Millisecond)
	sum, err = j.Round(testkit.Context(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	want := heartbeat.Heartbeat{SourceAlias: tgt, TargetAlias: src, Timestamp: t0.UnixMilli()}
	if sum.Newest == nil || *sum.Newest != want || sum.ReplicationLatencyMS == nil || *sum.ReplicationLatencyMS != 1500 {
		t.Fatalf("after replication: newest %+v latency %v, want %+v and 1500 ms", sum.Newest, sum.ReplicationLatencyMS, want)
	}
	if sum.LatencyTopic != remote {
		t.Errorf("latency topic %q, want %q", sum.LatencyTopic, remote)
	}
	t.Logf("replication latency from %s: %d ms", remote, *sum.ReplicationLatencyMS)

	// The engine created mm2-offsets.<src>.internal; round 2 left the heartbeat connector's
	// Connect offset there, as MM2 does, in the partition Java's producer would pick.
	key := mm2.HeartbeatOffsetKey(src, tgt)
	found := false
	for _, r := range testkit.ReadAll(t, c.Target.Bootstrap, "mm2-offsets."+src+".internal") {
		if string(r.Key) != string(key) {
			continue
		}
		found = true
		if v, err := mm2.DecodeOffsetValue(r.Value); err != nil || v != 0 || r.Partition != mm2.KeyPartition(key, 25) {
			t.Errorf("heartbeat Connect offset %q in partition %d: %v %v", r.Value, r.Partition, v, err)
		}
	}
	if !found {
		t.Errorf("no Connect offset %s", key)
	}
}

// TestRoundOptions checks that the reverse heartbeat and the forward one can
// be turned off separately.
func TestRoundOptions(t *testing.T) {
	c := testkit.Require(t)
	for _, tc := range []struct {
		name             string
		opts             heartbeat.Options
		wantWrittenOnSrc bool
		wantWrittenOnTgt bool
	}{
		{"no-reverse", heartbeat.Options{DisableReverse: true}, false, true},
		{"no-forward", heartbeat.Options{DisableHeartbeats: true}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			o.SourceAlias, o.TargetAlias, o.HeartbeatsTopicReplicationFactor = testkit.Name(t, "s"), testkit.Name(t, "t"), 1
			j, err := heartbeat.New(context.Background(), o, dial(c.Source.Bootstrap), dial(c.Target.Bootstrap), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			sum, err := j.Round(testkit.Context(t, time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			var onSrc, onTgt bool
			for _, w := range sum.Written {
				onSrc = onSrc || w.Cluster == "source"
				onTgt = onTgt || w.Cluster == "target"
			}
			if onSrc != tc.wantWrittenOnSrc || onTgt != tc.wantWrittenOnTgt || len(sum.Written) != 1 {
				t.Errorf("written %+v", sum.Written)
			}
		})
	}
}

// TestRoundUnavailable reports an unreachable cluster as UnavailableError.
func TestRoundUnavailable(t *testing.T) {
	c := testkit.Require(t)
	j, err := heartbeat.New(context.Background(), heartbeat.Options{Flow: round.Flow{SourceAlias: "a", TargetAlias: "b"}},
		dial(c.Source.Bootstrap), dial("127.0.0.1:1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = j.Round(ctx)
	var ue *heartbeat.UnavailableError
	if !errors.As(err, &ue) || ue.Cluster != "target" {
		t.Fatalf("round against a closed port: %v, want UnavailableError for the target", err)
	}
}

// TestRoundSourceDown: with the source unreachable (a failover) the round still writes the
// forward heartbeat and reports why the reverse one is missing.
func TestRoundSourceDown(t *testing.T) {
	c := testkit.Require(t)
	j, err := heartbeat.New(context.Background(), heartbeat.Options{
		Flow:                             round.Flow{SourceAlias: testkit.Name(t, "s"), TargetAlias: testkit.Name(t, "t")},
		HeartbeatsTopicReplicationFactor: 1,
	}, dial("127.0.0.1:1"), dial(c.Target.Bootstrap), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	sum, err := j.Round(testkit.Context(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Written) != 1 || sum.Written[0].Cluster != "target" || sum.ReverseError == "" {
		t.Errorf("written %+v, reverse error %q: want the forward heartbeat and a reason", sum.Written, sum.ReverseError)
	}
}
