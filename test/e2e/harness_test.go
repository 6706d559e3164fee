package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
)

func TestHarnessRoundTripBothClusters(t *testing.T) {
	c := testkit.Require(t)
	for _, cl := range []testkit.Cluster{c.Source, c.Target} {
		t.Run(cl.Name, func(t *testing.T) {
			topic := testkit.CreateTopic(t, cl.Bootstrap, testkit.Name(t, "rt"), 3, nil)
			want := testkit.SampleRecords(topic, 3, 30)
			testkit.Produce(t, cl.Bootstrap, want...)
			got := testkit.ReadAll(t, cl.Bootstrap, topic)
			testkit.AssertSameRecords(t, want, got)
		})
	}
}

// TestRealMirrorMaker2 proves the harness runs genuine MirrorMaker 2: it copies a topic to
// source.<topic> on the target with the records intact.
func TestRealMirrorMaker2(t *testing.T) {
	c := testkit.Require(t)
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "mm2"), 2, nil)
	want := testkit.SampleRecords(topic, 2, 20)
	testkit.Produce(t, c.Source.Bootstrap, want...)
	remote := "source." + topic
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, remote)

	start := time.Now()
	name := testkit.StartMM2(t, MM2Properties(c, topic))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("MirrorMaker 2 log:\n%s", tail(testkit.MM2Log(t, name), 4000))
		}
	})
	var got []*kgo.Record
	testkit.WaitFor(t, 90*time.Second, "MirrorMaker 2 to copy "+topic, func() bool {
		ctx := testkit.Context(t, 10*time.Second)
		recs, err := testkit.ReadAllErr(ctx, c.Target.Bootstrap, remote)
		if err != nil {
			return false
		}
		got = recs
		return len(recs) >= len(want)
	})
	t.Logf("real MM2 copied %d records in %s", len(got), time.Since(start).Round(time.Millisecond))
	testkit.AssertSameRecords(t, want, got)
}

// linesWith returns the lines of s that contain sub, for a failure to show why.
func linesWith(s, sub string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			out = append(out, strings.TrimRight(l, "\n"))
		}
	}
	return strings.Join(out, "\n")
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
