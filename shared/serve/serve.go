// Package serve is the HTTP + CloudEvents front end shared by mm2go's functions (mirror,
// checkpoint, heartbeat) for their `serve` sub-command.
//
// One server answers:
//
//	POST /          a CloudEvent in binary or structured content mode (sdk-go's HTTP binding);
//	                the Handler's protocol.Result decides the status code and body
//	GET  /healthz   liveness: 200 while the process serves
//	GET  /readyz    readiness: the Handler's Ready check (clusters reachable), 200 or 503 (the
//	                reason is logged, not answered)
//
// Every answer that is not 2xx carries a one-line text body that says why, because KafkaSource
// keeps up to 1024 bytes of it in the dead-letter event (knativeerrordata) and operators read it
// there. The status classes follow KafkaSource's retry rules (docs/events.md): 5xx, 404, 408,
// 409 and 429 are retried by the dispatcher, every other code >= 300 is final.
//
// Run adds what a long-lived serverless container needs around that: request body limits
// (413; a body the handler does not use is dropped as it is read, see Config), server timeouts
// sized for requests that wait on a Kafka fetch, panic recovery (500), one structured log line
// per request (never headers, bodies or credentials), and a graceful shutdown that lets
// in-flight requests finish when the context is cancelled (SIGTERM).
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/protocol"
)

// Handler handles one CloudEvent. The result decides the answer:
//
//   - nil or protocol.ResultACK: 200 with an empty body;
//   - a *Reply (see JSON, Text): its status, content type and body;
//   - an sdk-go HTTP result (cehttp.NewResult(code, format, args...)), found with errors.As so it
//     may be wrapped: that code with the formatted message as a one-line text body;
//   - any other error: 500 with the error text as a one-line body.
//
// The context ends when the request's time budget (Config.RequestTimeout) runs out, when the
// client goes away, or when a shutdown gives up waiting.
type Handler interface {
	Handle(ctx context.Context, e event.Event) protocol.Result
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, e event.Event) protocol.Result

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, e event.Event) protocol.Result { return f(ctx, e) }

// Readier is implemented by handlers that can tell whether they can serve (clusters reachable).
// /readyz answers 503 while Ready returns an error, whose text is logged (at each change) but not
// answered. A handler without it is always ready.
type Readier interface {
	Ready(ctx context.Context) error
}

// Config sets the server. The zero value of every field means the documented default.
type Config struct {
	// Addr is the listen address, overriding the default of ":8080". Knative sets PORT; the
	// caller turns it into ":"+PORT.
	Addr string
	// Listener, if set, is used instead of listening on Addr (tests pass a loopback listener).
	Listener net.Listener
	// MaxBodyBytes limits the request body handed to the handler, overriding the default of
	// 8 KiB (PingSource ticks, structured-mode record events of fetch mode). A larger body gets
	// 413 without being read whole. Payload mode raises it to the largest record the target
	// accepts (mirrorevents.Handler.ServeConfig).
	MaxBodyBytes int64
	// DiscardBinaryData: a binary-mode event's body is read and dropped, never held, and the
	// handler gets the event without data (fetch mode, which reads the record from the source).
	// Such bodies may be up to MaxDiscardBytes.
	DiscardBinaryData bool
	// MaxDiscardBytes limits a body dropped under DiscardBinaryData, overriding the default of
	// 32 MiB (above Kafka's largest record settings). A larger body gets 413.
	MaxDiscardBytes int64
	// RequestTimeout bounds one event's handling, overriding the default of 280s (below Knative
	// Serving's default timeoutSeconds of 300 so the function, not the platform, answers). When it
	// runs out the handler's context ends and the handler answers 503 itself.
	RequestTimeout time.Duration
	// ReadHeaderTimeout overrides the default of 10s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout (whole request including body) overrides the default of 60s.
	ReadTimeout time.Duration
	// WriteTimeout overrides the default of RequestTimeout + ReadTimeout + 10s, so that a handler
	// that uses its whole budget can still write its answer.
	WriteTimeout time.Duration
	// IdleTimeout (keep-alive) overrides the default of 120s.
	IdleTimeout time.Duration
	// ShutdownTimeout is how long a shutdown waits for in-flight requests, overriding the
	// default of RequestTimeout + 5s. After it the handlers' contexts are cancelled.
	ShutdownTimeout time.Duration
	// ReadyTimeout bounds one Ready check, overriding the default of 5s.
	ReadyTimeout time.Duration
	// ReadyCacheTTL is how long /readyz answers the last Ready check without checking again,
	// overriding the default of 2s: /readyz is open, and each check asks both clusters.
	ReadyCacheTTL time.Duration
	// Metrics, if set, answers GET /metrics (metrics.Recorder.Handler: Prometheus text).
	Metrics http.Handler
	// SenderAuth, when enabled, requires a valid OIDC bearer token on every event request
	// (Knative Eventing's sender authentication, auth.go); /healthz, /readyz and /metrics stay
	// open for probes and scrapers.
	SenderAuth SenderAuthConfig
}

// Defaults.
const (
	DefaultAddr              = ":8080"
	DefaultMaxBodyBytes      = 8 << 10
	DefaultMaxDiscardBytes   = 32 << 20
	DefaultRequestTimeout    = 280 * time.Second
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 60 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultReadyTimeout      = 5 * time.Second
	DefaultReadyCacheTTL     = 2 * time.Second
)

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxDiscardBytes <= 0 {
		c.MaxDiscardBytes = DefaultMaxDiscardBytes
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = c.RequestTimeout + c.ReadTimeout + 10*time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = c.RequestTimeout + 5*time.Second
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.ReadyCacheTTL <= 0 {
		c.ReadyCacheTTL = DefaultReadyCacheTTL
	}
	return c
}

// AddrFromPort turns Knative's PORT value into a listen address (":8080" for "").
func AddrFromPort(port string) string {
	if port == "" {
		return DefaultAddr
	}
	return ":" + port
}

// Run serves h until ctx is cancelled, then shuts down gracefully: it stops accepting, lets
// in-flight requests finish (up to ShutdownTimeout, then cancels their contexts) and returns.
// It returns nil after a shutdown caused by ctx, or the error that stopped the server.
func Run(ctx context.Context, cfg Config, logger *slog.Logger, h Handler) error {
	cfg = cfg.withDefaults()
	var auth *senderAuth
	if cfg.SenderAuth.Enabled() {
		var err error
		if auth, err = newSenderAuth(ctx, cfg.SenderAuth, logger); err != nil {
			return err
		}
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		var lc net.ListenConfig
		ln, err = lc.Listen(ctx, "tcp", cfg.Addr)
		if err != nil {
			return fmt.Errorf("listening on %s: %w", cfg.Addr, err)
		}
	}
	// Handlers' contexts descend from base, not from ctx: a SIGTERM must not abort the copy an
	// in-flight request waits on. base is cancelled only when the shutdown gives up waiting.
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	srv := &http.Server{
		Handler:           newHTTPHandler(cfg, logger, h, auth),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	logger.Info("serving CloudEvents", "addr", ln.Addr().String(), "max_body_bytes", cfg.MaxBodyBytes, "discard_binary_data", cfg.DiscardBinaryData,
		"request_timeout", cfg.RequestTimeout.String())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving HTTP on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	logger.Info("shutting down: finishing in-flight requests", "timeout", cfg.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		// Out of patience: cancel the handlers so they answer, then close the connections.
		cancelBase()
		err = errors.Join(fmt.Errorf("shutting down HTTP server: %w", err), srv.Close())
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, fmt.Errorf("serving HTTP: %w", serr))
	}
	if err == nil {
		logger.Info("shut down cleanly")
	}
	return err
}

// NewHTTPHandler returns the server's routes (/, /healthz, /readyz, /metrics) as an http.Handler, for
// tests with httptest or for mounting on another server. cfg's zero fields take their defaults;
// Addr, Listener and the server timeouts are not used. With cfg.SenderAuth enabled but invalid,
// every event is refused with 500 and the setting's problem (Run refuses to start instead).
func NewHTTPHandler(cfg Config, logger *slog.Logger, h Handler) http.Handler {
	var auth *senderAuth
	if cfg.SenderAuth.Enabled() {
		var err error
		if auth, err = newSenderAuth(context.Background(), cfg.SenderAuth, logger); err != nil {
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				writeText(w, http.StatusInternalServerError, err.Error())
			})
		}
	}
	return newHTTPHandler(cfg, logger, h, auth)
}

func newHTTPHandler(cfg Config, logger *slog.Logger, h Handler, auth *senderAuth) http.Handler {
	cfg = cfg.withDefaults()
	s := &server{cfg: cfg, log: logger, h: h}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	if cfg.Metrics != nil {
		mux.Handle("GET /metrics", cfg.Metrics)
	}
	if auth != nil {
		mux.HandleFunc("/", auth.wrap(s.event))
	} else {
		mux.HandleFunc("/", s.event)
	}
	return s.recoverer(mux)
}

type server struct {
	cfg Config
	log *slog.Logger
	h   Handler

	readyMu      sync.Mutex
	readyState   string        // "" before the first check, "ready", or unreachable's text: logged at changes
	readyErr     error         // the last check's outcome, answered until readyAt + ReadyCacheTTL
	readyAt      time.Time     // when the last check ended
	readyRunning chan struct{} // closed when the running check ends; nil when none runs
}

func (s *server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeText(w, http.StatusOK, "ok")
}

func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	rd, ok := s.h.(Readier)
	if !ok {
		writeText(w, http.StatusOK, "ready")
		return
	}
	if err := s.ready(r.Context(), rd); err != nil {
		// The reason (bootstrap addresses, client ids) goes to the log only: /readyz is open.
		writeText(w, http.StatusServiceUnavailable, "not ready: "+unreachable(err)+" (the function's log says why)")
		return
	}
	writeText(w, http.StatusOK, "ready")
}

// ready returns the last Ready check's outcome while it is younger than ReadyCacheTTL, else
// checks again; concurrent GETs share one check. It logs changes of state only: ready, or which
// cluster is unreachable (the error text of one cluster's refusals differs from one to the next).
func (s *server) ready(ctx context.Context, rd Readier) error {
	s.readyMu.Lock()
	for s.readyRunning != nil && (s.readyAt.IsZero() || time.Since(s.readyAt) >= s.cfg.ReadyCacheTTL) {
		running := s.readyRunning
		s.readyMu.Unlock()
		select {
		case <-running:
		case <-ctx.Done():
			return ctx.Err()
		}
		s.readyMu.Lock()
	}
	if !s.readyAt.IsZero() && time.Since(s.readyAt) < s.cfg.ReadyCacheTTL {
		err := s.readyErr
		s.readyMu.Unlock()
		return err
	}
	running := make(chan struct{})
	s.readyRunning = running
	s.readyMu.Unlock()

	// The check is shared: it is bounded by ReadyTimeout, not by this request.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ReadyTimeout)
	err := rd.Ready(cctx)
	cancel()
	state := "ready"
	if err != nil {
		state = unreachable(err)
	}

	s.readyMu.Lock()
	changed := state != s.readyState
	s.readyState, s.readyErr, s.readyAt, s.readyRunning = state, err, time.Now(), nil
	s.readyMu.Unlock()
	close(running)
	if changed && err != nil {
		s.log.Warn("not ready", "reason", oneLine(err.Error()))
	} else if changed {
		s.log.Info("ready")
	}
	return err
}

// recoverer turns a panic anywhere below it into a 500 with a one-line reason. Handler panics are
// normally caught closer (in event) so their log line carries the event's identity.
func (s *server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic while serving", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v))
				writeText(w, http.StatusInternalServerError, fmt.Sprintf("internal error: panic: %v", v))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// statusFor maps a handler result to a status, content type and body, following sdk-go's rules
// (nil/ACK → 200, HTTP result → its code, other error → 500) plus Reply.
func statusFor(res protocol.Result) (status int, contentType string, body []byte) {
	if res == nil || protocol.IsACK(res) {
		return http.StatusOK, "", nil
	}
	var rep *Reply
	if errors.As(res, &rep) {
		return rep.Status, rep.ContentType, rep.Body
	}
	var hr *cehttpResult
	if asHTTPResult(res, &hr) {
		return hr.status, "text/plain; charset=utf-8", []byte(oneLine(hr.msg))
	}
	return http.StatusInternalServerError, "text/plain; charset=utf-8", []byte(oneLine(res.Error()))
}

// oneLine keeps a reason on one line (and short): newlines become "; ".
func oneLine(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\r':
		case '\n':
			if i+1 < len(s) {
				b = append(b, ';', ' ')
			}
		default:
			b = append(b, c)
		}
	}
	const max = 1000 // KafkaSource keeps 1024 bytes of the body in the dead-letter event
	if len(b) > max {
		b = append(b[:max-3], "..."...)
	}
	return string(b)
}

func writeText(w http.ResponseWriter, status int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	body := oneLine(msg) + "\n"
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// requestLevel: successes at Debug (one per record event would flood the log), client errors
// at Warn, server errors at Error.
func (s *server) requestLevel(status int) slog.Level {
	switch {
	case status >= 500:
		return slog.LevelError
	case status >= 300:
		return slog.LevelWarn
	default:
		return slog.LevelDebug
	}
}

// unreachable names which cluster a readiness error is about, without its text.
func unreachable(err error) string {
	msg := err.Error()
	src, tgt := strings.Contains(msg, "source"), strings.Contains(msg, "target")
	switch {
	case src && !tgt:
		return "source cluster unreachable"
	case tgt && !src:
		return "target cluster unreachable"
	}
	return "a cluster is unreachable"
}
