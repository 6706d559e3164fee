package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
)

// TestWaitForServing: once WaitForServing returns for topics just created, a record produced
// to any of their partitions is accepted at the first try (a partition that a leader is named
// for but does not serve yet answers NOT_LEADER_FOR_PARTITION), and DescribeTopic names a
// leader for each; for a topic that does not exist it gives up when ctx ends, naming the topic.
func TestWaitForServing(t *testing.T) {
	c := testkit.Require(t)
	cl := testkit.Client(t, c.Target.Bootstrap)
	ctx := testkit.Context(t, time.Minute)
	wide, narrow := testkit.Name(t, "served"), testkit.Name(t, "served-narrow")
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, wide, narrow)
	failed, err := CreateTopicsEach(ctx, cl, NewTopic{Name: wide, Partitions: 12, ReplicationFactor: 1}, NewTopic{Name: narrow, Partitions: 3, ReplicationFactor: 1})
	if err != nil || failed[wide] != nil || failed[narrow] != nil {
		t.Fatalf("creating topics: %v %v", failed, err)
	}
	if err := WaitForServing(ctx, cl, wide, narrow); err != nil {
		t.Fatal(err)
	}
	once := testkit.Client(t, c.Target.Bootstrap, kgo.RecordRetries(1), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for topic, n := range map[string]int32{wide: 12, narrow: 3} {
		st, err := DescribeTopic(ctx, cl, topic)
		if err != nil || !st.Led || len(st.Leaders) != int(n) {
			t.Fatalf("after WaitForServing: %s %+v, %v; want %d led partitions", topic, st, err, n)
		}
		for p := int32(0); p < n; p++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte("first")})
		}
	}
	for _, r := range once.ProduceSync(ctx, recs...) {
		if r.Err != nil {
			t.Errorf("first produce to %s[%d]: %v", r.Record.Topic, r.Record.Partition, r.Err)
		}
	}

	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	missing := testkit.Name(t, "missing")
	if err := WaitForServing(short, cl, missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing topic: %v; want an error naming %s", err, missing)
	}
}

// TestWaitForTopicsOutwaitsASlowBroker: a topic whose partitions get their leaders 16 s after
// the wait starts (a loaded broker that has just created a thousand partitions: the bench's
// 1,000-partition copy met 'still lack a leader for some partition 200 checks after their
// creation' for its offsets topic) is waited for, and its partition count returned.
func TestWaitForTopicsOutwaitsASlowBroker(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	time.AfterFunc(16*time.Second, func() {
		_, _ = kadm.NewClient(cl).CreateTopic(context.Background(), 3, 1, nil, "late")
	})
	n, err := WaitForTopics(context.Background(), cl, "late")
	if err != nil || n["late"] != 3 {
		t.Fatalf("WaitForTopics: %v, %v; want late with 3 partitions", n, err)
	}
}
