package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/protocol"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/mm2go/mm2go/test/testkit"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

type readyHandler struct {
	HandlerFunc
	err error
}

func (r readyHandler) Ready(context.Context) error { return r.err }

func ok(context.Context, event.Event) protocol.Result { return nil }

func binaryRequest(body string, hdr map[string]string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	req.Header.Set("ce-specversion", "1.0")
	req.Header.Set("ce-id", "1")
	req.Header.Set("ce-source", "/test")
	req.Header.Set("ce-type", "test.event")
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	return req
}

func do(h http.Handler, req *http.Request) (int, string) {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

func TestHealthAndReady(t *testing.T) {
	for name, tc := range map[string]struct {
		h          Handler
		path       string
		wantStatus int
		wantBody   string
	}{
		"healthz":            {HandlerFunc(ok), "/healthz", 200, "ok"},
		"readyz no readier":  {HandlerFunc(ok), "/readyz", 200, "ready"},
		"readyz ready":       {readyHandler{HandlerFunc(ok), nil}, "/readyz", 200, "ready"},
		"readyz not ready":   {readyHandler{HandlerFunc(ok), errors.New("target cluster unreachable")}, "/readyz", 503, "not ready: target cluster unreachable"},
		"healthz not ready":  {readyHandler{HandlerFunc(ok), errors.New("down")}, "/healthz", 200, "ok"},
		"get on event route": {HandlerFunc(ok), "/", 405, "method GET not allowed"},
	} {
		t.Run(name, func(t *testing.T) {
			code, body := do(NewHTTPHandler(Config{}, quietLogger(), tc.h), httptest.NewRequest(http.MethodGet, tc.path, nil))
			if code != tc.wantStatus || !strings.Contains(body, tc.wantBody) {
				t.Fatalf("got %d %q, want %d containing %q", code, body, tc.wantStatus, tc.wantBody)
			}
		})
	}
}

func TestResultMapping(t *testing.T) {
	for name, tc := range map[string]struct {
		res        protocol.Result
		wantStatus int
		wantBody   string
		wantCT     string
	}{
		"nil":               {nil, 200, "", ""},
		"ack":               {protocol.ResultACK, 200, "", ""},
		"cehttp 503":        {cehttp.NewResult(503, "target unavailable: %s", "broker down"), 503, "target unavailable: broker down", "text/plain"},
		"wrapped cehttp":    {fmt.Errorf("ctx: %w", cehttp.NewResult(400, "bad offset")), 400, "bad offset", "text/plain"},
		"cehttp multi-line": {cehttp.NewResult(400, "a\nb"), 400, "a; b", "text/plain"},
		"plain error":       {errors.New("boom"), 500, "boom", "text/plain"},
		"nack":              {protocol.ResultNACK, 500, "", "text/plain"},
		"json":              {JSON(200, map[string]int{"records": 3}), 200, `{"records":3}`, "application/json"},
		"text":              {Text(409, "busy"), 409, "busy", "text/plain"},
	} {
		t.Run(name, func(t *testing.T) {
			h := NewHTTPHandler(Config{}, quietLogger(), HandlerFunc(func(context.Context, event.Event) protocol.Result { return tc.res }))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, binaryRequest("x", nil))
			if w.Code != tc.wantStatus || !strings.Contains(w.Body.String(), tc.wantBody) {
				t.Fatalf("got %d %q, want %d containing %q", w.Code, w.Body.String(), tc.wantStatus, tc.wantBody)
			}
			if w.Code >= 300 && strings.TrimSpace(w.Body.String()) == "" {
				t.Fatalf("non-2xx answer %d without a reason", w.Code)
			}
			if strings.Count(strings.TrimSpace(w.Body.String()), "\n") > 0 {
				t.Fatalf("reason is not one line: %q", w.Body.String())
			}
			if !strings.HasPrefix(w.Header().Get("Content-Type"), tc.wantCT) {
				t.Fatalf("content type %q, want %q", w.Header().Get("Content-Type"), tc.wantCT)
			}
		})
	}
}

func TestStructuredAndBinaryReachHandler(t *testing.T) {
	var got []event.Event
	h := NewHTTPHandler(Config{}, quietLogger(), HandlerFunc(func(_ context.Context, e event.Event) protocol.Result {
		got = append(got, e)
		return nil
	}))
	if code, body := do(h, binaryRequest("hello", map[string]string{"content-type": "text/plain", "ce-knativekafkaoffset": "7"})); code != 200 {
		t.Fatalf("binary: %d %s", code, body)
	}
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(
		`{"specversion":"1.0","id":"2","source":"/s","type":"t","datacontenttype":"text/plain","data":"hi","knativekafkaoffset":"8"}`))
	req.Header.Set("Content-Type", "application/cloudevents+json")
	if code, body := do(h, req); code != 200 {
		t.Fatalf("structured: %d %s", code, body)
	}
	if len(got) != 2 || string(got[0].Data()) != "hello" || got[0].Extensions()["knativekafkaoffset"] != "7" ||
		got[1].ID() != "2" || got[1].Extensions()["knativekafkaoffset"] != "8" {
		t.Fatalf("events: %+v", got)
	}
}

func TestMalformedRequests(t *testing.T) {
	h := NewHTTPHandler(Config{MaxBodyBytes: 64}, quietLogger(), HandlerFunc(ok))
	for name, tc := range map[string]struct {
		req        *http.Request
		wantStatus int
		wantReason string
	}{
		"no ce headers": {httptest.NewRequest(http.MethodPost, "/", strings.NewReader("x")), 415, "not a CloudEvent"},
		"missing id":    {binaryRequest("x", map[string]string{"ce-id": ""}), 400, "invalid CloudEvent"},
		"missing type":  {binaryRequest("x", map[string]string{"ce-type": ""}), 400, "invalid CloudEvent"},
		"bad version":   {binaryRequest("x", map[string]string{"ce-specversion": "9.9"}), 415, "not a CloudEvent"},
		"bad time":      {binaryRequest("x", map[string]string{"ce-time": "yesterday"}), 400, "CloudEvent"},
		"too large":     {binaryRequest(strings.Repeat("x", 65), nil), 413, "larger than the 64-byte limit"},
		"structured bad json": func() struct {
			req        *http.Request
			wantStatus int
			wantReason string
		} {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"specversion":`))
			r.Header.Set("Content-Type", "application/cloudevents+json")
			return struct {
				req        *http.Request
				wantStatus int
				wantReason string
			}{r, 400, "malformed CloudEvent"}
		}(),
		"batch": func() struct {
			req        *http.Request
			wantStatus int
			wantReason string
		} {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`[]`))
			r.Header.Set("Content-Type", "application/cloudevents-batch+json")
			return struct {
				req        *http.Request
				wantStatus int
				wantReason string
			}{r, 400, "batched"}
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			code, body := do(h, tc.req)
			if code != tc.wantStatus || !strings.Contains(body, tc.wantReason) {
				t.Fatalf("got %d %q, want %d with %q", code, body, tc.wantStatus, tc.wantReason)
			}
		})
	}
}

func TestPanicBecomes500(t *testing.T) {
	h := NewHTTPHandler(Config{}, quietLogger(), HandlerFunc(func(context.Context, event.Event) protocol.Result { panic("kaboom") }))
	code, body := do(h, binaryRequest("x", nil))
	if code != 500 || !strings.Contains(body, "panic") || !strings.Contains(body, "kaboom") {
		t.Fatalf("got %d %q", code, body)
	}
}

func TestRequestTimeoutReachesHandler(t *testing.T) {
	h := NewHTTPHandler(Config{RequestTimeout: 50 * time.Millisecond}, quietLogger(), HandlerFunc(func(ctx context.Context, _ event.Event) protocol.Result {
		<-ctx.Done()
		return cehttp.NewResult(503, "gave up: %v", ctx.Err())
	}))
	code, body := do(h, binaryRequest("x", nil))
	if code != 503 || !strings.Contains(body, "deadline exceeded") {
		t.Fatalf("got %d %q", code, body)
	}
}

// TestGracefulShutdownFinishesInFlight cancels Run's context while a request is in its handler:
// the request must still get its answer, new connections must be refused, and Run returns nil.
func TestGracefulShutdownFinishesInFlight(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{})
	release := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, _ event.Event) protocol.Result {
		close(entered)
		select {
		case <-release:
			return Text(200, "finished")
		case <-ctx.Done():
			return Text(503, "cancelled: %v", ctx.Err())
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Config{Listener: ln, ShutdownTimeout: 10 * time.Second}, quietLogger(), h) }()

	url := "http://" + ln.Addr().String() + "/"
	type answer struct {
		code int
		body string
		err  error
	}
	ans := make(chan answer, 1)
	go func() {
		req := binaryRequest("x", nil)
		hreq, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("x"))
		hreq.Header = req.Header
		resp, err := http.DefaultClient.Do(hreq)
		if err != nil {
			ans <- answer{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ans <- answer{code: resp.StatusCode, body: string(b)}
	}()
	<-entered
	cancel() // SIGTERM
	// Poll /healthz, each probe on a new connection, until the server refuses it (bounded).
	probe := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := probe.Get("http://" + ln.Addr().String() + "/healthz")
		if err != nil {
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatal("server still accepts new requests 10 s into shutdown")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned while a request was in flight: %v", err)
	default:
	}
	close(release)
	a := <-ans
	if a.err != nil || a.code != 200 || !strings.Contains(a.body, "finished") {
		t.Fatalf("in-flight request: %d %q %v", a.code, a.body, a.err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestShutdownTimeoutCancelsHandlers: a handler that never finishes is cancelled after
// ShutdownTimeout and Run still returns.
func TestShutdownTimeoutCancelsHandlers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{})
	cancelled := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, _ event.Event) protocol.Result {
		close(entered)
		<-ctx.Done()
		close(cancelled)
		return Text(503, "cancelled")
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Listener: ln, ShutdownTimeout: 300 * time.Millisecond}, quietLogger(), h)
	}()
	go func() {
		req := binaryRequest("x", nil)
		hreq, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/", strings.NewReader("x"))
		hreq.Header = req.Header
		if resp, err := http.DefaultClient.Do(hreq); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	cancel()
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("handler context not cancelled after the shutdown timeout")
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Run returned nil after a shutdown that timed out")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
}

func TestAddrFromPort(t *testing.T) {
	if AddrFromPort("") != ":8080" || AddrFromPort("9000") != ":9000" {
		t.Fatal(AddrFromPort(""), AddrFromPort("9000"))
	}
}

// countingReadier fails every Ready with a text that differs each time (as a client's dial
// errors do: addresses, attempts), counting the calls.
type countingReadier struct {
	HandlerFunc
	mu    sync.Mutex
	calls int
	fail  func(call int) error
}

func (c *countingReadier) Ready(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	return c.fail(c.calls)
}

// TestReadyzCachedAndLogsChangesOnly: /readyz is open, so GETs within the cache's life answer
// the last check without asking the clusters again, and the log gets one line per change of
// state (ready, or which cluster is unreachable), not one per refusal whose text differs.
func TestReadyzCachedAndLogsChangesOnly(t *testing.T) {
	r := &countingReadier{HandlerFunc: ok, fail: func(n int) error {
		return fmt.Errorf("target cluster unreachable: dial tcp 10.0.0.%d:9092: connection refused", n)
	}}
	h := NewHTTPHandler(Config{ReadyCacheTTL: time.Hour}, quietLogger(), r)
	for range 50 {
		if code, body := do(h, httptest.NewRequest(http.MethodGet, "/readyz", nil)); code != http.StatusServiceUnavailable || strings.Contains(body, "10.0.0") {
			t.Fatalf("/readyz: %d %q, want 503 without the error text", code, body)
		}
	}
	if r.calls != 1 {
		t.Errorf("50 GET /readyz within the cache's life asked the clusters %d times, want 1", r.calls)
	}

	var logs testkit.SyncBuffer
	states := []error{nil, errors.New("source cluster unreachable: a"), errors.New("source cluster unreachable: b"), errors.New("source cluster unreachable: c"),
		errors.New("target cluster unreachable: d"), errors.New("target cluster unreachable: e"), nil, nil}
	r = &countingReadier{HandlerFunc: ok, fail: func(n int) error { return states[(n-1)%len(states)] }}
	h = NewHTTPHandler(Config{ReadyCacheTTL: time.Nanosecond}, slog.New(slog.NewTextHandler(&logs, nil)), r)
	for range states {
		time.Sleep(time.Millisecond) // past the cache's life: every GET checks
		do(h, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	}
	if r.calls != len(states) {
		t.Fatalf("%d checks for %d GETs past the cache's life, want one each", r.calls, len(states))
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 2 {
		t.Errorf("%d WARN lines for 2 changes to not ready (source, then target), want 2:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), `msg=ready`); n != 2 {
		t.Errorf("%d 'ready' lines for 2 changes to ready, want 2:\n%s", n, logs.String())
	}
}
