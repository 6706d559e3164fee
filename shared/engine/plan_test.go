package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/filter"
	"github.com/mm2go/mm2go/shared/policy"
	"github.com/mm2go/mm2go/test/testkit"
)

// TestPlanPartitionRules: where a partition's copy starts and ends, and which gaps it reports.
func TestPlanPartitionRules(t *testing.T) {
	tp := TP{"orders", 0}
	for _, tc := range []struct {
		name                      string
		latest                    bool
		pos, logStart, end, limit int64
		start, stop, initPos      int64
		gap                       *Gap
	}{
		{name: "no position: log start", pos: -1, logStart: 5, end: 20, limit: -1, start: 5, stop: 20, initPos: -2},
		{name: "no position, latest: end, stored at once", latest: true, pos: -1, logStart: 5, end: 20, limit: -1, start: 20, stop: 20, initPos: 19},
		{name: "latest on an empty partition stores nothing", latest: true, pos: -1, logStart: 7, end: 7, limit: -1, start: 7, stop: 7, initPos: -2},
		{name: "position in the log: next offset", pos: 9, logStart: 5, end: 20, limit: -1, start: 10, stop: 20, initPos: -2},
		{name: "position at the end: nothing to copy", pos: 19, logStart: 5, end: 20, limit: -1, start: 20, stop: 20, initPos: -2},
		{name: "limit lowers the end", pos: 9, logStart: 5, end: 20, limit: 12, start: 10, stop: 12, initPos: -2},
		{name: "position just before the log start: no gap", pos: 4, logStart: 5, end: 20, limit: -1, start: 5, stop: 20, initPos: -2},
		{name: "records deleted before they were mirrored", pos: 9, logStart: 15, end: 20, limit: -1, start: 15, stop: 20, initPos: -2,
			gap: &Gap{Topic: "orders", Partition: 0, Kind: GapDeleted, Position: 9, From: 10, To: 15, Records: 5}},
		{name: "deleted, latest: still the log start", latest: true, pos: 9, logStart: 15, end: 20, limit: -1, start: 15, stop: 20, initPos: -2,
			gap: &Gap{Topic: "orders", Partition: 0, Kind: GapDeleted, Position: 9, From: 10, To: 15, Records: 5}},
		{name: "position beyond the end: recreated", pos: 99, logStart: 0, end: 20, limit: -1, start: 0, stop: 20, initPos: -2,
			gap: &Gap{Topic: "orders", Partition: 0, Kind: GapRecreated, Position: 99, From: 100, To: -1, Records: -1}},
	} {
		e := bareEngine(Options{AutoOffsetResetLatest: tc.latest})
		w := e.planner.planPartition(tp, "src.orders", tc.pos, tc.logStart, tc.end, tc.limit)
		if w.start != tc.start || w.end != tc.stop || w.initPos != tc.initPos {
			t.Errorf("%s: [%d,%d) init %d, want [%d,%d) init %d", tc.name, w.start, w.end, w.initPos, tc.start, tc.stop, tc.initPos)
		}
		switch {
		case (w.gap == nil) != (tc.gap == nil):
			t.Errorf("%s: gap %v, want %v", tc.name, w.gap, tc.gap)
		case w.gap != nil && *w.gap != *tc.gap:
			t.Errorf("%s: gap %+v, want %+v", tc.name, *w.gap, *tc.gap)
		}
	}
	g := Gap{Topic: "orders", Partition: 0, Kind: GapDeleted, Position: 9, From: 10, To: 15, Records: 5}
	if s := g.String(); !strings.Contains(s, "orders-0: offsets 10-14 (5 records) were deleted") {
		t.Errorf("gap text %q", s)
	}
}

// TestExplain: MirrorSourceConnector's topic selection, with the reason a dry run shows.
func TestExplain(t *testing.T) {
	topics, err := filter.Topics("orders.*, heartbeats-not", filter.DefaultTopicsExclude)
	if err != nil {
		t.Fatal(err)
	}
	e := bareEngine(Options{SourceAlias: "a", TargetAlias: "b", Policy: policy.NewDefault(".", true), Topics: topics, HeartbeatsReplication: true})
	for _, tc := range []struct {
		topic    string
		internal bool
		ok       bool
		reason   string
	}{
		{"orders", false, true, "included by topics"},
		{"payments", false, false, "not matched by topics"},
		{"orders.internal", false, true, "included by topics"}, // MM2 4.1 mirrors it
		{"mm2-offsets.a.internal", false, false, "excluded by topics.exclude"},
		{"heartbeats", false, true, "heartbeats.replication.enabled"},
		{"b.orders", false, false, "not matched"},
		{"orders_b", false, true, "included"},
		{"__consumer_offsets", true, false, "Kafka internal"},
	} {
		ok, reason := e.Explain(tc.topic, tc.internal)
		if ok != tc.ok || !strings.Contains(reason, tc.reason) {
			t.Errorf("Explain(%q) = %v, %q; want %v, ...%q...", tc.topic, ok, reason, tc.ok, tc.reason)
		}
		if e.Selected(tc.topic) != (tc.ok && !tc.internal) {
			t.Errorf("Selected(%q) disagrees with Explain", tc.topic)
		}
	}
	cycleTopics, _ := filter.Topics(".*", "")
	e = bareEngine(Options{SourceAlias: "a", TargetAlias: "b", Policy: policy.NewDefault(".", true), Topics: cycleTopics, HeartbeatsReplication: true})
	if ok, reason := e.Explain("b.orders", false); ok || !strings.Contains(reason, "cycle") {
		t.Errorf("Explain(b.orders) = %v, %q; want a cycle", ok, reason)
	}
}

// TestPlanThenBurst: the plan names what the burst then does (create with the source's
// configs, grow, config sync, the offsets to copy), and after the burst the plan is empty.
func TestPlanThenBurst(t *testing.T) {
	f := newPlanFlow(t, "orders, pays")
	f.opts.SyncTopicConfigs = true
	ctx := context.Background()
	retention := "3600000"
	if err := f.src.CreateTopic("orders", 2, map[string]string{"retention.ms": retention}); err != nil {
		t.Fatal(err)
	}
	if err := f.src.CreateTopic("pays", 3, map[string]string{"retention.ms": retention}); err != nil {
		t.Fatal(err)
	}
	if err := f.tgt.CreateTopic("src.pays", 1, nil); err != nil { // fewer partitions, default retention
		t.Fatal(err)
	}
	f.produceTo("orders", 0, 7)
	f.produceTo("pays", 2, 4)
	e := f.engine()
	pl := f.plan(e)
	if len(pl.Topics) != 2 {
		t.Fatalf("topics %+v", pl.Topics)
	}
	o, p := pl.Topics[0], pl.Topics[1]
	if o.Source != "orders" || o.Action != ActionCreate || o.Remote != "src.orders" || o.Configs["retention.ms"] == nil || *o.Configs["retention.ms"] != retention {
		t.Errorf("orders: %+v", o)
	}
	if p.Action != ActionGrow || p.TargetPartitions != 1 || p.Partitions != 3 {
		t.Errorf("pays: %+v", p)
	}
	if len(p.ConfigChanges) != 1 || p.ConfigChanges[0].Name != "retention.ms" || p.ConfigChanges[0].Op != "set" || *p.ConfigChanges[0].Value != retention {
		t.Errorf("pays config changes: %+v", p.ConfigChanges)
	}
	copies := map[TP][2]int64{}
	for _, pp := range pl.Partitions {
		copies[pp.TP] = [2]int64{pp.Start, pp.End}
	}
	if copies[TP{"orders", 0}] != [2]int64{0, 7} || copies[TP{"pays", 2}] != [2]int64{0, 4} || copies[TP{"pays", 0}] != [2]int64{0, 0} || len(copies) != 5 {
		t.Errorf("copies %v", copies)
	}

	s := f.burstWith(e)
	if s.Records != 11 || len(s.Gaps) != 0 {
		t.Fatalf("burst: %+v", s)
	}
	tgt := f.admin(Target)
	ends, err := tgt.ListEndOffsets(ctx, "src.orders", "src.pays")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("src.orders", 0); o.Offset != 7 {
		t.Errorf("src.orders-0 ends at %d", o.Offset)
	}
	if o, ok := ends.Lookup("src.pays", 2); !ok || o.Offset != 4 {
		t.Errorf("src.pays-2 ends at %d (%v): not grown?", o.Offset, ok)
	}
	rc, err := tgt.DescribeTopicConfigs(ctx, "src.pays")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := rc.On("src.pays", nil); err != nil || !hasConfig(v.Configs, "retention.ms", retention) {
		t.Errorf("src.pays configs not synced: %v %v", v.Configs, err)
	}

	pl = f.plan(e)
	for _, tp := range pl.Topics {
		if tp.Action != ActionExists || len(tp.ConfigChanges) != 0 {
			t.Errorf("after the burst: %+v", tp)
		}
	}
	for _, pp := range pl.Partitions {
		if pp.Records() != 0 || pp.Gap != nil {
			t.Errorf("after the burst: %+v", pp)
		}
	}
}

func hasConfig(cs []kadm.Config, name, value string) bool {
	for _, c := range cs {
		if c.Key == name && c.Value != nil && *c.Value == value {
			return true
		}
	}
	return false
}

// TestPlanEndIsLastStableOffset: read_committed copies (exactly-once, or
// consumer.isolation.level) end at the last stable offset, an at-least-once copy at the high
// watermark; the plan says which.
func TestPlanEndIsLastStableOffset(t *testing.T) {
	f := newPlanFlow(t, "orders")
	ctx := context.Background()
	if err := f.src.CreateTopic("orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	f.produceTo("orders", 0, 3)
	txn, err := f.dial(ctx, Source, kgo.TransactionalID("open"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	f.produceTo("orders", 0, 2)
	for _, tc := range []struct {
		committed bool
		end       int64
	}{{false, 6}, {true, 3}} {
		f.opts.ReadCommitted = tc.committed
		pl := f.plan(f.engine())
		if len(pl.Partitions) != 1 || pl.Partitions[0].End != tc.end {
			t.Errorf("read_committed=%v: %+v, want end %d", tc.committed, pl.Partitions, tc.end)
		}
	}
	_ = txn.EndTransaction(ctx, kgo.TryAbort)
}

// TestPlanEndIsLastStableOffsetBroker is TestPlanEndIsLastStableOffset on the harness source
// broker, whose transactions are the real ones: with a transaction left open, read_committed
// plans end at the last stable offset (the open transaction's first record) and at-least-once
// plans at the high watermark; once it is aborted both end past its marker.
func TestPlanEndIsLastStableOffsetBroker(t *testing.T) {
	c := testkit.Require(t)
	src := c.Source.Bootstrap
	topic := testkit.CreateTopic(t, src, testkit.Name(t, "lso"), 1, nil)
	testkit.Produce(t, src, testkit.SampleRecords(topic, 1, 3)...) // offsets 0-2
	txn := testkit.Client(t, src, kgo.TransactionalID(testkit.Name(t, "open")), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := testkit.Context(t, time.Minute)
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("open")}).FirstErr(); err != nil { // offset 3
		t.Fatal(err)
	}
	testkit.Produce(t, src, testkit.SampleRecords(topic, 1, 2)...) // offsets 4-5
	f := newFlow(t, topic)
	end := func(committed bool) int64 {
		t.Helper()
		f.opts.ReadCommitted = committed
		pl, err := f.engine().Plan(ctx)
		if err != nil {
			t.Fatalf("plan: %v", err)
		}
		if len(pl.Partitions) != 1 {
			t.Fatalf("plan of %d partitions, want 1", len(pl.Partitions))
		}
		return pl.Partitions[0].End
	}
	if e := end(false); e != 6 {
		t.Errorf("transaction open, at-least-once: end %d, want 6", e)
	}
	if e := end(true); e != 3 {
		t.Errorf("transaction open, read_committed: end %d, want 3", e)
	}
	if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	// The coordinator answers before the marker (offset 6) is written: wait for it.
	testkit.WaitFor(t, 30*time.Second, "the abort marker", func() bool { return end(false) == 7 })
	if e := end(true); e != 7 {
		t.Errorf("transaction aborted, read_committed: end %d, want 7", e)
	}
}

// TestBurstReportsDeletedRecords: records deleted on the source past the stored position are
// reported as a gap with their count, and the burst copies from the log start.
func TestBurstReportsDeletedRecords(t *testing.T) {
	f := newPlanFlow(t, "orders")
	ctx := context.Background()
	if err := f.src.CreateTopic("orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	f.produceTo("orders", 0, 10)
	e := f.engine()
	if s := f.burstWith(e); s.Records != 10 {
		t.Fatalf("first burst: %+v", s)
	}
	f.produceTo("orders", 0, 10)
	resp, err := f.admin(Source).DeleteRecords(ctx, kadm.Offsets{"orders": {0: {Topic: "orders", Partition: 0, At: 15, LeaderEpoch: -1}}})
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	pl := f.plan(e)
	want := Gap{Topic: "orders", Partition: 0, Kind: GapDeleted, Position: 9, From: 10, To: 15, Records: 5}
	if len(pl.Partitions) != 1 || pl.Partitions[0].Gap == nil || *pl.Partitions[0].Gap != want {
		t.Fatalf("plan: %+v", pl.Partitions)
	}
	s := f.burstWith(e)
	if s.Records != 5 || len(s.Gaps) != 1 || s.Gaps[0] != want {
		t.Fatalf("second burst: records %d gaps %+v, want 5 and %+v", s.Records, s.Gaps, want)
	}
	if s = f.burstWith(e); len(s.Gaps) != 0 || s.Records != 0 {
		t.Fatalf("third burst: %+v", s)
	}
}

// TestNoOffsetSyncs: emit.offset-syncs.enabled=false creates no offset-syncs topic and writes
// no sync; the records and positions are copied as usual.
func TestNoOffsetSyncs(t *testing.T) {
	f := newPlanFlow(t, "orders")
	f.opts.EmitOffsetSyncs = new(false)
	if err := f.src.CreateTopic("orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	f.produceTo("orders", 0, 300)
	e := f.engine()
	if s := f.burstWith(e); s.Records != 300 {
		t.Fatalf("burst: %+v", s)
	}
	ctx := context.Background()
	for _, side := range []Side{Source, Target} {
		topics, err := f.admin(side).ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range topics.Names() {
			if strings.Contains(name, "offset-syncs") {
				t.Errorf("%s has %s", side, name)
			}
		}
	}
	pl := f.plan(e)
	if len(pl.Partitions) != 1 || pl.Partitions[0].Position != 299 {
		t.Errorf("position not stored: %+v", pl.Partitions)
	}
}
