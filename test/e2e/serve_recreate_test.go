package e2e

import (
	"testing"
	"time"

	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/dispatcher"
)

// TestServeRecreatedTopic: the source topic is deleted and created again (offsets restart at 0)
// while positions of the old one are stored. A fresh function must not take the old positions
// for "already copied": the new records, delivered by the genuine dispatcher, reach the target.
func TestServeRecreatedTopic(t *testing.T) {
	c := testkit.Require(t)
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "srt"), 1, nil)
	remote := "source." + topic
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, remote)
	old := cleanRecords(topic, 1, 50, "old")
	testkit.Produce(t, c.Source.Bootstrap, old...)
	fn := startServe(t, c, c.Target.Bootstrap, topic)
	d := dispatcher.Start(t, shippedDelivery(t, c.Source.Bootstrap, []string{topic}, fn.URL))
	waitTargetCount(t, c.Target.Bootstrap, remote, int64(len(old)), time.Minute)
	d.Stop()
	fn.stop()

	adm := testkit.Admin(t, c.Source.Bootstrap)
	ctx := testkit.Context(t, time.Minute)
	if _, err := adm.DeleteTopics(ctx, topic); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "the topic to be recreated", func() bool {
		resp, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
		return err == nil && resp.Err == nil
	})
	fresh := cleanRecords(topic, 1, 10, "new")
	testkit.Produce(t, c.Source.Bootstrap, fresh...)

	fn.start()
	// A new KafkaSource (a new group): the old group's offsets point past the new topic's end.
	dispatcher.Start(t, shippedDelivery(t, c.Source.Bootstrap, []string{topic}, fn.URL))
	waitTargetCount(t, c.Target.Bootstrap, remote, int64(len(old)+len(fresh)), time.Minute)
	testkit.AssertSameRecords(t, append(old, fresh...), testkit.ReadAll(t, c.Target.Bootstrap, remote))
}
