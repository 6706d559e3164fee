package e2e

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/ehfake"
)

// ehRun runs `mirror run` as a process with the environment of ehEnv plus extra.
func ehRun(t *testing.T, env map[string]string, extra ...string) MirrorResult {
	t.Helper()
	list := []string{"PATH=" + os.Getenv("PATH"), "MM2_LOG_FORMAT=json"}
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	return RunMirror(t, append(list, extra...))
}

// wantRefusal fails the test unless r exited with code and its log says each of says.
func wantRefusal(t *testing.T, what string, r MirrorResult, code int, says ...string) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("%s: exit %d, want %d\n%s", what, r.Code, code, lastLines(r.Stderr, 20))
	}
	for _, s := range says {
		if !strings.Contains(r.Stderr, s) {
			t.Errorf("%s: the log does not say %q:\n%s", what, s, lastLines(r.Stderr, 10))
		}
	}
}

// TestEventHubsStandardCannotGrow: a source topic that gains partitions after its event hub
// was created. On Standard an event hub's partition count is fixed: the run stops before
// writing anything, naming the hub, both counts, the tier setting and the ways out (exit 1,
// the same answer every run, no retries), and the event hub keeps its partitions. On Premium
// the same run grows the event hub and copies every record.
func TestEventHubsStandardCannotGrow(t *testing.T) {
	c := testkit.Require(t)
	for _, premium := range []bool{false, true} {
		t.Run(map[bool]string{false: "standard", true: "premium"}[premium], func(t *testing.T) {
			f := ehfake.New(t, ehfake.Config{Premium: premium})
			topic := createTopic(t, c.Source.Bootstrap, testkit.Name(t, "grow"), 2, nil)
			first := testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 2, 20)...)
			env := ehEnv(c, f, topic)
			if premium {
				env["MM2_TARGET_EVENTHUBS_TIER"] = "premium"
			}
			if r := ehRun(t, env); r.Code != 0 || r.Records() != 20 {
				t.Fatalf("first run: exit %d, %d records\n%s", r.Code, r.Records(), lastLines(r.Stderr, 20))
			}
			if _, err := testkit.Admin(t, c.Source.Bootstrap).UpdatePartitions(testkit.Context(t, time.Minute), 4, topic); err != nil {
				t.Fatal(err)
			}
			more := testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 4, 40)...)
			r := ehRun(t, env)
			remote := "source." + topic
			if premium {
				if r.Code != 0 || r.Records() != 40 {
					t.Fatalf("premium: exit %d, %d records; want 0, 40\n%s", r.Code, r.Records(), lastLines(r.Stderr, 20))
				}
				testkit.AssertSameRecords(t, append(first, more...), ehRead(t, f, remote))
				return
			}
			wantRefusal(t, "standard, grown source", r, 1, "cannot gain partitions", remote+" has 2 and its source 4",
				"MM2_TARGET_EVENTHUBS_TIER", "MM2_REPLICATION_POLICY_SEPARATOR", "nothing created")
			if r.Records() != 0 || f.QuotaRefusals.Load() != 0 {
				t.Errorf("standard: %d records copied, %d refusals by the double; want 0 and 0 (stopped before asking)", r.Records(), f.QuotaRefusals.Load())
			}
			testkit.AssertSameRecords(t, first, ehRead(t, f, remote))
		})
	}
}

// TestEventHubsRecordOverOneMB: a source record of 1,040,000 bytes (the source topic allows
// it) cannot go to Event Hubs on any tier. The run fails at once (exit 1) naming the
// partition and offset, the 1 MB limit, that no setting raises it, and MM2_TOPICS_EXCLUDE;
// nothing reaches the event hub and the double never cut a connection.
func TestEventHubsRecordOverOneMB(t *testing.T) {
	c := testkit.Require(t)
	f := ehfake.New(t, ehfake.Config{})
	topic := createTopic(t, c.Source.Bootstrap, testkit.Name(t, "huge"), 1, map[string]*string{"max.message.bytes": ptr("3000000")})
	cl := testkit.Client(t, c.Source.Bootstrap, kgo.ProducerBatchMaxBytes(3_000_000))
	if err := cl.ProduceSync(testkit.Context(t, time.Minute), &kgo.Record{Topic: topic, Value: bytes.Repeat([]byte("x"), 1_040_000)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r := ehRun(t, ehEnv(c, f, topic))
	wantRefusal(t, "record over 1 MB", r, 1, topic+"-0 offset 0", "MESSAGE_TOO_LARGE", "at most 1 MB", "no setting raises", "MM2_TOPICS_EXCLUDE")
	if r.Records() != 0 || f.Oversized.Load() != 0 {
		t.Errorf("%d records copied, %d connections cut by the double; want 0 and 0", r.Records(), f.Oversized.Load())
	}
}

// TestEventHubsBatchOverOneMB: a source batch of 1,020,000 bytes (100 records written in one
// batch) is copied in batches under the cap: byte for byte, no connection cut, no request
// over 1,000,000 bytes. (The answer was already right at da9ea34.)
func TestEventHubsBatchOverOneMB(t *testing.T) {
	c := testkit.Require(t)
	f := ehfake.New(t, ehfake.Config{})
	topic := createTopic(t, c.Source.Bootstrap, testkit.Name(t, "bigbatch"), 1, map[string]*string{"max.message.bytes": ptr("3000000")})
	cl := testkit.Client(t, c.Source.Bootstrap, kgo.ProducerLinger(time.Second), kgo.ProducerBatchMaxBytes(3_000_000), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var want []*kgo.Record
	for i := range 100 {
		want = append(want, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i)), Value: bytes.Repeat([]byte{byte(i)}, 10_200)})
	}
	if err := cl.ProduceSync(testkit.Context(t, time.Minute), want...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if r := ehRun(t, ehEnv(c, f, topic)); r.Code != 0 || r.Records() != 100 {
		t.Fatalf("exit %d, %d records; want 0, 100\n%s", r.Code, r.Records(), lastLines(r.Stderr, 20))
	}
	testkit.AssertSameRecords(t, want, ehRead(t, f, "source."+topic))
	if f.Oversized.Load() != 0 || f.LargestRequest.Load() > 1_000_000 {
		t.Errorf("the double cut %d connections; largest request %d bytes", f.Oversized.Load(), f.LargestRequest.Load())
	}
}

// TestEventHubsExactlyOnceRefused: MM2_EXACTLY_ONCE=true into a namespace without Kafka
// transactions stops before anything is created, as a settings error (exit 2) naming the
// setting, the tier and the choices. At da9ea34 every partition's transaction failed at its
// commit and the run retried for two minutes before exiting 1.
func TestEventHubsExactlyOnceRefused(t *testing.T) {
	c := testkit.Require(t)
	f := ehfake.New(t, ehfake.Config{})
	topic := createTopic(t, c.Source.Bootstrap, testkit.Name(t, "eos"), 1, nil)
	testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 1, 10)...)
	r := ehRun(t, ehEnv(c, f, topic), "MM2_EXACTLY_ONCE=true")
	wantRefusal(t, "exactly-once on Standard", r, 2, "MM2_EXACTLY_ONCE=true", "tier standard", "does not support transactions", "EndTxn", "Premium")
	if f.Topics() != 0 {
		t.Errorf("the refused run created %d event hubs", f.Topics())
	}
}

// TestEventHubsCompressedSource: source batches compressed with each codec Kafka has are
// copied to a Standard namespace (no compression at all) uncompressed: byte for byte, none
// refused by the double. (The answer was already right at da9ea34: the mirror writes what the
// target takes.)
func TestEventHubsCompressedSource(t *testing.T) {
	c := testkit.Require(t)
	f := ehfake.New(t, ehfake.Config{})
	var topics []string
	var want [][]*kgo.Record
	for _, codec := range []struct {
		name string
		c    kgo.CompressionCodec
	}{{"gzip", kgo.GzipCompression()}, {"snappy", kgo.SnappyCompression()}, {"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()}} {
		topic := createTopic(t, c.Source.Bootstrap, testkit.Name(t, codec.name), 2, nil)
		cl := testkit.Client(t, c.Source.Bootstrap, kgo.ProducerBatchCompression(codec.c), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		recs := testkit.SampleRecords(topic, 2, 60)
		if err := cl.ProduceSync(testkit.Context(t, time.Minute), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		topics, want = append(topics, topic), append(want, recs)
	}
	if r := ehRun(t, ehEnv(c, f, strings.Join(topics, ","))); r.Code != 0 || r.Records() != 240 {
		t.Fatalf("exit %d, %d records; want 0, 240\n%s", r.Code, r.Records(), lastLines(r.Stderr, 20))
	}
	for i, topic := range topics {
		testkit.AssertSameRecords(t, want[i], ehRead(t, f, "source."+topic))
	}
	if f.Compressed.Load() != 0 {
		t.Errorf("the double refused %d compressed produce requests", f.Compressed.Load())
	}
}

// TestReplicationFactorTargetCannotGive: a replication factor larger than the target's
// broker count is a settings error (exit 2) naming the setting that gave it (remote topics:
// MM2_REPLICATION_FACTOR; the offsets topic: MM2_OFFSET_STORAGE_REPLICATION_FACTOR) and the
// broker count, every run the same; at da9ea34 every run exited 3 ("run again later") within
// a second. A run refused for the offsets topic's factor on a flow's first run has copied
// what its summary's records say (that topic is created behind the copy) without storing
// positions, and the run with the factor fixed copies it again: the remote topic holds
// exactly the summaries' records. Event Hubs keeps its own copies: the double takes the
// factor 3 of Microsoft's MM2 tutorial.
func TestReplicationFactorTargetCannotGive(t *testing.T) {
	c := testkit.Require(t)
	topic := createTopic(t, c.Source.Bootstrap, testkit.Name(t, "rf"), 1, nil)
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, "source."+topic)
	testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 1, 10)...)
	var remote int64 // records on the remote topic
	for _, tc := range []struct{ set, says string }{
		{"MM2_REPLICATION_FACTOR=3", "MM2_REPLICATION_FACTOR (replication.factor)"},
		{"MM2_OFFSET_STORAGE_REPLICATION_FACTOR=3", "MM2_OFFSET_STORAGE_REPLICATION_FACTOR (offset.storage.replication.factor)"},
	} {
		// An offsets topic of its own: the first case's run creates its offsets topic
		// before it fails on the remote topic.
		offsets := testkit.Name(t, "offsets")
		testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, offsets)
		var copied int64
		for range 2 {
			r := RunMirror(t, MirrorEnv(c, topic, tc.set, "MM2_OFFSET_STORAGE_TOPIC="+offsets))
			wantRefusal(t, tc.set, r, 2, tc.says, "replication factor 3", "lists 1 broker(s)", "-1 for the broker's default")
			copied += r.Records()
		}
		// The remote topic is created first, and on a flow's first run the offsets topic
		// behind the copy: what a refused run copied before the offsets topic failed is on
		// the target without a stored position (the summary's records say how many), and
		// the run with the factor fixed copies it again.
		if r := RunMirror(t, MirrorEnv(c, topic, "MM2_OFFSET_STORAGE_TOPIC="+offsets)); r.Code != 0 || r.Records() != 10 {
			t.Fatalf("%s fixed: exit %d, %d records; want 0, 10\n%s", tc.set, r.Code, r.Records(), lastLines(r.Stderr, 20))
		}
		if got := EndOffsetsSum(testkit.Context(t, time.Minute), c.Target.Bootstrap, "source."+topic); got != remote+copied+10 {
			t.Fatalf("%s: the remote topic holds %d records, want %d before, %d from the refused runs' summaries and 10 from the fixed run", tc.set, got, remote, copied)
		}
		t.Logf("%s: the refused runs copied %d records", tc.set, copied)
		remote += copied + 10
	}
	f := ehfake.New(t, ehfake.Config{})
	r := ehRun(t, ehEnv(c, f, topic), "MM2_REPLICATION_FACTOR=3", "MM2_OFFSET_STORAGE_REPLICATION_FACTOR=3")
	if r.Code != 0 || r.Records() != 10 {
		t.Fatalf("Event Hubs with replication factor 3: exit %d, %d records\n%s", r.Code, r.Records(), lastLines(r.Stderr, 20))
	}
}
