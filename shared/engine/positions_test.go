package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/test/testkit"
)

// TestReadPositions writes positions the way a Connect worker does, buries them under many
// newer records of other keys (checkpoint connector keys, other partitions' positions) in the
// same offsets-topic partitions, and reads them back: newest value wins, tombstones mean "no
// position", foreign keys are skipped.
func TestReadPositions(t *testing.T) {
	c := testkit.Require(t)
	f := newFlow(t, "unused")
	e := f.engine()
	ctx := testkit.Context(t, time.Minute)
	n, _, err := e.positions.ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 25 {
		t.Fatalf("offsets topic has %d partitions, want 25", n)
	}
	topic := e.OffsetsTopic()
	tps := []TP{{"orders", 0}, {"orders", 1}, {"orders", 2}, {"payments", 7}, {"gone", 0}}
	var recs []*kgo.Record
	put := func(key, value []byte) {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: mm2.KeyPartition(key, n), Key: key, Value: value})
	}
	// Old values first, then the values that count.
	for _, tp := range tps {
		put(mm2.SourceOffsetKey(f.alias, tp.Topic, tp.Partition), mm2.OffsetValue(1))
	}
	put(mm2.SourceOffsetKey(f.alias, "orders", 0), mm2.OffsetValue(41))
	put(mm2.SourceOffsetKey(f.alias, "orders", 1), mm2.OffsetValue(4242))
	put(mm2.SourceOffsetKey(f.alias, "payments", 7), mm2.OffsetValue(7))
	put(mm2.SourceOffsetKey(f.alias, "gone", 0), nil) // tombstone
	// orders-2 keeps value 1. Then lots of noise in every partition: checkpoint keys, and
	// positions of another source alias.
	for i := 0; i < 3000; i++ {
		put(mm2.CheckpointOffsetKey(f.alias+".orders", int32(i%50), fmt.Sprintf("g%d", i)), mm2.OffsetValue(0))
		put(mm2.SourceOffsetKey("other", "orders", int32(i%40)), mm2.OffsetValue(int64(i)))
	}
	testkit.Produce(t, c.Target.Bootstrap, recs...)

	began := time.Now()
	got, err := e.ReadPositions(ctx, append(tps, TP{"never", 3}), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("read %d positions in %s", len(got), time.Since(began))
	want := map[TP]int64{{"orders", 0}: 41, {"orders", 1}: 4242, {"orders", 2}: 1, {"payments", 7}: 7}
	if len(got) != len(want) {
		t.Errorf("got %d positions %v, want %v", len(got), got, want)
	}
	for tp, w := range want {
		if got[tp] != w {
			t.Errorf("position of %s = %d, want %d", tp, got[tp], w)
		}
	}
}

// TestPositionsWhereConnectPutsThem checks the bytes a burst leaves in the offsets topic: the
// canonical key in the partition murmur2 picks (fakeFlow.positions checks both), value = last
// copied offset. Pure logic: on kfake.
func TestPositionsWhereConnectPutsThem(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"pos": 4})
	f.produce("pos", 4, 10)
	if s, err := f.engine().Burst(context.Background(), BurstOptions{}); err != nil || s.Records != 40 {
		t.Fatalf("burst: %+v, %v; want 40 records", s, err)
	}
	pos := f.positions()
	for p := int32(0); p < 4; p++ {
		if pos[TP{"pos", p}] != 9 {
			t.Errorf("position of pos-%d = %d, want 9", p, pos[TP{"pos", p}])
		}
	}
}

// TestAutoOffsetResetLatest: without a position, latest starts at the end and stores that
// start at once, so records produced before the next burst are not skipped.
func TestAutoOffsetResetLatest(t *testing.T) {
	c := testkit.Require(t)
	src := c.Source.Bootstrap
	topic := testkit.CreateTopic(t, src, testkit.Name(t, "latest"), 1, nil)
	all := testkit.SampleRecords(topic, 1, 20)
	testkit.Produce(t, src, all[:10]...)
	f := newFlow(t, topic)
	f.opts.AutoOffsetResetLatest = true
	if s := f.burst(BurstOptions{}); s.Records != 0 {
		t.Errorf("first burst copied %d, want 0 (latest)", s.Records)
	}
	if p := f.positions()[TP{topic, 0}]; p != 9 {
		t.Errorf("position after latest start = %d, want 9", p)
	}
	testkit.Produce(t, src, all[10:]...)
	if s := f.burst(BurstOptions{}); s.Records != 10 {
		t.Errorf("second burst copied %d, want 10", s.Records)
	}
	got := testkit.ReadAll(t, c.Target.Bootstrap, f.remote(topic))
	testkit.AssertSameRecords(t, sourceRecords(t, src, topic)[10:], got)
}

// TestCopyPartition copies one partition through a given offset, then to its end; an internal
// topic is refused. On kfake.
func TestCopyPartition(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"one": 2})
	recs := f.produce("one", 2, 20)
	f.opts.NoSweep = true // this partition alone (TestFakeSweep covers the sweep)
	e := f.engine()
	ctx := context.Background()
	s, err := e.CopyPartition(ctx, "one", 1, 9)
	if err != nil {
		t.Fatal(err)
	}
	if s.Records != 10 {
		t.Errorf("copied %d, want 10", s.Records)
	}
	if s, err = e.CopyPartition(ctx, "one", 1, -1); err != nil || s.Records != 10 {
		t.Errorf("second copy: %d records, err %v; want 10", s.Records, err)
	}
	var want []*kgo.Record
	for _, r := range recs {
		if r.Partition == 1 {
			want = append(want, r)
		}
	}
	f.assertCopied(want, "src.one")
	if _, err := e.CopyPartition(ctx, "__consumer_offsets", 0, -1); err == nil {
		t.Error("CopyPartition of an internal topic succeeded")
	}
}

// TestOffsetSyncsOnTarget: with offset-syncs.topic.location=target the syncs go to
// mm2-offset-syncs.<source>.internal on the target, partition 0, in MM2's encoding. On kfake.
func TestOffsetSyncsOnTarget(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"synctgt": 2})
	f.produce("synctgt", 2, 150)
	f.opts.OffsetSyncsTopicLocation = SyncsOnTarget
	f.opts.OffsetLagMax = 50
	if s, err := f.engine().Burst(context.Background(), BurstOptions{}); err != nil || s.Records != 300 {
		t.Fatalf("burst: %+v, %v; want 300 records", s, err)
	}
	perPart := map[int32][]int64{}
	for _, r := range f.readAll(Target, "mm2-offset-syncs.src.internal") {
		s, err := mm2.DecodeOffsetSync(r.Key, r.Value)
		if err != nil || r.Partition != 0 {
			t.Fatalf("offset sync %q/%q in partition %d: %v", r.Key, r.Value, r.Partition, err)
		}
		if s.UpstreamOffset != s.DownstreamOffset {
			t.Errorf("sync %v: upstream and downstream differ on a gapless copy", s)
		}
		perPart[s.Partition] = append(perPart[s.Partition], s.UpstreamOffset)
	}
	for p := int32(0); p < 2; p++ {
		ups := perPart[p]
		// offset.lag.max=50 over 150 records: the first record, every 50, and the last.
		if len(ups) < 3 || ups[0] != 0 || ups[len(ups)-1] != 149 {
			t.Errorf("partition %d syncs at upstream %v, want 0 ... 149 every ~50", p, ups)
		}
	}
	if n := len(f.readAll(Source, "mm2-offset-syncs.tgt.internal")); n != 0 {
		t.Errorf("%d offset syncs on the source, want none", n)
	}
}

// TestInternalTopicCreationFails: a first burst creates the offsets and offset-syncs topics
// while it copies; when one of them cannot be created (a replication factor the one-broker
// target cannot meet) the burst fails naming the topic and the setting, and a corrected burst
// leaves every source record on the target: duplicates, never a gap.
func TestInternalTopicCreationFails(t *testing.T) {
	for _, test := range []struct {
		name    string
		set     func(o *Options, rf int16)
		topic   func(alias string) string
		setting string
		// recopies: without the offsets topic no position was stored, so the corrected burst
		// copies all 30 records again.
		recopies bool
	}{
		{"offsets", func(o *Options, rf int16) { o.OffsetStorageReplicationFactor = rf },
			func(alias string) string { return "mm2-offsets." + alias + ".internal" }, "offset.storage.replication.factor=3", true},
		{"offset-syncs", func(o *Options, rf int16) { o.OffsetSyncsTopicReplicationFactor = rf },
			func(alias string) string { return "mm2-offset-syncs.t" + alias + ".internal" }, "offset-syncs.topic.replication.factor=3", false},
	} {
		t.Run(test.name, func(t *testing.T) {
			c := testkit.Require(t)
			topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "noint"), 1, nil)
			testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 1, 30)...)
			f := newFlow(t, topic)
			test.set(&f.opts, 3)
			s, err := f.engine().Burst(testkit.Context(t, time.Minute), BurstOptions{})
			t.Logf("failed burst: %d records, error: %v", s.Records, err)
			if err == nil || s.Reason != ReasonFailed {
				t.Fatalf("burst with a %s topic that cannot be created: reason %q, err %v; want failed", test.name, s.Reason, err)
			}
			if name := test.topic(f.alias); !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), test.setting) {
				t.Errorf("error %q does not name the topic %s and %s", err, name, test.setting)
			}
			test.set(&f.opts, 1)
			s = f.burst(BurstOptions{})
			if s.Lag != 0 || s.Reason != ReasonDone || (test.recopies && s.Records != 30) {
				t.Errorf("corrected burst: reason %q, lag %d, %d records; want done, 0 (and all 30 again: %v)", s.Reason, s.Lag, s.Records, test.recopies)
			}
			f.assertCaughtUpAfterFailure(topic)
		})
	}
}

// TestIdlePositionsRefreshedWithoutCompaction: on an Event Hubs target without compaction the
// offsets topic is created with delete retention, and a burst that finds a partition idle
// stores its unchanged position again (so it outlives the retention); with compaction, an
// idle partition's position is not rewritten.
func TestIdlePositionsRefreshedWithoutCompaction(t *testing.T) {
	for _, compact := range []bool{false, true} {
		t.Run(fmt.Sprintf("compaction=%v", compact), func(t *testing.T) {
			c := testkit.Require(t)
			src := c.Source.Bootstrap
			topic := testkit.CreateTopic(t, src, testkit.Name(t, "idle"), 2, nil)
			testkit.Produce(t, src, testkit.SampleRecords(topic, 2, 20)...)
			f := newFlow(t, topic)
			f.opts.TargetProfile = cluster.Profile{Cluster: "target", EventHubs: true, CompactInternalTopics: compact}
			offsets := "mm2-offsets." + f.alias + ".internal"
			count := func() map[TP]int {
				n := map[TP]int{}
				for _, r := range testkit.ReadAll(t, c.Target.Bootstrap, offsets) {
					k, err := mm2.DecodeOffsetKey(r.Key)
					if err != nil {
						t.Fatal(err)
					}
					n[TP{k.Topic, k.Partition}]++
				}
				return n
			}
			f.burst(BurstOptions{})
			if v, _ := remoteConfig(t, c.Target.Bootstrap, offsets, "cleanup.policy"); (v == "compact") != compact {
				t.Errorf("offsets topic cleanup.policy = %q with compaction %v", v, compact)
			}
			first := count()
			// Partition 1 gets new records, partition 0 stays idle.
			more := testkit.SampleRecords(topic, 2, 10)
			for _, r := range more {
				r.Partition = 1
			}
			testkit.Produce(t, src, more...)
			if s := f.burst(BurstOptions{}); s.Records != 10 {
				t.Fatalf("second burst copied %d, want 10", s.Records)
			}
			second := count()
			idle, busy := TP{topic, 0}, TP{topic, 1}
			wantIdle := first[idle]
			if !compact {
				wantIdle++
			}
			if second[idle] != wantIdle {
				t.Errorf("idle partition: %d position records after the second burst, want %d (first burst wrote %d)", second[idle], wantIdle, first[idle])
			}
			if second[busy] <= first[busy] {
				t.Errorf("busy partition: %d position records after the second burst, want more than %d", second[busy], first[busy])
			}
			pos := f.positions()
			if pos[idle] != 9 || pos[busy] != 19 {
				t.Errorf("positions %v, want %s at 9 and %s at 19", pos, idle, busy)
			}
		})
	}
}

// assertCaughtUpAfterFailure checks a one-partition topic after a failed burst and a corrected
// one: the target ends with every source record in order (whatever the failed burst wrote
// comes before: duplicates, never a gap) and the stored position is the last source offset.
func (f *flow) assertCaughtUpAfterFailure(topic string) {
	f.t.Helper()
	want := sourceRecords(f.t, f.c.Source.Bootstrap, topic)
	got := testkit.ReadAll(f.t, f.c.Target.Bootstrap, f.remote(topic))
	if len(got) < len(want) {
		f.t.Fatalf("target has %d records, want at least %d", len(got), len(want))
	}
	testkit.AssertSameRecords(f.t, want, got[len(got)-len(want):])
	if last := want[len(want)-1].Offset; f.positions()[TP{topic, 0}] != last {
		f.t.Errorf("position after the corrected burst = %d, want %d", f.positions()[TP{topic, 0}], last)
	}
}

// TestConcurrentCopyPartitions: the first events of many new topics arrive at once (a
// KafkaSource starting). The calls are copied together in shared copies (fewer source
// consumers than calls, never more than maxConcurrentCopies at once), each call gets its own
// partition's outcome, and every topic ends up byte-exact on the target with its position
// stored.
func TestConcurrentCopyPartitions(t *testing.T) {
	c := testkit.Require(t)
	src := c.Source.Bootstrap
	const n = 20
	var topics []string
	for i := range n {
		topic := testkit.CreateTopic(t, src, testkit.Name(t, fmt.Sprintf("many%d", i)), 1, nil)
		testkit.Produce(t, src, testkit.SampleRecords(topic, 1, 25+i)...)
		topics = append(topics, topic)
	}
	f := newFlow(t, topics...)
	ctx := testkit.Context(t, 2*time.Minute)
	// Count the copies' source consumers (clients with assigned partitions) alive at once,
	// independently of the engine's own bookkeeping.
	counter := &liveConsumers{}
	e := f.engineWithHooks(counter)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, topic := range topics {
		wg.Go(func() {
			s, err := e.CopyPartition(ctx, topic, 0, -1)
			// A call's partition may have been swept by an earlier shared copy (0 records).
			if err == nil && ((s.Records != int64(25+i) && s.Records != 0) || s.Partitions != 1 || s.Topics[topic] == nil || s.Lag != 0) {
				err = fmt.Errorf("outcome %+v, want %d records (or 0: swept) of this partition alone", s, 25+i)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("%s: %v", topics[i], err)
		}
	}
	if peak, total := counter.peak.Load(), counter.total.Load(); peak > maxConcurrentCopies || total >= n/2 {
		t.Errorf("%d source consumers for %d calls, %d at once; want fewer than %d, at most %d at once", total, n, peak, n/2, maxConcurrentCopies)
	}
	pos := f.positions()
	for i, topic := range topics {
		testkit.AssertSameRecords(t, sourceRecords(t, src, topic), testkit.ReadAll(t, c.Target.Bootstrap, f.remote(topic)))
		if want := int64(24 + i); pos[TP{topic, 0}] != want {
			t.Errorf("position of %s = %d, want %d", topic, pos[TP{topic, 0}], want)
		}
	}
}

// TestSharedCopyIsolatesFailures: a record the target refuses (larger than its remote topic's
// max.message.bytes) fails the shared copy it is in; the other partitions of that copy are
// copied again one by one and succeed, and only the call of the refused partition fails,
// naming it.
func TestSharedCopyIsolatesFailures(t *testing.T) {
	c := testkit.Require(t)
	src := c.Source.Bootstrap
	var topics []string
	for i := range 3 {
		topic := testkit.CreateTopic(t, src, testkit.Name(t, fmt.Sprintf("ok%d", i)), 1, nil)
		testkit.Produce(t, src, testkit.SampleRecords(topic, 1, 10)...)
		topics = append(topics, topic)
	}
	bad := testkit.CreateTopic(t, src, testkit.Name(t, "big"), 1, nil)
	big := make([]byte, 20_000)
	_, _ = rand.Read(big) // incompressible: the batch stays larger than the limit
	testkit.Produce(t, src, &kgo.Record{Topic: bad, Value: big})
	f := newFlow(t, append(topics, bad)...)
	testkit.CreateTopic(t, c.Target.Bootstrap, f.remote(bad), 1, map[string]*string{"max.message.bytes": kadm.StringPtr("5000")})

	e := f.engineWithHooks()
	var logs testkit.SyncBuffer // written by the copies' goroutines, read below
	e.log = slog.New(slog.NewJSONHandler(&logs, nil))
	e.runs.max = 1
	ctx := testkit.Context(t, 2*time.Minute)
	// Held behind the start-up warm-up, the four calls are released together and go into
	// one shared copy.
	e.WarmInBackground(ctx, nil)
	var wg sync.WaitGroup
	all := append(topics, bad)
	errs := make([]error, len(all))
	for i, topic := range all {
		wg.Go(func() { _, errs[i] = e.CopyPartition(ctx, topic, 0, -1) })
	}
	wg.Wait()
	for i, topic := range topics {
		if errs[i] != nil {
			t.Errorf("%s: %v", topic, errs[i])
		}
		testkit.AssertSameRecords(t, sourceRecords(t, src, topic), testkit.ReadAll(t, c.Target.Bootstrap, f.remote(topic)))
	}
	if err := errs[len(topics)]; err == nil || !errors.Is(err, kerr.MessageTooLarge) || !strings.Contains(err.Error(), bad) {
		t.Errorf("copy of the refused record: %v; want MESSAGE_TOO_LARGE naming %s; log:\n%s", err, bad, logs.String())
	}
	// One shared copy of all four failed, then each partition was copied alone.
	if !strings.Contains(logs.String(), `"msg":"shared copy failed; copying its partitions again one by one","partitions":4`) {
		t.Errorf("no shared copy of the four partitions failed; log:\n%s", logs.String())
	}
	pos := f.positions()
	for _, topic := range topics {
		if pos[TP{topic, 0}] != 9 {
			t.Errorf("position of %s = %d, want 9", topic, pos[TP{topic, 0}])
		}
	}
	if p, ok := pos[TP{bad, 0}]; ok {
		t.Errorf("position %d stored for the refused record", p)
	}
}

// TestWarm: before any event, Warm creates every selected topic's remote topic (same
// partition count), the offsets topic and the offset-syncs topic; a copy afterwards works.
func TestWarm(t *testing.T) {
	c := testkit.Require(t)
	src := c.Source.Bootstrap
	a := testkit.CreateTopic(t, src, testkit.Name(t, "warma"), 3, nil)
	b := testkit.CreateTopic(t, src, testkit.Name(t, "warmb"), 1, nil)
	testkit.Produce(t, src, testkit.SampleRecords(b, 1, 5)...)
	f := newFlow(t, a, b)
	e := f.engine()
	ctx := testkit.Context(t, time.Minute)
	if err := e.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	tgt := testkit.Client(t, c.Target.Bootstrap)
	st, err := cluster.DescribeTopics(ctx, tgt, f.remote(a), f.remote(b), "mm2-offsets."+f.alias+".internal")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int32{f.remote(a): 3, f.remote(b): 1, "mm2-offsets." + f.alias + ".internal": 25} {
		if st[name].Partitions != want {
			t.Errorf("%s: %d partitions after Warm, want %d", name, st[name].Partitions, want)
		}
	}
	if st, err := cluster.DescribeTopic(ctx, testkit.Client(t, src), "mm2-offset-syncs.t"+f.alias+".internal"); err != nil || !st.Exists {
		t.Errorf("offset-syncs topic after Warm: %+v, %v", st, err)
	}
	if s, err := e.CopyPartition(ctx, b, 0, -1); err != nil || s.Records != 5 {
		t.Fatalf("copy after Warm: %d records, %v", s.Records, err)
	}
	testkit.AssertSameRecords(t, sourceRecords(t, src, b), testkit.ReadAll(t, c.Target.Bootstrap, f.remote(b)))
}

// TestWarmInBackgroundGatesCopies: a copy that arrives while the start-up warm-up runs waits
// for the topics it needs (so it neither repeats the warm-up's work nor meets unserved
// partitions), then copies. On a flow's first start it need not wait for the offsets topic
// (no position exists anywhere): it plans without positions and stores its own once the topic
// is ready. On a later start it reads the stored positions.
func TestWarmInBackgroundGatesCopies(t *testing.T) {
	c := testkit.Require(t)
	src := c.Source.Bootstrap
	topic := testkit.CreateTopic(t, src, testkit.Name(t, "gate"), 2, nil)
	testkit.Produce(t, src, testkit.SampleRecords(topic, 2, 10)...)
	f := newFlow(t, topic)
	f.opts.NoSweep = true // partition 1 alone
	for i, want := range []int64{5, 3} {
		e := f.engine()
		var logs bytes.Buffer
		e.log = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		ctx := testkit.Context(t, time.Minute)
		warmErr := make(chan error, 1)
		e.WarmInBackground(ctx, func(err error) { warmErr <- err })
		s, err := e.CopyPartition(ctx, topic, 1, -1)
		if err != nil || s.Records != want {
			t.Fatalf("start %d: copy during warm-up: %d records, %v; want %d", i+1, s.Records, err, want)
		}
		select {
		case <-e.reuse.warming:
		default:
			t.Errorf("start %d: the copy returned while its topics were still being prepared", i+1)
		}
		if err := <-warmErr; err != nil {
			t.Errorf("start %d: warm-up: %v", i+1, err)
		}
		early := strings.Contains(logs.String(), "planning without positions")
		if first := i == 0; early != first {
			t.Errorf("start %d: planned without positions: %v, want %v", i+1, early, first)
		}
		if pos := f.positions()[TP{topic, 1}]; pos != 4+int64(i)*3 {
			t.Errorf("start %d: position %d stored, want %d", i+1, pos, 4+i*3)
		}
		testkit.Produce(t, src, testkit.SampleRecords(topic, 2, 6)...) // 3 more in partition 1
	}
	var want []*kgo.Record
	for _, r := range sourceRecords(t, src, topic) {
		if r.Partition == 1 && r.Offset < 8 {
			want = append(want, r)
		}
	}
	testkit.AssertSameRecords(t, want, testkit.ReadAll(t, c.Target.Bootstrap, f.remote(topic)))
}

// liveConsumers is a franz-go hook counting clients that consume assigned partitions (the
// copies' source consumers) while they are open, and the most open at once.
type liveConsumers struct{ live, peak, total atomic.Int32 }

func isConsumer(cl *kgo.Client) bool {
	m, _ := cl.OptValue(kgo.ConsumePartitions).(map[string]map[int32]kgo.Offset)
	return len(m) > 0
}

func (l *liveConsumers) OnNewClient(cl *kgo.Client) {
	if !isConsumer(cl) {
		return
	}
	l.total.Add(1)
	n := l.live.Add(1)
	for p := l.peak.Load(); n > p && !l.peak.CompareAndSwap(p, n); p = l.peak.Load() {
	}
}

func (l *liveConsumers) OnClientClosed(cl *kgo.Client) {
	if isConsumer(cl) {
		l.live.Add(-1)
	}
}
