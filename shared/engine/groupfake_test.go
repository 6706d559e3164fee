package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFakeGroupMemberFinishingGetsWork: a burst group member that has copied its partitions
// and is finishing can still be handed a partition with records left (eager rebalancing gives
// every partition out afresh). It copies it before it leaves, instead of leaving it to a group
// whose other members may all be ending. Here member A copies both partitions and, while it
// finishes, new records arrive and member B joins: each gets one partition with work, B copies
// its share and leaves, and A must copy the other.
func TestFakeGroupMemberFinishingGetsWork(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 2})
	first := f.produce("orders", 2, 50)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	aFetched, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var a Summary
	var aErr error
	aDone := make(chan struct{})
	go func() {
		defer close(aDone)
		a, aErr = f.engine().Burst(ctx, BurstOptions{Group: "g", fetched: func() {
			once.Do(func() { close(aFetched) })
			select { // hold A between its copy loop and its finish
			case <-release:
			case <-ctx.Done():
			}
		}})
	}()
	select {
	case <-aFetched:
	case <-ctx.Done():
		t.Fatal("member A never finished its copy loop")
	}

	// New records for both partitions, then member B joins and takes one of them.
	cl := f.client(Source, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var late []*kgo.Record
	for p := range int32(2) {
		for i := range 20 {
			late = append(late, &kgo.Record{Topic: "orders", Partition: p, Key: fmt.Appendf(nil, "late%d-%d", p, i), Value: []byte("v")})
		}
	}
	if err := cl.ProduceSync(ctx, late...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	b, err := f.engine().Burst(ctx, BurstOptions{Group: "g"})
	if err != nil {
		t.Fatalf("member B: %v (%+v)", err, b)
	}
	close(release)
	<-aDone
	if aErr != nil {
		t.Fatalf("member A: %v (%+v)", aErr, a)
	}
	t.Logf("member A copied %d (%s, lag %d), member B %d (%s, lag %d)", a.Records, a.Reason, a.Lag, b.Records, b.Reason, b.Lag)
	if b.Records != 20 {
		t.Errorf("member B copied %d records, want its partition's 20 new ones", b.Records)
	}
	if a.Records != 120 {
		t.Errorf("member A copied %d records, want 100 and then the 20 new ones of the partition it was given while finishing", a.Records)
	}
	f.assertCopied(append(first, late...), "src.orders")
}

// TestFakeGroupLastMemberOutCopiesWhatIsLeft: a burst group member that has decided it is done
// can still be handed a partition with records left before it has left the group: here member
// B (a plain group member that copies nothing, as a member that ends on a budget or that is
// itself past that decision) holds one of the two partitions and leaves while A finishes, and
// the group hands it to A. The last member out must not end the burst as done with records
// left to nobody: every record of the backlog seen at A's start is on the target when A
// returns.
func TestFakeGroupLastMemberOutCopiesWhatIsLeft(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 2})
	recs := f.produce("orders", 2, 50)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// B joins first with the burst's protocol and gets both partitions.
	bAssigned := make(chan struct{}, 8)
	b := f.client(Source, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("orders"), kgo.Balancers(kgo.StickyBalancer()),
		kgo.DisableAutoCommit(), kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			if len(m["orders"]) > 0 {
				bAssigned <- struct{}{}
			}
		}))
	go b.PollFetches(ctx) // joins the group
	select {
	case <-bAssigned:
	case <-ctx.Done():
		t.Fatal("member B was never assigned a partition")
	}

	// A joins: the group splits the two partitions, A copies its own and decides it is done;
	// B leaves while A has not left yet.
	leaving, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var a Summary
	var aErr error
	aDone := make(chan struct{})
	go func() {
		defer close(aDone)
		a, aErr = f.engine().Burst(ctx, BurstOptions{Group: "g", leaving: func() {
			once.Do(func() {
				close(leaving)
				select {
				case <-release:
				case <-ctx.Done():
				}
			})
		}})
	}()
	select {
	case <-leaving:
	case <-ctx.Done():
		t.Fatal("member A never finished its share")
	}
	b.Close() // waits until B has left the group
	close(release)
	<-aDone
	if aErr != nil {
		t.Fatalf("member A: %v (%+v)", aErr, a)
	}
	t.Logf("member A copied %d (%s, lag %d)", a.Records, a.Reason, a.Lag)
	f.assertCopied(recs, "src.orders")
	if a.Records != 100 {
		t.Errorf("member A copied %d records, want its own partition's 50 and then the 50 of the partition B left", a.Records)
	}
}
