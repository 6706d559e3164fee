package mm2

import "testing"

func BenchmarkOffsetSyncEncode(b *testing.B) {
	s := OffsetSync{Topic: "orders.eu-west", Partition: 7, UpstreamOffset: 123456789, DownstreamOffset: 123450000}
	b.ReportAllocs()
	for range b.N {
		if _, _, err := s.Encode(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOffsetSyncDecode(b *testing.B) {
	k, v, err := OffsetSync{Topic: "orders.eu-west", Partition: 7, UpstreamOffset: 123456789, DownstreamOffset: 123450000}.Encode()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for range b.N {
		if _, err := DecodeOffsetSync(k, v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSourceOffsetKey(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		_ = SourceOffsetKey("source", "orders.eu-west", 7)
	}
}

func BenchmarkOffsetValue(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		_ = OffsetValue(123456789)
	}
}

func BenchmarkDecodeOffsetValue(b *testing.B) {
	v := OffsetValue(123456789)
	b.ReportAllocs()
	for range b.N {
		if _, err := DecodeOffsetValue(v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkKeyPartition(b *testing.B) {
	key := []byte("customer-000123456")
	b.ReportAllocs()
	for range b.N {
		_ = KeyPartition(key, 25)
	}
}
