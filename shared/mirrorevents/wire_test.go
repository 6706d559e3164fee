package mirrorevents

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
)

// Requests as the genuine Knative KafkaSource dispatcher (dispatcher-loom, Vert.x WebClient
// 4.5.21) sent them, captured byte for byte on a raw TCP listener (key type as named), with the
// source record each came from.
var wireCases = []struct {
	name    string
	keyType KeyType
	raw     string
	src     *kgo.Record // the Kafka record the dispatcher read
	want    *kgo.Record // what payload mode writes
}{
	{
		name: "text headers, content-type, duplicates", keyType: KeyString,
		raw: "POST / HTTP/1.1\r\nuser-agent: Vert.x-WebClient/4.5.21\r\nPrefer: reply\r\nKn-Namespace: default\r\nce-specversion: 1.0\r\n" +
			"ce-id: partition:0/offset:0\r\nce-source: /apis/v1/namespaces/default/kafkasources/ks#orders\r\nce-type: dev.knative.kafka.event\r\n" +
			"content-type: application/json\r\nce-subject: partition:0#0\r\nce-time: 2023-11-14T22:13:20.123Z\r\nce-kafkaheaderxtraceid: abc 100%41\r\n" +
			"ce-partitionkey: k1\r\nce-knativekafkapartition: 0\r\nce-kafkaheaderu: h\xe9llo\r\nce-knativekafkaoffset: 0\r\nce-key: k1\r\n" +
			"ce-kafkaheaderd: 2\r\ncontent-length: 2\r\nhost: 127.0.0.1:45451\r\n\r\nv0",
		src: &kgo.Record{Key: []byte("k1"), Value: []byte("v0"), Timestamp: time.UnixMilli(1_700_000_000_123), Headers: []kgo.RecordHeader{
			{Key: "Content-Type", Value: []byte("Application/JSON")}, {Key: "X-Trace_Id", Value: []byte("abc 100%41")},
			{Key: "u", Value: []byte("héllo")}, {Key: "d", Value: []byte("1")}, {Key: "D", Value: []byte("2")}}},
		// Lost: the case of content-type's name and value, header name case and '_', order,
		// the first "d". Kept: the UTF-8 text "héllo" (sent as ISO-8859-1), "%41" as it is.
		want: &kgo.Record{Key: []byte("k1"), Value: []byte("v0"), Timestamp: time.UnixMilli(1_700_000_000_123), Headers: []kgo.RecordHeader{
			{Key: "content-type", Value: []byte("application/json")}, {Key: "d", Value: []byte("2")},
			{Key: "u", Value: []byte("héllo")}, {Key: "xtraceid", Value: []byte("abc 100%41")}}},
	},
	{
		name: "invalid UTF-8 and characters above U+00FF become '?'; empty names", keyType: KeyByteArray,
		raw: "POST / HTTP/1.1\r\nce-specversion: 1.0\r\nce-id: partition:0/offset:0\r\nce-source: /apis/v1/namespaces/default/kafkasources/ks#orders\r\n" +
			"ce-type: dev.knative.kafka.event\r\nce-subject: partition:0#0\r\nce-time: 2026-12-01T13:07:42.352Z\r\nce-kafkaheaderq: ?\r\n" +
			"ce-kafkaheadereuro: ? x\r\nce-partitionkey: AAH/\r\nce-kafkaheaderc1: \x85\r\nce-knativekafkapartition: 0\r\nce-knativekafkaoffset: 0\r\n" +
			"ce-key: AAH/\r\nce-kafkaheader: sym\r\nce-kafkaheaderx: a?b\r\ncontent-length: 2\r\n\r\nv0",
		src: &kgo.Record{Key: []byte{0, 1, 0xff}, Value: []byte("v0"), Timestamp: at("2026-12-01T13:07:42.352Z"), Headers: []kgo.RecordHeader{
			{Key: "euro", Value: []byte("€ x")}, {Key: "", Value: []byte("noname")}, {Key: "--", Value: []byte("sym")},
			{Key: "c1", Value: []byte("\u0085")}, {Key: "q", Value: []byte("?")}, {Key: "x", Value: []byte{'a', 0xff, 'b'}}}},
		want: &kgo.Record{Key: []byte{0, 1, 0xff}, Value: []byte("v0"), Timestamp: at("2026-12-01T13:07:42.352Z"), Headers: []kgo.RecordHeader{
			{Key: "", Value: []byte("sym")}, {Key: "c1", Value: []byte("\u0085")}, {Key: "euro", Value: []byte("? x")},
			{Key: "q", Value: []byte("?")}, {Key: "x", Value: []byte("a?b")}}},
	},
	{
		name: "null value: no body, no Content-Length; no key", keyType: KeyByteArray,
		raw: "POST / HTTP/1.1\r\nce-specversion: 1.0\r\nce-id: partition:0/offset:0\r\nce-source: /apis/v1/namespaces/default/kafkasources/ks#orders\r\n" +
			"ce-type: dev.knative.kafka.event\r\nce-subject: partition:0#0\r\nce-time: 2026-12-01T13:02:45.056Z\r\nce-knativekafkapartition: 0\r\n" +
			"ce-knativekafkaoffset: 0\r\nhost: 127.0.0.1:45451\r\n\r\n",
		src:  &kgo.Record{Timestamp: at("2026-12-01T13:02:45.056Z")},
		want: &kgo.Record{Timestamp: at("2026-12-01T13:02:45.056Z")},
	},
	{
		name: "empty value: Content-Length 0; an empty key is not sent", keyType: KeyByteArray,
		raw: "POST / HTTP/1.1\r\nce-specversion: 1.0\r\nce-id: partition:0/offset:0\r\nce-source: /apis/v1/namespaces/default/kafkasources/ks#orders\r\n" +
			"ce-type: dev.knative.kafka.event\r\nce-subject: partition:0#0\r\nce-time: 2026-12-01T13:02:46.592Z\r\nce-knativekafkapartition: 0\r\n" +
			"ce-knativekafkaoffset: 0\r\ncontent-length: 0\r\nhost: 127.0.0.1:45451\r\n\r\n",
		src:  &kgo.Record{Key: []byte{}, Value: []byte{}, Timestamp: at("2026-12-01T13:02:46.592Z")},
		want: &kgo.Record{Value: []byte{}, Timestamp: at("2026-12-01T13:02:46.592Z")}, // lost: empty key becomes null
	},
	{
		name: "int key of 4 bytes", keyType: KeyInt,
		raw: "POST / HTTP/1.1\r\nce-specversion: 1.0\r\nce-id: partition:0/offset:0\r\nce-source: /apis/v1/namespaces/default/kafkasources/ks#orders\r\n" +
			"ce-type: dev.knative.kafka.event\r\nce-subject: partition:0#0\r\nce-time: 2026-12-01T13:08:09.187Z\r\nce-partitionkey: -5\r\n" +
			"ce-knativekafkapartition: 0\r\nce-knativekafkaoffset: 0\r\nce-key: -5\r\ncontent-length: 2\r\n\r\nv2",
		src:  &kgo.Record{Key: []byte{0xff, 0xff, 0xff, 0xfb}, Value: []byte("v2"), Timestamp: at("2026-12-01T13:08:09.187Z")},
		want: &kgo.Record{Key: []byte{0xff, 0xff, 0xff, 0xfb}, Value: []byte("v2"), Timestamp: at("2026-12-01T13:08:09.187Z")},
	},
	{
		name: "float key of 4 bytes is written as a double", keyType: KeyFloat,
		raw: "POST / HTTP/1.1\r\nce-specversion: 1.0\r\nce-id: partition:0/offset:0\r\nce-source: /apis/v1/namespaces/default/kafkasources/ks#orders\r\n" +
			"ce-type: dev.knative.kafka.event\r\nce-subject: partition:0#0\r\nce-time: 2026-12-01T13:08:42.085Z\r\nce-partitionkey: 1.5\r\n" +
			"ce-knativekafkapartition: 0\r\nce-knativekafkaoffset: 0\r\nce-key: 1.5\r\ncontent-length: 2\r\n\r\nv4",
		src:  &kgo.Record{Key: []byte{0x3f, 0xc0, 0, 0}, Value: []byte("v4"), Timestamp: at("2026-12-01T13:08:42.085Z")},
		want: &kgo.Record{Key: []byte{0x3f, 0xf8, 0, 0, 0, 0, 0, 0}, Value: []byte("v4"), Timestamp: at("2026-12-01T13:08:42.085Z")},
	},
	{
		name: "string key with an invalid UTF-8 byte", keyType: KeyString,
		raw: "POST / HTTP/1.1\r\nce-specversion: 1.0\r\nce-id: partition:0/offset:0\r\nce-source: /apis/v1/namespaces/default/kafkasources/ks#orders\r\n" +
			"ce-type: dev.knative.kafka.event\r\nce-subject: partition:0#0\r\nce-time: 2026-12-01T13:09:16.855Z\r\nce-partitionkey: K>? \r\n" +
			"ce-knativekafkapartition: 0\r\nce-knativekafkaoffset: 0\r\nce-key: K>? \r\ncontent-length: 2\r\n\r\nv7",
		src: &kgo.Record{Key: []byte{0x4b, 0x3e, 0xbc, 0x20}, Value: []byte("v7"), Timestamp: at("2026-12-01T13:09:16.855Z")},
		// Lost: the invalid byte ('?'), and the trailing space (Go's HTTP server trims
		// whitespace around header values, as HTTP allows).
		want: &kgo.Record{Key: []byte("K>?"), Value: []byte("v7"), Timestamp: at("2026-12-01T13:09:16.855Z")},
	},
}

// TestPayloadFromGenuineDispatcherRequests: payload mode turns each captured request into the
// documented record (docs/events.md); the source record is listed to show what is lost.
func TestPayloadFromGenuineDispatcherRequests(t *testing.T) {
	for _, tc := range wireCases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			k := tp{"orders", 0}
			f.ends[k], f.next[k] = 1, 0
			_, hh := newTestHandler(t, f, Options{Mode: ModePayload, KeyType: tc.keyType})
			req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(tc.raw)))
			if err != nil {
				t.Fatal(err)
			}
			req.RequestURI, req.RemoteAddr = "", "127.0.0.1:1"
			w := httptest.NewRecorder()
			hh.ServeHTTP(w, req)
			if w.Code != 200 || len(f.payloads[k]) != 1 {
				t.Fatalf("%d %s, %d payload writes", w.Code, w.Body.String(), len(f.payloads[k]))
			}
			if d := testkit.SameRecord(tc.want, f.payloads[k][0]); d != "" {
				t.Errorf("%s\nsource record: %+v", d, tc.src)
			}
		})
	}
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}
