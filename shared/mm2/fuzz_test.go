package mm2

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// The decode fuzzers check that decoding never panics and that whatever decodes re-encodes to
// the consumed prefix of the input (trailing bytes are ignored; the version of a versioned
// value is not kept, so it is skipped in the comparison) and decodes again to the same value.

func FuzzDecodeOffsetSync(f *testing.F) {
	f.Add(unhex(f, goldenOffsetSyncKey), unhex(f, goldenOffsetSyncValue))
	f.Add([]byte{0, 0, 0, 0, 0, 0}, make([]byte, 20))
	f.Add([]byte{0xff, 0xff}, []byte{1})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		s, err := DecodeOffsetSync(key, value)
		if err != nil {
			return
		}
		k, v, err := s.Encode()
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", s, err)
		}
		if !bytes.HasPrefix(key, k) || !bytes.HasPrefix(value, v) {
			t.Fatalf("re-encoded %x/%x is not a prefix of %x/%x", k, v, key, value)
		}
		s2, err := DecodeOffsetSync(k, v)
		if err != nil || s2 != s {
			t.Fatalf("decode(encode(%+v)) = %+v, %v", s, s2, err)
		}
	})
}

func FuzzDecodeCheckpoint(f *testing.F) {
	f.Add(unhex(f, goldenCheckpointKey), unhex(f, goldenCheckpointValue))
	f.Add(unhex(f, goldenCheckpointKey), unhex(f, goldenCheckpointValueMeta))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0}, []byte{0, 1})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		c, err := DecodeCheckpoint(key, value)
		if err != nil {
			return
		}
		k, v, err := c.Encode()
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", c, err)
		}
		if !bytes.HasPrefix(key, k) || len(value) < len(v) || !bytes.HasPrefix(value[2:], v[2:]) {
			t.Fatalf("re-encoded %x/%x is not a prefix of %x/%x", k, v, key, value)
		}
		c2, err := DecodeCheckpoint(k, v)
		if err != nil || c2 != c {
			t.Fatalf("decode(encode(%+v)) = %+v, %v", c, c2, err)
		}
	})
}

func FuzzDecodeHeartbeat(f *testing.F) {
	f.Add(unhex(f, goldenHeartbeatKey), unhex(f, goldenHeartbeatValue))
	f.Add([]byte{0, 0, 0, 0}, []byte{0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		h, err := DecodeHeartbeat(key, value)
		if err != nil {
			return
		}
		k, v, err := h.Encode()
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", h, err)
		}
		if !bytes.HasPrefix(key, k) || len(value) < len(v) || !bytes.HasPrefix(value[2:], v[2:]) {
			t.Fatalf("re-encoded %x/%x is not a prefix of %x/%x", k, v, key, value)
		}
		h2, err := DecodeHeartbeat(k, v)
		if err != nil || h2 != h {
			t.Fatalf("decode(encode(%+v)) = %+v, %v", h, h2, err)
		}
	})
}

func FuzzDecodeOffsetKey(f *testing.F) {
	for _, g := range goldenConnect {
		f.Add([]byte(g.json))
	}
	f.Add([]byte(`["MirrorCheckpointConnector",{"partition":-1,"topic":"A.t\"x","group":"g\n<1>\u001f"}]`))
	f.Add([]byte(`["x",{"topic":null}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := DecodeOffsetKey(b)
		if err != nil {
			return
		}
		enc, err := k.Encode()
		if err != nil {
			if _, known := requiredFields[k.Connector]; known {
				t.Fatalf("re-encoding %+v: %v", k, err)
			}
			return
		}
		k2, err := DecodeOffsetKey(enc)
		if err != nil || k2 != k {
			t.Fatalf("decode(encode(%+v)) = %+v, %v (encoded %s)", k, k2, err, enc)
		}
		// The canonical form is stable.
		if enc2, _ := k2.Encode(); !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable: %s vs %s", enc, enc2)
		}
	})
}

func FuzzDecodeOffsetValue(f *testing.F) {
	for _, g := range goldenConnect {
		f.Add([]byte(g.valueJSON))
	}
	f.Add([]byte(`null`))
	f.Add([]byte(`{"offset":-9223372036854775808,"x":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		off, err := DecodeOffsetValue(b)
		if err != nil {
			if errors.Is(err, ErrTombstone) && strings.TrimSpace(string(b)) != "null" {
				t.Fatalf("%q reported as tombstone", b)
			}
			return
		}
		got, err := DecodeOffsetValue(OffsetValue(off))
		if err != nil || got != off {
			t.Fatalf("decode(encode(%d)) = %d, %v", off, got, err)
		}
	})
}

// The round-trip fuzzers build values from arbitrary fields and check decode(encode(x)) == x.

func FuzzRoundTripRecords(f *testing.F) {
	f.Add("orders", "A.orders", "meta", int32(3), int64(1000), int64(990))
	f.Add("", "", "", int32(-1), int64(-1<<63), int64(1<<63-1))
	f.Add("g\x00\xff", "é", "\n", int32(1<<31-1), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, a, b, c string, p int32, x, y int64) {
		s := OffsetSync{Topic: a, Partition: p, UpstreamOffset: x, DownstreamOffset: y}
		if k, v, err := s.Encode(); err == nil {
			if got, err := DecodeOffsetSync(k, v); err != nil || got != s {
				t.Fatalf("offset sync %+v round trip = %+v, %v", s, got, err)
			}
		} else if len(a) <= maxStringLen {
			t.Fatalf("encoding %+v: %v", s, err)
		}
		cp := Checkpoint{Group: a, Topic: b, Partition: p, UpstreamOffset: x, DownstreamOffset: y, Metadata: c}
		if k, v, err := cp.Encode(); err == nil {
			if got, err := DecodeCheckpoint(k, v); err != nil || got != cp {
				t.Fatalf("checkpoint %+v round trip = %+v, %v", cp, got, err)
			}
		} else if len(a) <= maxStringLen && len(b) <= maxStringLen && len(c) <= maxStringLen {
			t.Fatalf("encoding %+v: %v", cp, err)
		}
		h := Heartbeat{SourceAlias: a, TargetAlias: b, Timestamp: x}
		if k, v, err := h.Encode(); err == nil {
			if got, err := DecodeHeartbeat(k, v); err != nil || got != h {
				t.Fatalf("heartbeat %+v round trip = %+v, %v", h, got, err)
			}
		} else if len(a) <= maxStringLen && len(b) <= maxStringLen {
			t.Fatalf("encoding %+v: %v", h, err)
		}
	})
}

func FuzzRoundTripOffsetKeys(f *testing.F) {
	f.Add("A", "orders", "g1", int32(3), int64(1000))
	f.Add("\x00\"\\/\u2028<>&", "\xff", "é😀", int32(-1), int64(-1))
	f.Add("\xe0\xa0", "\xed\xa0\x80z", "\xf4\x90\x80\x80\xc3", int32(0), int64(0)) // truncated, a surrogate, past U+10FFFF
	f.Fuzz(func(t *testing.T, a, b, c string, p int32, off int64) {
		// JSON cannot carry invalid UTF-8: the encoder writes what Java's UTF-8 decoder makes of
		// the bytes, one U+FFFD per maximal subpart of an ill-formed sequence (javaString,
		// checked against Java by TestJavaUTF8Oracle).
		fix := javaString
		for _, tc := range []struct {
			key  []byte
			want OffsetKey
		}{
			{SourceOffsetKey(a, b, p), OffsetKey{Connector: SourceConnector, Cluster: fix(a), Topic: fix(b), Partition: p}},
			{CheckpointOffsetKey(b, p, c), OffsetKey{Connector: CheckpointConnector, Topic: fix(b), Group: fix(c), Partition: p}},
			{HeartbeatOffsetKey(a, c), OffsetKey{Connector: HeartbeatConnector, SourceAlias: fix(a), TargetAlias: fix(c)}},
		} {
			if !utf8.Valid(tc.key) {
				t.Fatalf("key %q is not valid UTF-8", tc.key)
			}
			got, err := DecodeOffsetKey(tc.key)
			if err != nil || got != tc.want {
				t.Fatalf("DecodeOffsetKey(%s) = %+v, %v; want %+v", tc.key, got, err, tc.want)
			}
		}
		if got, err := DecodeOffsetValue(OffsetValue(off)); err != nil || got != off {
			t.Fatalf("offset %d round trip = %d, %v", off, got, err)
		}
	})
}
