package engine

import (
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
)

// TestFetchSizer: the budgets a consumer asks for shrink by the ratio of decompressed to
// compressed bytes seen so far, never below minFetchBytes, and come back when the data stops
// compressing; the first fetch asks for an eighth.
func TestFetchSizer(t *testing.T) {
	f := newFetchSizer(512<<10, 256<<10)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, f.initial()...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	f.cl = cl
	budgets := func() (int32, int32) {
		return cl.OptValue(kgo.FetchMaxBytes).(int32), cl.OptValue(kgo.FetchMaxPartitionBytes).(int32)
	}
	if b, pb := budgets(); b != 64<<10 || pb != 64<<10 {
		t.Errorf("first fetch asks for %d / %d bytes, want 65536 / 65536", b, pb)
	}
	batch := func(compressed, raw int) {
		f.OnFetchBatchRead(kgo.BrokerMetadata{}, "t", 0, kgo.FetchBatchMetrics{CompressedBytes: compressed, UncompressedBytes: raw, CompressionType: 2})
	}
	batch(10_000, 10_000) // not compressed: the whole budget
	if b, pb := budgets(); b != 512<<10 || pb != 256<<10 {
		t.Errorf("uncompressed data: %d / %d bytes, want 524288 / 262144", b, pb)
	}
	batch(10_000, 390_000) // running ratio 20: the partition budget reaches its floor
	if b, pb := budgets(); b != 512<<10/20 || pb != minFetchBytes {
		t.Errorf("20× compression: %d / %d bytes, want %d / %d", b, pb, 512<<10/20, minFetchBytes)
	}
	batch(1_000, 1_000_000) // ratio ~66: both at the floor
	if b, pb := budgets(); b != minFetchBytes || pb != minFetchBytes {
		t.Errorf("66× compression: %d / %d bytes, want %d / %d", b, pb, minFetchBytes, minFetchBytes)
	}
	batch(5_000_000, 5_000_000) // mostly incompressible from now on: ratio ~1.3
	if b, _ := budgets(); b < 512<<10*3/4 {
		t.Errorf("after incompressible data the fetch budget stays at %d bytes", b)
	}
}

// TestScaleDownNear covers the arithmetic's edges.
func TestScaleDownNear(t *testing.T) {
	if got := scaleDown(8<<10, 1, 100); got != 8<<10 {
		t.Errorf("budget below the floor is kept: got %d", got)
	}
	if got := scaleDown(1<<20, 1, 1_000_000); got != minFetchBytes {
		t.Errorf("floor: got %d", got)
	}
	if !near(100, 110) || near(100, 130) {
		t.Error("near: a change under a sixth is ignored, a larger one is not")
	}
}

// fetchBudgets records the fetch budget each source consumer asked for last, when it closes.
type fetchBudgets struct {
	mu   sync.Mutex
	last []int32
}

func (h *fetchBudgets) OnClientClosed(cl *kgo.Client) {
	if !isConsumer(cl) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last = append(h.last, cl.OptValue(kgo.FetchMaxBytes).(int32))
}

// TestFetchBudgetFollowsCompression: a burst over records that compress about 20× (snappy,
// zeros) ends with its consumer asking for a small fraction of FetchMaxBytes, so what it holds
// decompressed stays near the budget; over incompressible records it asks for all of it.
func TestFetchBudgetFollowsCompression(t *testing.T) {
	c := testkit.Require(t)
	src := c.Source.Bootstrap
	zeros := testkit.CreateTopic(t, src, testkit.Name(t, "zeros"), 1, nil)
	noise := testkit.CreateTopic(t, src, testkit.Name(t, "noise"), 1, nil)
	var recs []*kgo.Record
	for range 2000 {
		v := make([]byte, 1024)
		recs = append(recs, &kgo.Record{Topic: zeros, Value: v})
		n := make([]byte, 1024)
		_, _ = rand.Read(n)
		recs = append(recs, &kgo.Record{Topic: noise, Value: n})
	}
	testkit.Produce(t, src, recs...) // franz-go compresses with snappy by default
	for _, tc := range []struct {
		topic string
		check func(int32) bool
		want  string
	}{
		{zeros, func(b int32) bool { return b <= 512<<10/16 }, "at most a sixteenth of 512 KiB"},
		{noise, func(b int32) bool { return b == 512<<10 }, "all of 512 KiB"},
	} {
		f := newFlow(t, tc.topic)
		f.opts.DecodeRecords = true // the record path's consumer is what this test measures
		h := &fetchBudgets{}
		e := f.engineWithHooks(h)
		if s, err := e.Burst(testkit.Context(t, time.Minute), BurstOptions{}); err != nil || s.Records != 2000 {
			t.Fatalf("%s: burst copied %d records: %v", tc.topic, s.Records, err)
		}
		h.mu.Lock()
		if len(h.last) != 1 || !tc.check(h.last[0]) {
			t.Errorf("%s: consumers' last fetch budgets %v, want one of %s", tc.topic, h.last, tc.want)
		}
		h.mu.Unlock()
	}
}

// TestFetchPoolSizesDecompressBuffers: a decompression buffer follows the batches' ratio, and a
// pooled buffer far larger than a batch needs is not handed out (franz-go zeroes a buffer's
// whole capacity on recycling).
func TestFetchPoolSizesDecompressBuffers(t *testing.T) {
	compressed := make([]byte, 1000)
	p := &fetchPool{}
	if got := cap(p.GetDecompressBytes(compressed, 0)); got != 4000 {
		t.Errorf("no ratio yet: capacity %d, want 4x", got)
	}
	p.ratio = func() float64 { return 10 }
	want := 1000*10*9/8 + 1<<10
	if got := cap(p.GetDecompressBytes(compressed, 0)); got != want {
		t.Errorf("ratio 10: capacity %d, want %d", got, want)
	}
	p.PutDecompressBytes(make([]byte, 1<<20))
	if got := cap(p.GetDecompressBytes(compressed, 0)); got != want {
		t.Errorf("after pooling a 1 MiB buffer: capacity %d, want a fresh %d", got, want)
	}
}
