package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/protocol"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
)

// Reply is a handler result with an explicit status, content type and body. It is an error (so
// it is a protocol.Result); errors.As finds it even when wrapped. Build it with JSON or Text.
type Reply struct {
	Status      int
	ContentType string
	Body        []byte
}

// Error returns the status and body on one line.
func (r *Reply) Error() string { return fmt.Sprintf("%d: %s", r.Status, oneLine(string(r.Body))) }

// JSON returns a Reply with v encoded as JSON (a summary on 200). If v cannot be encoded the reply
// is a 500 saying so.
func JSON(status int, v any) protocol.Result {
	b, err := json.Marshal(v)
	if err != nil {
		return Text(http.StatusInternalServerError, "encoding the answer as JSON: %v", err)
	}
	return &Reply{Status: status, ContentType: "application/json", Body: append(b, '\n')}
}

// Text returns a Reply with a one-line text body: the formatted reason.
func Text(status int, format string, args ...any) protocol.Result {
	return &Reply{Status: status, ContentType: "text/plain; charset=utf-8", Body: []byte(oneLine(fmt.Sprintf(format, args...)) + "\n")}
}

// cehttpResult is the status and message of an sdk-go *cehttp.Result.
type cehttpResult struct {
	status int
	msg    string
}

func asHTTPResult(res error, out **cehttpResult) bool {
	var r *cehttp.Result
	if !errors.As(res, &r) || r == nil {
		return false
	}
	status := r.StatusCode
	if status <= 100 || status >= 600 {
		status = http.StatusOK // sdk-go ignores codes outside (100, 600)
	}
	*out = &cehttpResult{status: status, msg: fmt.Errorf(r.Format, r.Args...).Error()}
	return true
}

// event handles POST / (any path: Knative posts to the service root, other routers may not).
//
// Parsing uses sdk-go's HTTP binding (cehttp.NewMessageFromHttpRequest + binding.ToEvent), which
// understands binary mode (KafkaSource, PingSource) and structured mode. The client's receive
// handler (cloudevents.NewHTTPReceiveHandler) is not used because it answers 500 for some
// malformed events (a retried code, which would make KafkaSource retry poison), has no body
// limit, and pairs requests with handler goroutines through one shared channel, so a request can
// run under another request's context.
func (s *server) event(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeText(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed: POST a CloudEvent to /, or GET /healthz or /readyz")
		return
	}
	rec := &requestLog{start: start, path: r.URL.Path}
	defer func() { s.logRequest(r.Context(), rec) }()

	var body []byte
	var err error
	limit := s.cfg.MaxBodyBytes
	if s.cfg.DiscardBinaryData && cehttp.NewMessage(r.Header, nil).ReadEncoding() == binding.EncodingBinary {
		// The handler does not use a binary-mode event's data: drop it as it arrives.
		limit = s.cfg.MaxDiscardBytes
		var n int64
		n, err = io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, limit))
		rec.bytes = int(n)
	} else {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		rec.bytes = len(body)
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			rec.status = http.StatusRequestEntityTooLarge
			writeText(w, rec.status, fmt.Sprintf("request body larger than the %d-byte limit", limit))
			return
		}
		// The client went away or sent a broken body: 400 is final for a body that cannot be
		// read, but the dispatcher will not see it if it is gone anyway.
		rec.status = http.StatusBadRequest
		writeText(w, rec.status, "reading request body: "+err.Error())
		return
	}

	e, status, reason := parseEvent(r, body)
	if status != 0 {
		rec.status = status
		rec.reason = reason
		writeText(w, status, reason)
		return
	}
	rec.id, rec.typ, rec.source, rec.subject = short(e.ID()), short(e.Type()), short(e.Source()), short(e.Subject())

	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	res := s.invoke(ctx, e)
	status, ctype, out := statusFor(res)
	rec.status = status
	if status >= 300 {
		rec.reason = oneLine(string(out))
		if len(out) == 0 {
			out = []byte(http.StatusText(status))
		}
	}
	if len(out) > 0 {
		if ctype == "" {
			ctype = "text/plain; charset=utf-8"
		}
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	}
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// parseEvent reads a CloudEvent (binary or structured) from the request and validates it. A
// non-zero status means the request is not a usable event; reason says why in one line.
func parseEvent(r *http.Request, body []byte) (event.Event, int, string) {
	if cehttp.IsHTTPBatch(r.Header) {
		return event.Event{}, http.StatusBadRequest, "batched CloudEvents are not supported: send one event per request"
	}
	msg := cehttp.NewMessage(r.Header, io.NopCloser(bytes.NewReader(body)))
	if msg.ReadEncoding() == binding.EncodingUnknown {
		return event.Event{}, http.StatusUnsupportedMediaType,
			"not a CloudEvent: no ce-specversion header (binary mode) and Content-Type is not application/cloudevents+json (structured mode)"
	}
	ep, err := binding.ToEvent(r.Context(), msg)
	if err != nil {
		return event.Event{}, http.StatusBadRequest, "malformed CloudEvent: " + err.Error()
	}
	if err := ep.Validate(); err != nil {
		return event.Event{}, http.StatusBadRequest, "invalid CloudEvent: " + err.Error()
	}
	if len(body) == 0 && msg.ReadEncoding() == binding.EncodingBinary {
		// Binary mode keeps "no body" and "an empty body" apart, as Knative's KafkaSource
		// dispatcher does for a null and an empty record value: a request with neither
		// Content-Length nor Transfer-Encoding has nil data, one with Content-Length: 0 has
		// empty data.
		if r.Header.Get("Content-Length") == "" && len(r.TransferEncoding) == 0 {
			ep.DataEncoded = nil
		} else {
			ep.DataEncoded = []byte{}
		}
	}
	return *ep, 0, ""
}

// invoke calls the handler, turning a panic into a 500 result.
func (s *server) invoke(ctx context.Context, e event.Event) (res protocol.Result) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("panic in event handler", "event_id", e.ID(), "event_type", e.Type(), "panic", fmt.Sprint(v))
			res = Text(http.StatusInternalServerError, "internal error: panic while handling event %s: %v", e.ID(), v)
		}
	}()
	if res := typeRefused(ctx, e.Type()); res != nil {
		return res
	}
	return s.h.Handle(ctx, e)
}

// requestLog is what one request's log line says. It holds no header, body or credential:
// only CloudEvent identity attributes, sizes, status, reason and timing.
type requestLog struct {
	start                    time.Time
	path                     string
	id, typ, source, subject string
	bytes, status            int
	reason                   string
}

func (s *server) logRequest(ctx context.Context, rl *requestLog) {
	attrs := []any{
		"status", rl.status,
		"duration_ms", time.Since(rl.start).Milliseconds(),
		"path", rl.path,
		"bytes", rl.bytes,
	}
	if rl.id != "" {
		attrs = append(attrs, "event_id", rl.id, "event_type", rl.typ, "event_source", rl.source)
		if rl.subject != "" {
			attrs = append(attrs, "event_subject", rl.subject)
		}
	}
	if rl.reason != "" {
		attrs = append(attrs, "reason", oneLine(strings.TrimSpace(rl.reason)))
	}
	level := s.requestLevel(rl.status)
	s.log.Log(ctx, level, "request", attrs...)
}

// short keeps an attribute a sender chose from filling a log line: at most 200 bytes.
func short(s string) string {
	const max = 200
	if len(s) > max {
		return s[:max-3] + "..."
	}
	return s
}

// OneLine returns s on one line and at most 1000 bytes long, as answers and log lines quote a
// reason: for handlers that log errors quoting what a sender sent.
func OneLine(s string) string { return oneLine(s) }
