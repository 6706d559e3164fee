package mirrorevents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/serve"
	"github.com/mm2go/mm2go/test/testkit"
)

// fakeCopier is a Copier over an in-memory "source" of end offsets and a "target" log.
type fakeCopier struct {
	mu         sync.Mutex
	ends       map[tp]int64
	next       map[tp]int64 // stored position + 1
	written    map[tp][]int64
	payloads   map[tp][]*kgo.Record
	copies     atomic.Int32
	lookups    atomic.Int32     // Topics calls
	partitions map[string]int32 // the source's topics and partition counts besides those of ends
	gate       chan struct{}    // if set, CopyThrough waits for it
	err        error            // returned by CopyThrough/WriteAt when set
	stopAt     int64            // if > 0, CopyThrough copies only below it, then fails
	selected   func(string) bool
}

func newFake() *fakeCopier {
	return &fakeCopier{ends: map[tp]int64{}, next: map[tp]int64{}, written: map[tp][]int64{}, payloads: map[tp][]*kgo.Record{},
		selected: func(t string) bool { return !strings.HasPrefix(t, "excluded") }}
}

func (f *fakeCopier) Selected(t string) bool { return f.selected(t) }
func (f *fakeCopier) Ready(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}
func (f *fakeCopier) Position(_ context.Context, t string, p int32) (int64, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.next[tp{t, p}]
	return n, ok, nil
}
func (f *fakeCopier) CopyThrough(ctx context.Context, t string, p int32, off int64) (int64, error) {
	f.copies.Add(1)
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, f.err
	}
	k := tp{t, p}
	end := f.ends[k]
	if off >= end {
		return 0, Permanent(fmt.Errorf("offset %d beyond end %d", off, end))
	}
	stop := end
	if f.stopAt > 0 && f.stopAt < end {
		stop = f.stopAt
	}
	for o := f.next[k]; o < stop; o++ {
		f.written[k] = append(f.written[k], o)
	}
	f.next[k] = stop
	if stop < end {
		return 0, fmt.Errorf("copy stopped (max-duration) with %d records left", end-stop)
	}
	return end, nil
}
func (f *fakeCopier) WriteAt(_ context.Context, t string, p int32, rec *kgo.Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	k := tp{t, p}
	if rec.Offset != f.next[k] {
		return fmt.Errorf("write at %d, next is %d", rec.Offset, f.next[k])
	}
	f.written[k] = append(f.written[k], rec.Offset)
	f.payloads[k] = append(f.payloads[k], rec)
	f.next[k] = rec.Offset + 1
	return nil
}
func (f *fakeCopier) Topics(context.Context) (map[string]int32, error) {
	f.lookups.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	counts := map[string]int32{}
	for k := range f.ends {
		counts[k.topic] = max(counts[k.topic], k.partition+1)
	}
	for t, n := range f.partitions {
		counts[t] = n
	}
	return counts, nil
}
func (f *fakeCopier) Burst(context.Context) (any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return map[string]int{"records": 42}, nil
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// kafkaEvent builds a record event as KafkaSource sends it.
func kafkaEvent(topic string, p int32, off int64) event.Event {
	e := event.New()
	e.SetID(fmt.Sprintf("partition:%d/offset:%d", p, off))
	e.SetSource("/apis/v1/namespaces/ns/kafkasources/src#" + topic)
	e.SetType(TypeKafkaEvent)
	e.SetSubject(fmt.Sprintf("partition:%d#%d", p, off))
	e.SetTime(time.UnixMilli(1_600_000_000_123))
	e.SetExtension(ExtPartition, fmt.Sprint(p))
	e.SetExtension(ExtOffset, fmt.Sprint(off))
	return e
}

func post(t *testing.T, h http.Handler, e event.Event) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	req.Header.Set("ce-specversion", "1.0")
	req.Header.Set("ce-id", e.ID())
	req.Header.Set("ce-source", e.Source())
	req.Header.Set("ce-type", e.Type())
	if e.Subject() != "" {
		req.Header.Set("ce-subject", e.Subject())
	}
	if !e.Time().IsZero() {
		req.Header.Set("ce-time", e.Time().UTC().Format(time.RFC3339Nano))
	}
	if e.DataContentType() != "" {
		req.Header.Set("content-type", e.DataContentType())
	}
	for k, v := range e.Extensions() {
		req.Header.Set("ce-"+k, fmt.Sprint(v))
	}
	req.Body = io.NopCloser(strings.NewReader(string(e.Data())))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

// newAuthTestHandler is newTestHandler whose requests come from an authenticated sender.
func newAuthTestHandler(t *testing.T, f *fakeCopier, opts Options) (*Handler, http.Handler) {
	t.Helper()
	h, srv := newTestHandler(t, f, opts)
	return h, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.ServeHTTP(w, r.WithContext(serve.WithSender(r.Context())))
	})
}

func newTestHandler(t *testing.T, f *fakeCopier, opts Options) (*Handler, http.Handler) {
	t.Helper()
	h, err := New(f, opts, quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h, serve.NewHTTPHandler(h.ServeConfig(serve.Config{}), quiet(), h)
}

func TestFetchCopiesOnceAndAnswersRedeliveriesAtOnce(t *testing.T) {
	f := newFake()
	f.ends[tp{"orders", 0}] = 10
	_, hh := newTestHandler(t, f, Options{})
	for off := int64(0); off < 10; off++ {
		if code, body := post(t, hh, kafkaEvent("orders", 0, off)); code != 200 {
			t.Fatalf("offset %d: %d %s", off, code, body)
		}
	}
	// Redeliveries.
	for off := int64(0); off < 10; off++ {
		if code, _ := post(t, hh, kafkaEvent("orders", 0, off)); code != 200 {
			t.Fatalf("redelivery %d: %d", off, code)
		}
	}
	if n := f.copies.Load(); n != 1 {
		t.Fatalf("%d copies, want 1 (first event copies to the end, the rest are already copied)", n)
	}
	if got := len(f.written[tp{"orders", 0}]); got != 10 {
		t.Fatalf("%d records written, want 10", got)
	}
}

// TestFetchFollowsStaleEvents: with FollowEvents, an event for a record already copied (a
// dispatcher behind the source) starts a catch-up copy of what the source gained since, so
// records whose own events have not come yet reach the target; after a catch-up copy that
// found nothing, events start no copy for FollowPause (an hour here).
func TestFetchFollowsStaleEvents(t *testing.T) {
	f := newFake()
	k := tp{"orders", 0}
	f.ends[k] = 10
	h, hh := newTestHandler(t, f, Options{FollowEvents: true, FollowPause: time.Hour})
	idle := func() bool {
		h.followMu.Lock()
		defer h.followMu.Unlock()
		return !h.following
	}
	if code, body := post(t, hh, kafkaEvent("orders", 0, 0)); code != 200 {
		t.Fatalf("first event: %d %s", code, body)
	}
	// The catch-up copy after the first event found nothing new: it pauses catch-ups for an
	// hour. Lift the pause, then the source gains records 10..14 while the dispatcher is still
	// delivering offset 3.
	testkit.WaitFor(t, 30*time.Second, "the first catch-up copy to end", idle)
	h.followMu.Lock()
	h.quietUntil = time.Time{}
	h.followMu.Unlock()
	f.mu.Lock()
	f.ends[k] = 15
	f.mu.Unlock()
	if code, body := post(t, hh, kafkaEvent("orders", 0, 3)); code != 200 {
		t.Fatalf("stale event: %d %s", code, body)
	}
	testkit.WaitFor(t, 30*time.Second, "records 10..14 copied without events of their own", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.next[k] == 15
	})
	testkit.WaitFor(t, 30*time.Second, "the second catch-up copy to end", idle)
	// Nothing new on the source: the next stale event's catch-up finds nothing and pauses.
	if code, body := post(t, hh, kafkaEvent("orders", 0, 4)); code != 200 {
		t.Fatalf("stale event 4: %d %s", code, body)
	}
	testkit.WaitFor(t, 30*time.Second, "a catch-up copy that found nothing", func() bool {
		h.followMu.Lock()
		defer h.followMu.Unlock()
		return !h.following && time.Now().Before(h.quietUntil)
	})
	copies := f.copies.Load()
	for off := int64(5); off < 15; off++ {
		if code, body := post(t, hh, kafkaEvent("orders", 0, off)); code != 200 {
			t.Fatalf("stale event %d: %d %s", off, code, body)
		}
	}
	h.Close() // waits for any copy the events started
	if n := f.copies.Load(); n != copies {
		t.Errorf("%d copies after stale events with nothing new on the source, want none", n-copies)
	}
	if got := f.written[k]; len(got) != 15 || got[14] != 14 {
		t.Errorf("written %v, want offsets 0..14 once each", got)
	}
}

// TestRedeliveryAfterRestart: an event a previous process already copied (the stored position
// covers it) is answered 200 after one copy that resumes from the stored position: nothing is
// written twice.
func TestRedeliveryAfterRestart(t *testing.T) {
	f := newFake()
	f.ends[tp{"orders", 0}] = 10
	f.next[tp{"orders", 0}] = 8 // a previous process copied 0..7
	_, hh := newTestHandler(t, f, Options{})
	for range 2 {
		if code, _ := post(t, hh, kafkaEvent("orders", 0, 5)); code != 200 {
			t.Fatal(code)
		}
	}
	if n := f.copies.Load(); n != 1 {
		t.Errorf("%d copies for two redelivered events, want 1", n)
	}
	if got := f.written[tp{"orders", 0}]; !slices.Equal(got, []int64{8, 9}) {
		t.Errorf("written %v, want [8 9] (what the stored position did not cover)", got)
	}
}

func TestStatusCodes(t *testing.T) {
	f := newFake()
	f.ends[tp{"orders", 0}] = 3
	_, hh := newTestHandler(t, f, Options{})
	if code, body := post(t, hh, kafkaEvent("orders", 0, 3)); code != 400 || !strings.Contains(body, "beyond end") {
		t.Fatalf("offset beyond end: %d %s", code, body)
	}
	if code, body := post(t, hh, kafkaEvent("excluded-topic", 0, 0)); code != 400 || !strings.Contains(body, "not replicated") {
		t.Fatalf("excluded topic: %d %s", code, body)
	}
	f.mu.Lock()
	f.err = errors.New("target cluster unreachable: dial tcp: connection refused")
	f.mu.Unlock()
	if code, body := post(t, hh, kafkaEvent("orders", 0, 1)); code != 503 || !strings.Contains(body, "not durable on the target yet, retry") {
		t.Fatalf("target down: %d %s", code, body)
	}
	if code, body := post(t, hh, event.Event{}); code != 400 && code != 415 {
		t.Fatalf("empty: %d %s", code, body)
	}
	f.mu.Lock()
	f.err = nil
	f.mu.Unlock()
	if code, body := post(t, hh, kafkaEvent("orders", 0, 1)); code != 200 {
		t.Fatalf("after recovery: %d %s", code, body)
	}
}

func TestBurstEvents(t *testing.T) {
	f := newFake()
	ping := event.New()
	ping.SetID("u1")
	ping.SetSource("/apis/v1/namespaces/ns/pingsources/tick")
	ping.SetType(TypePing)
	other := event.New()
	other.SetID("u2")
	other.SetSource("/x")
	other.SetType("com.example.other")
	custom := other.Clone()
	custom.SetType("com.example.drain")

	_, hh := newAuthTestHandler(t, f, Options{BurstEventTypes: []string{"com.example.drain"}})
	for name, tc := range map[string]struct {
		e    event.Event
		code int
		body string
	}{
		"ping":       {ping, 200, `"records":42`},
		"configured": {custom, 200, `"records":42`},
		"other":      {other, 400, "neither"},
	} {
		t.Run(name, func(t *testing.T) {
			if code, body := post(t, hh, tc.e); code != tc.code || !strings.Contains(body, tc.body) {
				t.Fatalf("%d %s", code, body)
			}
		})
	}
	_, any := newAuthTestHandler(t, f, Options{})
	if code, body := post(t, any, other); code != 200 {
		t.Fatalf("any type bursts when BurstEventTypes is empty (authenticated sender): %d %s", code, body)
	}
	f.err = errors.New("source down")
	if code, body := post(t, any, ping); code != 503 || !strings.Contains(body, "source down") {
		t.Fatalf("failed burst: %d %s", code, body)
	}
}

func TestPayloadMode(t *testing.T) {
	f := newFake()
	k := tp{"orders", 0}
	f.ends[k] = 20
	f.next[k] = 5
	_, hh := newTestHandler(t, f, Options{Mode: ModePayload, KeyType: KeyByteArray})
	ev := func(off int64, data string) event.Event {
		e := kafkaEvent("orders", 0, off)
		_ = e.SetData("text/plain", []byte(data))
		e.SetExtension(ExtKey, "AAH/") // 00 01 ff
		e.SetExtension("kafkaheaderxtrace", "abc")
		return e
	}
	// In order: written from the payload.
	for off := int64(5); off < 8; off++ {
		if code, body := post(t, hh, ev(off, fmt.Sprint("v", off))); code != 200 {
			t.Fatalf("%d: %d %s", off, code, body)
		}
	}
	// Older: nothing written.
	if code, _ := post(t, hh, ev(6, "again")); code != 200 {
		t.Fatal(code)
	}
	if len(f.payloads[k]) != 3 || f.copies.Load() != 0 {
		t.Fatalf("payload writes %d, copies %d", len(f.payloads[k]), f.copies.Load())
	}
	r := f.payloads[k][0]
	if string(r.Value) != "v5" || string(r.Key) != "\x00\x01\xff" || len(r.Headers) != 2 ||
		r.Headers[0].Key != "content-type" || r.Headers[1].Key != "xtrace" || string(r.Headers[1].Value) != "abc" ||
		r.Timestamp.UnixMilli() != 1_600_000_000_123 {
		t.Fatalf("rebuilt record: %+v", r)
	}
	// A gap (8, 9 never delivered): fetched from the source through the end.
	if code, body := post(t, hh, ev(10, "v10")); code != 200 {
		t.Fatalf("gap: %d %s", code, body)
	}
	if f.copies.Load() != 1 || f.next[k] != 20 {
		t.Fatalf("gap fill: copies %d next %d", f.copies.Load(), f.next[k])
	}
	want := []int64{5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}
	if fmt.Sprint(f.written[k]) != fmt.Sprint(want) {
		t.Fatalf("written %v, want %v", f.written[k], want)
	}
}

// TestStructuredModeRecordEvent: the record event in structured mode. Numbers in extensions
// are int32 to sdk-go's JSON reader, so an offset beyond 2^31-1 must be a JSON string there
// (KafkaSource sends binary mode, where every extension is a string); a big JSON number is a 400
// with sdk-go's reason.
func TestStructuredModeRecordEvent(t *testing.T) {
	f := newFake()
	f.ends[tp{"orders", 2}] = 5_000_000_001
	f.next[tp{"orders", 2}] = 5_000_000_001 // already copied: no copy needed
	_, hh := newTestHandler(t, f, Options{})
	for _, tc := range []struct {
		off, id string
		code    int
	}{
		{`"5000000000"`, "5000000000", 200},
		{`7`, "7", 200},
		{`5000000000`, "5000000000", 400},
	} {
		body := `{"specversion":"1.0","id":"partition:2/offset:` + tc.id + `","source":"/apis/v1/namespaces/ns/kafkasources/s#orders",` +
			`"type":"dev.knative.kafka.event","knativekafkapartition":2,"knativekafkaoffset":` + tc.off + `}`
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/cloudevents+json")
		w := httptest.NewRecorder()
		hh.ServeHTTP(w, req)
		if w.Code != tc.code {
			t.Fatalf("offset %s: %d %s", tc.off, w.Code, w.Body.String())
		}
	}
}

// TestRecordAnswersKeepClusterErrorsFromStrangers: a record event that fails on a cluster error
// (the copy, or the source lookup of a topic's partitions) is answered 503 with a generic reason
// to an unauthenticated sender, the cluster's error (addresses, client ids) in the log only; an
// authenticated sender gets the reason.
func TestRecordAnswersKeepClusterErrorsFromStrangers(t *testing.T) {
	const secret = "dial tcp 10.1.2.3:9093: client mm2go-target-pod-7"
	for _, failing := range []string{"copy", "partition lookup"} {
		t.Run(failing, func(t *testing.T) {
			f := newFake()
			f.ends[tp{"orders", 0}] = 5
			var logs testkit.SyncBuffer
			h, err := New(f, Options{}, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(h.Close)
			srv := serve.NewHTTPHandler(h.ServeConfig(serve.Config{}), quiet(), h)
			if failing == "copy" {
				if code, body := post(t, srv, kafkaEvent("orders", 0, 0)); code != http.StatusOK {
					t.Fatalf("first event: %d %q", code, body)
				}
				f.ends[tp{"orders", 0}] = 10
			}
			f.mu.Lock()
			f.err = errors.New(secret)
			f.mu.Unlock()
			code, body := post(t, srv, kafkaEvent("orders", 0, 7))
			if code != http.StatusServiceUnavailable || strings.Contains(body, "10.1.2.3") || strings.Contains(body, "mm2go-target") {
				t.Errorf("unauthenticated sender, %s failing: answer %d %q, want 503 without the cluster's error", failing, code, body)
			}
			if !strings.Contains(logs.String(), secret) {
				t.Errorf("the log lacks the cluster's error %q:\n%s", secret, logs.String())
			}
			authed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				srv.ServeHTTP(w, r.WithContext(serve.WithSender(r.Context())))
			})
			if code, body := post(t, authed, kafkaEvent("orders", 0, 7)); code != http.StatusServiceUnavailable || !strings.Contains(body, secret) {
				t.Errorf("authenticated sender, %s failing: answer %d %q, want 503 with the cluster's error", failing, code, body)
			}
		})
	}
}
