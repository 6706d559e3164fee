package engine

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFakeCommitterCancelWritesAgain: a position whose write the target refuses is cancelled
// (Connect's cancelFlush): the copy fails, and the next cycle writes the position again instead
// of counting it as stored. The target answers the first produce of positions
// INVALID_RECORD (ControlKey). Before the committer, the ledger counted the refused position
// as written, and the next cycle wrote nothing: no position stored for orders-0.
func TestFakeCommitterCancelWritesAgain(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 1})
	e := f.engine()
	ctx := context.Background()
	parts, _, err := e.positions.ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.tgt.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		pr := req.(*kmsg.ProduceRequest)
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range pr.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.InvalidRecord.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	prod := f.client(Target, positionProducerOpts()...)
	var (
		mu   sync.Mutex
		errs []error
	)
	st := &partLedger{w: &work{tp: TP{"orders", 0}, initPos: -1}, lastAcked: 41, lastSeen: 41, written: -1}
	k := &committer{e: e, offsets: readyTopic(parts), prod: prod,
		fail:    func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() },
		ledgers: func() []*partLedger { return []*partLedger{st} }}
	for cycle := range 2 {
		if err := k.commit(ctx, commitStart); err != nil {
			t.Fatal(err)
		}
		if err := k.flush(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		n := len(errs)
		mu.Unlock()
		if cycle == 0 && (n != 1 || !errors.Is(errs[0], kerr.InvalidRecord)) {
			t.Fatalf("first cycle: errors %v, want the refused position's INVALID_RECORD", errs)
		}
	}
	if got, ok := f.positions()[TP{"orders", 0}]; !ok || got != 41 {
		t.Fatalf("stored position of orders-0 = %d (stored %v), want 41 written again by the second cycle", got, ok)
	}
}
