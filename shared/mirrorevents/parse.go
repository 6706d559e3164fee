package mirrorevents

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"

	"github.com/mm2go/mm2go/shared/serve"
	"github.com/twmb/franz-go/pkg/kgo"
)

// CloudEvent types and extension names used by Knative's sources (see docs/events.md).
const (
	// TypeKafkaEvent is the type KafkaSource gives a record that is not itself a CloudEvent.
	TypeKafkaEvent = "dev.knative.kafka.event"
	// TypePing is PingSource's event type; it runs a burst.
	TypePing = serve.TypePing

	ExtPartition     = "knativekafkapartition"
	ExtOffset        = "knativekafkaoffset"
	ExtKey           = "key"
	ExtPartitionKey  = "partitionkey"
	ExtHeaderPrefix  = "kafkaheader"
	ExtTopicOverride = "mm2gotopic" // set with a KafkaSource's spec.ceOverrides for CloudEvent records
)

// KeyType is the KafkaSource label kafkasources.sources.knative.dev/key-type: how the dispatcher
// turned the Kafka key into the `key` extension, so how payload mode turns it back.
type KeyType string

// Key types of KafkaSource.
const (
	KeyString    KeyType = "string" // the default: key bytes decoded as UTF-8
	KeyInt       KeyType = "int"
	KeyFloat     KeyType = "float"
	KeyByteArray KeyType = "byte-array" // standard base64 of the exact bytes
)

// ParseKeyType accepts the label's values ("" is string). Unknown values are an error here
// (KafkaSource silently treats them as string; a mirror should not guess).
func ParseKeyType(s string) (KeyType, error) {
	switch k := KeyType(strings.ToLower(strings.TrimSpace(s))); k {
	case "":
		return KeyString, nil
	case KeyString, KeyInt, KeyFloat, KeyByteArray:
		return k, nil
	}
	return "", fmt.Errorf("key type %q: want string, int, float or byte-array", s)
}

// RecordEvent is what a KafkaSource record event says about one source record.
type RecordEvent struct {
	// Topic, Partition and Offset locate the source record.
	Topic     string
	Partition int32
	Offset    int64
	// Raw is true for a record KafkaSource wrapped (type dev.knative.kafka.event, id
	// partition:P/offset:O); false for a record that already was a CloudEvent and was forwarded
	// as it is (its key and non-ce_ headers are not in the event).
	Raw bool
	// Record is the target record rebuilt from the event (payload mode), with the lossy
	// transformations documented in docs/events.md. Partition and Offset are set to the
	// source's; Topic is the source topic. Nil when Raw is false.
	Record *kgo.Record
}

// EventError is an event that can never be handled (malformed, missing partition or offset,
// unknown topic): the handler answers 400 so KafkaSource sends it to the dead-letter sink
// instead of retrying it.
type EventError struct{ Reason string }

func (e *EventError) Error() string { return e.Reason }

func badEvent(format string, args ...any) error {
	return &EventError{Reason: fmt.Sprintf(format, args...)}
}

// IsRecordEvent reports whether e is a KafkaSource record event (a wrapped raw record, or a
// forwarded CloudEvent record carrying the partition/offset extensions). Such an event is never
// treated as a burst trigger, even when malformed.
func IsRecordEvent(e event.Event) bool {
	if e.Type() == TypeKafkaEvent {
		return true
	}
	ext := e.Extensions()
	_, p := ext[ExtPartition]
	_, o := ext[ExtOffset]
	return p || o
}

// sourceRE is KafkaSource's source attribute: /apis/v1/namespaces/<ns>/kafkasources/<name>#<topic>.
var sourceRE = regexp.MustCompile(`^/apis/v1/namespaces/([^/]+)/kafkasources/([^/#]+)#(.+)$`)

// subjectRE is `partition:<p>#<offset>`, idRE is `partition:<p>/offset:<o>`.
var (
	subjectRE = regexp.MustCompile(`^partition:(\d+)#(\d+)$`)
	idRE      = regexp.MustCompile(`^partition:(\d+)/offset:(\d+)$`)
)

// validTopic is Kafka's legal topic name (1-249 of [a-zA-Z0-9._-], not "." or "..").
func validTopic(t string) bool {
	if t == "" || len(t) > 249 || t == "." || t == ".." {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ParseRecordEvent reads a KafkaSource record event. Partition and offset come from the
// knativekafkapartition / knativekafkaoffset extensions, else from subject
// (partition:<p>#<offset>) or id (partition:<p>/offset:<o>); when several are present they must
// agree. The topic comes from source (…/kafkasources/<name>#<topic>), else from the mm2gotopic
// extension. withRecord also rebuilds the record (payload mode). Every error is an *EventError.
func ParseRecordEvent(e event.Event, keyType KeyType, withRecord bool) (RecordEvent, error) {
	var re RecordEvent
	ext := e.Extensions()

	// Topic.
	if m := sourceRE.FindStringSubmatch(e.Source()); m != nil {
		re.Topic = m[3]
	}
	if v, ok := ext[ExtTopicOverride]; ok {
		t, err := types.ToString(v)
		if err != nil {
			return re, badEvent("extension %s: %v", ExtTopicOverride, err)
		}
		if re.Topic != "" && re.Topic != t {
			return re, badEvent("extension %s=%q disagrees with the topic %q in source", ExtTopicOverride, t, re.Topic)
		}
		re.Topic = t
	}
	if re.Topic == "" {
		return re, badEvent("no source topic: source %q is not /apis/v1/namespaces/<ns>/kafkasources/<name>#<topic> and there is no %s extension", e.Source(), ExtTopicOverride)
	}
	if !validTopic(re.Topic) {
		return re, badEvent("source topic %q is not a valid Kafka topic name", re.Topic)
	}

	// Partition and offset: every place that states them must agree.
	type claim struct {
		from      string
		partition int64
		offset    int64
	}
	var claims []claim
	var extP, extO int64 = -1, -1
	if v, ok := ext[ExtPartition]; ok {
		n, err := parseInt(v, 31)
		if err != nil {
			return re, badEvent("extension %s: %v", ExtPartition, err)
		}
		extP = n
	}
	if v, ok := ext[ExtOffset]; ok {
		n, err := parseInt(v, 63)
		if err != nil {
			return re, badEvent("extension %s: %v", ExtOffset, err)
		}
		extO = n
	}
	if (extP >= 0) != (extO >= 0) {
		return re, badEvent("extensions %s and %s must come together", ExtPartition, ExtOffset)
	}
	if extP >= 0 {
		claims = append(claims, claim{"extensions", extP, extO})
	}
	if m := subjectRE.FindStringSubmatch(e.Subject()); m != nil {
		p, err1 := strconv.ParseInt(m[1], 10, 32)
		o, err2 := strconv.ParseInt(m[2], 10, 64)
		if err1 != nil || err2 != nil {
			return re, badEvent("subject %q: partition or offset out of range", e.Subject())
		}
		claims = append(claims, claim{"subject", p, o})
	}
	idMatch := idRE.FindStringSubmatch(e.ID())
	if idMatch != nil {
		p, err1 := strconv.ParseInt(idMatch[1], 10, 32)
		o, err2 := strconv.ParseInt(idMatch[2], 10, 64)
		if err1 != nil || err2 != nil {
			return re, badEvent("id %q: partition or offset out of range", e.ID())
		}
		claims = append(claims, claim{"id", p, o})
	}
	if len(claims) == 0 {
		return re, badEvent("no partition/offset: no %s/%s extensions, subject is not partition:<p>#<offset> and id is not partition:<p>/offset:<o>", ExtPartition, ExtOffset)
	}
	for _, c := range claims[1:] {
		if c.partition != claims[0].partition || c.offset != claims[0].offset {
			return re, badEvent("partition/offset %d/%d from %s disagree with %d/%d from %s", c.partition, c.offset, c.from, claims[0].partition, claims[0].offset, claims[0].from)
		}
	}
	re.Partition, re.Offset = int32(claims[0].partition), claims[0].offset
	re.Raw = e.Type() == TypeKafkaEvent && idMatch != nil

	if !withRecord || !re.Raw {
		return re, nil
	}
	rec, err := buildRecord(e, keyType)
	if err != nil {
		return re, err
	}
	rec.Topic, rec.Partition, rec.Offset = re.Topic, re.Partition, re.Offset
	re.Record = rec
	return re, nil
}

// parseInt reads an integer extension (a string in binary mode, a number or string in
// structured mode) without sdk-go's int32 limit.
func parseInt(v any, bits int) (int64, error) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case int32:
		s = strconv.FormatInt(int64(x), 10)
	case int64:
		s = strconv.FormatInt(x, 10)
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, fmt.Errorf("%v is not an integer", x)
		}
		s = strconv.FormatInt(int64(x), 10)
	default:
		ts, err := types.ToString(v)
		if err != nil {
			return 0, err
		}
		s = ts
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, bits+1)
	if err != nil {
		return 0, fmt.Errorf("%q is not a decimal integer in range", s)
	}
	if n < 0 {
		return 0, fmt.Errorf("%d is negative", n)
	}
	return n, nil
}

// buildRecord rebuilds the Kafka record KafkaSource wrapped (payload mode). See docs/events.md
// for each loss.
func buildRecord(e event.Event, keyType KeyType) (*kgo.Record, error) {
	ext := e.Extensions()
	rec := &kgo.Record{}

	// Value: the dispatcher sends a null value as a request without a body (no Content-Length)
	// and an empty value with Content-Length: 0; shared/serve keeps the difference as nil and
	// empty data.
	if d := e.Data(); d != nil {
		rec.Value = append([]byte{}, d...)
	}

	// Key.
	if v, ok := ext[ExtKey]; ok {
		s, err := types.ToString(v)
		if err != nil {
			return nil, badEvent("extension key: %v", err)
		}
		k, err := decodeKey(fromLatin1(s), keyType)
		if err != nil {
			return nil, err
		}
		rec.Key = k
	}

	// Headers: content-type first (KafkaSource moved it into datacontenttype), then every
	// kafkaheader<name> in name order (the original order is not carried).
	if ct := e.DataContentType(); ct != "" {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: "content-type", Value: []byte(fromLatin1(ct))})
	}
	var names []string
	for name := range ext {
		if strings.HasPrefix(name, ExtHeaderPrefix) { // "kafkaheader" alone: a name with no [a-z0-9]
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		s, err := types.ToString(ext[name])
		if err != nil {
			return nil, badEvent("extension %s: %v", name, err)
		}
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: name[len(ExtHeaderPrefix):], Value: []byte(fromLatin1(s))})
	}

	// Timestamp: time, at millisecond precision, becomes CreateTime. No time: the producer
	// stamps the record.
	if t := e.Time(); !t.IsZero() {
		rec.Timestamp = time.UnixMilli(t.UnixMilli())
	}
	return rec, nil
}

// decodeKey turns the `key` extension back into bytes per the KafkaSource's key type.
func decodeKey(s string, kt KeyType) ([]byte, error) {
	switch kt {
	case KeyByteArray:
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, badEvent("extension key: not standard base64 (key type byte-array): %v", err)
		}
		return b, nil
	case KeyInt:
		// The dispatcher wrote a 4-byte big-endian int as decimal; keys of another length
		// fell back to string.
		if n, err := strconv.ParseInt(s, 10, 32); err == nil {
			return binary.BigEndian.AppendUint32(nil, uint32(int32(n))), nil
		}
		return []byte(s), nil
	case KeyFloat:
		// 4 or 8 bytes were written with Java's toString; the width is not carried, so we
		// write a double (docs/events.md).
		if f, err := strconv.ParseFloat(strings.Replace(s, "E", "e", 1), 64); err == nil && !strings.ContainsAny(s, " _") {
			return binary.BigEndian.AppendUint64(nil, math.Float64bits(f)), nil
		}
		return []byte(s), nil
	default:
		return []byte(s), nil
	}
}

// fromLatin1 undoes how the dispatcher writes a header value: it decodes the Kafka bytes as
// UTF-8 into a Java string and Netty writes each character as one byte (ISO-8859-1; a
// character above U+00FF, such as the U+FFFD that replaced an invalid byte, becomes '?'). So
// each received byte is one character, re-encoded here as UTF-8. Header values are taken
// as text, never percent-decoded: the dispatcher does not percent-encode them.
func fromLatin1(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) * 2)
	for i := 0; i < len(s); i++ {
		b.WriteRune(rune(s[i]))
	}
	return b.String()
}
