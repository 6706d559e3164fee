package serve

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
