package engine

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mm2go/mm2go/shared/mm2"
)

// Regression tests of the engine's contracts with its callers and users, on kfake: each one
// failed on the engine before the fix named in its comment.

// TestFakeUserDeliveryTimeoutHonoured: an option the dial function gives (applied before the
// engine's own options, as shared/app's Dialer does; a delivery timeout here, though shared/config
// no longer maps producer.delivery.timeout.ms to one) stays on every records producer the engine
// dials: a burst's, the warmed one and serve's long-lived one. Before the fix the engine
// appended RecordDeliveryTimeout(0) and so overrode it in silence (got 0s).
func TestFakeUserDeliveryTimeoutHonoured(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 1})
	const want = 7 * time.Second
	f.extra = []kgo.Opt{kgo.RecordDeliveryTimeout(want)}
	e := f.engine()
	ctx := context.Background()
	prod, _, err := e.reuse.producers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	warmed, _ := e.runner.warmProducer(ctx)
	if warmed == nil {
		t.Fatal("no warmed producer")
	}
	defer warmed.Close()
	for name, cl := range map[string]*kgo.Client{"serve's records producer": prod, "a burst's records producer": warmed} {
		if got, _ := cl.OptValue(kgo.RecordDeliveryTimeout).(time.Duration); got != want {
			t.Errorf("%s: delivery timeout %v, want the user's %v", name, got, want)
		}
	}
}

// readSyncs returns the offset syncs on the flow's offset-syncs topic (on the source), by
// source partition of topic, in the order written.
func (f *fakeFlow) readSyncs(topic string) map[int32][]mm2.OffsetSync {
	f.t.Helper()
	out := map[int32][]mm2.OffsetSync{}
	for _, r := range f.readAll(Source, "mm2-offset-syncs.tgt.internal") {
		sy, err := mm2.DecodeOffsetSync(r.Key, r.Value)
		if err != nil {
			f.t.Fatalf("offset sync %q/%q: %v", r.Key, r.Value, err)
		}
		if sy.Topic == topic {
			out[sy.Partition] = append(out[sy.Partition], sy)
		}
	}
	return out
}

// TestFakeEachCopyOwnsItsOffsetSyncs: serve's copies share the offset-sync rules (one
// long-lived writer, as one MirrorSourceTask), but each copy sends only the syncs of its own
// partitions, so a copy's finish returns once its own syncs are acknowledged and writes no
// other copy's (mirrorevents' WriteAt promise). Before the fix the shared writer's
// TakePending and PromoteDelayed took every partition's syncs: copy B's finish wrote copy A's
// delayed sync (orders-0 1->1) under B's context, and A's finish then had nothing of its own
// to wait for.
func TestFakeEachCopyOwnsItsOffsetSyncs(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 2})
	e := f.engine()
	ctx := context.Background()
	a, err := e.reuse.syncEmitter(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	b, err := e.reuse.syncEmitter(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	pa, pb := a.partition(TP{"orders", 0}), b.partition(TP{"orders", 1})
	a.recordAt(ctx, pa, 0, 0) // due at once: the partition's first sync
	a.recordAt(ctx, pa, 1, 1) // delayed until a finish promotes it
	b.recordAt(ctx, pb, 0, 0)
	b.recordAt(ctx, pb, 1, 1)
	if err := b.finish(ctx); err != nil {
		t.Fatal(err)
	}
	got := f.readSyncs("orders")
	if last := got[1]; len(last) == 0 || last[len(last)-1].UpstreamOffset != 1 {
		t.Fatalf("after B's finish, syncs of B's orders-1: %+v; want 1->1 last", last)
	}
	for _, sy := range got[0] {
		if sy.UpstreamOffset == 1 {
			t.Fatalf("B's finish wrote A's sync %+v (orders-0 belongs to copy A)", sy)
		}
	}
	if err := a.finish(ctx); err != nil {
		t.Fatal(err)
	}
	if last := f.readSyncs("orders")[0]; len(last) == 0 || last[len(last)-1].UpstreamOffset != 1 {
		t.Fatalf("after A's finish, syncs of orders-0: %+v; want 1->1 last", last)
	}
}

// TestFakeSlowSyncsTopicDoesNotStallCopy: the offset-syncs topic (on the source by default)
// answering nothing must not stop the target's acknowledgements: outstanding syncs are capped
// (per partition and per producer, below its buffer) and a sync that finds no permit waits in the writer instead of blocking
// the producer's promise, so every record is acknowledged and every position stored while the
// syncs topic holds every request, and once it answers the final sync of every partition is
// written. The syncs producer's buffer is held to 50 records here so that the old engine's
// stall shows with few records. Before the fix the promise blocked in the syncs producer's
// Produce once 50 syncs waited: the positions stayed below the end (and the copy finished only
// after the syncs topic answered again).
func TestFakeSlowSyncsTopicDoesNotStallCopy(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 2})
	f.produce("orders", 2, 500)
	f.opts.OffsetLagMax = 1     // a sync due every other record
	f.opts.DecodeRecords = true // the record path: its promise registers the syncs
	f.extra = []kgo.Opt{kgo.MaxBufferedRecords(50)}
	release := make(chan struct{})
	var held atomic.Int64
	f.src.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		f.src.KeepControl()
		held.Add(1)
		f.src.SleepControl(func() { <-release })
		return nil, nil, false
	})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	defer open()
	done := burstInBackground(f.engine())
	// A commit cycle stores positions before it sends offset syncs, so the positions can be at
	// the end a moment before the first sync reaches the held syncs topic: wait for both.
	deadline := time.Now().Add(30 * time.Second)
	for {
		pos := f.positions()
		if pos[TP{"orders", 0}] == 499 && pos[TP{"orders", 1}] == 499 && held.Load() > 0 {
			break
		}
		if time.Now().After(deadline) {
			if held.Load() == 0 {
				t.Fatalf("no offset sync was sent while the syncs topic was slow (positions %v)", pos)
			}
			t.Fatalf("positions %v while the syncs topic held %d produce requests; want 499 for both partitions", pos, held.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
	open()
	r := <-done
	if r.err != nil || r.s.Records != 1000 {
		t.Fatalf("burst: %+v, %v; want 1000 records", r.s, r.err)
	}
	for p, ss := range f.readSyncs("orders") {
		if last := ss[len(ss)-1]; last.UpstreamOffset != 499 || last.DownstreamOffset != 499 {
			t.Errorf("last offset sync of orders-%d: %+v, want 499->499", p, last)
		}
	}
	if n := len(f.readSyncs("orders")); n != 2 {
		t.Errorf("offset syncs of %d partitions, want 2", n)
	}
}

// TestFakeReuseLockNotHeldAcrossIO: serve's shared state (reuse.mu) is never held while a
// request is out, so a copy that only reads a recent check does not wait behind another
// copy's network I/O: here the offset-syncs topic's creation on the source, held until the
// read returned, and the engine's closing flush of the last offset syncs. Before the fix
// reusedSyncEmitter created the topic under reuse.mu and preparedRecently waited for it (the
// test gave up after 10 s with the CreateTopics request still held).
func TestFakeReuseLockNotHeldAcrossIO(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 1})
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	defer open()
	arrived := make(chan struct{}, 1)
	f.src.ControlKey(int16(kmsg.CreateTopics), func(kmsg.Request) (kmsg.Response, error, bool) {
		f.src.KeepControl()
		select {
		case arrived <- struct{}{}:
		default:
		}
		f.src.SleepControl(func() { <-release })
		return nil, nil, false
	})
	e := f.engine()
	ctx := context.Background()
	emitted := make(chan error, 1)
	go func() {
		s, err := e.reuse.syncEmitter(ctx, false)
		if err == nil {
			s.close()
		}
		emitted <- err
	}()
	select {
	case <-arrived:
	case err := <-emitted:
		t.Fatalf("the offset-syncs topic was not created: %v", err)
	}
	read := make(chan struct{})
	go func() {
		e.reuse.preparedRecently("orders", 1)
		close(read)
	}()
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		t.Fatal("preparedRecently waited behind the offset-syncs topic's creation (reuse.mu held across I/O)")
	}
	open()
	if err := <-emitted; err != nil {
		t.Fatal(err)
	}
}

// TestFakeForwarderLeavesSharedStateAlone: what the copier's ownership comments say is fixed
// once a copy starts stays fixed while batches are forwarded: every partition's work (its
// start offset: the forwarder's handover offset is the partition state's, under its lock) and
// the copier's in-flight budget (the forwarder's larger budget is its own), so any goroutine
// may read them at any time. Before the fix the forwarder moved w.start to its handover offset
// (start 200 after forwarding, want 0) and doubled c.budget for its run, a data race with
// every reader outside the fetch loop (go test -race: "race detected").
func TestFakeForwarderLeavesSharedStateAlone(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 2})
	f.produce("orders", 2, 200)
	e := f.engine()
	ctx := context.Background()
	c := f.plannedCopier(e, TP{"orders", 0}, TP{"orders", 1})
	c.forward = true
	works := make([]*work, 0, len(c.states))
	for _, st := range c.states {
		works = append(works, st.w)
	}
	budget := c.budget
	stop := make(chan struct{})
	var seen sync.WaitGroup
	seen.Go(func() { // a reader outside the fetch loop, as the producer's promise is
		for {
			select {
			case <-stop:
				return
			default:
			}
			if b := c.bound(); b != budget && b != startInflightBytes {
				t.Errorf("in-flight bound %d during the copy, want %d", b, budget)
				return
			}
			for _, w := range works {
				if w.start != 0 {
					t.Errorf("work of %s starts at %d during the copy, want 0", w.tp, w.start)
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	})
	s, err := c.run(ctx, time.Now())
	close(stop)
	seen.Wait()
	if err != nil || s.Records != 400 {
		t.Fatalf("copy: %+v, %v; want 400 records", s, err)
	}
	if s.ForwardedRecords == 0 {
		t.Fatalf("no batch forwarded (%+v): the test needs the forwarder", s)
	}
	for _, w := range works {
		if w.start != 0 {
			t.Errorf("work of %s starts at %d after forwarding, want 0 (works never change)", w.tp, w.start)
		}
	}
}

// TestFakeSyncHistoryKeptThroughAckBursts: a forwarded batch acknowledges a partition's 5,000
// records at once, so 50 offset syncs (offset.lag.max 100) fall due together while the syncs
// topic is slow. Each must still be written (the producer-wide permits keep Produce from
// blocking), so that a group at 3,001 translates through a sync at most offset.lag.max records
// before it. With ten permits per partition the first ten went out and the others replaced
// each other until the final one: the newest sync at or before 3,001 was at 900.
func TestFakeSyncHistoryKeptThroughAckBursts(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 1})
	f.produce("orders", 1, 5000)
	f.opts.OffsetLagMax = 100
	open, done := f.burstWithSyncsHeld()
	defer open()
	deadline := time.Now().Add(30 * time.Second)
	for f.positions()[TP{"orders", 0}] != 4999 {
		if time.Now().After(deadline) {
			t.Fatalf("positions %v with the syncs topic held; want 4999", f.positions())
		}
		time.Sleep(20 * time.Millisecond)
	}
	open()
	if r := <-done; r.err != nil {
		t.Fatal(r.err)
	}
	var before int64 = -1
	for _, sy := range f.readSyncs("orders")[0] {
		if sy.UpstreamOffset <= 3001 && sy.UpstreamOffset > before {
			before = sy.UpstreamOffset
		}
	}
	if 3001-before > f.opts.OffsetLagMax {
		t.Errorf("newest offset sync at or before 3001 is at %d: %d records to re-read, want at most %d", before, 3001-before, f.opts.OffsetLagMax)
	}
}

// bufferedMax is a produce hook that keeps the most records its client ever held buffered,
// and how many it was given in all.
type bufferedMax struct {
	mu              sync.Mutex
	now, max, total int
}

func (b *bufferedMax) OnProduceRecordBuffered(*kgo.Record) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.now++
	b.total++
	b.max = max(b.max, b.now)
}

func (b *bufferedMax) OnProduceRecordUnbuffered(*kgo.Record, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.now--
}

func (b *bufferedMax) most() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.max
}

func (b *bufferedMax) all() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// TestFakeFinalSyncsTakePermits: finish writes the final offset sync of every partition within
// the syncs producer's permits (half its record buffer), as the per-record path does, so the
// producer's buffer never fills. finish used to produce them without permits: with the syncs
// topic slow and more partitions than free permits it filled the buffer, and a producer promise
// that sent a sync then (the copy's records' promises, a sync's own) blocked its client.
func TestFakeFinalSyncsTakePermits(t *testing.T) {
	const parts = 6
	f := newFakeFlow(t, map[string]int32{"orders": parts})
	f.produce("orders", parts, 20)
	f.opts.OffsetLagMax = 1
	buffered := &bufferedMax{}
	// Only the offset-syncs producer produces on the source: 4 records buffered, 2 permits.
	f.srcExtra = []kgo.Opt{kgo.MaxBufferedRecords(4), kgo.WithHooks(buffered)}
	open, done := f.burstWithSyncsHeld()
	defer open()
	deadline := time.Now().Add(30 * time.Second)
	for {
		pos := f.positions()
		at := 0
		for p := range int32(parts) {
			if pos[TP{"orders", p}] == 19 {
				at++
			}
		}
		if at == parts {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("positions %v with the syncs topic held; want 19 for all %d partitions", pos, parts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	open()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the burst did not end within 30 s of the syncs topic answering (the syncs producer buffered %d records, its permits are 2)", buffered.most())
	}
	if most := buffered.most(); most > 2 {
		t.Errorf("the offset-syncs producer buffered %d records, more than its 2 permits (half its buffer of 4)", most)
	}
	for p, ss := range f.readSyncs("orders") {
		if last := ss[len(ss)-1]; last.UpstreamOffset != 19 || last.DownstreamOffset != 19 {
			t.Errorf("last offset sync of orders-%d: %+v, want 19->19", p, last)
		}
	}
	if n := len(f.readSyncs("orders")); n != parts {
		t.Errorf("offset syncs of %d partitions, want %d", n, parts)
	}
}

// burstResult is the outcome of a burst run in the background.
type burstResult struct {
	s   Summary
	err error
}

// burstInBackground runs a burst of e in a goroutine of its own; done gets its outcome.
func burstInBackground(e *Engine) (done <-chan burstResult) {
	ch := make(chan burstResult, 1)
	go func() {
		s, err := e.Burst(context.Background(), BurstOptions{})
		ch <- burstResult{s, err}
	}()
	return ch
}

// burstWithSyncsHeld starts a burst of f while the source (where only the offset-syncs
// producer produces) holds every produce request until open is called; done gets the burst's
// outcome.
func (f *fakeFlow) burstWithSyncsHeld() (open func(), done <-chan burstResult) {
	release := make(chan struct{})
	var once sync.Once
	open = func() { once.Do(func() { close(release) }) }
	f.src.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		f.src.KeepControl()
		f.src.SleepControl(func() { <-release })
		return nil, nil, false
	})
	return open, burstInBackground(f.engine())
}

// TestFakeFinalSyncsWaitIsBounded: a syncs topic that never answers costs the end of a burst
// a bounded wait, not the copy: the burst ends without error, every record copied and every
// position stored, and its summary names the partitions whose final sync is unconfirmed.
// finish used to wait for them as long as for the positions (finishWaitMax, two minutes).
func TestFakeFinalSyncsWaitIsBounded(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 2})
	f.produce("orders", 2, 50)
	open, done := f.burstWithSyncsHeld() // never opened while the burst runs
	defer open()
	var r burstResult
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the burst did not end within 30 s while the offset-syncs topic answered nothing (positions %v)", f.positions())
	}
	if r.err != nil || r.s.Records != 100 || r.s.Lag != 0 {
		t.Fatalf("burst: %d records, lag %d, error %v; want 100, 0, none", r.s.Records, r.s.Lag, r.err)
	}
	if pos := f.positions(); pos[TP{"orders", 0}] != 49 || pos[TP{"orders", 1}] != 49 {
		t.Errorf("positions %v, want 49 for both partitions", pos)
	}
	if want := []string{"orders-0", "orders-1"}; !slices.Equal(r.s.SyncsUnconfirmed, want) {
		t.Errorf("summary's offset_syncs_unconfirmed: %q, want %q", r.s.SyncsUnconfirmed, want)
	}
}

// TestFakeFinalSyncsOutliveTheirWait: finish's bound ends only its own wait. The offset-syncs
// broker holds the first final sync past the bound and then answers it with a retriable error;
// the other partition's final sync finds no permit within the bound. finish reports both
// partitions unconfirmed without error, and afterwards, the copy's context still alive, the
// first sync is retried and written and the second is still pending in the writer (a shared
// writer's next send writes it). Produced under the bound, the first failed with "context
// deadline exceeded" once franz-go saw the bound had ended (and, answered a moment sooner,
// failed the copy), and the second was taken from the writer and dropped.
func TestFakeFinalSyncsOutliveTheirWait(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 2})
	const topic = "mm2-offset-syncs.tgt.internal"
	f.createTopic(Source, topic, 1, nil)
	release := make(chan struct{})
	var refused atomic.Bool
	f.src.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.src.KeepControl()
		f.src.SleepControl(func() { <-release })
		if refused.CompareAndSwap(false, true) {
			return failProduce(req, kerr.NotLeaderForPartition.Code), nil, true
		}
		return nil, nil, false
	})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	gate := newSyncGate(nil)
	// A buffer of two records: one permit, so the second final sync waits for the first.
	cl := f.client(Source, append(syncProducerOpts(0, gate), kgo.MaxBufferedRecords(2))...)
	e := bareEngine(Options{OffsetLagMax: 100})
	s := newEmitter(&e.core, cl, topic, false, nil, gate.size(cl))
	ctx := context.Background()
	parts := []*syncPartition{s.partition(TP{"orders", 0}), s.partition(TP{"orders", 1})}
	for _, p := range parts {
		p.h.Record(9, 19) // the first record of a partition: its sync is due
	}
	if err := s.finish(ctx); err != nil {
		t.Fatalf("finish with the syncs broker silent: %v, want no error", err)
	}
	if want := []string{"orders-0", "orders-1"}; !slices.Equal(s.unconfirmed, want) {
		t.Fatalf("unconfirmed final syncs %q, want %q", s.unconfirmed, want)
	}
	close(release)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := cl.Flush(wctx); err != nil { // the first sync's answer frees the permit
		t.Fatalf("flushing the syncs producer: %v", err)
	}
	if err := s.send(wctx, false); err != nil { // a commit tick after finish
		t.Fatalf("sending the syncs left pending after finish: %v", err)
	}
	if err := cl.Flush(wctx); err != nil {
		t.Fatalf("flushing the syncs producer: %v", err)
	}
	if err := s.error(); err != nil || s.sent != 2 {
		t.Errorf("after the bound, with the copy's context alive: %d final syncs written, error %v; want both written, no error", s.sent, err)
	}
}

// TestSyncGateStaysThrottledForARound: the offset-syncs producer's throttled mode ends with an
// answer that comes after the throttle has passed and at least throttledSyncRound after it
// began, not with the first answer after a short throttle: Kafka measures a quota over its
// window, and the syncs handed over freely at once drew a throttle of seconds that the final
// syncs waited behind (the slow-syncs bench: 86 ms, then 1.47 s, a 4.6 s run against 1.1 s).
func TestSyncGateStaysThrottledForARound(t *testing.T) {
	g := newSyncGate(nil)
	g.OnBrokerThrottle(kgo.BrokerMetadata{}, 10*time.Millisecond, true)
	time.Sleep(20 * time.Millisecond) // the throttle passes
	g.answered()
	if !g.throttled.Load() {
		t.Fatalf("an answer %v after a 10 ms throttle ended the throttled mode; want it kept until %v after the throttle", 20*time.Millisecond, throttledSyncRound)
	}
	g.throttledAt.Store(time.Now().Add(-throttledSyncRound).UnixNano()) // a round has passed
	g.answered()
	if g.throttled.Load() {
		t.Fatalf("an answer %v after the throttle kept the throttled mode; want it ended", throttledSyncRound)
	}
}

// TestThrottledSyncsWaitForARound: while the broker throttles the offset-syncs producer, the
// per-record path hands no sync to it (each would extend the throttle that the final syncs wait
// behind); a commit tick sends the newest sync of the partitions once the throttle has passed,
// and no other tick within throttledSyncRound.
func TestThrottledSyncsWaitForARound(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 4})
	buffered := &bufferedMax{}
	cl := f.client(Source, kgo.WithHooks(buffered), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	e := bareEngine(Options{OffsetLagMax: 10})
	s := newEmitter(&e.core, cl, "mm2-offset-syncs.tgt.internal", false, nil, nil)
	ctx := context.Background()
	parts := make([]*syncPartition, 4)
	for i := range parts {
		parts[i] = s.partition(TP{"orders", int32(i)})
	}
	s.gate.OnBrokerThrottle(kgo.BrokerMetadata{}, 50*time.Millisecond, true)
	for off := range int64(100) {
		for _, p := range parts {
			s.recordAt(ctx, p, off, off)
		}
	}
	if n := buffered.all(); n != 0 {
		t.Fatalf("while throttled the per-record path handed %d syncs to the producer, want 0", n)
	}
	if err := s.send(ctx, false); err != nil {
		t.Fatal(err)
	}
	if n := buffered.all(); n != 0 {
		t.Fatalf("a commit tick within the throttle handed %d syncs to the producer, want 0", n)
	}
	time.Sleep(60 * time.Millisecond) // the throttle passes
	if err := s.send(ctx, false); err != nil {
		t.Fatal(err)
	}
	if n := buffered.all(); n != len(parts) {
		t.Fatalf("the commit tick after the throttle handed %d syncs to the producer, want the newest of each of the %d partitions", n, len(parts))
	}
	for off := int64(100); off < 200; off++ {
		for _, p := range parts {
			s.recordAt(ctx, p, off, off)
		}
	}
	if err := s.send(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := buffered.all(); n != len(parts) {
		t.Errorf("a second commit tick within %s of the first handed syncs too: %d in all, want %d", throttledSyncRound, n, len(parts))
	}
}
