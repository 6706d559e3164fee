package mirrorevents

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/mm2go/mm2go/shared/serve"
)

func TestParseRecordEventSources(t *testing.T) {
	base := kafkaEvent("orders.v1", 3, 1<<40)
	re, err := ParseRecordEvent(base, KeyString, false)
	if err != nil || re.Topic != "orders.v1" || re.Partition != 3 || re.Offset != 1<<40 || !re.Raw {
		t.Fatalf("%+v %v", re, err)
	}
	// Only subject.
	e := base.Clone()
	e.SetExtension(ExtPartition, nil)
	e.SetExtension(ExtOffset, nil)
	e.SetID("some-other-id")
	if re, err := ParseRecordEvent(e, KeyString, false); err != nil || re.Partition != 3 || re.Offset != 1<<40 || re.Raw {
		t.Fatalf("subject only: %+v %v", re, err)
	}
	// A forwarded CloudEvent record: own id/source/type, topic from mm2gotopic.
	ce := event.New()
	ce.SetID("order-17")
	ce.SetSource("https://shop.example/orders")
	ce.SetType("com.example.order.created")
	ce.SetExtension(ExtPartition, "0")
	ce.SetExtension(ExtOffset, "9")
	ce.SetExtension(ExtTopicOverride, "orders")
	if re, err := ParseRecordEvent(ce, KeyString, true); err != nil || re.Topic != "orders" || re.Offset != 9 || re.Raw || re.Record != nil {
		t.Fatalf("CloudEvent record: %+v %v", re, err)
	}
}

func TestKeyTypes(t *testing.T) {
	for name, tc := range map[string]struct {
		kt   KeyType
		in   string
		want string
		bad  bool
	}{
		"string":           {KeyString, "k-1", "k-1", false},
		"string percent":   {KeyString, "a%20b%41", "a%20b%41", false},
		"string latin1":    {KeyString, "h\xe9?", "h\u00e9?", false},
		"string not pct":   {KeyString, "50%off", "50%off", false},
		"byte-array":       {KeyByteArray, "AP8BAg==", "\x00\xff\x01\x02", false},
		"byte-array bad":   {KeyByteArray, "not base64!", "", true},
		"int":              {KeyInt, "258", "\x00\x00\x01\x02", false},
		"int negative":     {KeyInt, "-1", "\xff\xff\xff\xff", false},
		"int fallback":     {KeyInt, "abc", "abc", false},
		"float as double":  {KeyFloat, "1.5", "\x3f\xf8\x00\x00\x00\x00\x00\x00", false},
		"float java style": {KeyFloat, "1.0E10", "\x42\x02\xa0\x5f\x20\x00\x00\x00", false},
	} {
		t.Run(name, func(t *testing.T) {
			e := kafkaEvent("t", 0, 0)
			e.SetExtension(ExtKey, tc.in)
			re, err := ParseRecordEvent(e, tc.kt, true)
			if tc.bad {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil || string(re.Record.Key) != tc.want {
				t.Fatalf("key %q %v, want %q", re.Record.Key, err, tc.want)
			}
		})
	}
}

// TestMalformedRecordEvents: each gets 400 with a reason, through the HTTP route.
func TestMalformedRecordEvents(t *testing.T) {
	f := newFake()
	f.ends[tp{"orders", 0}] = 10
	_, hh := newTestHandler(t, f, Options{Mode: ModePayload, KeyType: KeyByteArray})
	mod := func(fn func(e *event.Event)) event.Event {
		e := kafkaEvent("orders", 0, 1)
		fn(&e)
		return e
	}
	for name, tc := range map[string]struct {
		e      event.Event
		reason string
	}{
		"no partition/offset anywhere": {mod(func(e *event.Event) {
			e.SetExtension(ExtPartition, nil)
			e.SetExtension(ExtOffset, nil)
			e.SetSubject("")
			e.SetID("x")
		}), "no partition/offset"},
		"offset without partition":  {mod(func(e *event.Event) { e.SetExtension(ExtPartition, nil) }), "must come together"},
		"offset not a number":       {mod(func(e *event.Event) { e.SetExtension(ExtOffset, "12a") }), "not a decimal integer"},
		"offset negative":           {mod(func(e *event.Event) { e.SetExtension(ExtOffset, "-1") }), ExtOffset},
		"offset overflows int64":    {mod(func(e *event.Event) { e.SetExtension(ExtOffset, "9223372036854775808") }), "not a decimal integer"},
		"partition overflows int32": {mod(func(e *event.Event) { e.SetExtension(ExtPartition, "2147483648") }), "not a decimal integer"},
		"subject disagrees":         {mod(func(e *event.Event) { e.SetSubject("partition:0#2") }), "disagree"},
		"id disagrees":              {mod(func(e *event.Event) { e.SetID("partition:1/offset:1") }), "disagree"},
		"source without topic":      {mod(func(e *event.Event) { e.SetSource("/apis/v1/namespaces/ns/kafkasources/src") }), "no source topic"},
		"invalid topic name":        {mod(func(e *event.Event) { e.SetSource("/apis/v1/namespaces/ns/kafkasources/src#a b") }), "not a valid Kafka topic"},
		"topic override disagrees":  {mod(func(e *event.Event) { e.SetExtension(ExtTopicOverride, "other") }), "disagrees"},
		"key not base64":            {mod(func(e *event.Event) { e.SetExtension(ExtKey, "%%%") }), "base64"},
		"kafka type, no offsets": {func() event.Event {
			e := event.New()
			e.SetID("1")
			e.SetSource("/apis/v1/namespaces/ns/kafkasources/src#orders")
			e.SetType(TypeKafkaEvent)
			return e
		}(), "no partition/offset"},
		"topic not selected": {kafkaEvent("excluded-x", 0, 1), "not replicated"},
		"offset beyond end":  {kafkaEvent("orders", 0, 99), "beyond end"},
	} {
		t.Run(name, func(t *testing.T) {
			code, body := post(t, hh, tc.e)
			if code != 400 || !strings.Contains(body, tc.reason) || strings.Count(strings.TrimSpace(body), "\n") > 0 {
				t.Fatalf("got %d %q, want 400 with %q", code, body, tc.reason)
			}
		})
	}
}

// FuzzHandler sends arbitrary record-event headers and bodies through the full HTTP route in
// both modes: no crash, and any non-2xx is a 4xx with a one-line reason (the fake copier never
// fails, so a 5xx would be the handler's own fault).
func FuzzHandler(f *testing.F) {
	f.Add("partition:0/offset:1", "/apis/v1/namespaces/ns/kafkasources/s#orders", TypeKafkaEvent, "partition:0#1", "0", "1", "a2V5", "v", "body")
	f.Add("x", "/apis/v1/namespaces/ns/kafkasources/s#", TypeKafkaEvent, "", "", "99999999999999999999", "", "", "")
	f.Add("partition:5/offset:3", "s", "t", "partition:5#3", "5", "3", "%zz", "\xff", "")
	f.Add("u", "/ping", TypePing, "", "", "", "", "", "{}")
	fc := newFake()
	fc.ends[tp{"orders", 0}] = 1 << 20
	hs := map[Mode]http.Handler{}
	for _, m := range []Mode{ModeFetch, ModePayload} {
		h, err := New(fc, Options{Mode: m, KeyType: KeyByteArray, BurstEventTypes: []string{"burst"}}, quiet())
		if err != nil {
			f.Fatal(err)
		}
		hs[m] = serve.NewHTTPHandler(serve.Config{}, quiet(), h)
	}
	f.Fuzz(func(t *testing.T, id, source, typ, subject, part, off, key, hdr, body string) {
		for _, h := range hs {
			req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
			req.Header.Set("ce-specversion", "1.0")
			for k, v := range map[string]string{"ce-id": id, "ce-source": source, "ce-type": typ, "ce-subject": subject,
				"ce-knativekafkapartition": part, "ce-knativekafkaoffset": off, "ce-key": key, "ce-kafkaheaderx": hdr} {
				if v != "" && validHeader(v) {
					req.Header.Set(k, v)
				}
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			switch {
			case w.Code == 200:
			case w.Code >= 400 && w.Code < 500:
				if r := strings.TrimSpace(w.Body.String()); r == "" || strings.Contains(r, "\n") {
					t.Fatalf("%d with reason %q", w.Code, r)
				}
			default:
				t.Fatalf("status %d: %s", w.Code, w.Body.String())
			}
		}
	})
}

func validHeader(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
