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
	for i := range int64(b.Count()) {
		n, ok := varint(&r)
		if !ok || n < 0 || n > int64(len(r)) {
			return 0, false
		}
		rec := r[:n]
		r = r[n:]
		if len(rec) < 1 {
			return 0, false
		}
		rec = rec[1:]                  // attributes
		if _, ok = varint(&rec); !ok { // timestamp delta
			return 0, false
		}
		if d, ok := varint(&rec); !ok || d != i { // offset delta
			return 0, false
		}
		for range 2 { // key, value
			m, ok := lenBytes(&rec)
			if !ok {
				return 0, false
			}
			total += m
		}
		h, ok := varint(&rec)
		if !ok || h < 0 {
			return 0, false
		}
		for range 2 * h { // header keys and values
			m, ok := lenBytes(&rec)
			if !ok {
				return 0, false
			}
			total += m
		}
		if len(rec) != 0 {
			return 0, false
		}
	}
	return total, len(r) == 0
}

// varint reads one zig-zag varint off *b.
func varint(b *[]byte) (int64, bool) {
	v, n := binary.Varint(*b)
	if n <= 0 {
		return 0, false
	}
	*b = (*b)[n:]
	return v, true
}

// lenBytes skips one length-prefixed field (-1: null) off *b and returns its length.
func lenBytes(b *[]byte) (int64, bool) {
	n, ok := varint(b)
	if !ok || n < -1 || n > int64(len(*b)) {
		return 0, false
	}
	if n > 0 {
		*b = (*b)[n:]
		return n, true
	}
	return 0, true
}
