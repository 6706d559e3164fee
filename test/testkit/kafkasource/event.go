// Package kafkasource is a test driver that behaves like Knative KafkaSource's dispatcher
// (eventing-kafka-broker's data plane), written from /work/shared/docs/triggers.md §1: it
// consumes source topics in a consumer group, posts each record as a binary-mode CloudEvent with
// KafkaSource's attributes and extensions, one request in flight per partition (ordered) or up
// to 50 (unordered), retries the status codes KafkaSource retries with its backoff, hands
// records that ran out of retries to a dead-letter function, and commits offsets after a 2xx
// or the dead letter.
//
// Known differences from the real dispatcher (unverified behaviour of the Java stack):
//   - header values go through Java-like UTF-8 decoding (each invalid byte becomes U+FFFD) and
//     are then percent-encoded as the CloudEvents HTTP binding 1.0.2 (3.1.3.2) asks, so control
//     characters can travel in an HTTP header; what Vert.x really does with them is unverified
//     (triggers.md §8);
//   - float keys are formatted with Go's shortest form, not Java's Float/Double.toString;
//   - the commit happens after each polled batch rather than on a 5 s timer.
package kafkasource

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Event types and extensions of KafkaSource.
const (
	TypeKafkaEvent = "dev.knative.kafka.event"
	ExtPartition   = "knativekafkapartition"
	ExtOffset      = "knativekafkaoffset"
)

// Source identifies the KafkaSource whose events the driver imitates.
type Source struct {
	Namespace, Name string
	// KeyType is the label kafkasources.sources.knative.dev/key-type: string (default), int,
	// float or byte-array. Unknown values are string, as in KafkaSource.
	KeyType string
	// CEOverrides is spec.ceOverrides.extensions: added to every event, replacing attributes
	// of the same name.
	CEOverrides map[string]string
}

// EventFor builds the CloudEvent KafkaSource sends for a record: the record's own event when it
// already is a valid CloudEvent (binary ce_* headers or a structured
// application/cloudevents+json value), else KafkaSource's wrapper (triggers.md §1.2-1.4). The
// partition/offset extensions and ceOverrides are added in both cases (§1.6).
func EventFor(src Source, r *kgo.Record) event.Event {
	e, ok := cloudEventRecord(r)
	if !ok {
		e = rawRecordEvent(src, r)
	}
	e.SetExtension(ExtPartition, strconv.FormatInt(int64(r.Partition), 10))
	e.SetExtension(ExtOffset, strconv.FormatInt(r.Offset, 10))
	for k, v := range src.CEOverrides {
		setAttribute(&e, k, v)
	}
	return e
}

func rawRecordEvent(src Source, r *kgo.Record) event.Event {
	e := event.New(event.CloudEventsVersionV1)
	e.SetID(fmt.Sprintf("partition:%d/offset:%d", r.Partition, r.Offset))
	e.SetSource(fmt.Sprintf("/apis/v1/namespaces/%s/kafkasources/%s#%s", src.Namespace, src.Name, r.Topic))
	e.SetType(TypeKafkaEvent)
	e.SetSubject(fmt.Sprintf("partition:%d#%d", r.Partition, r.Offset))
	e.SetTime(r.Timestamp.UTC().Truncate(1e6))
	var contentType string
	for _, h := range r.Headers {
		if strings.EqualFold(h.Key, "content-type") {
			contentType = strings.ToLower(javaUTF8(h.Value))
			continue
		}
		// Later headers (and names that sanitize alike) overwrite earlier ones.
		e.SetExtension("kafkaheader"+sanitize(h.Key), headerValue(javaUTF8(h.Value)))
	}
	if len(r.Key) > 0 {
		k := keyString(src.KeyType, r.Key)
		e.SetExtension("key", headerValue(k))
		e.SetExtension("partitionkey", headerValue(k))
	}
	if r.Value != nil {
		e.DataEncoded = append([]byte(nil), r.Value...)
	}
	if contentType != "" {
		e.SetDataContentType(contentType)
	}
	return e
}

// sanitize is KafkaSource's header name rule: lower-case, keep only [a-z0-9].
func sanitize(name string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(name) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// javaUTF8 decodes bytes like Java's new String(b, UTF_8): each invalid byte becomes U+FFFD.
func javaUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		sb.WriteRune(r) // RuneError for an invalid byte, n == 1
		b = b[n:]
	}
	return sb.String()
}

// headerValue percent-encodes what the CloudEvents HTTP binding (1.0.2, 3.1.3.2) says must be
// encoded in a header value: space, double quote, percent and everything outside printable
// ASCII (as UTF-8 bytes).
func headerValue(s string) string {
	need := false
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '%' {
			need = true
			break
		}
	}
	if !need {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '"' || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// keyString is KafkaSource's KeyDeserializer followed by the HTTP writer's formatting.
func keyString(keyType string, k []byte) string {
	switch keyType {
	case "byte-array":
		return base64.StdEncoding.EncodeToString(k)
	case "int":
		if len(k) == 4 {
			return strconv.FormatInt(int64(int32(binary.BigEndian.Uint32(k))), 10)
		}
	case "float":
		switch len(k) {
		case 4:
			return javaDouble(float64(math.Float32frombits(binary.BigEndian.Uint32(k))), 32)
		case 8:
			return javaDouble(math.Float64frombits(binary.BigEndian.Uint64(k)), 64)
		}
	}
	return javaUTF8(k)
}

// javaDouble approximates Java's toString: "1.5", "1.0E10".
func javaDouble(f float64, bits int) string {
	a := math.Abs(f)
	if a != 0 && (a < 1e-3 || a >= 1e7) {
		s := strconv.FormatFloat(f, 'E', -1, bits)
		mant, exp, _ := strings.Cut(s, "E")
		if !strings.Contains(mant, ".") {
			mant += ".0"
		}
		e, _ := strconv.Atoi(exp)
		return mant + "E" + strconv.Itoa(e)
	}
	s := strconv.FormatFloat(f, 'f', -1, bits)
	if !strings.ContainsAny(s, ".NI") {
		s += ".0"
	}
	return s
}

// cloudEventRecord parses a record that already is a CloudEvent (Kafka protocol binding).
func cloudEventRecord(r *kgo.Record) (event.Event, bool) {
	var ct string
	var spec bool
	for _, h := range r.Headers {
		if strings.EqualFold(h.Key, "content-type") {
			ct = string(h.Value)
		}
		if h.Key == "ce_specversion" {
			spec = true
		}
	}
	if strings.HasPrefix(strings.ToLower(ct), "application/cloudevents+json") {
		var e event.Event
		if err := json.Unmarshal(r.Value, &e); err == nil && e.Validate() == nil {
			return e, true
		}
		return event.Event{}, false
	}
	if !spec {
		return event.Event{}, false
	}
	e := event.New(event.CloudEventsVersionV1)
	for _, h := range r.Headers {
		name, ok := strings.CutPrefix(h.Key, "ce_")
		if !ok {
			continue
		}
		if name == "specversion" {
			if string(h.Value) != "1.0" {
				return event.Event{}, false
			}
			continue
		}
		setAttribute(&e, name, string(h.Value))
	}
	if ct != "" {
		e.SetDataContentType(ct)
	}
	if r.Value != nil {
		e.DataEncoded = append([]byte(nil), r.Value...)
	}
	if e.Validate() != nil {
		return event.Event{}, false
	}
	return e, true
}

// setAttribute sets a context attribute by name, or an extension.
func setAttribute(e *event.Event, name, v string) {
	switch name {
	case "id":
		e.SetID(v)
	case "source":
		e.SetSource(v)
	case "type":
		e.SetType(v)
	case "subject":
		e.SetSubject(v)
	case "dataschema":
		e.SetDataSchema(v)
	case "datacontenttype":
		e.SetDataContentType(v)
	case "time":
		if t, err := types.ParseTime(v); err == nil {
			e.SetTime(t)
		}
	default:
		e.SetExtension(name, v)
	}
}
