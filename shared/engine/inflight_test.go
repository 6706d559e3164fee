package engine

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRefusedRecordFailsBeforeAnswered: a copy on the engine's shared producers waits for its
// own records (pending) and then reads its error; a record the target refused must have
// failed the copy by the time that wait returns. The acknowledgement counted the record as
// answered first and recorded the failure after, so a waiter woken at once (a channel closed
// at zero) read no error: the solo copy of a refused partition then ended with nil
// (TestSharedCopyIsolatesFailures, about 1 run in 15 under CPU load).
func TestRefusedRecordFailsBeforeAnswered(t *testing.T) {
	e := bareEngine(Options{MaxBufferedBytes: 1 << 30, OffsetLagMax: 100})
	ctx := context.Background()
	for i := range 2000 {
		w := &work{tp: TP{"big", 0}, remote: "src.big", end: 1, initPos: -2}
		c := newCopier(&e.core, BurstOptions{}, []*work{w}, readyTopic(25), disabledEmitter())
		c.reuse, c.writeCtx = true, ctx
		st := c.states[0]
		st.ctx = ctx
		r := &kgo.Record{Topic: "big", Value: make([]byte, 64), Offset: 0}
		recordSink{c}.track(st, r, recordSize(r))
		go st.ack(r, kerr.MessageTooLarge)
		if err := (recordSink{c}).flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.error(); !errors.Is(err, kerr.MessageTooLarge) {
			t.Fatalf("run %d: copy error %v once its records were answered; want MESSAGE_TOO_LARGE", i, err)
		}
	}
}

// TestGatherFindsLastArrivalQueued: a copy about to start waits (gather) until no call is on
// its way to the queue; when the last arrival ends, its call must already be queued. A call
// ended its arrival and joined the queue in two steps, so the woken copy could take its batch
// between them and start without it (TestSharedCopyIsolatesFailures: "no shared copy of the
// four partitions failed", the copy had 3).
func TestGatherFindsLastArrivalQueued(t *testing.T) {
	for i := range 2000 {
		r := &copyRuns{} // max 0: no loop starts; the test gathers itself
		left := r.arrive()
		queued := make(chan int)
		go func() {
			all := r.gather()
			r.mu.Lock()
			n := len(r.queue)
			r.mu.Unlock()
			if !all { // gatherMax passed first (a starved machine): no claim on the queue
				n = 1
			}
			queued <- n
		}()
		for waiting := false; !waiting; { // until gather sleeps on arrived (bounded by gatherMax)
			r.mu.Lock()
			waiting = r.arrived != nil
			r.mu.Unlock()
			if !waiting {
				runtime.Gosched()
			}
		}
		left(&copyCall{tp: TP{"t", 0}})
		if n := <-queued; n != 1 {
			t.Fatalf("round %d: gather returned with %d calls queued, want 1 (the last arrival's)", i, n)
		}
	}
}
