package engine

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFakeFirstBurstRidesOutTargetRestartForPositions: a flow's first burst creates the offsets
// topic behind its copy; a target broker restarting meanwhile answers CreateTopics with
// INVALID_REPLICATION_FACTOR (a KRaft broker fenced until it has caught up), retriable. The
// burst must create the topic once the broker is back and store the positions of every record
// the target acknowledged. It took the first answer for the topic's fate: the copy went on,
// every record reached the target, no position could be stored and the burst failed, so the
// next run copied everything again (issue 39, black-box 3: a first burst started 0.6 s before a
// graceful stop of the only target broker, exit 3, then a rerun copied all 600,000 records
// again).
func TestFakeFirstBurstRidesOutTargetRestartForPositions(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 2})
	recs := f.produce("orders", 2, 50)
	refused := f.tgt.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.CreateTopics}, Topic: "mm2-offsets.src.internal",
		Err: kerr.InvalidReplicationFactor, Count: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := f.engine().Burst(ctx, BurstOptions{})
	if err != nil || s.Records != 100 || s.Lag != 0 {
		t.Fatalf("first burst with the offsets topic refused 3 times: %d records, lag %d, %v; want 100, 0, no error", s.Records, s.Lag, err)
	}
	if n := refused.Hits(); n != 3 {
		t.Errorf("the target refused the offsets topic %d times, want 3 (the test's restart)", n)
	}
	f.assertCopied(recs, "src.orders")
	pos := f.positions()
	for p := range int32(2) {
		if got := pos[TP{"orders", p}]; got != 49 {
			t.Errorf("stored position of orders-%d = %d (stored %v), want 49: every record the target acknowledged", p, got, len(pos) > 0)
		}
	}
}
