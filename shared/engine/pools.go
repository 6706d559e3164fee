package engine

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fetchPool recycles the memory of fetched batches (decompressed bytes, record slices) once
// every record of a batch was acknowledged by the target (kgo.Record.Recycle), so a burst's
// allocation rate and resident memory do not follow the bytes copied.
type fetchPool struct {
	bytes, recs sync.Pool
	// ratio, if set, returns the decompressed-to-compressed ratio of the batches read so far
	// (0 before the first); set before the consumer that uses the pool is created.
	ratio func() float64
}

var (
	_ kgo.PoolDecompressBytes = (*fetchPool)(nil)
	_ kgo.PoolRecords         = (*fetchPool)(nil)
)

// GetDecompressBytes returns a buffer for one batch decompressed: about the size the batches'
// ratio so far predicts (4x before any is known). A pooled buffer is reused only if it is
// between that size and twice it: franz-go zeroes a buffer's whole capacity when its batch is
// recycled, and decompression into one too small grows it by copying. Reusing any larger
// buffer, and starting at 4x for data that compresses more, made those two 14% of an lz4
// copy's CPU.
func (p *fetchPool) GetDecompressBytes(compressed []byte, _ kgo.CompressionCodecType) []byte {
	want := 4 * len(compressed)
	if p.ratio != nil {
		if r := p.ratio(); r > 0 {
			want = int(float64(len(compressed))*r*1.125) + 1<<10
		}
	}
	if b, ok := p.bytes.Get().(*[]byte); ok && cap(*b) >= want && cap(*b) <= 2*want {
		return (*b)[:0]
	}
	return make([]byte, 0, want)
}

func (p *fetchPool) PutDecompressBytes(b []byte) { p.bytes.Put(&b) }

func (p *fetchPool) GetRecords(n int) []kgo.Record {
	if s, ok := p.recs.Get().(*[]kgo.Record); ok && cap(*s) >= n {
		return (*s)[:0]
	}
	return make([]kgo.Record, 0, n)
}

func (p *fetchPool) PutRecords(s []kgo.Record) { p.recs.Put(&s) }
