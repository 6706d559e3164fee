package mm2

import (
	"encoding/binary"
	"fmt"
	"math"
)

// maxStringLen is the longest string, in UTF-8 bytes, that Kafka's Type.STRING can write
// (Short.MAX_VALUE).
const maxStringLen = math.MaxInt16

// schemaWriter appends Kafka Schema fields to a byte slice. The first error sticks; later
// writes are no-ops.
type schemaWriter struct {
	what string // e.g. "checkpoint key", for error messages
	b    []byte
	err  error
}

func (w *schemaWriter) int16(v int16) {
	w.b = binary.BigEndian.AppendUint16(w.b, uint16(v))
}

func (w *schemaWriter) int32(v int32) {
	w.b = binary.BigEndian.AppendUint32(w.b, uint32(v))
}

func (w *schemaWriter) int64(v int64) {
	w.b = binary.BigEndian.AppendUint64(w.b, uint64(v))
}

func (w *schemaWriter) string(field, s string) {
	if w.err != nil {
		return
	}
	if len(s) > maxStringLen {
		w.err = fmt.Errorf("encoding %s: field %s: string is %d bytes, longer than the maximum of %d",
			w.what, field, len(s), maxStringLen)
		return
	}
	w.int16(int16(len(s)))
	w.b = append(w.b, s...)
}

func (w *schemaWriter) result() ([]byte, error) {
	if w.err != nil {
		return nil, w.err
	}
	return w.b, nil
}

// schemaReader reads Kafka Schema fields from a byte slice. The first error sticks; later
// reads return zero values. Bytes left over at the end are ignored, as in Schema.read.
type schemaReader struct {
	what string // e.g. "checkpoint value", for error messages
	b    []byte
	err  error
}

// take returns the next n bytes, or records an error naming field.
func (r *schemaReader) take(field string, n int) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < n {
		r.err = fmt.Errorf("decoding %s: field %s: need %d bytes, have %d", r.what, field, n, len(r.b))
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *schemaReader) int16(field string) int16 {
	if b := r.take(field, 2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *schemaReader) int32(field string) int32 {
	if b := r.take(field, 4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *schemaReader) int64(field string) int64 {
	if b := r.take(field, 8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (r *schemaReader) string(field string) string {
	n := r.int16(field)
	if r.err != nil {
		return ""
	}
	if n < 0 {
		r.err = fmt.Errorf("decoding %s: field %s: negative string length %d", r.what, field, n)
		return ""
	}
	return string(r.take(field, int(n)))
}
