package kafkasource

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestEventForRawRecord(t *testing.T) {
	ts := time.Date(2020, 1, 2, 3, 4, 5, 6_789_000, time.UTC)
	r := &kgo.Record{
		Topic: "orders", Partition: 2, Offset: 41, Timestamp: ts,
		Key:   []byte{0, 0xff, 'k'},
		Value: []byte("v"),
		Headers: []kgo.RecordHeader{
			{Key: "X-Trace_ID", Value: []byte("t1")},
			{Key: "Content-Type", Value: []byte("Application/JSON")},
			{Key: "bin", Value: []byte{'a', 0, 0xff}},
			{Key: "x.trace.id", Value: []byte("t2")}, // sanitizes like X-Trace_ID: later wins
		},
	}
	for kt, wantKey := range map[string]string{"": "%00%EF%BF%BDk", "byte-array": "AP9r"} {
		e := EventFor(Source{Namespace: "ns", Name: "src", KeyType: kt}, r)
		ext := e.Extensions()
		checks := map[string]any{
			"id": e.ID(), "source": e.Source(), "type": e.Type(), "subject": e.Subject(),
			"time": e.Time().Format(time.RFC3339Nano), "datacontenttype": e.DataContentType(), "data": string(e.Data()),
			"key": ext["key"], "partitionkey": ext["partitionkey"], "kafkaheaderxtraceid": ext["kafkaheaderxtraceid"],
			"kafkaheaderbin": ext["kafkaheaderbin"], "knativekafkapartition": ext[ExtPartition], "knativekafkaoffset": ext[ExtOffset],
		}
		want := map[string]any{
			"id": "partition:2/offset:41", "source": "/apis/v1/namespaces/ns/kafkasources/src#orders", "type": TypeKafkaEvent,
			"subject": "partition:2#41", "time": "2020-01-02T03:04:05.006Z", "datacontenttype": "application/json", "data": "v",
			"key": wantKey, "partitionkey": wantKey, "kafkaheaderxtraceid": "t2", "kafkaheaderbin": "a%00%EF%BF%BD",
			"knativekafkapartition": "2", "knativekafkaoffset": "41",
		}
		for k, w := range want {
			if checks[k] != w {
				t.Errorf("key type %q: %s = %v, want %v", kt, k, checks[k], w)
			}
		}
		if _, ok := ext["kafkaheadercontenttype"]; ok {
			t.Error("content-type must not become a kafkaheader extension")
		}
	}
}

func TestEventForKeyTypes(t *testing.T) {
	for name, tc := range map[string]struct {
		kt   string
		key  []byte
		want any
	}{
		"int":          {"int", []byte{0, 0, 1, 2}, "258"},
		"int fallback": {"int", []byte("abc"), "abc"},
		"double":       {"float", []byte{0x3f, 0xf8, 0, 0, 0, 0, 0, 0}, "1.5"},
		"big double":   {"float", []byte{0x42, 0x02, 0xa0, 0x5f, 0x20, 0, 0, 0}, "1.0E10"},
		"empty key":    {"string", []byte{}, nil},
		"null key":     {"string", nil, nil},
	} {
		t.Run(name, func(t *testing.T) {
			e := EventFor(Source{Namespace: "n", Name: "s", KeyType: tc.kt}, &kgo.Record{Topic: "t", Key: tc.key})
			got, ok := e.Extensions()["key"]
			if (tc.want == nil && ok) || (tc.want != nil && got != tc.want) {
				t.Fatalf("key %v (present %v), want %v", got, ok, tc.want)
			}
		})
	}
}

func TestEventForCloudEventRecords(t *testing.T) {
	bin := &kgo.Record{Topic: "t", Partition: 1, Offset: 5, Key: []byte("k"), Value: []byte("d"), Headers: []kgo.RecordHeader{
		{Key: "ce_specversion", Value: []byte("1.0")}, {Key: "ce_id", Value: []byte("abc")},
		{Key: "ce_source", Value: []byte("/mine")}, {Key: "ce_type", Value: []byte("my.type")},
		{Key: "ce_myext", Value: []byte("x")}, {Key: "other", Value: []byte("lost")},
	}}
	e := EventFor(Source{Namespace: "n", Name: "s"}, bin)
	ext := e.Extensions()
	if e.ID() != "abc" || e.Type() != "my.type" || ext["myext"] != "x" || ext["key"] != nil || ext["kafkaheaderother"] != nil ||
		ext[ExtOffset] != "5" || string(e.Data()) != "d" {
		t.Fatalf("binary CloudEvent record: %v", e)
	}
	structured := &kgo.Record{Topic: "t", Offset: 6, Value: []byte(`{"specversion":"1.0","id":"s1","source":"/x","type":"st"}`),
		Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/cloudevents+json")}}}
	if e := EventFor(Source{}, structured); e.ID() != "s1" || e.Extensions()[ExtOffset] != "6" {
		t.Fatalf("structured CloudEvent record: %v", e)
	}
	broken := &kgo.Record{Topic: "t", Offset: 7, Value: []byte(`{"id":`),
		Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/cloudevents+json")}}}
	if e := EventFor(Source{Namespace: "n", Name: "s"}, broken); e.Type() != TypeKafkaEvent {
		t.Fatalf("unparsable CloudEvent record must be wrapped: %v", e)
	}
}

// TestRetriesAndDeadLetter: retryable codes are retried with backoff, others go to the dead
// letter at once, and an exhausted budget dead-letters with the answer's body.
func TestRetriesAndDeadLetter(t *testing.T) {
	for name, tc := range map[string]struct {
		codes       []int
		wantReqs    int64
		wantDead    int64
		wantErrCode string
	}{
		"503 then 200":      {[]int{503, 503, 200}, 3, 0, ""},
		"404 408 429":       {[]int{404, 408, 429, 200}, 4, 0, ""},
		"409":               {[]int{409, 200}, 2, 0, ""},
		"400 is final":      {[]int{400}, 1, 1, "400"},
		"413 is final":      {[]int{413}, 1, 1, "413"},
		"budget exhausted":  {[]int{500, 500, 500, 500}, 4, 1, "500"},
		"415 after a retry": {[]int{502, 415}, 2, 1, "415"},
	} {
		t.Run(name, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Ce-Specversion") != "1.0" || r.Header.Get("Prefer") != "reply" {
					t.Errorf("not a binary-mode KafkaSource request: %v", r.Header)
				}
				i := int(n.Add(1)) - 1
				code := tc.codes[min(i, len(tc.codes)-1)]
				w.WriteHeader(code)
				_, _ = w.Write([]byte("reason"))
			}))
			defer srv.Close()
			d, err := New(Config{Bootstrap: "127.0.0.1:1", Topics: []string{"t"}, Group: "g", Sink: srv.URL, Retry: 3, BackoffDelay: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer d.cl.Close()
			if !d.dispatch(context.Background(), &kgo.Record{Topic: "t", Value: []byte("v")}) {
				t.Fatal("dispatch gave up")
			}
			s := d.Stats()
			if s.Requests != tc.wantReqs || s.DeadLettered != tc.wantDead {
				t.Fatalf("stats %+v", s)
			}
			if tc.wantDead > 0 {
				dl := d.DeadLettered()[0]
				if dl.Extensions()["knativeerrorcode"] != tc.wantErrCode || dl.Extensions()["knativeerrordata"] != "cmVhc29u" {
					t.Fatalf("dead letter extensions %v", dl.Extensions())
				}
			}
		})
	}
}

func TestRetryableTransportError(t *testing.T) {
	if !Retryable(0, context.DeadlineExceeded) || Retryable(422, nil) || !Retryable(cehttpStatus(503), nil) {
		t.Fatal("retry rule")
	}
}

func cehttpStatus(code int) int {
	r := cehttp.NewResult(code, "x").(*cehttp.Result)
	return r.StatusCode
}
