package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
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
		return failProduce(req, kerr.InvalidRecord.Code), nil, true
	})
	prod := f.client(Target, positionProducerOpts()...)
	var (
		mu   sync.Mutex
		errs []error
	)
	st := &partLedger{w: &work{tp: TP{"orders", 0}, initPos: -1}, lastAcked: 41, lastSeen: 41, written: -1}
	k := newCommitter(&e.core, readyTopic(parts), disabledEmitter(),
		func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() },
		func() []*partLedger { return []*partLedger{st} })
	k.prod = prod
	k.start(ctx)
	defer k.stop()
	for cycle := range 2 {
		if err := k.commit(ctx, commitStart); err != nil { // waits until its positions are answered
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

// TestFakeSlowPositionsTopicDoesNotStallCopy: the offsets topic answering nothing must not stop
// the copy. The committer runs its cycles on a goroutine of its own and holds no lock while one
// waits, so every record reaches the target while every position write is held; once the
// offsets topic answers, the burst's finish stores the final positions and then the final offset
// syncs. The position producer's buffer is held to one record here (the records producer sets
// its own bound), so that a cycle that writes while an earlier position is unanswered blocks in
// Produce at once; with the default buffer (10,000 records) a copy of many partitions gets
// there after a few seconds of a slow offsets topic. Records of 128 KiB under a 1 MiB in-flight
// budget: the copy cannot fetch its last records before 16 MiB are acknowledged, so the
// 8 MiB commit trigger fires at least twice while it copies.
func TestFakeSlowPositionsTopicDoesNotStallCopy(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 2})
	const perPart = 80
	cl := f.client(Source, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for p := range int32(2) {
		for i := range perPart {
			recs = append(recs, &kgo.Record{Topic: "orders", Partition: p, Key: fmt.Appendf(nil, "k%d-%d", p, i),
				Value: bytes.Repeat([]byte{byte(i)}, 128<<10)})
		}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	f.opts.DecodeRecords = true // the record path: its loop checks the commit trigger after every poll
	f.opts.MaxBufferedBytes = 1 << 20
	f.tgtExtra = []kgo.Opt{kgo.MaxBufferedRecords(1)}
	e := f.engine()
	ctx := context.Background()
	if _, _, err := e.positions.ensure(ctx); err != nil {
		t.Fatal(err)
	}
	md, err := f.admin(Target).Metadata(ctx, e.opts.OffsetStorageTopic)
	if err != nil {
		t.Fatal(err)
	}
	offsetsID := md.Topics[e.opts.OffsetStorageTopic].ID
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	defer open()
	var held atomic.Int64
	f.tgt.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.tgt.KeepControl()
		if producesTo(req, e.opts.OffsetStorageTopic, offsetsID) {
			held.Add(1)
			f.tgt.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	type result struct {
		s   Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := e.Burst(ctx, BurstOptions{})
		done <- result{s, err}
	}()
	// Metadata at most 50 ms old: kadm answers from franz-go's cache, which keeps "no such
	// topic" for 5 s by default, and the remote topic is created by the burst.
	adm := kadm.NewClient(f.client(Target, kgo.MetadataMinAge(50*time.Millisecond)))
	deadline := time.Now().Add(30 * time.Second)
	for {
		ends, err := adm.ListEndOffsets(ctx, "src.orders")
		if err == nil && ends.Error() == nil {
			o0, _ := ends.Lookup("src.orders", 0)
			o1, _ := ends.Lookup("src.orders", 1)
			if o0.Offset == perPart && o1.Offset == perPart {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("src.orders end offsets %d and %d after 30 s while the offsets topic held %d produce requests; want %d each (the copy waited behind a position write)",
					o0.Offset, o1.Offset, held.Load(), perPart)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if held.Load() == 0 {
		t.Fatal("no position was written while the copy ran: the test needs a commit cycle during the copy")
	}
	open()
	r := <-done
	if r.err != nil || r.s.Records != 2*perPart || r.s.Reason != ReasonDone {
		t.Fatalf("burst: %+v, %v; want %d records, done", r.s, r.err, 2*perPart)
	}
	pos := f.positions()
	for p := range int32(2) {
		if pos[TP{"orders", p}] != perPart-1 {
			t.Errorf("position of orders-%d = %d, want %d", p, pos[TP{"orders", p}], perPart-1)
		}
	}
	f.assertSyncsEndAt("orders", 2, perPart-1)
}

// TestFakeCommitterEndsWithItsCopy: the committer's goroutine is the copy's: a copy starts it
// when it opens its producers and has stopped it when it returns, and a cycle asked of it
// afterwards is refused instead of waiting for a goroutine that is gone.
func TestFakeCommitterEndsWithItsCopy(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 2})
	f.produce("orders", 2, 50)
	e := f.engine()
	ctx := context.Background()
	c := f.plannedCopier(e, TP{"orders", 0}, TP{"orders", 1})
	select {
	case <-c.alo.stopped:
		t.Fatal("the committer's goroutine ended before the copy started it")
	default:
	}
	s, err := c.run(ctx, time.Now())
	if err != nil || s.Records != 100 {
		t.Fatalf("copy: %+v, %v; want 100 records", s, err)
	}
	select {
	case <-c.alo.stopped:
	default:
		t.Fatal("the committer's goroutine still runs after its copy returned")
	}
	if err := c.commits.commit(ctx, commitRevoke); !errors.Is(err, errCommitterStopped) {
		t.Fatalf("a cycle asked of the stopped committer: %v, want %v", err, errCommitterStopped)
	}
	if pos := f.positions(); pos[TP{"orders", 0}] != 49 || pos[TP{"orders", 1}] != 49 {
		t.Fatalf("positions %v, want 49 for both partitions", pos)
	}
}

// TestFakeCommitterSettlesAfterItsCopy: a copy on serve's shared producers whose records the
// target has not acknowledged when it ends (its grace is 1 ms here, the target holds every
// produce of the remote topic until the copy has returned) keeps its committer until they are:
// then a settle cycle stores their positions, the committer's goroutine ends and the copy's
// partitions are freed (settled), in that order.
func TestFakeCommitterSettlesAfterItsCopy(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 1})
	f.produce("orders", 1, 30)
	e := f.engine()
	ctx := context.Background()
	works, parts, remote := f.plannedCopy(e, TP{"orders", 0})
	md, err := f.admin(Target).Metadata(ctx, "src.orders")
	if err != nil {
		t.Fatal(err)
	}
	remoteID := md.Topics["src.orders"].ID
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	defer open()
	f.tgt.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.tgt.KeepControl()
		if producesTo(req, "src.orders", remoteID) {
			f.tgt.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	syncs, err := e.newSyncEmitter(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer syncs.close()
	settled := make(chan bool, 1) // whether the committer had stopped when the partitions were freed
	var c *copier
	c = newCopier(&e.core, BurstOptions{Grace: time.Millisecond, settled: func() {
		select {
		case <-c.alo.stopped:
			settled <- true
		default:
			settled <- false
		}
	}}, works, readyTopic(parts), syncs)
	c.remote = remote
	c.shareEngineBudget()
	if _, err := c.run(ctx, time.Now()); err == nil {
		t.Fatal("the copy ended without error with every record unacknowledged; the test needs records in flight past its grace")
	}
	if pos, ok := f.positions()[TP{"orders", 0}]; ok {
		t.Fatalf("position %d stored before the target acknowledged any record", pos)
	}
	open()
	select {
	case stopped := <-settled:
		if !stopped {
			t.Fatal("the copy's partitions were freed while its committer still ran")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the copy did not settle within 30 s of the target acknowledging its records")
	}
	if pos := f.positions()[TP{"orders", 0}]; pos != 29 {
		t.Fatalf("position of orders-0 after settling = %d, want 29", pos)
	}
}
