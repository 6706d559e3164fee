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
}

var (
	_ kgo.PoolDecompressBytes = (*fetchPool)(nil)
	_ kgo.PoolRecords         = (*fetchPool)(nil)
)

func (p *fetchPool) GetDecompressBytes(compressed []byte, _ kgo.CompressionCodecType) []byte {
	if b, ok := p.bytes.Get().(*[]byte); ok && cap(*b) >= 2*len(compressed) {
		return (*b)[:0]
	}
	return make([]byte, 0, 4*len(compressed))
}

func (p *fetchPool) PutDecompressBytes(b []byte) { p.bytes.Put(&b) }

func (p *fetchPool) GetRecords(n int) []kgo.Record {
	if s, ok := p.recs.Get().(*[]kgo.Record); ok && cap(*s) >= n {
		return (*s)[:0]
	}
	return make([]kgo.Record, 0, n)
}

func (p *fetchPool) PutRecords(s []kgo.Record) { p.recs.Put(&s) }
