package engine

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// minFetchBytes is the least a fetch asks for however well the data compresses (a broker
// returns at least one whole batch anyway).
const minFetchBytes = 16 << 10

// fetchSizer keeps a consumer's fetches near their byte budgets once decompressed. A broker
// counts fetch.max.bytes and max.partition.fetch.bytes at the batches' compressed size, and
// the consumer holds a fetch decompressed: data that compresses 20× turned a 512 KiB fetch
// over 50 partitions into some 10-20 MB of records held at once. The sizer watches the
// batches read (franz-go's fetch-batch hook), keeps the running ratio of decompressed to
// compressed bytes, and lowers the budgets the client asks for by that ratio. The first
// fetch, before any ratio is known, asks for an eighth of the budget.
type fetchSizer struct {
	maxBytes, maxPartBytes int32

	mu                   sync.Mutex
	cl                   *kgo.Client
	compressed, raw      int64
	appliedB, appliedPtB int32
}

var _ kgo.HookFetchBatchRead = (*fetchSizer)(nil)

func newFetchSizer(maxBytes, maxPartBytes int32) *fetchSizer {
	return &fetchSizer{maxBytes: maxBytes, maxPartBytes: maxPartBytes}
}

// initial returns the client options for the first fetch and the hook.
func (f *fetchSizer) initial() []kgo.Opt {
	b := max(f.maxBytes/8, min(f.maxBytes, minFetchBytes))
	pb := min(f.maxPartBytes, b)
	f.appliedB, f.appliedPtB = b, pb
	return []kgo.Opt{kgo.FetchMaxBytes(b), kgo.FetchMaxPartitionBytes(pb), kgo.WithHooks(f)}
}

// dial builds the consumer through dial with the sizer's options added.
func (f *fetchSizer) dial(ctx context.Context, dial DialFunc, side Side, opts ...kgo.Opt) (*kgo.Client, error) {
	cl, err := dial(ctx, side, append(opts, f.initial()...)...)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.cl = cl
	f.mu.Unlock()
	return cl, nil
}

// OnFetchBatchRead implements kgo.HookFetchBatchRead.
func (f *fetchSizer) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.compressed += int64(m.CompressedBytes)
	f.raw += int64(max(m.UncompressedBytes, m.CompressedBytes))
	if f.cl == nil || f.compressed == 0 {
		return
	}
	b := scaleDown(f.maxBytes, f.compressed, f.raw)
	pb := min(scaleDown(f.maxPartBytes, f.compressed, f.raw), b)
	if near(b, f.appliedB) && near(pb, f.appliedPtB) {
		return
	}
	f.appliedB, f.appliedPtB = b, pb
	f.cl.UpdateFetchMaxBytes(b, pb)
}

// scaleDown returns budget × compressed / raw, at least minFetchBytes (or budget if smaller).
func scaleDown(budget int32, compressed, raw int64) int32 {
	v := int64(budget) * compressed / raw
	return int32(max(v, int64(min(budget, minFetchBytes))))
}

// ratio returns the decompressed-to-compressed byte ratio of the batches read so far, 0 before
// the first.
func (f *fetchSizer) ratio() float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.compressed == 0 {
		return 0
	}
	return float64(f.raw) / float64(f.compressed)
}

// near reports whether a and b differ by less than a sixth, not worth a change.
func near(a, b int32) bool {
	d := int64(a) - int64(b)
	if d < 0 {
		d = -d
	}
	return d*6 < int64(max(a, b))
}
