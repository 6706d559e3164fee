package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/engine"
	"github.com/mm2go/mm2go/shared/filter"
	"github.com/mm2go/mm2go/shared/mirrorevents"
	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/kafkasource"
)

// TestServeThroughput measures records/s through the KafkaSource driver in fetch mode (ordered
// and unordered) against a `mirror run` burst (the engine's Burst, in process) on the same
// topic. It asserts nothing about speed; run with MM2GO_SERVE_BENCH=<records> to get figures.
func TestServeThroughput(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("MM2GO_SERVE_BENCH"))
	if n <= 0 {
		t.Skip("set MM2GO_SERVE_BENCH=<records> to measure mirror serve throughput")
	}
	c := testkit.Require(t)
	const parts = 4
	val := make([]byte, 200)
	newTopic := func() (string, map[int32]int64) {
		topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "sb"), parts, nil)
		testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, "source."+topic, "bench."+topic)
		for i := 0; i < n; i += 10000 {
			var recs []*kgo.Record
			for j := i; j < min(i+10000, n); j++ {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(j % parts), Key: []byte(fmt.Sprintf("k%d", j)), Value: val})
			}
			testkit.Produce(t, c.Source.Bootstrap, recs...)
		}
		return topic, endOffsets(t, c.Source.Bootstrap, topic)
	}
	var topic string
	for _, unordered := range []bool{false, true} {
		tp, ends := newTopic()
		topic = tp
		fn := startServeMirror(t, c.Source.Bootstrap, c.Target.Bootstrap, topic, serveOpts{})
		group := testkit.Name(t, "ks")
		start := time.Now()
		d, stop := runDriver(t, kafkasource.Config{Bootstrap: c.Source.Bootstrap, Topics: []string{topic}, Group: group, Sink: fn.URL, Unordered: unordered})
		waitDelivered(t, c.Source.Bootstrap, group, topic, ends, 10*time.Minute)
		el := time.Since(start)
		stop()
		fn.stop()
		t.Logf("mirror serve, fetch mode, driver unordered=%v: %d events in %s = %.0f records/s (%d copies, %d requests)",
			unordered, n, el.Round(time.Millisecond), float64(n)/el.Seconds(), fn.copier.copies.Load(), d.Stats().Requests)
	}

	// Payload mode on live traffic: a seed record per partition gives each a stored position,
	// then every event is the partition's next offset and is written from its payload.
	{
		ptopic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "sbp"), parts, nil)
		testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, "source."+ptopic)
		fn := startServeMirror(t, c.Source.Bootstrap, c.Target.Bootstrap, ptopic, serveOpts{mode: mirrorevents.ModePayload, keyType: mirrorevents.KeyByteArray})
		group := testkit.Name(t, "ks")
		_, stop := runDriver(t, kafkasource.Config{Bootstrap: c.Source.Bootstrap, Topics: []string{ptopic}, Group: group, Sink: fn.URL,
			Source: kafkasource.Source{KeyType: "byte-array"}})
		var seeds []*kgo.Record
		for p := int32(0); p < parts; p++ {
			seeds = append(seeds, &kgo.Record{Topic: ptopic, Partition: p, Value: val})
		}
		testkit.Produce(t, c.Source.Bootstrap, seeds...)
		waitDelivered(t, c.Source.Bootstrap, group, ptopic, endOffsets(t, c.Source.Bootstrap, ptopic), time.Minute)
		start := time.Now()
		var recs []*kgo.Record
		for j := 0; j < n; j++ {
			recs = append(recs, &kgo.Record{Topic: ptopic, Partition: int32(j % parts), Key: []byte(fmt.Sprintf("k%d", j)), Value: val})
		}
		testkit.Produce(t, c.Source.Bootstrap, recs...)
		waitDelivered(t, c.Source.Bootstrap, group, ptopic, endOffsets(t, c.Source.Bootstrap, ptopic), 10*time.Minute)
		el := time.Since(start)
		stop()
		fn.stop()
		t.Logf("mirror serve, payload mode, live traffic: %d events in %s = %.0f records/s (%d payload writes, %d fetches)",
			n, el.Round(time.Millisecond), float64(n)/el.Seconds(), fn.copier.writes.Load(), fn.copier.copies.Load())
	}

	f, _ := filter.Topics(topic, "")
	dial := func(ctx context.Context, side engine.Side, extra ...kgo.Opt) (*kgo.Client, error) {
		bs := c.Source.Bootstrap
		if side == engine.Target {
			bs = c.Target.Bootstrap
		}
		return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bs)}, extra...)...)
	}
	e, err := engine.New(testkit.Context(t, time.Minute), engine.Options{SourceAlias: "bench", TargetAlias: "target", Topics: f,
		ReplicationFactor: 1, OffsetSyncsTopicReplicationFactor: 1, OffsetStorageReplicationFactor: 1}, dial, serveLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	start := time.Now()
	s, err := e.Burst(testkit.Context(t, 10*time.Minute), engine.BurstOptions{})
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	t.Logf("mirror run (engine burst): %d records in %s = %.0f records/s", s.Records, el.Round(time.Millisecond), float64(s.Records)/el.Seconds())
}
