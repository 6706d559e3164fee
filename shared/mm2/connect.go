package mm2

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Connector names under which MM2's dedicated mode stores Connect source offsets. They are the
// simple class names of the three connectors and the first element of every offset key.
const (
	// SourceConnector is MirrorSourceConnector: one offset per replicated source partition.
	SourceConnector = "MirrorSourceConnector"
	// CheckpointConnector is MirrorCheckpointConnector: one offset (always 0) per
	// group/topic/partition it checkpointed.
	CheckpointConnector = "MirrorCheckpointConnector"
	// HeartbeatConnector is MirrorHeartbeatConnector: one offset (always 0) per flow.
	HeartbeatConnector = "MirrorHeartbeatConnector"
)

// ErrTombstone is returned (wrapped) by DecodeOffsetValue for a null record value, which
// Connect writes to delete a stored offset. Check it with errors.Is.
var ErrTombstone = errors.New("tombstone (null offset value)")

// Field names of the Connect source partition maps, as MM2 writes them.
const (
	fieldCluster     = "cluster"
	fieldPartition   = "partition"
	fieldTopic       = "topic"
	fieldGroup       = "group"
	fieldSourceAlias = "sourceClusterAlias"
	fieldTargetAlias = "targetClusterAlias"
	fieldOffset      = "offset"
)

// SourceOffsetKey returns the Connect offsets record key MirrorSourceConnector uses for a
// source partition: ["MirrorSourceConnector",{"cluster":C,"partition":N,"topic":T}], byte for
// byte as Jackson writes it (Java HashMap order, no whitespace). cluster is the source alias,
// topic the source topic name.
func SourceOffsetKey(cluster, topic string, partition int32) []byte {
	b := make([]byte, 0, 64+len(cluster)+len(topic))
	b = append(b, `["`+SourceConnector+`",{"`+fieldCluster+`":`...)
	b = appendJSONString(b, cluster)
	b = append(b, `,"`+fieldPartition+`":`...)
	b = strconv.AppendInt(b, int64(partition), 10)
	b = append(b, `,"`+fieldTopic+`":`...)
	b = appendJSONString(b, topic)
	return append(b, "}]"...)
}

// CheckpointOffsetKey returns the Connect offsets record key MirrorCheckpointConnector uses:
// ["MirrorCheckpointConnector",{"partition":N,"topic":T,"group":G}], byte for byte as Jackson
// writes it. topic is the target-side (renamed) topic name.
func CheckpointOffsetKey(topic string, partition int32, group string) []byte {
	b := make([]byte, 0, 72+len(topic)+len(group))
	b = append(b, `["`+CheckpointConnector+`",{"`+fieldPartition+`":`...)
	b = strconv.AppendInt(b, int64(partition), 10)
	b = append(b, `,"`+fieldTopic+`":`...)
	b = appendJSONString(b, topic)
	b = append(b, `,"`+fieldGroup+`":`...)
	b = appendJSONString(b, group)
	return append(b, "}]"...)
}

// HeartbeatOffsetKey returns the Connect offsets record key MirrorHeartbeatConnector uses:
// ["MirrorHeartbeatConnector",{"sourceClusterAlias":S,"targetClusterAlias":T}], byte for byte
// as Jackson writes it.
func HeartbeatOffsetKey(sourceAlias, targetAlias string) []byte {
	b := make([]byte, 0, 80+len(sourceAlias)+len(targetAlias))
	b = append(b, `["`+HeartbeatConnector+`",{"`+fieldSourceAlias+`":`...)
	b = appendJSONString(b, sourceAlias)
	b = append(b, `,"`+fieldTargetAlias+`":`...)
	b = appendJSONString(b, targetAlias)
	return append(b, "}]"...)
}

// OffsetValue returns the Connect offsets record value {"offset":N}. MirrorSourceConnector
// stores the upstream offset of the last replicated record (not +1); the checkpoint and
// heartbeat connectors always store 0.
func OffsetValue(offset int64) []byte {
	b := make([]byte, 0, 32)
	b = append(b, `{"`+fieldOffset+`":`...)
	b = strconv.AppendInt(b, offset, 10)
	return append(b, '}')
}

// OffsetKey is a decoded Connect offsets record key: the connector name and the fields of its
// source partition map. Which fields are meaningful depends on Connector: Cluster, Topic and
// Partition for SourceConnector; Topic, Partition and Group for CheckpointConnector;
// SourceAlias and TargetAlias for HeartbeatConnector.
type OffsetKey struct {
	Connector   string // connector name, e.g. SourceConnector
	Cluster     string // "cluster": source alias (source connector)
	Topic       string // "topic": source topic (source connector) or renamed target topic (checkpoint connector)
	Group       string // "group": consumer group (checkpoint connector)
	SourceAlias string // "sourceClusterAlias" (heartbeat connector)
	TargetAlias string // "targetClusterAlias" (heartbeat connector)
	Partition   int32  // "partition" (source and checkpoint connectors)
}

// Encode returns the canonical (Jackson-identical) key bytes for k, built with the function
// matching k.Connector. It fails for a connector name other than the three MM2 ones.
func (k OffsetKey) Encode() ([]byte, error) {
	switch k.Connector {
	case SourceConnector:
		return SourceOffsetKey(k.Cluster, k.Topic, k.Partition), nil
	case CheckpointConnector:
		return CheckpointOffsetKey(k.Topic, k.Partition, k.Group), nil
	case HeartbeatConnector:
		return HeartbeatOffsetKey(k.SourceAlias, k.TargetAlias), nil
	default:
		return nil, fmt.Errorf("encoding connect offset key: unknown connector %q", k.Connector)
	}
}

// requiredFields lists the source partition fields each MM2 connector always writes.
var requiredFields = map[string][]string{
	SourceConnector:     {fieldCluster, fieldPartition, fieldTopic},
	CheckpointConnector: {fieldPartition, fieldTopic, fieldGroup},
	HeartbeatConnector:  {fieldSourceAlias, fieldTargetAlias},
}

// DecodeOffsetKey parses a Connect offsets record key [name, {partition map}] in any key order
// and whitespace. For the three MM2 connectors every field that connector writes must be
// present with the right JSON type (strings, and an integer partition within int32); other
// connector names are accepted and get whichever of the known fields are present. Unknown
// fields are ignored.
func DecodeOffsetKey(b []byte) (OffsetKey, error) {
	var k OffsetKey
	if b == nil {
		return k, errors.New("decoding connect offset key: key is null")
	}
	var arr []json.RawMessage
	if err := json.Unmarshal(b, &arr); err != nil {
		return k, fmt.Errorf("decoding connect offset key: not a JSON array: %w", err)
	}
	if len(arr) != 2 {
		return k, fmt.Errorf("decoding connect offset key: array has %d elements, want 2", len(arr))
	}
	name, err := jsonString(arr[0])
	if err != nil {
		return k, fmt.Errorf("decoding connect offset key: connector name: %w", err)
	}
	k.Connector = name
	var fields map[string]json.RawMessage
	if isJSONNull(arr[1]) {
		return k, fmt.Errorf("decoding connect offset key of %s: partition map is null", name)
	}
	if err := json.Unmarshal(arr[1], &fields); err != nil {
		return k, fmt.Errorf("decoding connect offset key of %s: partition map is not a JSON object: %w", name, err)
	}
	for _, f := range requiredFields[name] {
		if _, ok := fields[f]; !ok {
			return k, fmt.Errorf("decoding connect offset key of %s: field %s missing", name, f)
		}
	}
	for _, sf := range []struct {
		name string
		dst  *string
	}{
		{fieldCluster, &k.Cluster},
		{fieldTopic, &k.Topic},
		{fieldGroup, &k.Group},
		{fieldSourceAlias, &k.SourceAlias},
		{fieldTargetAlias, &k.TargetAlias},
	} {
		raw, ok := fields[sf.name]
		if !ok {
			continue
		}
		if *sf.dst, err = jsonString(raw); err != nil {
			return OffsetKey{}, fmt.Errorf("decoding connect offset key of %s: field %s: %w", name, sf.name, err)
		}
	}
	if raw, ok := fields[fieldPartition]; ok {
		p, err := jsonInt(raw, 32)
		if err != nil {
			return OffsetKey{}, fmt.Errorf("decoding connect offset key of %s: field %s: %w", name, fieldPartition, err)
		}
		k.Partition = int32(p)
	}
	return k, nil
}

// DecodeOffsetValue parses a Connect offsets record value {"offset":N} and returns N. A nil
// value, or the JSON literal null, is a deletion of the stored offset: the error then matches
// errors.Is(err, ErrTombstone). Other keys in the object are ignored.
func DecodeOffsetValue(b []byte) (offset int64, err error) {
	if b == nil || isJSONNull(b) {
		return 0, fmt.Errorf("decoding connect offset value: %w", ErrTombstone)
	}
	if n, ok := compactOffsetValue(b); ok {
		return n, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return 0, fmt.Errorf("decoding connect offset value: not a JSON object: %w", err)
	}
	raw, ok := fields[fieldOffset]
	if !ok {
		return 0, fmt.Errorf("decoding connect offset value: field %s missing", fieldOffset)
	}
	if offset, err = jsonInt(raw, 64); err != nil {
		return 0, fmt.Errorf("decoding connect offset value: field %s: %w", fieldOffset, err)
	}
	return offset, nil
}

// compactOffsetValue parses the exact form OffsetValue and Connect's JsonConverter write,
// {"offset":N}, without allocating; ok is false for anything else (the general decoder then
// decides, with its errors).
func compactOffsetValue(b []byte) (int64, bool) {
	const prefix = `{"` + fieldOffset + `":`
	if len(b) < len(prefix)+2 || string(b[:len(prefix)]) != prefix || b[len(b)-1] != '}' {
		return 0, false
	}
	num := b[len(prefix) : len(b)-1]
	digits := num
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || (digits[0] == '0' && len(digits) > 1) {
		return 0, false // not a JSON integer (or a leading zero)
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(num), 10, 64)
	return n, err == nil
}

func isJSONNull(raw []byte) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// jsonString decodes a JSON string, rejecting null and other types.
func jsonString(raw json.RawMessage) (string, error) {
	var s *string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("not a JSON string: %s", truncateForError(raw))
	}
	if s == nil {
		return "", errors.New("is null, want a string")
	}
	return *s, nil
}

// jsonInt decodes a JSON integer that fits in bits bits (no fraction, no exponent). A JSON
// string holding digits is rejected: Jackson writes Java integers as JSON numbers.
func jsonInt(raw json.RawMessage, bits int) (int64, error) {
	t := bytes.TrimSpace(raw)
	if string(t) == "null" {
		return 0, errors.New("is null, want an integer")
	}
	if len(t) == 0 || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) {
		return 0, fmt.Errorf("not a JSON number: %s", truncateForError(t))
	}
	var n json.Number
	if err := json.Unmarshal(t, &n); err != nil {
		return 0, fmt.Errorf("not a JSON number: %s", truncateForError(t))
	}
	v, err := strconv.ParseInt(n.String(), 10, bits)
	if err != nil {
		return 0, fmt.Errorf("%s is not an integer of %d bits", truncateForError(t), bits)
	}
	return v, nil
}

// truncateForError shortens raw JSON for inclusion in an error message.
func truncateForError(b []byte) string {
	const limit = 40
	if len(b) > limit {
		return strconv.Quote(string(b[:limit])) + "..."
	}
	return strconv.Quote(string(b))
}

const hexUpper = "0123456789ABCDEF"

// appendJSONString appends s as a JSON string literal the way the JsonConverter of Connect's
// offsets topic writes it (Jackson 2.19's UTF-8 generator with default settings), so that
// position keys are byte-identical to MM2's: '"' and '\\' get a backslash; \b \t \n \f \r their
// short escapes; every other control character below 0x20 becomes \u00XX with upper-case hex
// digits; a character above U+FFFF is written as its UTF-16 surrogate pair, \uXXXX\uXXXX
// (Jackson's COMBINE_UNICODE_SURROGATES_IN_UTF8 is off by default); every other character,
// including '/', DEL, U+2028/U+2029 and the rest of non-ASCII, is written as raw UTF-8 (no HTML
// escaping). Bytes that are not UTF-8 are written as U+FFFD, one for each maximal subpart of an
// ill-formed sequence (a truncated sequence is one, any other bad byte is one each), as Java's
// UTF-8 decoder gives when Kafka's protocol reader builds a String from them.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0 // start of the pending run of bytes to copy verbatim
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\t':
				b = append(b, '\\', 't')
			case '\n':
				b = append(b, '\\', 'n')
			case '\f':
				b = append(b, '\\', 'f')
			case '\r':
				b = append(b, '\\', 'r')
			default:
				b = append(b, '\\', 'u', '0', '0', hexUpper[c>>4], hexUpper[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = utf8.AppendRune(b, utf8.RuneError)
			i += maximalSubpart(s[i:])
			start = i
		case r > 0xFFFF:
			b = append(b, s[start:i]...)
			hi, lo := utf16.EncodeRune(r)
			b = appendUnicodeEscape(appendUnicodeEscape(b, hi), lo)
			i += size
			start = i
		default:
			i += size
		}
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendUnicodeEscape appends \uXXXX for the UTF-16 code unit u, with upper-case hex digits.
func appendUnicodeEscape(b []byte, u rune) []byte {
	return append(b, '\\', 'u', hexUpper[u>>12&0xf], hexUpper[u>>8&0xf], hexUpper[u>>4&0xf], hexUpper[u&0xf])
}

// maximalSubpart returns how many bytes of the ill-formed UTF-8 sequence s starts with Java's
// UTF-8 decoder replaces with one U+FFFD: the maximal subpart (Unicode 16.0 section 3.9, "U+FFFD
// Substitution of Maximal Subparts"), a lead byte followed by the continuation bytes it allows,
// cut short; 1 for a byte that starts no sequence or a lead byte whose next byte does not fit.
// Java departs from Unicode's rule on one point: after 0xED it takes any continuation byte, so
// an encoded surrogate (0xED 0xA0-0xBF 0x80-0xBF) is one U+FFFD, not three.
func maximalSubpart(s string) int {
	n, lo, hi := 0, byte(0x80), byte(0xBF) // sequence length; range of the second byte
	switch c := s[0]; {
	case c >= 0xC2 && c <= 0xDF:
		n = 2
	case c == 0xE0:
		n, lo = 3, 0xA0
	case c >= 0xE1 && c <= 0xEF:
		n = 3
	case c == 0xF0:
		n, lo = 4, 0x90
	case c >= 0xF1 && c <= 0xF3:
		n = 4
	case c == 0xF4:
		n, hi = 4, 0x8F
	default:
		return 1
	}
	i := 1
	for ; i < n && i < len(s); i++ {
		if c := s[i]; c < lo || c > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return i
}
