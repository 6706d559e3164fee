package serve

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/protocol"
)

// FuzzEventRoute throws arbitrary bodies and CloudEvent headers at the event route through
// httptest: the server must never crash, must answer a status it can justify (2xx only for a
// valid event, otherwise 4xx with a one-line reason), and must never call the handler with an
// event that fails validation.
func FuzzEventRoute(f *testing.F) {
	f.Add("1.0", "id", "/src", "type", "text/plain", "", "body")
	f.Add("1.0", "", "/src", "type", "", "", "")
	f.Add("", "id", "/src", "type", "application/cloudevents+json", "", `{"specversion":"1.0","id":"1","source":"s","type":"t"}`)
	f.Add("1.0", "id", "", "type", "application/json", "2020-01-02T03:04:05Z", "{")
	f.Add("0.3", "id", "%zz", "t", "application/cloudevents-batch+json", "x", "[{}]")
	f.Add("", "", "", "", "application/cloudevents+json", "", `{"specversion":"1.0","id":"","source":"","type":"","data_base64":"!!"}`)
	h := NewHTTPHandler(Config{MaxBodyBytes: 1 << 16}, quietLogger(), HandlerFunc(func(_ context.Context, e event.Event) protocol.Result {
		if err := e.Validate(); err != nil {
			panic("handler got an invalid event: " + err.Error())
		}
		return nil
	}))
	f.Fuzz(func(t *testing.T, specversion, id, source, typ, contentType, tm, body string) {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		for k, v := range map[string]string{"ce-specversion": specversion, "ce-id": id, "ce-source": source, "ce-type": typ, "content-type": contentType, "ce-time": tm} {
			if v != "" && validHeaderValue(v) {
				req.Header.Set(k, v)
			}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch {
		case w.Code == http.StatusOK:
		case w.Code >= 400 && w.Code < 500:
			reason := strings.TrimSpace(w.Body.String())
			if reason == "" || strings.Contains(reason, "\n") {
				t.Fatalf("status %d with reason %q: want one non-empty line", w.Code, reason)
			}
		default:
			t.Fatalf("status %d (%q) for a client-side problem", w.Code, w.Body.String())
		}
	})
}

// validHeaderValue mirrors what an HTTP/1.1 server would accept in a field value (no CTLs
// except tab), since net/http itself rejects the rest before any handler runs.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
