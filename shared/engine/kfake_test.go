package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mm2go/mm2go/shared/filter"
	"github.com/mm2go/mm2go/shared/mm2"
)

// Fast tests of the engine's rules on franz-go's in-memory kfake clusters: planning, positions,
// offset syncs, coalescing and failure handling, in seconds and without brokers. What only real
// brokers show (transactions, compaction, topic configs, KRaft timing) stays in the real-broker
// tests beside these.

// fakeFlow is a flow between two kfake clusters.
type fakeFlow struct {
	t        testing.TB
	src, tgt *kfake.Cluster
	opts     Options
	logs     *lineCounter
	extra    []kgo.Opt // options of every client the engine dials
	srcExtra []kgo.Opt // options of every source client the engine dials
	tgtExtra []kgo.Opt // options of every target client the engine dials
}

// lineCounter is a slog.Handler counting messages (and keeping them, with their attributes,
// for failure output). A test can wait for a condition on them (await).
type lineCounter struct {
	mu    sync.Mutex
	lines []string // messages
	attrs []string // each message's attributes, as key=value ...
	// more is closed (and replaced) when a message is added; nil until a test awaits.
	more chan struct{}
}

func (l *lineCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *lineCounter) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, "%s=%v ", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, r.Message)
	l.attrs = append(l.attrs, b.String())
	if l.more != nil {
		close(l.more)
		l.more = nil
	}
	return nil
}

// await waits until ok, called under the lock with the messages and attributes logged so
// far, returns true, checking again on every new message; it fails the test if ctx ends first.
func (l *lineCounter) await(ctx context.Context, t testing.TB, what string, ok func(lines, attrs []string) bool) {
	t.Helper()
	for {
		l.mu.Lock()
		if ok(l.lines, l.attrs) {
			l.mu.Unlock()
			return
		}
		if l.more == nil {
			l.more = make(chan struct{})
		}
		more := l.more
		l.mu.Unlock()
		select {
		case <-more:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}

// countOf returns how many of lines are msg with attributes (in attrs) containing sub.
func countOf(lines, attrs []string, msg, sub string) int {
	n := 0
	for i, m := range lines {
		if m == msg && strings.Contains(attrs[i], sub) {
			n++
		}
	}
	return n
}

// logged reports whether a message msg was logged with attributes containing sub.
func (l *lineCounter) logged(msg, sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, m := range l.lines {
		if m == msg && strings.Contains(l.attrs[i], sub) {
			return true
		}
	}
	return false
}
func (l *lineCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *lineCounter) WithGroup(string) slog.Handler      { return l }

func (l *lineCounter) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.lines {
		if m == msg {
			n++
		}
	}
	return n
}

// newFakeFlow makes the flow's two clusters and creates topics (name -> partitions) on the
// source. A test (or subtest) that makes one runs in parallel with the other such tests: each
// flow has clusters of its own, and the engine has no global state.
func newFakeFlow(t testing.TB, topics map[string]int32, opts ...kfake.Opt) *fakeFlow {
	t.Helper()
	if tt, ok := t.(*testing.T); ok {
		tt.Parallel()
	}
	mk := func(extra ...kfake.Opt) *kfake.Cluster {
		c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.AllowAutoTopicCreation()}, extra...)...)
		if err != nil {
			t.Fatalf("kfake cluster: %v", err)
		}
		t.Cleanup(c.Close)
		return c
	}
	f := &fakeFlow{t: t, src: mk(opts...), tgt: mk(), logs: &lineCounter{}}
	for name, parts := range topics {
		f.createTopic(Source, name, parts, nil)
	}
	f.opts = Options{SourceAlias: "src", TargetAlias: "tgt", OffsetStoragePartitions: 5}
	return f
}

// newPlanFlow is a fakeFlow (without topics) whose flow selects the source topics topics.
func newPlanFlow(t *testing.T, topics string) *fakeFlow {
	t.Helper()
	f := newFakeFlow(t, nil)
	flt, err := filter.Topics(topics, filter.DefaultTopicsExclude)
	if err != nil {
		t.Fatal(err)
	}
	f.opts.Topics = flt
	return f
}

// admin returns an admin client of one side.
func (f *fakeFlow) admin(side Side) *kadm.Client { return kadm.NewClient(f.client(side)) }

// produceTo writes n records of value "v" to topic's partition p on the source.
func (f *fakeFlow) produceTo(topic string, p int32, n int) {
	f.t.Helper()
	cl := f.client(Source, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		f.t.Fatal(err)
	}
}

// burstWith runs a burst of e and fails the test if it fails.
func (f *fakeFlow) burstWith(e *Engine) Summary {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := e.Burst(ctx, BurstOptions{})
	if err != nil {
		f.t.Fatalf("burst: %v", err)
	}
	return s
}

// plan returns e's plan and fails the test if it cannot be made.
func (f *fakeFlow) plan(e *Engine) *Plan {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pl, err := e.Plan(ctx)
	if err != nil {
		f.t.Fatalf("plan: %v", err)
	}
	return pl
}

// createTopic creates topic on side with parts partitions and the topic configs cfg.
func (f *fakeFlow) createTopic(side Side, topic string, parts int32, cfg map[string]*string) {
	f.t.Helper()
	if _, err := kadm.NewClient(f.client(side)).CreateTopic(context.Background(), parts, 1, cfg, topic); err != nil {
		f.t.Fatalf("creating %s: %v", topic, err)
	}
}

// bootstrap is the address of side's cluster, for the testkit helpers that dial one.
func (f *fakeFlow) bootstrap(side Side) string {
	if side == Target {
		return f.tgt.ListenAddrs()[0]
	}
	return f.src.ListenAddrs()[0]
}

// dial is the flow's DialFunc (and the tests' own clients'). Its clients send kfake no client
// metrics (KIP-714): kfake subscribes every client, and each one's last push, at Close,
// compressed its metrics with a new lz4 or gzip writer (megabytes each): four fifths of the
// bytes the package's tests allocated, and under -race most of their CPU.
func (f *fakeFlow) dial(_ context.Context, side Side, extra ...kgo.Opt) (*kgo.Client, error) {
	c, own := f.src, f.srcExtra
	if side == Target {
		c, own = f.tgt, f.tgtExtra
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.DisableClientMetrics()}, f.extra...)
	opts = append(opts, own...)
	return kgo.NewClient(append(opts, extra...)...)
}

func (f *fakeFlow) client(side Side, extra ...kgo.Opt) *kgo.Client {
	f.t.Helper()
	cl, err := f.dial(context.Background(), side, extra...)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(cl.Close)
	return cl
}

func (f *fakeFlow) engine() *Engine {
	f.t.Helper()
	e, err := New(context.Background(), f.opts, f.dial, slog.New(f.logs))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(e.Close)
	return e
}

// produce writes n records to each partition of topic: key k<p>-<i>, value, a header, a
// timestamp of its own. It returns them as written (with offsets).
func (f *fakeFlow) produce(topic string, parts int32, n int) []*kgo.Record {
	f.t.Helper()
	cl := f.client(Source, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	base := time.UnixMilli(1_700_000_000_000)
	for p := range parts {
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p,
				Key: fmt.Appendf(nil, "k%d-%d", p, i), Value: bytes.Repeat([]byte{byte(i)}, 10+i%7),
				Headers:   []kgo.RecordHeader{{Key: "h", Value: fmt.Appendf(nil, "v%d", i)}},
				Timestamp: base.Add(time.Duration(i) * time.Millisecond)})
		}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		f.t.Fatalf("producing to %s: %v", topic, err)
	}
	return recs
}

// readAll returns every record of topic on side, by partition and offset.
func (f *fakeFlow) readAll(side Side, topic string) []*kgo.Record {
	f.t.Helper()
	return f.readAllOpts(side, topic)
}

// readAllOpts reads every partition of topic on side up to its end offset (as of the call)
// with the consumer options opts (read_committed: the records of committed transactions
// only), and returns the data records by partition and offset.
func (f *fakeFlow) readAllOpts(side Side, topic string, opts ...kgo.Opt) []*kgo.Record {
	f.t.Helper()
	adm := kadm.NewClient(f.client(side))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		f.t.Fatal(err)
	}
	left := map[int32]int64{} // partition -> end offset still to reach
	offs := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
			offs[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	var out []*kgo.Record
	if len(left) > 0 {
		// Control records are kept to see how far each partition was read, then dropped.
		cl := f.client(side, append([]kgo.Opt{kgo.KeepControlRecords(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs})}, opts...)...)
		for len(left) > 0 {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				f.t.Fatalf("reading %s: partitions %v not read to their end: %v", topic, left, err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if end, ok := left[r.Partition]; ok && r.Offset >= end-1 {
					delete(left, r.Partition)
				}
				if !r.Attrs.IsControl() {
					out = append(out, r)
				}
			})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Partition != out[j].Partition {
			return out[i].Partition < out[j].Partition
		}
		return out[i].Offset < out[j].Offset
	})
	return out
}

// assertCopied checks that the remote topic holds exactly want, byte for byte, in the same
// partitions and order.
func (f *fakeFlow) assertCopied(want []*kgo.Record, remote string) {
	f.t.Helper()
	got := f.readAll(Target, remote)
	sort.SliceStable(want, func(i, j int) bool { return want[i].Partition < want[j].Partition })
	if len(got) != len(want) {
		f.t.Fatalf("%s has %d records, want %d", remote, len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if g.Partition != w.Partition || !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) ||
			!g.Timestamp.Equal(w.Timestamp) || fmt.Sprint(g.Headers) != fmt.Sprint(w.Headers) {
			f.t.Fatalf("record %d on %s: got p%d %q=%q %v %v, want p%d %q=%q %v %v", i, remote,
				g.Partition, g.Key, g.Value, g.Timestamp, g.Headers, w.Partition, w.Key, w.Value, w.Timestamp, w.Headers)
		}
	}
}

// assertCaughtUpAfterFailure checks a one-partition topic after a failed burst and a corrected
// one: the remote topic ends with every source record in want, in order (whatever the failed
// burst wrote comes before: duplicates, never a gap), and the stored position is the last
// source offset.
func (f *fakeFlow) assertCaughtUpAfterFailure(want []*kgo.Record, topic string) {
	f.t.Helper()
	got := f.readAll(Target, "src."+topic)
	if len(got) < len(want) {
		f.t.Fatalf("src.%s has %d records, want at least %d", topic, len(got), len(want))
	}
	for i, w := range want {
		g := got[len(got)-len(want)+i]
		if !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) || !g.Timestamp.Equal(w.Timestamp) {
			f.t.Fatalf("record %d of the last %d on src.%s: %q=%q %v, want %q=%q %v", i, len(want), topic, g.Key, g.Value, g.Timestamp, w.Key, w.Value, w.Timestamp)
		}
	}
	if last := want[len(want)-1].Offset; f.positions()[TP{topic, 0}] != last {
		f.t.Errorf("position after the corrected burst = %d, want %d", f.positions()[TP{topic, 0}], last)
	}
}

// inPartition returns the records of recs in partition p.
func inPartition(recs []*kgo.Record, p int32) []*kgo.Record {
	var out []*kgo.Record
	for _, r := range recs {
		if r.Partition == p {
			out = append(out, r)
		}
	}
	return out
}

// positions returns the stored positions (Connect offsets records) of the flow, newest wins.
func (f *fakeFlow) positions() map[TP]int64 {
	f.t.Helper()
	out := map[TP]int64{}
	for _, r := range f.readAllOpts(Target, "mm2-offsets.src.internal", kgo.FetchIsolationLevel(kgo.ReadCommitted())) {
		k, err := mm2.DecodeOffsetKey(r.Key)
		if err != nil {
			f.t.Fatalf("undecodable position key %q: %v", r.Key, err)
		}
		if k.Connector != mm2.SourceConnector || k.Cluster != "src" {
			f.t.Fatalf("position key %q: connector %q cluster %q", r.Key, k.Connector, k.Cluster)
		}
		if want := mm2.KeyPartition(r.Key, f.opts.OffsetStoragePartitions); r.Partition != want {
			f.t.Fatalf("position %q in offsets partition %d, Connect puts it in %d", r.Key, r.Partition, want)
		}
		v, err := mm2.DecodeOffsetValue(r.Value)
		if err != nil {
			f.t.Fatalf("position value %q: %v", r.Value, err)
		}
		out[TP{k.Topic, k.Partition}] = v
	}
	return out
}

// countRequests counts requests of kind key that a cluster receives.
func countRequests(c *kfake.Cluster, key kmsg.Key) *sync.Map {
	var counts sync.Map
	var mu sync.Mutex
	n := 0
	c.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		n++
		counts.Store("n", n)
		mu.Unlock()
		return nil, nil, false
	})
	return &counts
}

func loaded(m *sync.Map) int {
	v, _ := m.Load("n")
	n, _ := v.(int)
	return n
}

func TestFakeBurstCopiesAndStoresPositions(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 3})
	recs := f.produce("orders", 3, 40)
	e := f.engine()
	s, err := e.Burst(context.Background(), BurstOptions{})
	if err != nil {
		t.Fatalf("burst: %v (%+v)", err, s)
	}
	if s.Records != 120 || s.Lag != 0 || s.Reason != ReasonDone {
		t.Fatalf("summary %+v, want 120 records, lag 0, done", s)
	}
	f.assertCopied(recs, "src.orders")
	pos := f.positions()
	for p := range int32(3) {
		if pos[TP{"orders", p}] != 39 {
			t.Errorf("position of orders-%d = %d, want 39", p, pos[TP{"orders", p}])
		}
	}
	// Offset syncs (MM2's encoding, partition 0 of the source-side topic): the first record of
	// each partition, and its last one (a delayed sync promoted at the end).
	syncs := map[int32][]mm2.OffsetSync{}
	for _, r := range f.readAll(Source, "mm2-offset-syncs.tgt.internal") {
		sy, err := mm2.DecodeOffsetSync(r.Key, r.Value)
		if err != nil || r.Partition != 0 {
			t.Fatalf("offset sync %q/%q in partition %d: %v", r.Key, r.Value, r.Partition, err)
		}
		syncs[sy.Partition] = append(syncs[sy.Partition], sy)
	}
	for p := range int32(3) {
		ss := syncs[p]
		if len(ss) < 2 || ss[0].UpstreamOffset != 0 || ss[len(ss)-1].UpstreamOffset != 39 || ss[len(ss)-1].DownstreamOffset != 39 {
			t.Errorf("offset syncs of orders-%d: %+v; want 0->0 first and 39->39 last", p, ss)
		}
	}
}

// TestFakeMaxRecordsPositions: a burst stopped by its record budget stores positions that
// cover exactly the records it copied, and the next burst copies the rest, nothing twice.
func TestFakeMaxRecordsPositions(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 2})
	recs := f.produce("orders", 2, 50)
	e := f.engine()
	s, err := e.Burst(context.Background(), BurstOptions{MaxRecords: 30})
	if err != nil || s.Reason != ReasonMaxRecords || s.Records != 30 || s.Lag != 70 {
		t.Fatalf("first burst: %+v, %v; want 30 records, lag 70, max-records", s, err)
	}
	pos := f.positions()
	var covered int64
	for _, p := range pos {
		covered += p + 1
	}
	if covered != 30 {
		t.Fatalf("positions %v cover %d records, want the 30 copied", pos, covered)
	}
	if s, err := f.engine().Burst(context.Background(), BurstOptions{}); err != nil || s.Records != 70 {
		t.Fatalf("second burst: %+v, %v; want the 70 left", s, err)
	}
	f.assertCopied(recs, "src.orders")
}

// TestFakeLatestStoresPositionAtOnce: with auto.offset.reset=latest a partition without a
// position starts at its end, and that position is stored even though nothing is copied, so
// records arriving before the next burst are not skipped.
func TestFakeLatestStoresPositionAtOnce(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 1})
	f.produce("orders", 1, 5)
	f.opts.AutoOffsetResetLatest = true
	if s, err := f.engine().Burst(context.Background(), BurstOptions{}); err != nil || s.Records != 0 {
		t.Fatalf("burst: %+v, %v", s, err)
	}
	if p := f.positions()[TP{"orders", 0}]; p != 4 {
		t.Fatalf("position %d, want 4 (the end at the first burst, minus one)", p)
	}
	later := f.produce("orders", 1, 3)
	if s, err := f.engine().Burst(context.Background(), BurstOptions{}); err != nil || s.Records != 3 {
		t.Fatalf("second burst: %+v, %v; want the 3 new records", s, err)
	}
	f.assertCopied(later, "src.orders")
}

// TestFakeSweepAndMemory: under KafkaSource's dispatcher events arrive one partition after
// another. The first event's copy takes every lagging partition of the topics checked at
// start (the sweep); the events of the other partitions are then answered from memory, with no
// copy and no request to the source; a record that arrives later is copied by its event.
func TestFakeSweepAndMemory(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"a": 3, "b": 1})
	recs := append(f.produce("a", 3, 20), f.produce("b", 1, 20)...)
	e := f.engine()
	ctx := context.Background()
	if err := e.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := e.CopyThrough(ctx, "a", 0, 0)
	if err != nil || next != 20 {
		t.Fatalf("first event: next %d, %v; want 20", next, err)
	}
	var wantA, wantB []*kgo.Record
	for _, r := range recs {
		if r.Topic == "a" {
			wantA = append(wantA, r)
		} else {
			wantB = append(wantB, r)
		}
	}
	f.assertCopied(wantA, "src.a")
	f.assertCopied(wantB, "src.b")
	fetches := countRequests(f.src, kmsg.Fetch)
	lists := countRequests(f.src, kmsg.ListOffsets)
	for _, tp := range []TP{{"a", 1}, {"a", 2}, {"b", 0}} {
		for off := range int64(20) {
			if n, err := e.CopyThrough(ctx, tp.Topic, tp.Partition, off); err != nil || n != 20 {
				t.Fatalf("event %s@%d: next %d, %v", tp, off, n, err)
			}
		}
	}
	if n, m := loaded(fetches), loaded(lists); n != 0 || m != 0 {
		t.Fatalf("events for swept records sent %d fetch and %d list-offsets requests to the source, want none", n, m)
	}
	if n := f.logs.count("shared copy fetched"); n != 1 {
		t.Fatalf("%d shared copies, want 1", n)
	}
	more := f.produce("b", 1, 2)
	if n, err := e.CopyThrough(ctx, "b", 0, 21); err != nil || n != 22 {
		t.Fatalf("event for a new record: next %d, %v; want 22", n, err)
	}
	f.assertCopied(append(wantB, more...), "src.b")
	pos := f.positions()
	for tp, want := range map[TP]int64{{"a", 0}: 19, {"a", 1}: 19, {"a", 2}: 19, {"b", 0}: 21} {
		if pos[tp] != want {
			t.Errorf("position of %s = %d, want %d", tp, pos[tp], want)
		}
	}
}

// TestFakeConcurrentEventsCopiedOnce: many events of one partition at once (an unordered
// KafkaSource) share copies, every record reaches the target once, and an event naming an
// offset beyond the partition's end fails alone with ErrNoSuchRecord.
func TestFakeConcurrentEventsCopiedOnce(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 1})
	recs := f.produce("orders", 1, 200)
	e := f.engine()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 51)
	for i := range 50 {
		wg.Go(func() { _, errs[i] = e.CopyThrough(ctx, "orders", 0, int64(i*4)) })
	}
	wg.Go(func() { _, errs[50] = e.CopyThrough(ctx, "orders", 0, 1<<40) })
	wg.Wait()
	for i, err := range errs[:50] {
		if err != nil {
			t.Errorf("event %d: %v", i, err)
		}
	}
	if !errors.Is(errs[50], ErrNoSuchRecord) {
		t.Errorf("event beyond the end: %v, want ErrNoSuchRecord", errs[50])
	}
	if n := f.logs.count("shared copy fetched"); n > 3 {
		t.Errorf("%d copies for 51 events, want at most 3", n)
	}
	f.assertCopied(recs, "src.orders")
}

// TestFakeWriteRecordAt: a payload record is written as the copy of its source offset only
// when that offset is the partition's next one: same bytes, the source timestamp, its position
// and offset sync; a redelivery writes nothing; a record ahead of the next offset is refused with
// ErrBehind.
func TestFakeWriteRecordAt(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 1})
	f.produce("orders", 1, 2)
	f.opts.NoSweep = true
	e := f.engine()
	ctx := context.Background()
	if _, err := e.CopyThrough(ctx, "orders", 0, 1); err != nil {
		t.Fatal(err)
	}
	ts := time.UnixMilli(1_700_000_123_456)
	rec := &kgo.Record{Offset: 2, Key: []byte("k"), Value: []byte("payload"), Timestamp: ts,
		Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("text/plain")}}}
	if err := e.WriteRecordAt(ctx, "orders", 0, &kgo.Record{Offset: 3, Value: []byte("early")}); !errors.Is(err, ErrBehind) {
		t.Fatalf("record ahead of the next offset: %v, want ErrBehind", err)
	}
	f.produce("orders", 1, 1) // the record the payload stands for
	for range 2 {             // the second is a redelivery
		if err := e.WriteRecordAt(ctx, "orders", 0, rec); err != nil {
			t.Fatal(err)
		}
	}
	got := f.readAll(Target, "src.orders")
	if len(got) != 3 {
		t.Fatalf("%d records on the target, want 3", len(got))
	}
	g := got[2]
	if string(g.Key) != "k" || string(g.Value) != "payload" || !g.Timestamp.Equal(ts) || fmt.Sprint(g.Headers) != fmt.Sprint(rec.Headers) {
		t.Fatalf("payload record on the target: %q=%q %v %v", g.Key, g.Value, g.Timestamp, g.Headers)
	}
	if p := f.positions()[TP{"orders", 0}]; p != 2 {
		t.Fatalf("position %d, want 2", p)
	}
	if n, ok, err := e.Next(ctx, "orders", 0); err != nil || !ok || n != 3 {
		t.Fatalf("next %d %v %v, want 3", n, ok, err)
	}
}

// TestFakeAckForAnotherRecordFails: an acknowledgement that is not for the oldest record in
// flight of its partition (a record acknowledged twice, or one the partition never produced)
// fails the partition with an internal error and stores no position past the last record
// acknowledged in order; nothing panics. (Before acknowledgements were bound to their
// partition's state, the promise looked the state up by remote partition and indexed an empty
// FIFO: runtime error: index out of range [0] with length 0.)
func TestFakeAckForAnotherRecordFails(t *testing.T) {
	e := bareEngine(Options{MaxBufferedBytes: 1 << 20, OffsetLagMax: 100})
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	w := &work{tp: TP{"orders", 0}, remote: "src.orders", end: 10, initPos: -2}
	c := newCopier(&e.core, BurstOptions{}, []*work{w}, readyTopic(5), newEmitter(&e.core, cl, "syncs", false, nil, nil))
	st := c.states[0]
	st.ctx = context.Background()
	r0 := &kgo.Record{Offset: 0, Value: []byte("a")}
	r1 := &kgo.Record{Offset: 1, Value: []byte("b")}
	recordSink{c}.track(st, r0, recordSize(r0))
	recordSink{c}.track(st, r1, recordSize(r1))
	st.ack(r0, nil)
	st.ack(r0, nil) // again: not the oldest in flight (r1 is)
	stray := &kgo.Record{Offset: 7}
	st.ack(stray, nil) // never produced by this partition
	if err := c.error(); err == nil || !strings.Contains(err.Error(), "internal error") {
		t.Fatalf("copier error %v, want the internal error", err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if p := st.position(); p != 0 {
		t.Fatalf("position %d, want 0 (only the first record was acknowledged in order)", p)
	}
}

// TestFakeExactlyOnceCommitUnsettled: the target answers the first EndTransaction(commit)
// requests of an exactly-once burst with a retriable error (COORDINATOR_LOAD_IN_PROGRESS, as a
// restarting broker does), more often than the client retries them, without committing: the
// commit fails with a retriable error, as when a target broker restarts under it. The burst does not fail: it fences the transaction with a new producer, reads the
// stored position back and copies again from it, and a read_committed reader sees every
// record once.
func TestFakeExactlyOnceCommitUnsettled(t *testing.T) {
	commitAnsweredWith(t, kerr.CoordinatorLoadInProgress, 3, kgo.RequestRetries(1))
}

// TestFakeExactlyOnceCommitServerError: the target answers an exactly-once burst's first
// EndTransaction(commit) requests with UNKNOWN_SERVER_ERROR, without committing, as a Kafka 4.1
// broker did to one of two overlapping exactly-once runs in the Container Apps replay (idle CI at
// 8955440: the run exited 1). The broker failed while handling the commit, so its outcome is
// unknown: the burst settles it (a new producer fences it, the stored position is read back) and
// copies again from what is stored, instead of failing; a read_committed reader sees every record
// once.
func TestFakeExactlyOnceCommitServerError(t *testing.T) {
	commitAnsweredWith(t, kerr.UnknownServerError, 2)
}

// commitAnsweredWith runs an exactly-once burst of 2 x 30 records whose first n
// EndTransaction(commit) requests the target answers with answer, without committing, and
// checks that the burst settled them and copied every record once, with every position at the
// partition's last record.
func commitAnsweredWith(t *testing.T, answer *kerr.Error, n int, extra ...kgo.Opt) {
	f := newFakeFlow(t, map[string]int32{"orders": 2})
	recs := f.produce("orders", 2, 30)
	f.extra = extra
	var mu sync.Mutex
	drops := 0
	f.tgt.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.tgt.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		if !req.(*kmsg.EndTxnRequest).Commit || drops >= n {
			return nil, nil, false
		}
		drops++
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = answer.Code
		return resp, nil, true
	})
	f.opts.ExactlyOnce = true
	s, err := f.engine().Burst(context.Background(), BurstOptions{})
	if err != nil || s.Records != 60 || s.Lag != 0 || s.Reason != ReasonDone {
		t.Fatalf("burst: %+v, %v; want 60 records, lag 0, done\n%s", s, err, strings.Join(f.logs.lines, "\n"))
	}
	if settles := f.logs.count("exactly-once commit not settled; fencing it and reading the stored position back"); drops != n || settles == 0 {
		t.Fatalf("%d commits answered %s, %d settled; log:\n%s", drops, answer.Message, settles, strings.Join(f.logs.lines, "\n"))
	}
	got := f.readAllOpts(Target, "src.orders", kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if len(got) != len(recs) {
		t.Fatalf("read_committed reader sees %d records on src.orders, want %d once each", len(got), len(recs))
	}
	seen := map[string]bool{}
	for _, r := range got {
		if seen[string(r.Key)] {
			t.Fatalf("record %q committed twice", r.Key)
		}
		seen[string(r.Key)] = true
	}
	for p := range int32(2) {
		if pos := f.positions()[TP{"orders", p}]; pos != 29 {
			t.Errorf("position of orders-%d = %d, want 29", p, pos)
		}
	}
}

// TestFakeProducerWarmedWhileTopicsAreCreated: a burst with records to copy has its target
// producer connect and get its producer ID while the remote topic is still being created (so
// the first record does not wait for both after the topic is ready), and a burst with nothing
// to copy sends no InitProducerID to the target at all.
func TestFakeProducerWarmedWhileTopicsAreCreated(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 2})
	recs := f.produce("orders", 2, 10)
	inits := make(chan struct{}, 64)
	f.tgt.ControlKey(int16(kmsg.InitProducerID), func(kmsg.Request) (kmsg.Response, error, bool) {
		f.tgt.KeepControl()
		inits <- struct{}{}
		return nil, nil, false
	})
	var warmedFirst, sawCreate atomic.Bool
	f.tgt.ControlKey(int16(kmsg.CreateTopics), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.tgt.KeepControl()
		for _, rt := range req.(*kmsg.CreateTopicsRequest).Topics {
			if rt.Topic == "src.orders" && !sawCreate.Swap(true) {
				// Hold the remote topic's creation until the target sees an InitProducerID.
				f.tgt.SleepControl(func() {
					select {
					case <-inits:
						warmedFirst.Store(true)
					case <-time.After(5 * time.Second):
					}
				})
			}
		}
		return nil, nil, false
	})
	s, err := f.engine().Burst(context.Background(), BurstOptions{})
	if err != nil || s.Records != 20 {
		t.Fatalf("burst: %+v, %v; want 20 records", s, err)
	}
	f.assertCopied(recs, "src.orders")
	if s.TopicsReadyMS < 0 || s.FirstRecordMS < s.TopicsReadyMS {
		t.Errorf("topics ready after %d ms, first record after %d ms: want both, the record after the topics", s.TopicsReadyMS, s.FirstRecordMS)
	}
	if !sawCreate.Load() || !warmedFirst.Load() {
		t.Fatalf("remote topic created: %v; producer ID requested while it was created: %v (want both)", sawCreate.Load(), warmedFirst.Load())
	}
	for len(inits) > 0 {
		<-inits
	}
	if s, err := f.engine().Burst(context.Background(), BurstOptions{}); err != nil || s.Records != 0 {
		t.Fatalf("idle burst: %+v, %v; want nothing to copy", s, err)
	}
	if n := len(inits); n != 0 {
		t.Fatalf("an idle burst sent %d InitProducerID requests to the target, want 0", n)
	}
}

// TestFakeExactlyOnceCommitFencedInvalidTxnState: while an exactly-once burst commits the first
// transaction of a partition, another instance fences it (a producer with the same
// transactional id initializes: the coordinator aborts the open transaction) and the commit is
// answered INVALID_TXN_STATE, as a Kafka coordinator with transactions V2 answers a fenced
// producer's EndTxn that it takes for a retry of the fencing abort (state CompleteAbort). The
// transaction was aborted, so the partition is given up to the other instance as for
// PRODUCER_FENCED: the burst does not fail, its records are not visible read_committed, the
// stored position does not pass what the target committed, and the summary names the
// partition as the other instance's now (not this burst's lag).
func TestFakeExactlyOnceCommitFencedInvalidTxnState(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 2})
	recs := f.produce("orders", 2, 30)
	var (
		mu       sync.Mutex
		fencedID string
		fenceErr error
	)
	f.tgt.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.tgt.KeepControl()
		end := req.(*kmsg.EndTxnRequest)
		mu.Lock()
		first := end.Commit && fencedID == ""
		if first {
			fencedID = end.TransactionalID
		}
		mu.Unlock() // not held while sleeping: the other partition's EndTxn runs this too
		if !first {
			return nil, nil, false
		}
		// The other instance: its InitProducerID fences this producer and aborts its
		// transaction (served while this EndTxn sleeps).
		f.tgt.SleepControl(func() {
			other := f.client(Target, kgo.TransactionalID(end.TransactionalID))
			_, _, err := other.ProducerID(context.Background())
			other.Close()
			mu.Lock()
			fenceErr = err
			mu.Unlock()
		})
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.InvalidTxnState.Code
		return resp, nil, true
	})
	f.opts.ExactlyOnce = true
	e := f.engine()
	s, err := e.Burst(context.Background(), BurstOptions{})
	mu.Lock()
	if fencedID == "" || fenceErr != nil {
		t.Fatalf("no commit fenced (id %q, fencing error %v)", fencedID, fenceErr)
	}
	mu.Unlock()
	if err != nil || s.Reason != ReasonDone || s.Lag != 0 || len(s.GivenUp) != 1 {
		t.Fatalf("burst: %+v, %v; want no error, done, lag 0, one partition given up\n%s", s, err, strings.Join(f.logs.lines, "\n"))
	}
	var fencedPart int32 = -1
	for tp, why := range s.GivenUp {
		if strings.HasSuffix(why, "another instance owns it now") {
			fmt.Sscanf(tp, "orders-%d", &fencedPart)
		}
	}
	if f.logs.count("partition taken over by another instance (fenced)") != 1 {
		t.Fatalf("no partition given up as fenced; log:\n%s", strings.Join(f.logs.lines, "\n"))
	}
	got := f.readAllOpts(Target, "src.orders", kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if left := len(inPartition(recs, fencedPart)); fencedPart < 0 || int64(len(got)) != s.Records || s.Records+int64(left) != int64(len(recs)) {
		t.Fatalf("read_committed reader sees %d records; summary %d records, %d left in partition %d given up (%v), of %d", len(got), s.Records, left, fencedPart, s.GivenUp, len(recs))
	}
	seen := map[string]bool{}
	perPart := map[int32]int64{}
	for _, r := range got {
		if seen[string(r.Key)] {
			t.Fatalf("record %q committed twice", r.Key)
		}
		seen[string(r.Key)] = true
		perPart[r.Partition]++
	}
	for tp, pos := range f.positions() {
		if pos+1 > perPart[tp.Partition] {
			t.Errorf("position of %s = %d, past the %d records committed on the target", tp, pos, perPart[tp.Partition])
		}
	}
}
