package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFakeGroupMemberFinishingGetsWork: a burst group member that has copied its partitions
// and is finishing can still be handed a partition with records left (eager rebalancing gives
// every partition out afresh). It copies it before it leaves, instead of leaving it to a group
// whose other members may all be ending. Here member A copies both partitions and, while it
// finishes, new records arrive and member B joins: each gets one partition with work, B copies
// its share and leaves, and A must copy the other.
func TestFakeGroupMemberFinishingGetsWork(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 2})
	f.fastGroups()
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
	late := f.produceLate(ctx)
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
	f.assertLagReported("orders", a, b)
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
	f.fastGroups()
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
	f.assertLagReported("orders", a)
	f.assertCopied(recs, "src.orders")
	if a.Records != 100 {
		t.Errorf("member A copied %d records, want its own partition's 50 and then the 50 of the partition B left", a.Records)
	}
}

// TestFakeGroupMemberLagIsItsOwn: a burst group member whose partitions are revoked while it
// copies them (a second member joins) hands the records left to the group; whoever is assigned
// them next copies them, and they are not the lag of the member they were revoked from. Both
// members end done with every record copied, and neither reports lag. Member A copies both
// partitions slowly (the target answers each of its produce requests late, until its
// partitions are revoked, and A may have 1 KiB in flight) while member B joins.
func TestFakeGroupMemberLagIsItsOwn(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 2})
	f.fastGroups()
	cl := f.client(Source, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for i := range 50 { // batches of 20 records, so that a fetch of 1 KiB brings few
		batch := make([]*kgo.Record, 0, 40)
		for p := range int32(2) {
			for j := range 20 {
				batch = append(batch, &kgo.Record{Topic: "orders", Partition: p, Key: fmt.Appendf(nil, "k%d-%d-%d", p, i, j), Value: []byte("value")})
			}
		}
		if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, batch...)
	}
	f.opts.MaxBufferedBytes, f.opts.FetchMaxBytes = 1024, 1024

	// The target answers each produce request of the copy 200 ms late until A's partitions are
	// revoked: A alone would copy the 2,000 records in several seconds, far longer than B takes
	// to join (B starts once A has produced) and A to notice (a heartbeat). After that, the
	// copy runs at full speed.
	produced, revoked := make(chan struct{}), make(chan struct{})
	var producedOnce, revokedOnce sync.Once
	f.tgt.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		for _, tp := range req.(*kmsg.ProduceRequest).Topics { // by topic ID in newer versions: look for the keys
			for _, p := range tp.Partitions {
				if bytes.Contains(p.Records, []byte("k0-")) || bytes.Contains(p.Records, []byte("k1-")) {
					producedOnce.Do(func() { close(produced) })
					f.tgt.SleepControl(func() {
						select {
						case <-revoked:
						case <-time.After(200 * time.Millisecond):
						}
					})
					return nil, nil, false
				}
			}
		}
		return nil, nil, false
	})
	ea, err := New(context.Background(), f.opts, f.dial, slog.New(signalOn{f.logs, "burst group revoking partitions",
		func() { revokedOnce.Do(func() { close(revoked) }) }}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ea.Close)

	a, b := joinWhileCopying(t, ctx, ea, f.engine(), produced, ": the records left of partitions revoked from it were the other member's")
	f.assertLagReported("orders", a, b)
	if b.Records == 0 {
		t.Errorf("member B copied nothing: member A copied all %d records before B's join revoked anything, which this test does not cover", a.Records)
	}
	f.assertCopied(recs, "src.orders")
}

// TestFakeGroupRevokedWhileFinishingIsHandedOverStored: a rebalance can revoke the partitions
// of a burst group member while it finishes (its loop has ended, its last records are still in
// flight). The group must get them only once those records are written and their positions
// stored: the member that gets them next starts from the stored positions, and copied the
// records in flight a second time before. Here the target holds member A's first produce
// request until A's revocation waits for it, or until member B has its assignment (which only
// a revocation that does not wait lets happen first).
func TestFakeGroupRevokedWhileFinishingIsHandedOverStored(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 2})
	f.fastGroups()
	recs := f.produce("orders", 2, 100)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hold := make(chan struct{})
	var released sync.Once
	release := func() { released.Do(func() { close(hold) }) }
	t.Cleanup(release)
	var held atomic.Bool
	f.tgt.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		for _, tp := range req.(*kmsg.ProduceRequest).Topics { // by topic ID in newer versions: look for the keys
			for _, p := range tp.Partitions {
				if (bytes.Contains(p.Records, []byte("k0-")) || bytes.Contains(p.Records, []byte("k1-"))) && held.CompareAndSwap(false, true) {
					f.tgt.SleepControl(func() { <-hold })
				}
			}
		}
		return nil, nil, false
	})
	ea, err := New(context.Background(), f.opts, f.dial, slog.New(signalOn{f.logs, "burst group revoking partitions", release}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ea.Close)
	eb, err := New(context.Background(), f.opts, f.dial, slog.New(signalOn{f.logs, "partitions assigned by burst group", release}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eb.Close)
	bDone := make(chan Summary, 1)
	var bErr error
	var once sync.Once
	aDone := make(chan struct{})
	var a Summary
	var aErr error
	go func() {
		defer close(aDone)
		a, aErr = ea.Burst(ctx, BurstOptions{Group: "g", fetched: func() {
			once.Do(func() { // A's loop has produced every record; the first request is held
				go func() {
					s, err := eb.Burst(ctx, BurstOptions{Group: "g"})
					bErr = err
					bDone <- s
				}()
			})
		}})
	}()
	<-aDone
	b := <-bDone
	if aErr != nil || bErr != nil {
		t.Fatalf("member A: %v, member B: %v", aErr, bErr)
	}
	t.Logf("member A copied %d (%s, lag %d), member B %d (%s, lag %d)", a.Records, a.Reason, a.Lag, b.Records, b.Reason, b.Lag)
	f.assertLagReported("orders", a, b)
	f.assertCopied(recs, "src.orders")
}

// TestFakeGroupPartitionBackIsPlannedFromStore: a partition that comes back to a burst group
// member after another member copied it further in between is planned from the offsets topic,
// not from what this member stored before it was revoked. Member A copies both partitions and
// is held while it finishes; new records arrive and member B joins (each gets one partition),
// copies its share and leaves, and the group hands B's partition back to A while A is still
// held. Once released, A copies the new records of its own partition only: B's partition has
// none left.
func TestFakeGroupPartitionBackIsPlannedFromStore(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 2})
	f.fastGroups()
	first := f.produce("orders", 2, 50)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// A logs to a handler of its own: its assignments are counted apart from B's.
	aLogs := &lineCounter{}
	ea, err := New(context.Background(), f.opts, f.dial, slog.New(aLogs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ea.Close)
	bothAssigned := func(lines, attrs []string) int { // A's assignments of both partitions
		return countOf(lines, attrs, "partitions assigned by burst group", "partitions=2 ")
	}

	aFetched, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var a Summary
	var aErr error
	aDone := make(chan struct{})
	go func() {
		defer close(aDone)
		a, aErr = ea.Burst(ctx, BurstOptions{Group: "g", fetched: func() {
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
	aLogs.mu.Lock()
	n := bothAssigned(aLogs.lines, aLogs.attrs)
	aLogs.mu.Unlock()
	if n != 1 {
		t.Fatalf("member A was assigned both partitions %d times before B joined, want once", n)
	}

	late := f.produceLate(ctx)
	b, err := f.engine().Burst(ctx, BurstOptions{Group: "g"})
	if err != nil {
		t.Fatalf("member B: %v (%+v)", err, b)
	}
	// B has left; A (still held, its loop ended) gets both partitions again.
	aLogs.await(ctx, t, "member A to be assigned B's partition back", func(lines, attrs []string) bool { return bothAssigned(lines, attrs) >= 2 })
	close(release)
	<-aDone
	if aErr != nil {
		t.Fatalf("member A: %v (%+v)", aErr, a)
	}
	t.Logf("member A copied %d (%s, lag %d), member B %d (%s, lag %d)", a.Records, a.Reason, a.Lag, b.Records, b.Reason, b.Lag)
	f.assertLagReported("orders", a, b)
	f.assertCopied(append(first, late...), "src.orders")
	if b.Records != 20 || a.Records != 120 {
		t.Errorf("member A copied %d records and B %d, want 100 and the 20 new ones of A's partition, and B the 20 of its own", a.Records, b.Records)
	}
}

// groupHeartbeat is the heartbeat interval of the burst group members in these tests, set
// through the dial function (the engine leaves a group member's timings to it). A member
// learns of a rebalance at its next heartbeat, so with franz-go's 3 s every join or leave of
// another member cost a test up to 3 s of waiting; the tests' outcomes do not depend on it.
const groupHeartbeat = 50 * time.Millisecond

// fastGroups has every source client the engine dials heartbeat every groupHeartbeat.
func (f *fakeFlow) fastGroups() {
	f.srcExtra = append(f.srcExtra, kgo.HeartbeatInterval(groupHeartbeat))
}

// assertLagReported checks the burst group members' summaries against what they left: the
// records of topic on the source (its end offsets) that the target does not hold (distinct
// keys per partition; the tests' keys are unique) must be reported as lag by the members
// together. A member that ends "done, lag 0" while records it owned at its end are left to
// nobody fails this.
func (f *fakeFlow) assertLagReported(topic string, members ...Summary) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := f.admin(Source).ListEndOffsets(ctx, topic)
	if err != nil {
		f.t.Fatal(err)
	}
	held := map[int32]map[string]bool{}
	for _, r := range f.readAll(Target, "src."+topic) {
		if held[r.Partition] == nil {
			held[r.Partition] = map[string]bool{}
		}
		held[r.Partition][string(r.Key)] = true
	}
	var left int64
	ends.Each(func(o kadm.ListedOffset) {
		left += max(0, o.Offset-int64(len(held[o.Partition])))
	})
	var reported int64
	var each []string
	for _, s := range members {
		if ts := s.Topics[topic]; ts != nil {
			reported += ts.Lag
		}
		each = append(each, fmt.Sprintf("%s lag %d", s.Reason, s.Lag))
	}
	if left > reported {
		f.t.Errorf("%d records of %s are on the source and not on the target, but the members reported lag %d (%s)", left, topic, reported, strings.Join(each, "; "))
	}
}

// TestFakeGroupFinishingMemberWaitsForItsAssignment: a rebalance can revoke a burst group
// member's partitions while it finishes and assign it new ones a moment later. A member that
// finds nothing active then must wait for that assignment before it leaves: it holds
// partitions with records left as soon as it arrives, and leaving before it came left them to
// nobody (the member's own check as the last one out looks only at the end offsets of its
// start) while both members reported "done, lag 0". Here member A copies both partitions and
// is held while it finishes; new records arrive, member B joins (each gets one partition),
// copies its share and leaves. The rebalance that follows revokes A's partition (its 20 new
// records not copied yet), and the source holds A's SyncGroup, and with it A's new
// assignment, until A has decided what to do (it leaves, or it waits).
func TestFakeGroupFinishingMemberWaitsForItsAssignment(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 2})
	f.fastGroups()
	first := f.produce("orders", 2, 50)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Once B has left, the next SyncGroup (A's, rejoining alone after its revocation) is held
	// until A decides.
	var armed, held atomic.Bool
	syncHeld, syncRelease := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	releaseSync := func() { releaseOnce.Do(func() { close(syncRelease) }) }
	t.Cleanup(releaseSync)
	f.src.ControlKey(int16(kmsg.LeaveGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		armed.Store(true)
		return nil, nil, false
	})
	f.src.ControlKey(int16(kmsg.SyncGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		if armed.Load() && held.CompareAndSwap(false, true) {
			close(syncHeld)
			f.src.SleepControl(func() { <-syncRelease })
		}
		return nil, nil, false
	})

	aLogs := &lineCounter{}
	ea, err := New(context.Background(), f.opts, f.dial, slog.New(signalOn{aLogs, "waiting for it before leaving", releaseSync}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ea.Close)
	aFetched, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var a Summary
	var aErr error
	aDone := make(chan struct{})
	go func() {
		defer close(aDone)
		a, aErr = ea.Burst(ctx, BurstOptions{Group: "g",
			fetched: func() {
				once.Do(func() { close(aFetched) })
				select { // hold A between its copy loop and its finish
				case <-release:
				case <-ctx.Done():
				}
			},
			leaving: releaseSync,
		})
	}()
	select {
	case <-aFetched:
	case <-ctx.Done():
		t.Fatal("member A never finished its copy loop")
	}

	late := f.produceLate(ctx)
	b, err := f.engine().Burst(ctx, BurstOptions{Group: "g"})
	if err != nil {
		t.Fatalf("member B: %v (%+v)", err, b)
	}
	select { // A was revoked (eager: before it rejoins) and its new assignment is held
	case <-syncHeld:
	case <-ctx.Done():
		t.Fatal("member A never rejoined the group after B left")
	}
	close(release)
	<-aDone
	if aErr != nil {
		t.Fatalf("member A: %v (%+v)", aErr, a)
	}
	t.Logf("member A copied %d (%s, lag %d), member B %d (%s, lag %d)", a.Records, a.Reason, a.Lag, b.Records, b.Reason, b.Lag)
	f.assertLagReported("orders", a, b)
	if a.Records != 120 || b.Records != 20 {
		t.Errorf("member A copied %d records and B %d, want 100 and the 20 new ones of the partition A held, and B the 20 of its own", a.Records, b.Records)
	}
	f.assertCopied(append(first, late...), "src.orders")
}

// TestFakeGroupTimingsFromDial: a burst group member's timings (session and rebalance timeouts,
// heartbeat interval) are the dial function's: the engine sets none of them, so a user's
// consumer.session.timeout.ms and the group tests' short heartbeat (fastGroups) reach the group.
// The timeouts are checked on the member's JoinGroup request.
func TestFakeGroupTimingsFromDial(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 1})
	f.fastGroups()
	f.srcExtra = append(f.srcExtra, kgo.SessionTimeout(7*time.Second), kgo.RebalanceTimeout(9*time.Second))
	recs := f.produce("orders", 1, 5)
	var mu sync.Mutex
	var joins []*kmsg.JoinGroupRequest
	f.src.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.src.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		joins = append(joins, req.(*kmsg.JoinGroupRequest))
		return nil, nil, false
	})
	s, err := f.engine().Burst(context.Background(), BurstOptions{Group: "g"})
	if err != nil || s.Records != 5 {
		t.Fatalf("burst: %d records, %v; want 5", s.Records, err)
	}
	f.assertCopied(recs, "src.orders")
	mu.Lock()
	defer mu.Unlock()
	n := len(joins)
	for _, j := range joins {
		if j.SessionTimeoutMillis != 7000 || j.RebalanceTimeoutMillis != 9000 {
			t.Errorf("JoinGroup with session timeout %d ms and rebalance timeout %d ms, want the dial function's 7000 and 9000", j.SessionTimeoutMillis, j.RebalanceTimeoutMillis)
		}
	}
	if n == 0 {
		t.Error("the burst group member sent no JoinGroup")
	}
}

// produceLate writes 20 more records to each of orders' two partitions (keys late<p>-<i>),
// the records that arrive while a burst group member finishes, and returns them.
func (f *fakeFlow) produceLate(ctx context.Context) []*kgo.Record {
	f.t.Helper()
	cl := f.client(Source, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var late []*kgo.Record
	for p := range int32(2) {
		for i := range 20 {
			late = append(late, &kgo.Record{Topic: "orders", Partition: p, Key: fmt.Appendf(nil, "late%d-%d", p, i), Value: []byte("v")})
		}
	}
	if err := cl.ProduceSync(ctx, late...).FirstErr(); err != nil {
		f.t.Fatal(err)
	}
	return late
}

// TestFakeGroupRevokeLeavesUnsentRecords: a burst group member whose partitions are revoked
// (another member joins) hands them over once the produce requests it has sent are answered;
// the records it has fetched and buffered but not sent are left to the member that gets the
// partitions next, which starts from the positions stored. Under a produce quota, sending the
// buffer first kept the joining member idle for as long as the quota took to pass it (the
// in-flight budget is seconds of a small quota).
//
// Here the target answers each of member A's produce requests 20 ms late until its revocation
// begins, and A's producer writes batches of at most 100 bytes of the remote topic (one or two
// of these records), so that of A's in-flight budget of 1 KiB (about 80 records) at most some
// 20 records are in its five produce requests and the rest waits in its buffer when member B
// joins, while A still copies (at about 100 records a second, A needs 20 s for the 2,000; the
// revocation comes within some 2 s, once A's loop has written its fetch of 1 KiB and polls).
// The revocation must fail those buffered records with kgo.ErrAborting (a member that waited
// for them sent them all first: 0 aborted), B must copy them, and every record is copied once.
//
// It used to count the copy's produce requests the target received while A's revocation ran
// and want none: a flake under load ("member A sent 1 produce request(s) ... while its
// partitions were revoked"), as franz-go keeps up to five idempotent produce requests in flight
// per connection and kfake answers a connection's requests in order, so a request A wrote
// before its revocation reached the control function behind a sleeping one, after the
// revocation began. Sent-before and sent-after are told apart here by franz-go's own answer to
// each record, not by arrival times.
func TestFakeGroupRevokeLeavesUnsentRecords(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 2})
	f.fastGroups()
	cl := f.client(Source, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for i := range 50 {
		batch := make([]*kgo.Record, 0, 40)
		for p := range int32(2) {
			for j := range 20 {
				batch = append(batch, &kgo.Record{Topic: "orders", Partition: p, Key: fmt.Appendf(nil, "k%d-%d-%d", p, i, j), Value: []byte("value")})
			}
		}
		if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, batch...)
	}
	f.opts.MaxBufferedBytes, f.opts.FetchMaxBytes = 1<<10, 1<<10

	produced := make(chan struct{})
	var producedOnce sync.Once
	var revokeSeen atomic.Bool
	f.tgt.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		for _, tp := range req.(*kmsg.ProduceRequest).Topics { // by topic ID in newer versions: look for the keys
			for _, p := range tp.Partitions {
				if bytes.Contains(p.Records, []byte("k0-")) || bytes.Contains(p.Records, []byte("k1-")) {
					producedOnce.Do(func() { close(produced) })
					if !revokeSeen.Load() {
						f.tgt.SleepControl(func() { time.Sleep(20 * time.Millisecond) })
					}
					return nil, nil, false
				}
			}
		}
		return nil, nil, false
	})
	logA := slog.New(signalOn{f.logs, "burst group revoking partitions", func() { revokeSeen.Store(true) }})
	left := &abortedRecords{topic: "src.orders"}
	dialA := func(ctx context.Context, side Side, extra ...kgo.Opt) (*kgo.Client, error) {
		if side == Target {
			extra = append(extra, kgo.WithHooks(left), kgo.ProducerBatchMaxBytesFn(func(topic string) int32 {
				if topic == "src.orders" {
					return 100
				}
				return 1000012 // franz-go's default
			}))
		}
		return f.dial(ctx, side, extra...)
	}
	ea, err := New(context.Background(), f.opts, dialA, logA)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ea.Close)

	a, b := joinWhileCopying(t, ctx, ea, f.engine(), produced, "")
	t.Logf("member A's producer failed %d buffered record(s) with ErrAborting", left.n.Load())
	if left.n.Load() == 0 {
		t.Errorf("member A aborted none of its buffered records at the revocation, want some: it sent what it had not sent yet instead of leaving it to the next holder")
	}
	if b.Records == 0 {
		t.Errorf("member B copied nothing: member A had sent every record before the revocation, which this test needs while A still copies")
	}
	f.assertLagReported("orders", a, b)
	f.assertCopied(recs, "src.orders")
}

// abortedRecords is a franz-go hook counting the records of topic that a producer failed with
// kgo.ErrAborting (AbortBufferedRecords).
type abortedRecords struct {
	topic string
	n     atomic.Int64
}

// OnProduceRecordUnbuffered implements kgo.HookProduceRecordUnbuffered.
func (h *abortedRecords) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if r.Topic == h.topic && errors.Is(err, kgo.ErrAborting) {
		h.n.Add(1)
	}
}

// joinWhileCopying runs a burst of group "g" on engine a, and once a has produced (produced is
// closed) a burst of the same group on engine b, which joins and takes partitions from a. It
// returns both summaries once both bursts ended; a member that failed, or ended other than done
// with lag 0, fails t (why, if any, is appended to that error).
func joinWhileCopying(t *testing.T, ctx context.Context, a, b *Engine, produced <-chan struct{}, why string) (Summary, Summary) {
	t.Helper()
	aDone, bDone := make(chan burstResult, 1), make(chan burstResult, 1)
	go func() {
		s, err := a.Burst(ctx, BurstOptions{Group: "g"})
		aDone <- burstResult{s, err}
	}()
	select { // A has joined and copies
	case <-produced:
	case <-ctx.Done():
		t.Fatal("member A never produced")
	}
	go func() {
		s, err := b.Burst(ctx, BurstOptions{Group: "g"})
		bDone <- burstResult{s, err}
	}()
	ra, rb := <-aDone, <-bDone
	for name, r := range map[string]burstResult{"A": ra, "B": rb} {
		if r.err != nil {
			t.Fatalf("member %s: %v", name, r.err)
		}
		t.Logf("member %s copied %d (%s, lag %d)", name, r.s.Records, r.s.Reason, r.s.Lag)
		if r.s.Reason != ReasonDone || r.s.Lag != 0 {
			t.Errorf("member %s ended %s with lag %d, want done with lag 0%s", name, r.s.Reason, r.s.Lag, why)
		}
	}
	return ra.s, rb.s
}

// TestFakeRevokeErrorNamesGroupAndPartitions: a burst group member that cannot leave the unsent
// records of revoked partitions (its context ends while a produce request of theirs is still
// unanswered) fails with an error that names the group and the partitions, as its log lines
// do. Before the fix it named neither: "leaving the unsent records of revoked partitions:
// context canceled".
func TestFakeRevokeErrorNamesGroupAndPartitions(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 1})
	e := f.engine()
	c := f.plannedCopier(e, TP{"orders", 0})
	c.bo.Group = "g"
	release := make(chan struct{})
	defer close(release)
	held := make(chan struct{})
	var heldOnce sync.Once
	f.tgt.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		f.tgt.KeepControl()
		heldOnce.Do(func() { close(held) })
		f.tgt.SleepControl(func() { <-release })
		return nil, nil, false
	})
	c.prod = f.client(Target)
	c.prod.Produce(context.Background(), &kgo.Record{Topic: "src.orders", Partition: 0, Value: []byte("v")}, nil)
	<-held // a produce request of the revoked partition is in flight
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.revoke(ctx, f.client(Source), map[string][]int32{"orders": {0}})
	err := c.error()
	if err == nil || !strings.Contains(err.Error(), `"g"`) || !strings.Contains(err.Error(), "orders-0") {
		t.Errorf("revoke with its records unanswered and its context ended: %v, want an error naming group \"g\" and orders-0", err)
	}
}
