package engine

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mm2go/mm2go/shared/mm2"
)

// Fast tests of the engine's rules on franz-go's in-memory kfake clusters: planning, positions,
// offset syncs, coalescing and failure handling, in seconds and without brokers. What only real
// brokers show (transactions, compaction, topic configs, KRaft timing) stays in the real-broker
// tests beside these.

// fakeFlow is a flow between two kfake clusters.
type fakeFlow struct {
	t        *testing.T
	src, tgt *kfake.Cluster
	opts     Options
	logs     *lineCounter
}

// lineCounter is a slog.Handler counting messages (and keeping them for failure output).
type lineCounter struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *lineCounter) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, r.Message)
	return nil
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

func newFakeFlow(t *testing.T, topics map[string]int32, opts ...kfake.Opt) *fakeFlow {
	t.Helper()
	mk := func(extra ...kfake.Opt) *kfake.Cluster {
		c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.AllowAutoTopicCreation()}, extra...)...)
		if err != nil {
			t.Fatalf("kfake cluster: %v", err)
		}
		t.Cleanup(c.Close)
		return c
	}
	f := &fakeFlow{t: t, src: mk(opts...), tgt: mk(), logs: &lineCounter{}}
	adm := kadm.NewClient(f.client(Source))
	for name, parts := range topics {
		if _, err := adm.CreateTopic(context.Background(), parts, 1, nil, name); err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
	}
	f.opts = Options{SourceAlias: "src", TargetAlias: "tgt", OffsetStoragePartitions: 5}
	return f
}

func (f *fakeFlow) dial(_ context.Context, side Side, extra ...kgo.Opt) (*kgo.Client, error) {
	c := f.src
	if side == Target {
		c = f.tgt
	}
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, extra...)...)
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
	adm := kadm.NewClient(f.client(side))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		f.t.Fatal(err)
	}
	want := 0
	offs := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		want += int(o.Offset)
		offs[o.Partition] = kgo.NewOffset().AtStart()
	})
	var out []*kgo.Record
	if want > 0 {
		cl := f.client(side, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}))
		for len(out) < want {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				f.t.Fatalf("reading %s: %d of %d records: %v", topic, len(out), want, err)
			}
			out = append(out, fs.Records()...)
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

// positions returns the stored positions (Connect offsets records) of the flow, newest wins.
func (f *fakeFlow) positions() map[TP]int64 {
	f.t.Helper()
	out := map[TP]int64{}
	for _, r := range f.readAll(Target, "mm2-offsets.src.internal") {
		k, err := mm2.DecodeOffsetKey(r.Key)
		if err != nil {
			f.t.Fatalf("undecodable position key %q: %v", r.Key, err)
		}
		if k.Connector != mm2.SourceConnector || k.Cluster != "src" {
			f.t.Fatalf("position key %q: connector %q cluster %q", r.Key, k.Connector, k.Cluster)
		}
		if want := mm2.KeyPartition(r.Key, 5); r.Partition != want {
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
	_ = strings.TrimSpace
}
