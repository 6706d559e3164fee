package offsetsync

import (
	"testing"

	"github.com/mm2go/mm2go/shared/mm2"
)

// BenchmarkWriterRecord is the per-record cost of the offset-sync rules: 8 partitions, no
// gaps, a sync due every offset.lag.max records, taken as the engine does after each record.
func BenchmarkWriterRecord(b *testing.B) {
	w := NewWriter(DefaultMaxOffsetLag)
	b.ReportAllocs()
	for i := range b.N {
		p := int32(i % 8)
		off := int64(i / 8)
		w.Record("orders", p, off, off)
		_ = w.TakePending()
	}
}

// BenchmarkPartitionRecord is BenchmarkWriterRecord through per-partition handles, as the
// engine records.
func BenchmarkPartitionRecord(b *testing.B) {
	w := NewWriter(DefaultMaxOffsetLag)
	var parts [8]Partition
	for i := range parts {
		parts[i] = w.Partition("orders", int32(i))
	}
	b.ReportAllocs()
	for i := range b.N {
		off := int64(i / 8)
		if parts[i%8].Record(off, off) {
			_ = w.TakePending()
		}
	}
}

func BenchmarkStoreAdd(b *testing.B) {
	s := NewStore()
	s.ReadToEnd()
	b.ReportAllocs()
	for i := range b.N {
		off := int64(i) * 100
		s.Add(mm2.OffsetSync{Topic: "orders", Partition: int32(i % 8), UpstreamOffset: off, DownstreamOffset: off})
	}
}

func BenchmarkStoreTranslate(b *testing.B) {
	s := NewStore()
	for i := range 10_000 {
		off := int64(i) * 100
		s.Add(mm2.OffsetSync{Topic: "orders", Partition: 0, UpstreamOffset: off, DownstreamOffset: off})
	}
	s.ReadToEnd()
	b.ReportAllocs()
	for i := range b.N {
		if _, ok := s.Translate("orders", 0, int64(i%1_000_000)); !ok {
			b.Fatal("no translation")
		}
	}
}
