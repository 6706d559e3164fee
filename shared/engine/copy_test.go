package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
)

// TestCopyByteExact copies several topics (plain, LogAppendTime, transactional with gaps) and
// compares every record byte for byte, then checks positions and offset syncs.
func TestCopyByteExact(t *testing.T) {
	c := testkit.Require(t)
	src := c.Source.Bootstrap
	plain := testkit.CreateTopic(t, src, testkit.Name(t, "plain"), 3, nil)
	lat := testkit.CreateTopic(t, src, testkit.Name(t, "lat"), 2, map[string]*string{"message.timestamp.type": strp("LogAppendTime")})
	gaps := testkit.CreateTopic(t, src, testkit.Name(t, "gaps"), 1, map[string]*string{"cleanup.policy": strp("compact")})

	testkit.Produce(t, src, testkit.SampleRecords(plain, 3, 300)...)
	testkit.Produce(t, src, testkit.SampleRecords(lat, 2, 50)...)
	// gaps: offsets 0,1 plain; 2,3 in a committed transaction (marker at 4); 5 plain; an aborted
	// transaction (6, marker 7); 8 plain.
	testkit.Produce(t, src, keyed(gaps, "a", 2)...)
	produceTxn(t, src, keyed(gaps, "b", 2), true)
	testkit.Produce(t, src, keyed(gaps, "c", 1)...)
	produceTxn(t, src, keyed(gaps, "d", 1), false)
	testkit.Produce(t, src, keyed(gaps, "e", 1)...)

	f := newFlow(t, plain, lat, gaps)
	s := f.burst(BurstOptions{})
	if s.Reason != ReasonDone || s.Lag != 0 {
		t.Errorf("summary: reason %q lag %d, want done and 0", s.Reason, s.Lag)
	}
	// read_uncommitted like MM2's default: the aborted record is copied too.
	if want := int64(300 + 50 + 7); s.Records != want {
		t.Errorf("summary: %d records, want %d", s.Records, want)
	}
	for _, topic := range []string{plain, lat, gaps} {
		want := sourceRecords(t, src, topic)
		got := testkit.ReadAll(t, c.Target.Bootstrap, f.remote(topic))
		testkit.AssertSameRecords(t, want, got)
	}

	pos := f.positions()
	for p := int32(0); p < 3; p++ {
		if pos[TP{plain, p}] != 99 {
			t.Errorf("position of %s-%d = %d, want 99", plain, p, pos[TP{plain, p}])
		}
	}
	// The position of gaps is its last offset, 8: the last data record or, if the coordinator
	// wrote the abort marker last, that marker (nothing is left to copy after it).
	if p := pos[TP{gaps, 0}]; p != 8 {
		t.Errorf("position of %s-0 = %d, want 8", gaps, p)
	}
	// Offset syncs on gaps: the first record, every record after a gap (transaction markers,
	// wherever the coordinator wrote them), and the last record (delayed sync promoted at the
	// end). Downstream offsets are the records' indexes on the target.
	syncs := f.syncs(gaps)
	has := func(up, down int64) bool {
		for _, s := range syncs {
			if s.UpstreamOffset == up && s.DownstreamOffset == down && s.Partition == 0 {
				return true
			}
		}
		return false
	}
	gapRecs := sourceRecords(t, src, gaps)
	for i, r := range gapRecs {
		due := i == 0 || i == len(gapRecs)-1 || r.Offset-gapRecs[i-1].Offset != 1
		if due && !has(r.Offset, int64(i)) {
			t.Errorf("no offset sync %d->%d for %s in %v", r.Offset, i, gaps, syncs)
		}
	}
	// The plain topic's last record of each partition is synced at the end (delayed sync).
	for p := int32(0); p < 3; p++ {
		found := false
		for _, s := range f.syncs(plain) {
			if s.Partition == p && s.UpstreamOffset == 99 && s.DownstreamOffset == 99 {
				found = true
			}
		}
		if !found {
			t.Errorf("no final offset sync 99->99 for %s-%d", plain, p)
		}
	}
}

// keyed returns n records with distinct non-null keys (a compacted topic rejects null keys).
func keyed(topic, prefix string, n int) []*kgo.Record {
	recs := testkit.SampleRecords(topic, 1, n)
	for i, r := range recs {
		r.Key = []byte(fmt.Sprintf("%s-%d", prefix, i))
	}
	return recs
}

func produceTxn(t *testing.T, bootstrap string, recs []*kgo.Record, commit bool) {
	t.Helper()
	cl := testkit.Client(t, bootstrap, kgo.TransactionalID(testkit.Name(t, "txn")), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := testkit.Context(t, 30*time.Second)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
}

// TestResume: a second burst without new data copies nothing; after new data only the new
// records are copied; a budget stops early and the next burst continues. On kfake.
func TestResume(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"resume": 2})
	recs := f.produce("resume", 2, 20)
	burst := func(bo BurstOptions) Summary {
		t.Helper()
		s, err := f.engine().Burst(context.Background(), bo)
		if err != nil {
			t.Fatalf("burst: %v (summary %+v)", err, s)
		}
		return s
	}
	if s := burst(BurstOptions{}); s.Records != 40 {
		t.Fatalf("first burst copied %d, want 40", s.Records)
	}
	if s := burst(BurstOptions{}); s.Records != 0 || s.Reason != ReasonDone {
		t.Errorf("second burst without new data: %d records, reason %q; want 0, done", s.Records, s.Reason)
	}
	recs = append(recs, f.produce("resume", 2, 30)...)
	s := burst(BurstOptions{MaxRecords: 25})
	if s.Records != 25 || s.Reason != ReasonMaxRecords || s.Lag != 35 {
		t.Errorf("budget burst: %d records, reason %q, lag %d; want 25, max-records, 35", s.Records, s.Reason, s.Lag)
	}
	if s := burst(BurstOptions{}); s.Records != 35 || s.Lag != 0 {
		t.Errorf("final burst: %d records, lag %d; want 35, 0", s.Records, s.Lag)
	}
	f.assertCopied(recs, "src.resume")
}

// TestNewTopicAndGrowth: a topic created and partitions added between bursts are picked up.
// On kfake.
func TestNewTopicAndGrowth(t *testing.T) {
	const retention = testkit.RetentionMS // non-default
	f := newFakeFlow(t, nil)
	f.createTopic(Source, "a", 1, map[string]*string{"retention.ms": strp(retention)})
	recsA := f.produce("a", 1, 10)
	ctx := context.Background()
	if s, err := f.engine().Burst(ctx, BurstOptions{}); err != nil || s.Records != 10 {
		t.Fatalf("first burst: %+v, %v; want 10 records", s, err)
	}
	f.createTopic(Source, "b", 2, nil)
	recsB := f.produce("b", 2, 5)
	if _, err := kadm.NewClient(f.client(Source)).UpdatePartitions(ctx, 3, "a"); err != nil {
		t.Fatal(err)
	}
	cl := f.client(Source, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(3) {
		for i := range 3 {
			r := &kgo.Record{Topic: "a", Partition: p, Key: fmt.Appendf(nil, "grown%d-%d", p, i), Value: []byte("v"), Timestamp: time.UnixMilli(1_700_000_500_000)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
			recsA = append(recsA, r)
		}
	}
	if s, err := f.engine().Burst(ctx, BurstOptions{}); err != nil || s.Records != 19 {
		t.Errorf("second burst: %+v, %v; want 19 records", s, err)
	}
	f.assertCopied(recsA, "src.a")
	f.assertCopied(recsB, "src.b")
	// The non-default retention.ms was copied at creation.
	if v, _ := remoteConfig(t, f.bootstrap(Target), "src.a", "retention.ms"); v != retention {
		t.Errorf("remote topic src.a has retention.ms=%q, want %s", v, retention)
	}
}

// TestInflightBudget: a narrow burst gets room for a full batch per partition, a wide one the
// small budget, an exactly-once one the large budget however wide, concurrent calls share the
// small one, and a configured bound wins everywhere.
func TestInflightBudget(t *testing.T) {
	auto, set := bareEngine(Options{}), bareEngine(Options{MaxBufferedBytes: 3 << 20})
	eos, eosSet := bareEngine(Options{ExactlyOnce: true}), bareEngine(Options{ExactlyOnce: true, MaxBufferedBytes: 3 << 20})
	for _, tc := range []struct {
		e          *Engine
		partitions int
		want       int64
	}{
		{auto, 1, 8 << 20}, {auto, 8, 8 << 20}, {auto, 16, 8 << 20}, {auto, 32, 4 << 20},
		{auto, 64, 2 << 20}, {auto, 100, 2 << 20}, {auto, 1000, 2 << 20},
		{set, 1, 3 << 20}, {set, 1000, 3 << 20},
		{eos, 8, 8 << 20}, {eos, 64, 8 << 20}, {eos, 1000, 8 << 20}, {eosSet, 1000, 3 << 20},
	} {
		if got := tc.e.opts.inflightBudget(tc.partitions); got != tc.want {
			t.Errorf("MaxBufferedBytes %d, exactly-once %v, %d partitions: budget %d, want %d", tc.e.opts.MaxBufferedBytes, tc.e.opts.ExactlyOnce, tc.partitions, got, tc.want)
		}
	}
	if got := auto.opts.sharedInflightBudget(); got != 2<<20 {
		t.Errorf("shared budget %d, want 2 MiB", got)
	}
	if got := set.opts.sharedInflightBudget(); got != 3<<20 {
		t.Errorf("configured shared budget %d, want 3 MiB", got)
	}
	if got := auto.opts.producerBufferedBytes(); got != 32<<20 {
		t.Errorf("producer buffer %d, want 2 × 8 MiB + 16 MiB", got)
	}
	// A burst starts small and opens up at its first acknowledgement; shared producers do not.
	c := &copier{budget: 8 << 20}
	if got := c.bound(); got != 256<<10 {
		t.Errorf("bound before the first acknowledgement %d, want 256 KiB", got)
	}
	c.firstAckNS.Store(1)
	if got := c.bound(); got != 8<<20 {
		t.Errorf("bound after the first acknowledgement %d, want the 8 MiB budget", got)
	}
	if got := (&copier{budget: 2 << 20, reuse: true}).bound(); got != 2<<20 {
		t.Errorf("shared producers' bound %d, want their 2 MiB budget", got)
	}
	// A wide burst starts at its budget (its first records may be for partitions the broker
	// serves last).
	var works []*work
	for p := range int32(narrowPartitions + 1) {
		works = append(works, &work{tp: TP{"t", p}, end: 1})
	}
	wide := newCopier(&auto.core, BurstOptions{}, works, readyTopic(1), disabledEmitter())
	if got, want := wide.bound(), auto.opts.inflightBudget(len(works)); got != want {
		t.Errorf("bound of a %d-partition burst before its first acknowledgement %d, want its budget %d", len(works), got, want)
	}
	if narrow := newCopier(&auto.core, BurstOptions{}, works[:narrowPartitions], readyTopic(1), disabledEmitter()); narrow.bound() != 256<<10 {
		t.Errorf("bound of a %d-partition burst before its first acknowledgement %d, want 256 KiB", narrowPartitions, narrow.bound())
	}
}

// TestFetchBudget: fetches grow with the partitions consumed, between 512 KiB and 4 MiB, and a
// configured consumer.fetch.max.bytes wins.
func TestFetchBudget(t *testing.T) {
	auto, set := bareEngine(Options{}), bareEngine(Options{FetchMaxBytes: 1 << 20})
	for _, tc := range []struct {
		e          *Engine
		partitions int
		want       int32
	}{
		{auto, 1, 512 << 10}, {auto, 8, 512 << 10}, {auto, 128, 512 << 10}, {auto, 256, 1 << 20},
		{auto, 1000, 4000 << 10}, {auto, 5000, 4 << 20}, {set, 8, 1 << 20}, {set, 1000, 1 << 20},
	} {
		if got := tc.e.opts.fetchBudget(tc.partitions); got != tc.want {
			t.Errorf("FetchMaxBytes %d, %d partitions: fetch budget %d, want %d", tc.e.opts.FetchMaxBytes, tc.partitions, got, tc.want)
		}
	}
}

// TestPartitionFetchBudget: a sixteenth of the fetch, between 256 KiB (or the fetch) and 1 MiB.
func TestPartitionFetchBudget(t *testing.T) {
	for b, want := range map[int32]int32{
		64 << 10: 64 << 10, 512 << 10: 256 << 10, 4 << 20: 256 << 10, 8 << 20: 512 << 10,
		16 << 20: 1 << 20, 50 << 20: 1 << 20,
	} {
		if got := partitionFetchBudget(b); got != want {
			t.Errorf("fetch %d: partition budget %d, want %d", b, got, want)
		}
	}
}

// TestFakeOutOfOrderAckReleasesItsRecord: an acknowledgement that is not for the oldest record
// in flight fails the partition, and still counts its record as answered: its bytes leave the
// in-flight bound (serve's copies share one) and the copy's count of records awaited drops, so
// neither the other copies nor this copy's settle wait for a record that was answered.
func TestFakeOutOfOrderAckReleasesItsRecord(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 1})
	f.produce("orders", 1, 2)
	e := f.engine()
	c := f.plannedCopier(e, TP{"orders", 0})
	st := c.states[0]
	sink := recordSink{c}
	first := &kgo.Record{Topic: "orders", Offset: 0, Value: []byte("first")}
	second := &kgo.Record{Topic: "orders", Offset: 1, Value: []byte("second record")}
	sink.track(st, first, recordSize(first))
	sink.track(st, second, recordSize(second))

	c.acked(st, second, nil) // answered before the oldest in flight
	if err := c.error(); err == nil || !strings.Contains(err.Error(), "not the oldest one in flight") {
		t.Fatalf("copy error after an out-of-order acknowledgement: %v; want the partition failed", err)
	}
	if got, want := c.inflight.load(), recordSize(first); got != want {
		t.Errorf("in-flight bytes after the second record was answered = %d, want %d (the first record's only)", got, want)
	}
	if got := c.pending.Load(); got != 1 {
		t.Errorf("records awaited after the second record was answered = %d, want 1", got)
	}
	c.acked(st, first, nil)
	if got := c.inflight.load(); got != 0 {
		t.Errorf("in-flight bytes after both records were answered = %d, want 0", got)
	}
	if got := c.pending.Load(); got != 0 {
		t.Errorf("records awaited after both records were answered = %d, want 0", got)
	}
}

// TestThrottledTargetBoundsInflight: while the target throttles the records' producer (a
// produce quota), a burst keeps at most throttledInflightBytes in flight: the target accepts
// no more per second than its quota, and a full budget (8 MiB, 4 s of a 2 MiB/s quota) is
// what a burst group member that joins waits for before the holder hands partitions over.
// Without throttling, and some time after the last throttle, the budget applies again.
func TestThrottledTargetBoundsInflight(t *testing.T) {
	c := &copier{budget: 8 << 20, throttle: newThrottleWatch(50 * time.Millisecond)}
	c.firstAckNS.Store(1)
	if got := c.bound(); got != 8<<20 {
		t.Fatalf("bound before any throttle %d, want the 8 MiB budget", got)
	}
	c.throttle.OnBrokerThrottle(kgo.BrokerMetadata{}, 300*time.Millisecond, true)
	if got := c.bound(); got != throttledInflightBytes {
		t.Errorf("bound while the target throttles %d, want %d", got, throttledInflightBytes)
	}
	c.throttle.OnBrokerThrottle(kgo.BrokerMetadata{}, 0, true) // an answer without throttle
	if got := c.bound(); got != throttledInflightBytes {
		t.Errorf("bound after an unthrottled answer within the memory %d, want %d", got, throttledInflightBytes)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.bound() != 8<<20 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := c.bound(); got != 8<<20 {
		t.Errorf("bound after the throttle memory ran out %d, want the 8 MiB budget", got)
	}
	small := &copier{budget: 512 << 10, throttle: newThrottleWatch(time.Minute)}
	small.firstAckNS.Store(1)
	small.throttle.OnBrokerThrottle(kgo.BrokerMetadata{}, time.Second, false)
	if got := small.bound(); got != 512<<10 {
		t.Errorf("throttled bound of a 512 KiB budget %d, want the budget (the smaller)", got)
	}
}
