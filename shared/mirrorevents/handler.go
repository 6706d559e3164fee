package mirrorevents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/protocol"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/engine"
	"github.com/mm2go/mm2go/shared/serve"
)

// Copier is what the handler needs from the replication engine (EngineCopier adapts
// shared/engine). Errors wrapped with Permanent make the event final (400); any other error is
// transient (503, retried by KafkaSource).
type Copier interface {
	// Selected reports whether the flow replicates source topic t.
	Selected(t string) bool
	// Position returns the next source offset to copy for a partition (the stored position,
	// MM2's last copied offset, plus one); ok is false when no position is stored.
	Position(ctx context.Context, topic string, partition int32) (next int64, ok bool, err error)
	// CopyThrough copies the partition from its stored position through at least offset,
	// reading exact bytes from the source, and returns once records, offset syncs and the new
	// position are durable on the target. next is the new stored position plus one (> offset).
	CopyThrough(ctx context.Context, topic string, partition int32, offset int64) (next int64, err error)
	// WriteAt writes rec (payload mode) as the copy of source offset rec.Offset of
	// topic/partition, which is the partition's next offset to copy, and returns once the
	// record, its offset sync and the position rec.Offset are durable. It returns an error
	// wrapping ErrBehind if earlier offsets turn out not to be on the target.
	WriteAt(ctx context.Context, topic string, partition int32, rec *kgo.Record) error
	// Topics returns the partition count of every source topic (one metadata request).
	Topics(ctx context.Context) (map[string]int32, error)
	// Burst runs one burst and returns its JSON-able summary.
	Burst(ctx context.Context) (any, error)
	// Ready reports whether both clusters are reachable.
	Ready(ctx context.Context) error
}

// ErrBehind is WriteAt's error when records before the payload's offset are not on the target.
var ErrBehind = engine.ErrBehind

// PermanentError marks an error no retry can fix (answered 400).
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err as a PermanentError.
func Permanent(err error) error { return &PermanentError{Err: err} }

// Mode is MM2_EVENT_MODE.
type Mode string

// Event modes.
const (
	// ModeFetch (default): a record event triggers a copy from the source of its partition
	// through at least its offset; the event's data is not used.
	ModeFetch Mode = "fetch"
	// ModePayload: the event's data, key, headers and time become the target record.
	ModePayload Mode = "payload"
)

// Options configure a Handler. Zero values mean the documented defaults.
type Options struct {
	// Mode overrides the default of ModeFetch.
	Mode Mode
	// BurstEventTypes are the CloudEvent types that run a burst besides PingSource's. Empty:
	// every event that is not a record event runs a burst if its sender passed sender
	// authentication (serve.Authenticated); without it, PingSource's type alone.
	BurstEventTypes []string
	// KeyType is the KafkaSource's key-type label (payload mode), overriding the default of
	// KeyString.
	KeyType KeyType
	// CopyTimeout bounds one shared copy of a partition, overriding the default of 4m. The copy
	// runs detached from the requests waiting on it, so a client that gives up does not abort a
	// copy others wait for.
	CopyTimeout time.Duration
	// BurstTimeout bounds one burst, overriding the default of 4m30s.
	BurstTimeout time.Duration
	// MaxRecordBytes is the largest record the target accepts (the producer's
	// max.request.size), overriding the default of cluster.DefaultMaxRequestSize. Payload mode's
	// request body limit follows it (ServeConfig).
	MaxRecordBytes int64
	// FollowEvents (fetch mode) makes every record event start a catch-up copy of what
	// arrived since the last copy, unless one runs: see follow. mirror serve sets it.
	FollowEvents bool
	// FollowPause is how long no catch-up copy starts after one that found nothing new,
	// overriding the default of 100ms.
	FollowPause time.Duration
}

// Handler answers KafkaSource record events and burst triggers for the mirror function. It
// implements serve.Handler and serve.Readier.
type Handler struct {
	c    Copier
	opts Options
	log  *slog.Logger

	ctx    context.Context // parent of detached copies; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	parts map[tp]*partition // only partitions the source has (known)

	known partitionCounts

	burstMu sync.Mutex
	burst   *flight // running burst, shared by concurrent triggers

	// following is true while a catch-up copy runs (follow); none starts before quietUntil
	// (set when one found nothing new).
	followMu   sync.Mutex
	following  bool
	quietUntil time.Time

	// copyMu keeps bursts and partition copies/writes of this process apart: partition work
	// holds it shared, a burst exclusively. Two copiers of one partition would each store
	// their own position, the later one possibly older, causing re-copies.
	copyMu sync.RWMutex
}

type tp struct {
	topic     string
	partition int32
}

// partition is the handler's knowledge of one source partition.
type partition struct {
	mu   sync.Mutex
	next int64 // every source offset < next is durable on the target; -1 unknown

	write chan struct{} // payload mode: one writer per partition (a lock that respects ctx)
}

// flight is one running burst that several requests may wait on.
type flight struct {
	done    chan struct{}
	summary any
	err     error
}

// New returns a Handler over c.
func New(c Copier, opts Options, logger *slog.Logger) (*Handler, error) {
	if c == nil {
		return nil, errors.New("mirrorevents: a copier is required")
	}
	switch opts.Mode {
	case "":
		opts.Mode = ModeFetch
	case ModeFetch, ModePayload:
	default:
		return nil, fmt.Errorf("mirrorevents: event mode %q: want fetch or payload", opts.Mode)
	}
	if opts.KeyType == "" {
		opts.KeyType = KeyString
	}
	if _, err := ParseKeyType(string(opts.KeyType)); err != nil {
		return nil, fmt.Errorf("mirrorevents: %w", err)
	}
	if opts.CopyTimeout <= 0 {
		opts.CopyTimeout = 4 * time.Minute
	}
	if opts.BurstTimeout <= 0 {
		opts.BurstTimeout = 4*time.Minute + 30*time.Second
	}
	if opts.MaxRecordBytes <= 0 {
		opts.MaxRecordBytes = cluster.DefaultMaxRequestSize
	}
	if opts.FollowPause <= 0 {
		opts.FollowPause = 100 * time.Millisecond
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Handler{c: c, opts: opts, log: logger, ctx: ctx, cancel: cancel, parts: map[tp]*partition{}}, nil
}

// Close cancels running copies and bursts and waits for them to stop. Call it after the server
// has shut down (in-flight requests answered).
func (h *Handler) Close() {
	h.cancel()
	h.wg.Wait()
}

// ServeConfig returns c with the request body limits of the handler's mode. Fetch mode uses no
// event data: a binary-mode body (KafkaSource's) is dropped as it is read, and a structured-mode
// event keeps serve's small default. Payload mode takes the record from the body: the limit is
// the largest record the target accepts, base64 in a structured-mode event, plus room for the
// attributes; a larger body could not be written anyway.
func (h *Handler) ServeConfig(c serve.Config) serve.Config {
	if h.opts.Mode == ModePayload {
		c.MaxBodyBytes = h.opts.MaxRecordBytes + h.opts.MaxRecordBytes/3 + serve.DefaultMaxBodyBytes
		c.DiscardBinaryData = false
	} else {
		c.DiscardBinaryData = true
	}
	return c
}

// Ready reports whether the clusters are reachable.
func (h *Handler) Ready(ctx context.Context) error { return h.c.Ready(ctx) }

var _ serve.Handler = (*Handler)(nil)
var _ serve.Readier = (*Handler)(nil)

// Handle answers one CloudEvent: 2xx only once the record(s) and the stored position are durable
// on the target; 400 for events that can never succeed; 503 when a cluster is unavailable or the
// copy did not finish in time (KafkaSource retries it). Every non-2xx body says why.
func (h *Handler) Handle(ctx context.Context, e event.Event) protocol.Result {
	if IsRecordEvent(e) {
		return h.record(ctx, e)
	}
	if serve.TriggerAllowed(ctx, e.Type(), h.opts.BurstEventTypes) {
		return h.runBurst(ctx)
	}
	return cehttp.NewResult(http.StatusBadRequest, "event type %q is neither a KafkaSource record event (%s) nor a burst trigger (%s or MM2_BURST_EVENT_TYPES %v; an empty list means any type only with sender authentication)",
		e.Type(), TypeKafkaEvent, TypePing, h.opts.BurstEventTypes)
}

func (h *Handler) record(ctx context.Context, e event.Event) protocol.Result {
	re, err := ParseRecordEvent(e, h.opts.KeyType, h.opts.Mode == ModePayload)
	if err != nil {
		return cehttp.NewResult(http.StatusBadRequest, "%v", err)
	}
	if !h.c.Selected(re.Topic) {
		return cehttp.NewResult(http.StatusBadRequest, "topic %q is not replicated by this flow (topics/topics.exclude filters, internal topic or replication cycle)", re.Topic)
	}
	if err := h.known.check(ctx, h.c, re.Topic, re.Partition); err != nil {
		return h.result(ctx, re, err)
	}
	key := tp{re.Topic, re.Partition}
	if h.opts.Mode == ModePayload && re.Record != nil {
		err = h.payload(ctx, key, re)
	} else {
		err = h.fetch(ctx, key, re.Offset)
	}
	return h.result(ctx, re, err)
}

// result maps a copy outcome to the answer.
func (h *Handler) result(ctx context.Context, re RecordEvent, err error) protocol.Result {
	if err == nil {
		return nil
	}
	var pe *PermanentError
	var ee *EventError
	switch {
	case errors.As(err, &pe), errors.As(err, &ee):
		h.log.Warn("record event rejected", "topic", serve.OneLine(re.Topic), "partition", re.Partition, "offset", re.Offset, "err", serve.OneLine(err.Error()))
		return cehttp.NewResult(http.StatusBadRequest, "%s[%d]@%d: %v", re.Topic, re.Partition, re.Offset, err)
	case ctx.Err() != nil:
		return cehttp.NewResult(http.StatusServiceUnavailable, "%s[%d]@%d: copy not durable yet after the request's time budget (%v); retry", re.Topic, re.Partition, re.Offset, ctx.Err())
	case serve.Authenticated(ctx):
		return cehttp.NewResult(http.StatusServiceUnavailable, "%s[%d]@%d: %v", re.Topic, re.Partition, re.Offset, err)
	default:
		// A cluster's error names addresses and client ids: the log has it, a sender anyone
		// can be gets the class of the failure only.
		h.log.Warn("record event not copied yet", "topic", serve.OneLine(re.Topic), "partition", re.Partition, "offset", re.Offset, "err", serve.OneLine(err.Error()))
		return cehttp.NewResult(http.StatusServiceUnavailable, "%s[%d]@%d: not durable on the target yet, retry (the function's log says why; answers carry the reason to authenticated senders only)",
			re.Topic, re.Partition, re.Offset)
	}
}

func (h *Handler) part(k tp) *partition {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.parts[k]
	if p == nil {
		p = &partition{next: -1, write: make(chan struct{}, 1)}
		h.parts[k] = p
	}
	return p
}

// fetch makes offset durable on the target: at once if this process already knows it is,
// else through the copier, which coalesces the copies of all events (the engine's copyRuns).
// The copy runs detached from the request, bounded by CopyTimeout: a dispatcher that gives up
// on a request does not abort a copy others wait for, and the next event finds its progress.
func (h *Handler) fetch(ctx context.Context, k tp, offset int64) error {
	p := h.part(k)
	if p.nextKnown() > offset {
		h.follow(k)
		return nil
	}
	defer h.follow(k)
	done := make(chan error, 1)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		cctx, cancel := context.WithTimeout(h.ctx, h.opts.CopyTimeout)
		defer cancel()
		start := time.Now()
		h.copyMu.RLock()
		next, err := h.c.CopyThrough(cctx, k.topic, k.partition, offset)
		h.copyMu.RUnlock()
		if err != nil {
			h.log.Warn("copy failed", "topic", serve.OneLine(k.topic), "partition", k.partition, "offset", offset, "err", serve.OneLine(err.Error()))
		} else {
			p.advance(next)
			h.log.Debug("copied", "topic", k.topic, "partition", k.partition, "offset", offset, "next", next, "duration_ms", time.Since(start).Milliseconds())
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// follow starts a catch-up copy of partition k's source (and, through the engine's sweep,
// of every lagging partition) from the next offset not yet copied to the current end, when
// FollowEvents is set and no catch-up copy runs or pauses after one that found nothing. It does
// not wait.
//
// KafkaSource's dispatcher sends one event per record, one at a time per partition: once it
// lags behind the source, its events name records a copy already took and are answered from
// memory, so no copy would start until it reached the records after the last copy's end, and
// the target would trail the source by the dispatcher's lag (seconds to minutes at 1,000
// records/s and more). With follow, each event starts the next copy instead: the target
// trails by about one copy however far behind the dispatcher is. When the source gains
// nothing, catch-up copies start at most every FollowPause while events come.
func (h *Handler) follow(k tp) {
	if !h.opts.FollowEvents || h.opts.Mode != ModeFetch {
		return
	}
	h.followMu.Lock()
	if h.following || time.Now().Before(h.quietUntil) || h.ctx.Err() != nil {
		h.followMu.Unlock()
		return
	}
	h.following = true
	h.wg.Add(1)
	h.followMu.Unlock()
	go func() {
		defer h.wg.Done()
		moved := h.catchUp(k)
		h.followMu.Lock()
		h.following = false
		if !moved {
			h.quietUntil = time.Now().Add(h.opts.FollowPause)
		}
		h.followMu.Unlock()
	}()
}

// catchUp copies partition k from its next offset to the end; it reports whether there was
// anything to copy (an offset at the end is no record: the engine's permanent error).
func (h *Handler) catchUp(k tp) bool {
	ctx, cancel := context.WithTimeout(h.ctx, h.opts.CopyTimeout)
	defer cancel()
	h.copyMu.RLock()
	defer h.copyMu.RUnlock()
	from, ok, err := h.c.Position(ctx, k.topic, k.partition)
	if err != nil || !ok {
		return false
	}
	next, err := h.c.CopyThrough(ctx, k.topic, k.partition, from)
	if err != nil {
		var pe *PermanentError
		if !errors.As(err, &pe) && ctx.Err() == nil {
			h.log.Warn("catch-up copy failed", "topic", serve.OneLine(k.topic), "partition", k.partition, "offset", from, "err", serve.OneLine(err.Error()))
		}
		return false
	}
	h.part(k).advance(next)
	return true
}

func (p *partition) nextKnown() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next
}

func (p *partition) advance(next int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = max(p.next, next)
}

// payload writes the event's record if it is the partition's next offset. An offset already
// copied is answered at once. An offset beyond the next one means records in between were not
// delivered to this process (transaction markers and aborted records, compaction, retention,
// a dead-lettered event, another replica, or no stored position yet): they are fetched from the
// source through this offset (fetch mode for the gap), so nothing is skipped (docs/events.md).
func (h *Handler) payload(ctx context.Context, k tp, re RecordEvent) error {
	p := h.part(k)
	select {
	case p.write <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.write }()

	next := p.nextKnown()
	if next < 0 {
		n, ok, err := h.c.Position(ctx, k.topic, k.partition)
		if err != nil {
			return err
		}
		if ok {
			next = n
			p.advance(n)
		}
	}
	switch {
	case next > re.Offset:
		return nil // already copied: write nothing twice
	case next == re.Offset:
		h.copyMu.RLock()
		err := h.c.WriteAt(ctx, k.topic, k.partition, re.Record)
		h.copyMu.RUnlock()
		if errors.Is(err, ErrBehind) {
			// A copy of the partition ran meanwhile (a burst) or the position moved: fill the
			// gap from the source.
			return h.fetch(ctx, k, re.Offset)
		}
		if err != nil {
			return err
		}
		p.advance(re.Offset + 1)
		return nil
	default:
		h.log.Info("payload event beyond the stored position: fetching the gap from the source",
			"topic", k.topic, "partition", k.partition, "offset", re.Offset, "next", next)
		return h.fetch(ctx, k, re.Offset)
	}
}

// runBurst runs one burst, or joins the one running, and answers its JSON summary.
func (h *Handler) runBurst(ctx context.Context) protocol.Result {
	h.burstMu.Lock()
	f := h.burst
	if f == nil {
		f = &flight{done: make(chan struct{})}
		h.burst = f
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			bctx, cancel := context.WithTimeout(h.ctx, h.opts.BurstTimeout)
			defer cancel()
			h.copyMu.Lock()
			f.summary, f.err = h.c.Burst(bctx)
			h.copyMu.Unlock()
			h.burstMu.Lock()
			h.burst = nil
			h.burstMu.Unlock()
			close(f.done)
		}()
	}
	h.burstMu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return cehttp.NewResult(http.StatusServiceUnavailable, "burst still running after the request's time budget (%v); it continues and commits its progress", ctx.Err())
	}
	auth := serve.Authenticated(ctx)
	if f.err != nil {
		var pe *PermanentError
		status, what := http.StatusServiceUnavailable, "burst failed"
		if errors.As(f.err, &pe) {
			status, what = http.StatusBadRequest, "burst"
		}
		if !auth {
			h.log.Warn("burst failed", "err", serve.OneLine(f.err.Error()))
			return cehttp.NewResult(status, "%s (the function's log says why; answers carry the reason to authenticated senders only)", what)
		}
		return cehttp.NewResult(status, "%s: %v", what, f.err)
	}
	if !auth {
		return serve.JSON(http.StatusOK, reasonOnly(f.summary))
	}
	return serve.JSON(http.StatusOK, f.summary)
}

// reasonOnly keeps a burst summary's "reason" (why it ended: done, max-duration, ...), the
// answer to an unauthenticated sender, which gets no topic names, counts or errors.
func reasonOnly(summary any) map[string]any {
	var r struct {
		Reason any `json:"reason"`
	}
	if b, err := json.Marshal(summary); err == nil {
		_ = json.Unmarshal(b, &r)
	}
	return map[string]any{"reason": r.Reason}
}
