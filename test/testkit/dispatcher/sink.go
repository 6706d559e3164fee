package dispatcher

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Request is one HTTP request a Sink received.
type Request struct {
	At     time.Time
	Method string
	Header http.Header
	// Body is the body as received; HasBody tells an empty body from none (no Content-Length and
	// no chunked transfer: what the dispatcher sends for a null record value).
	Body          []byte
	HasBody       bool
	ContentLength int64
}

// Sink is an HTTP server on loopback that records every request and answers it with the status
// its Respond function returns (200 when Respond is nil).
type Sink struct {
	URL string

	mu      sync.Mutex
	reqs    []Request
	respond func(Request) int
	srv     *httptest.Server
}

// NewSink starts a recording sink, closed when the test ends.
func NewSink(t testing.TB, respond func(Request) int) *Sink {
	t.Helper()
	s := &Sink{respond: respond}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/"
	t.Cleanup(s.srv.Close)
	return s
}

func (s *Sink) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := Request{At: time.Now(), Method: r.Method, Header: r.Header.Clone(), Body: body,
		HasBody: r.ContentLength > 0 || len(r.TransferEncoding) > 0 || len(body) > 0, ContentLength: r.ContentLength}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	respond := s.respond
	s.mu.Unlock()
	code := http.StatusOK
	if respond != nil {
		code = respond(req)
	}
	w.WriteHeader(code)
}

// SetRespond replaces the answer function.
func (s *Sink) SetRespond(respond func(Request) int) {
	s.mu.Lock()
	s.respond = respond
	s.mu.Unlock()
}

// Requests returns the requests received so far, in arrival order.
func (s *Sink) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}
