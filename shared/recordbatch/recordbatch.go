// Package recordbatch reads and rewrites the header of Kafka's record batches (magic v2, the
// format of every produce and fetch since Kafka 0.11) without decoding their records, so a
// batch fetched from one cluster can be produced to another as it is: same records, same
// compression, a new producer identity and a recomputed CRC.
//
// The layout is Kafka's DefaultRecordBatch: a 61-byte header (base offset, length, partition
// leader epoch, magic, CRC-32C, attributes, last offset delta, first and max timestamps,
// producer ID, epoch and base sequence, record count) followed by the records, compressed as
// a whole when the attributes name a codec.
package recordbatch

import (
	"encoding/binary"
	"hash/crc32"
)

// Byte offsets of the header fields.
const (
	offBaseOffset   = 0  // int64
	offLength       = 8  // int32: bytes after this field
	offLeaderEpoch  = 12 // int32
	offMagic        = 16 // int8
	offCRC          = 17 // uint32, CRC-32C of everything from offAttributes on
	offAttributes   = 21 // int16
	offLastDelta    = 23 // int32
	offFirstTime    = 27 // int64
	offMaxTime      = 35 // int64
	offProducerID   = 43 // int64
	offEpoch        = 51 // int16
	offBaseSequence = 53 // int32
	offCount        = 57 // int32

	// HeaderSize is the size of a magic v2 batch header.
	HeaderSize = 61
)

// Attribute bits.
const (
	codecMask         = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
	attrDeleteHorizon = 0x40
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Batch is one record batch: a slice of a fetch response's records, header included. Its
// methods read the header; Rewrite changes it in place.
type Batch []byte

// Next splits the first complete batch off b. ok is false if b holds no complete batch (a
// fetch response may end with a partial one).
func Next(b []byte) (batch Batch, rest []byte, ok bool) {
	if len(b) < HeaderSize {
		return nil, b, false
	}
	n := int64(offLeaderEpoch) + int64(int32(binary.BigEndian.Uint32(b[offLength:])))
	if n < HeaderSize || n > int64(len(b)) {
		return nil, b, false
	}
	return Batch(b[:n]), b[n:], true
}

// Size returns the size of the batch b starts with, from its header (0 if b is shorter than
// the length field): b may hold only part of it.
func Size(b []byte) int {
	if len(b) < offLeaderEpoch {
		return 0
	}
	return offLeaderEpoch + int(int32(binary.BigEndian.Uint32(b[offLength:])))
}

// BaseOffset is the offset of the batch's first record.
func (b Batch) BaseOffset() int64 { return int64(binary.BigEndian.Uint64(b[offBaseOffset:])) }

// LastOffset is the offset of the batch's last record (as written, before any compaction).
func (b Batch) LastOffset() int64 {
	return b.BaseOffset() + int64(int32(binary.BigEndian.Uint32(b[offLastDelta:])))
}

// Magic is the batch format version; the other methods assume 2.
func (b Batch) Magic() int8 { return int8(b[offMagic]) }

// Count is the number of records the batch holds now (compaction may have removed some).
func (b Batch) Count() int32 { return int32(binary.BigEndian.Uint32(b[offCount:])) }

// Codec is the compression codec of the records: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
func (b Batch) Codec() int8 { return int8(b.attrs() & codecMask) }

// FirstTimestamp is the timestamp the records' deltas count from, in ms (-1: none).
func (b Batch) FirstTimestamp() int64 { return int64(binary.BigEndian.Uint64(b[offFirstTime:])) }

// MaxTimestamp is the largest record timestamp, in ms (the append time under LogAppendTime).
func (b Batch) MaxTimestamp() int64 { return int64(binary.BigEndian.Uint64(b[offMaxTime:])) }

// LogAppendTime reports whether the records' timestamps are the broker's append time.
func (b Batch) LogAppendTime() bool { return b.attrs()&attrLogAppendTime != 0 }

// Control reports whether the batch holds a transaction marker instead of data.
func (b Batch) Control() bool { return b.attrs()&attrControl != 0 }

// DeleteHorizon reports whether compaction set the batch's delete horizon (its first
// timestamp is then the horizon, not a record time).
func (b Batch) DeleteHorizon() bool { return b.attrs()&attrDeleteHorizon != 0 }

// Contiguous reports whether the batch holds a record for every offset it spans, as a
// producer wrote it: compaction removes records and leaves the span.
func (b Batch) Contiguous() bool {
	return b.Count() > 0 && int64(b.Count()) == b.LastOffset()-b.BaseOffset()+1
}

// RecordsSize is the size of the records part (compressed, if the batch is).
func (b Batch) RecordsSize() int { return len(b) - HeaderSize }

func (b Batch) attrs() uint16 { return binary.BigEndian.Uint16(b[offAttributes:]) }

// Rewrite makes b a batch to produce: base offset 0, no partition leader epoch, not
// transactional, written by producerID at epoch with baseSequence (-1, -1, -1: no producer
// identity), and its CRC recomputed. Records, codec, timestamps and timestamp type stay.
func (b Batch) Rewrite(producerID int64, epoch int16, baseSequence int32) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], 0)
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], 0xffffffff)
	binary.BigEndian.PutUint16(b[offAttributes:], b.attrs()&^attrTransactional)
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(producerID))
	binary.BigEndian.PutUint16(b[offEpoch:], uint16(epoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(baseSequence))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
}

// ValidCRC reports whether the batch's CRC matches its content.
func (b Batch) ValidCRC() bool {
	return binary.BigEndian.Uint32(b[offCRC:]) == crc32.Checksum(b[offAttributes:], castagnoli)
}

// PayloadBytes walks the records of an uncompressed batch and returns the bytes of their keys,
// values, header keys and header values (what a client copying record by record counts), and
// whether the records are well formed with offset deltas 0, 1, 2, … as a producer writes
// them. It reports false for a compressed batch.
func (b Batch) PayloadBytes() (int64, bool) {
	if b.Codec() != 0 {
		return 0, false
	}
	r := []byte(b[HeaderSize:])
	var total int64
	i := 0
	for want := range int64(b.Count()) {
		n, j := varintAt(r, i)
		if j < 0 || n < 1 || n > int64(len(r)-j) {
			return 0, false
		}
		end := j + int(n)
		rec := r[:end]
		k := j + 1                          // attributes
		if _, k = varintAt(rec, k); k < 0 { // timestamp delta
			return 0, false
		}
		var d int64
		if d, k = varintAt(rec, k); k < 0 || d != want { // offset delta
			return 0, false
		}
		for range 2 { // key, value
			var m int64
			if m, k = fieldAt(rec, k); k < 0 {
				return 0, false
			}
			total += m
		}
		var h int64
		if h, k = varintAt(rec, k); k < 0 || h < 0 || h > int64(len(rec)) {
			return 0, false
		}
		for range 2 * h { // header keys and values
			var m int64
			if m, k = fieldAt(rec, k); k < 0 {
				return 0, false
			}
			total += m
		}
		if k != end {
			return 0, false
		}
		i = end
	}
	return total, i == len(r)
}

// varintAt reads the zig-zag varint at b[i:] and returns it with the index after it, or -1.
func varintAt(b []byte, i int) (int64, int) {
	if i < len(b) && b[i] < 0x80 { // one byte: most lengths and deltas
		u := uint64(b[i])
		return int64(u>>1) ^ -int64(u&1), i + 1
	}
	if i > len(b) {
		return 0, -1
	}
	v, n := binary.Varint(b[i:])
	if n <= 0 {
		return 0, -1
	}
	return v, i + n
}

// fieldAt skips the length-prefixed field (-1: null) at b[i:] and returns its length with the
// index after it, or -1.
func fieldAt(b []byte, i int) (int64, int) {
	n, j := varintAt(b, i)
	if j < 0 || n < -1 || n > int64(len(b)-j) {
		return 0, -1
	}
	if n <= 0 {
		return 0, j
	}
	return n, j + int(n)
}

// varint reads one zig-zag varint off *b.
func varint(b *[]byte) (int64, bool) {
	v, i := varintAt(*b, 0)
	if i < 0 {
		return 0, false
	}
	*b = (*b)[i:]
	return v, true
}

// Builder joins consecutive uncompressed batches into one, so a copy of a topic written in
// small batches is not produced one small batch per request. The records keep their bytes;
// only their offset and timestamp deltas are counted again from the joined batch's first
// record. Use Reset before the first Add.
type Builder struct {
	buf          []byte
	n            int32
	first, maxTS int64
	base, last   int64
	payload      int64
}

// Reset empties the builder, which then builds into buf's memory.
func (bd *Builder) Reset(buf []byte) {
	*bd = Builder{buf: buf[:0]}
}

// Len is the size of the batch built so far, header included.
func (bd *Builder) Len() int { return len(bd.buf) }

// Count is the number of records added.
func (bd *Builder) Count() int32 { return bd.n }

// BaseOffset and LastOffset are the source offsets of the first and last records added.
func (bd *Builder) BaseOffset() int64 { return bd.base }

// LastOffset is the source offset of the last record added.
func (bd *Builder) LastOffset() int64 { return bd.last }

// PayloadBytes is the sum of the added batches' PayloadBytes.
func (bd *Builder) PayloadBytes() int64 { return bd.payload }

// Add appends b's records. b must be uncompressed, CreateTime and contiguous, with offsets
// that follow the last record added, and payload its PayloadBytes; Add reports false (and
// adds nothing) if it is not.
func (bd *Builder) Add(b Batch, payload int64) bool {
	if b.Codec() != 0 || b.LogAppendTime() || !b.Contiguous() || b.FirstTimestamp() < 0 {
		return false
	}
	if bd.n == 0 {
		bd.buf = append(bd.buf, b[:HeaderSize]...)
		bd.buf = append(bd.buf, b[HeaderSize:]...) // its deltas count from its own first record
		bd.n, bd.first, bd.maxTS = b.Count(), b.FirstTimestamp(), b.MaxTimestamp()
		bd.base, bd.last, bd.payload = b.BaseOffset(), b.LastOffset(), payload
		return true
	}
	if b.BaseOffset() != bd.last+1 {
		return false
	}
	shift := b.FirstTimestamp() - bd.first
	mark := len(bd.buf)
	r := []byte(b[HeaderSize:])
	for i := range int64(b.Count()) {
		n, ok := varint(&r)
		if !ok || n < 1 || n > int64(len(r)) {
			bd.buf = bd.buf[:mark]
			return false
		}
		rec := r[:n]
		r = r[n:]
		attrs := rec[0]
		rec = rec[1:]
		ts, ok := varint(&rec)
		if !ok {
			bd.buf = bd.buf[:mark]
			return false
		}
		if _, ok = varint(&rec); !ok { // offset delta: i, as Contiguous and PayloadBytes checked
			bd.buf = bd.buf[:mark]
			return false
		}
		ts += shift
		off := int64(bd.n) + i
		size := 1 + varintLen(ts) + varintLen(off) + len(rec)
		bd.buf = binary.AppendVarint(bd.buf, int64(size))
		bd.buf = append(bd.buf, attrs)
		bd.buf = binary.AppendVarint(bd.buf, ts)
		bd.buf = binary.AppendVarint(bd.buf, off)
		bd.buf = append(bd.buf, rec...)
	}
	bd.n += b.Count()
	bd.maxTS = max(bd.maxTS, b.MaxTimestamp())
	bd.last = b.LastOffset()
	bd.payload += payload
	return true
}

// Batch returns the joined batch, its header filled in (base offset 0, CreateTime, no
// compression, no producer; Rewrite sets the producer and the CRC). It shares the builder's
// memory until the next Reset.
func (bd *Builder) Batch() Batch {
	b := Batch(bd.buf)
	binary.BigEndian.PutUint64(b[offBaseOffset:], 0)
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-offLeaderEpoch))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], 0xffffffff)
	b[offMagic] = 2
	binary.BigEndian.PutUint16(b[offAttributes:], 0)
	binary.BigEndian.PutUint32(b[offLastDelta:], uint32(bd.n-1))
	binary.BigEndian.PutUint64(b[offFirstTime:], uint64(bd.first))
	binary.BigEndian.PutUint64(b[offMaxTime:], uint64(bd.maxTS))
	binary.BigEndian.PutUint32(b[offCount:], uint32(bd.n))
	b.Rewrite(-1, -1, -1)
	return b
}

// varintLen is the size of v as a zig-zag varint.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}
