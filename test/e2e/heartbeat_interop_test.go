package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/engine"
	"github.com/mm2go/mm2go/shared/filter"
	"github.com/mm2go/mm2go/shared/heartbeat"
	"github.com/mm2go/mm2go/shared/round"
	"github.com/mm2go/mm2go/test/testkit"
)

// TestHeartbeatInteropWithMM2Tools writes heartbeats with mm2go, reads them with MM2's own
// HeartbeatFormatter, replicates the reverse heartbeat with mm2go's engine and checks that
// genuine RemoteClusterUtils then sees the source as an upstream cluster one hop away, and that
// the next round reports the replication latency of that heartbeat.
func TestHeartbeatInteropWithMM2Tools(t *testing.T) {
	c := testkit.Require(t)
	src, tgt := testkit.Name(t, "s"), testkit.Name(t, "t")
	remote := src + ".heartbeats"
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, remote, "mm2-offsets."+src+".internal")
	testkit.DeleteTopicsAtEnd(t, c.Source.Bootstrap, "mm2-offset-syncs."+tgt+".internal")
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	dial := func(b string) heartbeat.ClientFunc {
		return func(_ context.Context, extra ...kgo.Opt) (*kgo.Client, error) {
			return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b)}, extra...)...)
		}
	}
	j, err := heartbeat.New(context.Background(), heartbeat.Options{
		Flow:                             round.Flow{SourceAlias: src, TargetAlias: tgt},
		HeartbeatsTopicReplicationFactor: 1,
	}, dial(c.Source.Bootstrap), dial(c.Target.Bootstrap), logger)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	first, err := j.Round(testkit.Context(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var forward, reverse heartbeat.Written
	for _, w := range first.Written {
		if w.Cluster == "target" {
			forward = w
		} else {
			reverse = w
		}
	}

	// MM2's formatter prints mm2go's heartbeat.
	out := testkit.Tool(t, "org.apache.kafka.tools.consumer.ConsoleConsumer",
		"--bootstrap-server", c.Target.Bootstrap, "--topic", "heartbeats",
		"--partition", "0", "--offset", strconv.FormatInt(forward.Offset, 10), "--max-messages", "1",
		"--formatter", "org.apache.kafka.connect.mirror.formatters.HeartbeatFormatter", "--timeout-ms", "30000")
	want := fmt.Sprintf("Heartbeat{sourceClusterAlias=%s, targetClusterAlias=%s, timestamp=%d}", src, tgt, forward.Timestamp)
	if !strings.Contains(out, want) {
		t.Errorf("HeartbeatFormatter printed %q, want %q", out, want)
	} else {
		t.Logf("HeartbeatFormatter: %s", want)
	}

	// Replicate the source's heartbeats topic through the reverse heartbeat, as a burst of the
	// mirror function does.
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
	if s, err := eng.CopyPartition(testkit.Context(t, time.Minute), "heartbeats", 0, reverse.Offset); err != nil || s.Records == 0 {
		t.Fatalf("replicating heartbeats: %+v, %v", s, err)
	}

	// Genuine RemoteClusterUtils on the target: the source is upstream, one hop away.
	if up := mirrorClientTool(t, c, "upstream", c.Target.Bootstrap); !slices.Contains(up, src) {
		t.Errorf("RemoteClusterUtils.upstreamClusters does not list %s", src)
	}
	if hops := mirrorClientTool(t, c, "hops", c.Target.Bootstrap, src); len(hops) != 1 || hops[0] != "1" {
		t.Errorf("RemoteClusterUtils.replicationHops(%s) = %q, want 1", src, hops)
	}

	before := time.Now()
	second, err := j.Round(testkit.Context(t, time.Minute))
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if second.Newest == nil || *second.Newest != reverse.Heartbeat || second.ReplicationLatencyMS == nil {
		t.Fatalf("newest replicated heartbeat %+v (latency %v), want %+v", second.Newest, second.ReplicationLatencyMS, reverse.Heartbeat)
	}
	lat := *second.ReplicationLatencyMS
	lo, hi := before.UnixMilli()-reverse.Timestamp, after.UnixMilli()-reverse.Timestamp
	if lat < lo || lat > hi {
		t.Errorf("latency %d ms outside [%d, %d] (round 2 start/end minus the heartbeat's timestamp)", lat, lo, hi)
	}
	t.Logf("replication latency of %s: %d ms (heartbeat written, replicated by the engine, read back)", remote, lat)
}
