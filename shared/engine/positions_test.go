package engine

import (
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
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/test/testkit"
)

// TestReadPositions writes positions the way a Connect worker does, buries them under many
// newer records of other keys (checkpoint connector keys, other partitions' positions) in the
// same offsets-topic partitions, and reads them back: newest value wins, tombstones mean "no
// position", foreign keys are skipped. On kfake.
func TestReadPositions(t *testing.T) {
	f := newFakeFlow(t, nil)
	f.opts.OffsetStoragePartitions = 25
	e := f.engine()
	ctx := context.Background()
	// Warm creates the offsets topic (exported API: the position store's internals move).
	if err := e.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := cluster.DescribeTopic(ctx, f.client(Target), e.OffsetsTopic())
	if err != nil {
		t.Fatal(err)
	}
	n := st.Partitions
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
		put(mm2.SourceOffsetKey("src", tp.Topic, tp.Partition), mm2.OffsetValue(1))
	}
	put(mm2.SourceOffsetKey("src", "orders", 0), mm2.OffsetValue(41))
	put(mm2.SourceOffsetKey("src", "orders", 1), mm2.OffsetValue(4242))
	put(mm2.SourceOffsetKey("src", "payments", 7), mm2.OffsetValue(7))
	put(mm2.SourceOffsetKey("src", "gone", 0), nil) // tombstone
	// orders-2 keeps value 1. Then lots of noise in every partition: checkpoint keys, and
	// positions of another source alias.
	for i := range 3000 {
		put(mm2.CheckpointOffsetKey("src.orders", int32(i%50), fmt.Sprintf("g%d", i)), mm2.OffsetValue(0))
		put(mm2.SourceOffsetKey("other", "orders", int32(i%40)), mm2.OffsetValue(int64(i)))
	}
	cl := f.client(Target, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got, err := e.ReadPositions(ctx, append(tps, TP{"never", 3}), n)
	if err != nil {
		t.Fatal(err)
	}
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
// leaves every source record on the target: duplicates, never a gap. On kfake, which refuses
// a replication factor above its broker count as Kafka does.
func TestInternalTopicCreationFails(t *testing.T) {
	for _, test := range []struct {
		name    string
		set     func(o *Options, rf int16)
		topic   string
		setting string
		// recopies: without the offsets topic no position was stored, so the corrected burst
		// copies all 30 records again.
		recopies bool
	}{
		{"offsets", func(o *Options, rf int16) { o.OffsetStorageReplicationFactor = rf },
			"mm2-offsets.src.internal", "offset.storage.replication.factor=3", true},
		{"offset-syncs", func(o *Options, rf int16) { o.OffsetSyncsTopicReplicationFactor = rf },
			"mm2-offset-syncs.tgt.internal", "offset-syncs.topic.replication.factor=3", false},
	} {
		t.Run(test.name, func(t *testing.T) {
			f := newFakeFlow(t, map[string]int32{"noint": 1})
			recs := f.produce("noint", 1, 30)
			test.set(&f.opts, 3)
			s, err := f.engine().Burst(context.Background(), BurstOptions{})
			t.Logf("failed burst: %d records, error: %v", s.Records, err)
			if err == nil || s.Reason != ReasonFailed {
				t.Fatalf("burst with a %s topic that cannot be created: reason %q, err %v; want failed", test.name, s.Reason, err)
			}
			if !strings.Contains(err.Error(), test.topic) || !strings.Contains(err.Error(), test.setting) {
				t.Errorf("error %q does not name the topic %s and %s", err, test.topic, test.setting)
			}
			test.set(&f.opts, 1)
			s, err = f.engine().Burst(context.Background(), BurstOptions{})
			if err != nil || s.Lag != 0 || s.Reason != ReasonDone || (test.recopies && s.Records != 30) {
				t.Errorf("corrected burst: %v, reason %q, lag %d, %d records; want done, 0 (and all 30 again: %v)", err, s.Reason, s.Lag, s.Records, test.recopies)
			}
			f.assertCaughtUpAfterFailure(recs, "noint")
		})
	}
}

// TestIdlePositionsRefreshedWithoutCompaction: on an Event Hubs target without compaction the
// offsets topic is created with delete retention, and a burst that finds a partition idle
// stores its unchanged position again (so it outlives the retention); with compaction, an
// idle partition's position is not rewritten. On kfake (it keeps the topic's cleanup.policy;
// nothing here needs the broker to compact).
func TestIdlePositionsRefreshedWithoutCompaction(t *testing.T) {
	for _, compact := range []bool{false, true} {
		t.Run(fmt.Sprintf("compaction=%v", compact), func(t *testing.T) {
			f := newFakeFlow(t, map[string]int32{"idle": 2})
			f.produce("idle", 2, 20)
			f.opts.TargetProfile = cluster.Profile{Cluster: "target", EventHubs: true, CompactInternalTopics: compact}
			const offsets = "mm2-offsets.src.internal"
			count := func() map[TP]int {
				n := map[TP]int{}
				for _, r := range f.readAll(Target, offsets) {
					k, err := mm2.DecodeOffsetKey(r.Key)
					if err != nil {
						t.Fatal(err)
					}
					n[TP{k.Topic, k.Partition}]++
				}
				return n
			}
			burst := func(want int64) {
				t.Helper()
				if s, err := f.engine().Burst(context.Background(), BurstOptions{}); err != nil || s.Records != want {
					t.Fatalf("burst: %+v, %v; want %d records", s, err, want)
				}
			}
			burst(40)
			if v, _ := remoteConfig(t, f.bootstrap(Target), offsets, "cleanup.policy"); (v == "compact") != compact {
				t.Errorf("offsets topic cleanup.policy = %q with compaction %v", v, compact)
			}
			first := count()
			// Partition 1 gets new records, partition 0 stays idle.
			cl := f.client(Source, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			for i := range 10 {
				if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "idle", Partition: 1, Value: fmt.Appendf(nil, "more%d", i)}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			burst(10)
			second := count()
			idle, busy := TP{"idle", 0}, TP{"idle", 1}
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
			if pos[idle] != 19 || pos[busy] != 29 {
				t.Errorf("positions %v, want %s at 19 and %s at 29", pos, idle, busy)
			}
		})
	}
}

// TestConcurrentCopyPartitions: the first events of many new topics arrive at once (a
// KafkaSource starting). The calls are copied together in shared copies (fewer source
// consumers than calls, never more than maxConcurrentCopies at once), each call gets its own
// partition's outcome, and every topic ends up byte-exact on the target with its position
// stored. On kfake.
func TestConcurrentCopyPartitions(t *testing.T) {
	const n = 20
	topics := map[string]int32{}
	for i := range n {
		topics[fmt.Sprintf("many%d", i)] = 1
	}
	f := newFakeFlow(t, topics)
	recs := map[string][]*kgo.Record{}
	for i := range n {
		topic := fmt.Sprintf("many%d", i)
		recs[topic] = f.produce(topic, 1, 25+i)
	}
	ctx := context.Background()
	// Count the copies' source consumers (clients with assigned partitions) alive at once,
	// independently of the engine's own bookkeeping.
	counter := &liveConsumers{}
	f.srcExtra = []kgo.Opt{kgo.WithHooks(counter)}
	e := f.engine()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		topic := fmt.Sprintf("many%d", i)
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
			t.Errorf("many%d: %v", i, err)
		}
	}
	if peak, total := counter.peak.Load(), counter.total.Load(); peak > maxConcurrentCopies || total >= n/2 {
		t.Errorf("%d source consumers for %d calls, %d at once; want fewer than %d, at most %d at once", total, n, peak, n/2, maxConcurrentCopies)
	}
	pos := f.positions()
	for i := range n {
		topic := fmt.Sprintf("many%d", i)
		f.assertCopied(recs[topic], "src."+topic)
		if want := int64(24 + i); pos[TP{topic, 0}] != want {
			t.Errorf("position of %s = %d, want %d", topic, pos[TP{topic, 0}], want)
		}
	}
}

// TestSharedCopyIsolatesFailures: a record the target refuses (larger than its remote topic's
// max.message.bytes) fails the shared copy it is in; the other partitions of that copy are
// copied again one by one and succeed, and only the call of the refused partition fails,
// naming it. On kfake, which enforces max.message.bytes on produce as Kafka does.
func TestSharedCopyIsolatesFailures(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"ok0": 1, "ok1": 1, "ok2": 1, "big": 1})
	topics := []string{"ok0", "ok1", "ok2"}
	recs := map[string][]*kgo.Record{}
	for _, topic := range topics {
		recs[topic] = f.produce(topic, 1, 10)
	}
	big := make([]byte, 20_000)
	_, _ = rand.Read(big) // incompressible: the batch stays larger than the limit
	if err := f.client(Source).ProduceSync(context.Background(), &kgo.Record{Topic: "big", Value: big}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	f.createTopic(Target, "src.big", 1, map[string]*string{"max.message.bytes": kadm.StringPtr("5000")})

	e := f.engine()
	var logs testkit.SyncBuffer // written by the copies' goroutines, read below
	setLogger(e, slog.New(slog.NewJSONHandler(&logs, nil)))
	e.runs.max = 1
	ctx := context.Background()
	// Held behind the start-up warm-up, the four calls are released together and go into
	// one shared copy.
	e.WarmInBackground(ctx, nil)
	var wg sync.WaitGroup
	all := append(topics, "big")
	errs := make([]error, len(all))
	for i, topic := range all {
		wg.Go(func() { _, errs[i] = e.CopyPartition(ctx, topic, 0, -1) })
	}
	wg.Wait()
	for i, topic := range topics {
		if errs[i] != nil {
			t.Errorf("%s: %v", topic, errs[i])
		}
		f.assertCopied(recs[topic], "src."+topic)
	}
	if err := errs[len(topics)]; err == nil || !errors.Is(err, kerr.MessageTooLarge) || !strings.Contains(err.Error(), "big") {
		t.Errorf("copy of the refused record: %v; want MESSAGE_TOO_LARGE naming big; log:\n%s", err, logs.String())
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
	if p, ok := pos[TP{"big", 0}]; ok {
		t.Errorf("position %d stored for the refused record", p)
	}
}

// TestWarm: before any event, Warm creates every selected topic's remote topic (same
// partition count), the offsets topic and the offset-syncs topic; a copy afterwards works.
// On kfake.
func TestWarm(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"warma": 3, "warmb": 1})
	recs := f.produce("warmb", 1, 5)
	f.opts.OffsetStoragePartitions = 25
	e := f.engine()
	ctx := context.Background()
	if err := e.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := cluster.DescribeTopics(ctx, f.client(Target), "src.warma", "src.warmb", "mm2-offsets.src.internal")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int32{"src.warma": 3, "src.warmb": 1, "mm2-offsets.src.internal": 25} {
		if st[name].Partitions != want {
			t.Errorf("%s: %d partitions after Warm, want %d", name, st[name].Partitions, want)
		}
	}
	if st, err := cluster.DescribeTopic(ctx, f.client(Source), "mm2-offset-syncs.tgt.internal"); err != nil || !st.Exists {
		t.Errorf("offset-syncs topic after Warm: %+v, %v", st, err)
	}
	if s, err := e.CopyPartition(ctx, "warmb", 0, -1); err != nil || s.Records != 5 {
		t.Fatalf("copy after Warm: %d records, %v", s.Records, err)
	}
	f.assertCopied(recs, "src.warmb")
}

// TestWarmInBackgroundGatesCopies: a copy that arrives while the start-up warm-up runs waits
// for the topics it needs (so it neither repeats the warm-up's work nor meets unserved
// partitions), then copies. On a flow's first start it need not wait for the offsets topic
// (no position exists anywhere): it plans without positions and stores its own once the topic
// is ready. On a later start it reads the stored positions. On kfake.
func TestWarmInBackgroundGatesCopies(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"gate": 2})
	recs := f.produce("gate", 2, 5)
	f.opts.NoSweep = true // partition 1 alone
	// The first start's copy plans while the warm-up creates the offsets topic: the topic's
	// CreateTopics is held until the copy has said so, or kfake may create it before the copy
	// looks (then the copy plans from the new, empty topic: correct too, but not this case).
	planned := make(chan struct{})
	var plannedOnce sync.Once
	o := f.opts
	if err := o.withDefaults(); err != nil {
		t.Fatal(err)
	}
	offsetsTopic := o.OffsetStorageTopic
	f.tgt.ControlKey(int16(kmsg.CreateTopics), func(r kmsg.Request) (kmsg.Response, error, bool) {
		f.tgt.KeepControl()
		for _, ct := range r.(*kmsg.CreateTopicsRequest).Topics {
			if ct.Topic == offsetsTopic {
				f.tgt.SleepControl(func() { <-planned })
			}
		}
		return nil, nil, false
	})
	for i, want := range []int64{5, 3} {
		e := f.engine()
		var logs testkit.SyncBuffer
		setLogger(e, slog.New(signalOn{slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}),
			"planning without positions", func() { plannedOnce.Do(func() { close(planned) }) }}))
		ctx := context.Background()
		warmErr := make(chan error, 1)
		e.WarmInBackground(ctx, func(err error) { warmErr <- err })
		s, err := e.CopyPartition(ctx, "gate", 1, -1)
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
		if pos := f.positions()[TP{"gate", 1}]; pos != 4+int64(i)*3 {
			t.Errorf("start %d: position %d stored, want %d", i+1, pos, 4+i*3)
		}
		recs = append(recs, f.produce("gate", 2, 3)...) // 3 more in each partition
	}
	var want []*kgo.Record
	for _, r := range inPartition(recs, 1) {
		if r.Offset < 8 {
			want = append(want, r)
		}
	}
	f.assertCopied(want, "src.gate")
}

// signalOn is a slog.Handler that calls seen for every message containing text, then hands the
// record on.
type signalOn struct {
	slog.Handler
	text string
	seen func()
}

func (h signalOn) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.text) {
		h.seen()
	}
	return h.Handler.Handle(ctx, r)
}

func (h signalOn) WithAttrs(as []slog.Attr) slog.Handler {
	return signalOn{h.Handler.WithAttrs(as), h.text, h.seen}
}

func (h signalOn) WithGroup(name string) slog.Handler {
	return signalOn{h.Handler.WithGroup(name), h.text, h.seen}
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

// TestFakeWaitStableWaitsForOpenTransaction: under exactly-once, positions are read only once
// every transaction open on the offsets topic is decided. The first read_committed ListOffsets
// of waitStable is answered while a transaction holds a position (kfake answers requests one
// at a time, and the commit is sent only once that request arrived), so waitStable must ask
// again and return the offsets after the commit.
func TestFakeWaitStableWaitsForOpenTransaction(t *testing.T) {
	f := newFakeFlow(t, nil)
	f.opts.ExactlyOnce = true
	e := f.engine()
	ctx := context.Background()
	parts, _, err := e.positions.ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	txn := f.client(Target, kgo.TransactionalID("waitstable"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	rec := e.positions.record(TP{"orders", 0}, 41, parts)
	if err := txn.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int64
	first := make(chan struct{})
	f.tgt.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.tgt.KeepControl()
		if req.(*kmsg.ListOffsetsRequest).IsolationLevel == 1 && asked.Add(1) == 1 {
			close(first)
		}
		return nil, nil, false
	})
	type result struct {
		lso kadm.ListedOffsets
		err error
	}
	done := make(chan result, 1)
	go func() {
		lso, err := e.positions.waitStable(ctx, e.positions.topic, []int32{rec.Partition})
		done <- result{lso, err}
	}()
	<-first
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if o, _ := r.lso.Lookup(e.positions.topic, rec.Partition); o.Offset < 1 {
		t.Fatalf("last stable offset %d of the position's partition, want past the committed position at 0", o.Offset)
	}
	if n := asked.Load(); n < 2 {
		t.Fatalf("%d read_committed ListOffsets requests, want at least 2 (the first saw the transaction open)", n)
	}
}

// TestFakePositionsReadSlowFetch: reading positions goes on until the offsets topic has been
// read to the end ListOffsets measured, however long the broker takes to answer a fetch: the
// first fetch of the offsets topic is held for 2.5 s (a loaded broker), and the
// newest stored position (7, after an older 3) must still be what read returns. A read that
// takes two empty one-second polls for "nothing more" returns no position at all.
func TestFakePositionsReadSlowFetch(t *testing.T) {
	f := newFakeFlow(t, nil)
	e := f.engine()
	ctx := context.Background()
	parts, _, err := e.positions.ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tp := TP{"orders", 0}
	cl := f.client(Target)
	for _, pos := range []int64{3, 7} {
		if err := cl.ProduceSync(ctx, e.positions.record(tp, pos, parts)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var held atomic.Int32
	f.tgt.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.tgt.KeepControl()
		// Only the read fetches from the target here (fetch requests name topics by ID).
		if len(req.(*kmsg.FetchRequest).Topics) > 0 && held.Add(1) == 1 {
			f.tgt.SleepControl(func() { time.Sleep(2500 * time.Millisecond) })
		}
		return nil, nil, false
	})
	got, err := e.positions.read(ctx, []TP{tp}, parts)
	if err != nil {
		t.Fatal(err)
	}
	if pos, ok := got[tp]; !ok || pos != 7 {
		t.Fatalf("read %v (position of %s: %d, found %v) with the offsets topic's fetches held; want 7, the newest", got, tp, pos, ok)
	}
}
