package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/ehfake"
)

// TestEventHubsPositionsLostToRetention: on a Standard namespace the offsets topic is not
// compacted, so a flow that stood still longer than its retention loses its positions (here
// the retention's work is done with DeleteRecords on every partition of the offsets topic).
// The next run must not start over from the earliest records, which would copy all of them
// into the event hub again: it stops before copying (exit 2), naming the partitions and the
// choices, and the event hub keeps exactly the records it had. With the first choice
// (auto.offset.reset=latest) the next run stores the source's ends without copying, and the
// runs after it copy only what is new. At da9ea34 the run after the loss exited 0 and copied
// all 40 records again.
func TestEventHubsPositionsLostToRetention(t *testing.T) {
	c := testkit.Require(t)
	f := ehfake.New(t, ehfake.Config{})
	topic := createTopic(t, c.Source.Bootstrap, testkit.Name(t, "lost"), 2, nil)
	first := testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 2, 30)...)
	env := ehEnv(c, f, topic)
	if r := ehRun(t, env); r.Code != 0 || r.Records() != 30 {
		t.Fatalf("first run: exit %d, %d records\n%s", r.Code, r.Records(), lastLines(r.Stderr, 20))
	}
	// Retention removes every position record.
	offsets := "mm2-offsets.source.internal"
	adm := kadm.NewClient(ehClientFor(t, f))
	ctx := testkit.Context(t, time.Minute)
	ends, err := adm.ListEndOffsets(ctx, offsets)
	if err != nil {
		t.Fatal(err)
	}
	del := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) { del.AddOffset(offsets, o.Partition, o.Offset, -1) })
	if resp, err := adm.DeleteRecords(ctx, del); err != nil || resp.Error() != nil {
		t.Fatalf("deleting the offsets topic's records: %v %v", err, resp.Error())
	}
	testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 2, 10)...)

	r := ehRun(t, env)
	wantRefusal(t, "positions lost", r, 2, "stored positions of "+topic+"-0", topic+"-1", "removed by retention",
		"MM2_SOURCE_CONSUMER_AUTO_OFFSET_RESET=latest", "recreate", "MM2_TARGET_EVENTHUBS_COMPACTION")
	testkit.AssertSameRecords(t, first, ehRead(t, f, "source."+topic))

	if r := ehRun(t, env, "MM2_SOURCE_CONSUMER_AUTO_OFFSET_RESET=latest"); r.Code != 0 || r.Records() != 0 {
		t.Fatalf("run with auto.offset.reset=latest: exit %d, %d records; want 0, 0\n%s", r.Code, r.Records(), lastLines(r.Stderr, 20))
	}
	newer := testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 2, 6)...)
	if r := ehRun(t, env); r.Code != 0 || r.Records() != 6 {
		t.Fatalf("next run: exit %d, %d records; want 0, 6\n%s", r.Code, r.Records(), lastLines(r.Stderr, 20))
	}
	testkit.AssertSameRecords(t, append(first, newer...), ehRead(t, f, "source."+topic))
}
