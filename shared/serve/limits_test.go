package serve

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/protocol"
)

// TestReasonLoggedShort: a sender's 900 KiB ce-time header makes a 400 whose reason, quoted in
// the WARN request line, is cut to the answer's 1000 bytes: no log line grows with what a sender
// sends.
func TestReasonLoggedShort(t *testing.T) {
	var logs bytes.Buffer
	h := NewHTTPHandler(Config{}, slog.New(slog.NewTextHandler(&logs, nil)), HandlerFunc(ok))
	req := binaryRequest("{}", map[string]string{"ce-time": strings.Repeat("9", 900<<10), "ce-id": strings.Repeat("i", 900<<10)})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusBadRequest {
		t.Fatalf("answer %d %q, want 400", w.Code, w.Body.String())
	}
	if !strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("no WARN line for the refused event: %q", logs.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if len(line) > 4<<10 {
			t.Errorf("log line of %d bytes, want at most 4 KiB: %.300s...", len(line), line)
		}
	}
}

// TestBodyLimits (F3): by default (checkpoint, heartbeat) a body over 8 KiB is 413; with
// DiscardBinaryData (fetch mode) a binary-mode body is dropped, the handler gets no data, and
// only a body over MaxDiscardBytes is 413, while structured mode keeps the small limit.
func TestBodyLimits(t *testing.T) {
	var got []byte
	seen := false
	rec := HandlerFunc(func(_ context.Context, e event.Event) protocol.Result { seen, got = true, e.Data(); return nil })
	h := NewHTTPHandler(Config{}, quietLogger(), rec)
	if code, body := do(h, binaryRequest(strings.Repeat("x", DefaultMaxBodyBytes+1), nil)); code != http.StatusRequestEntityTooLarge ||
		!strings.Contains(body, "larger than the 8192-byte limit") {
		t.Errorf("default server, 8 KiB + 1 body: answer %d %q, want 413 naming the limit", code, body)
	}
	if seen {
		t.Errorf("the handler ran for a body over the limit")
	}
	d := NewHTTPHandler(Config{DiscardBinaryData: true, MaxDiscardBytes: 1 << 20}, quietLogger(), rec)
	if code, body := do(d, binaryRequest(strings.Repeat("x", 1<<20), nil)); code != http.StatusOK || !seen || got != nil {
		t.Errorf("discarding server, 1 MiB binary body: answer %d %q, handler ran %v with %d bytes, want 200 with no data", code, body, seen, len(got))
	}
	if code, _ := do(d, binaryRequest(strings.Repeat("x", 1<<20+1), nil)); code != http.StatusRequestEntityTooLarge {
		t.Errorf("discarding server, body over MaxDiscardBytes: answer %d, want 413", code)
	}
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"specversion":"1.0","id":"1","source":"/s","type":"t","data":"`+strings.Repeat("x", DefaultMaxBodyBytes)+`"}`))
	req.Header.Set("Content-Type", "application/cloudevents+json")
	if code, _ := do(d, req); code != http.StatusRequestEntityTooLarge {
		t.Errorf("discarding server, structured event over 8 KiB: answer %d, want 413", code)
	}
}

// TestReadyzNoClusterText (F6): /readyz is open to anyone who can reach the service: a cluster
// error (bootstrap address, client id) is logged, not answered.
func TestReadyzNoClusterText(t *testing.T) {
	var logs bytes.Buffer
	cause := errors.New("source cluster unreachable: dial tcp 10.1.2.3:9093 (client mm2go-source): connection refused")
	h := NewHTTPHandler(Config{}, slog.New(slog.NewTextHandler(&logs, nil)), readyHandler{HandlerFunc(ok), cause})
	code, body := do(h, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if code != http.StatusServiceUnavailable || strings.Contains(body, "10.1.2.3") || strings.Contains(body, "mm2go-source") {
		t.Errorf("/readyz: answer %d %q, want 503 without the cluster's error", code, body)
	}
	if !strings.Contains(logs.String(), "10.1.2.3") {
		t.Errorf("the log does not say why: %q", logs.String())
	}
}
