package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mm2go/mm2go/test/testkit"
)

// TestWideBurstHoldsNewPartitions: a burst copying record by record into more new partitions
// than awaitServing waits for consumes each source partition only once the target serves its
// remote partition, and still copies every record byte for byte, at the source's offsets.
func TestWideBurstHoldsNewPartitions(t *testing.T) {
	c := testkit.Require(t)
	src := c.Source.Bootstrap
	var topics []string
	for i := range 6 {
		topic := testkit.CreateTopic(t, src, testkit.Name(t, fmt.Sprintf("wide%d", i)), 4, nil)
		testkit.Produce(t, src, testkit.SampleRecords(topic, 4, 120)...)
		topics = append(topics, topic)
	}
	f := newFlow(t, topics...)
	f.opts.DecodeRecords = true
	s := f.burst(BurstOptions{})
	if s.Reason != ReasonDone || s.Lag != 0 || s.Records != 6*120 {
		t.Errorf("summary: reason %q, lag %d, %d records; want done, 0, %d", s.Reason, s.Lag, s.Records, 6*120)
	}
	for _, topic := range topics {
		testkit.AssertSameRecords(t, sourceRecords(t, src, topic), testkit.ReadAll(t, c.Target.Bootstrap, f.remote(topic)))
	}
	log := fmt.Sprint(f.log)
	if !strings.Contains(log, "each is copied once the target serves it") || !strings.Contains(log, "partitions=24") {
		t.Errorf("the burst did not hold the 24 new partitions:\n%s", log)
	}
	if !strings.Contains(log, "new remote partitions all served") {
		t.Errorf("the held partitions were not all seen served:\n%s", log)
	}

	// A second burst finds the remote topics served: nothing is held.
	for _, topic := range topics {
		testkit.Produce(t, src, testkit.SampleRecords(topic, 4, 8)...)
	}
	before := strings.Count(fmt.Sprint(f.log), "each is copied once the target serves it")
	if s := f.burst(BurstOptions{}); s.Records != 6*8 || s.Lag != 0 {
		t.Errorf("second burst: %d records, lag %d; want %d, 0", s.Records, s.Lag, 6*8)
	}
	if after := strings.Count(fmt.Sprint(f.log), "each is copied once the target serves it"); after != before {
		t.Errorf("the second burst held partitions of topics that existed")
	}
	for _, topic := range topics {
		testkit.AssertSameRecords(t, sourceRecords(t, src, topic), testkit.ReadAll(t, c.Target.Bootstrap, f.remote(topic)))
	}
}
