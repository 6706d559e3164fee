package engine

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/shared/offsetsync"
)

// syncEmitter feeds acknowledged (upstream, downstream) pairs to MM2's OffsetSyncWriter rules
// and writes the due syncs to partition 0 of the offset-syncs topic with its own
// non-transactional producer, as MirrorSourceTask does.
//
// An emitter owns the syncs of the partitions it was given (partition, record): it takes and
// sends only theirs, so serve's copies, which share one writer (the rules span their calls),
// never send each other's syncs, and finish waits for this emitter's syncs alone.
//
// Every sync handed to the producer holds a permit of the client's syncGate (shared by every
// emitter on the same client), so the producer's buffer never fills and Produce never blocks.
// Sends from the per-record path (recordAt, in producer promises) never wait: each also needs
// one of its partition's maxOutstandingSyncs (MM2's outstandingOffsetSyncs). A sync that finds
// no permit stays pending in the writer, replaced by the partition's next one (MM2's
// OffsetSyncWriter keeps the newest), until a later record, a commit tick's send or finish
// takes it. While the broker throttles the producer (syncGate.throttled), only a commit tick
// sends, one sync of a partition at a time, once per throttledSyncRound: every sync handed
// over then extends the broker's throttle, and the final syncs would wait behind it. A sync's
// own promise produces nothing (a promise producing on its own client can block it). finish
// and flushAll wait for permits (they run on the committer's goroutine and at Close, never in
// a promise), and finish waits a bounded time for the final syncs (finalSyncsWait): the
// partitions whose final sync was not answered by then are the summary's
// offset_syncs_unconfirmed, not a failure of the copy.
type syncEmitter struct {
	w     *offsetsync.Writer
	cl    *kgo.Client
	topic string
	// shared: cl belongs to the engine (CopyPartition calls): never closed here, and finish
	// waits for this emitter's syncs (inflight) instead of flushing the client.
	shared bool
	// gate holds cl's permits and whether the broker throttles it (see above).
	gate *syncGate
	// promote, if set, says whether finish promotes tp's delayed sync now (a shared writer
	// promotes a partition at most about once a second, as a long-running MM2 task does on its
	// commits); nil: always.
	promote func(tp TP) bool

	mu    sync.Mutex
	owned map[TP]*syncPartition // the partitions whose syncs are this emitter's
	err   error
	sent  int64
	// inflight counts this emitter's syncs produced and not yet answered; idle, when not nil,
	// is closed once inflight is 0 (finish waits on it).
	inflight int64
	idle     chan struct{}
	// unconfirmed names the partitions ("topic-partition", sorted) whose final sync finish
	// handed over and saw no answer to within its bound.
	unconfirmed []string

	// ready is the offset-syncs topic: known at once unless a first burst creates it in the
	// background.
	ready *pendingTopic

	// off: emit.offset-syncs.enabled=false. The emitter takes every call and writes nothing
	// (w and cl are nil).
	off bool
}

// maxOutstandingSyncs is how many offset syncs of one partition the per-record path may have
// in flight: MM2's MirrorSourceTask.MAX_OUTSTANDING_OFFSET_SYNCS, which MM2 counts per task.
// Counted per task here, the syncs due together when the forwarder acknowledges a batch of
// hundreds of records (one per offset.lag.max records) took every permit, and the other
// partitions' early syncs were replaced before they were sent: a lagging group's offset could
// no longer be translated (e2e TestCheckpointAfterMirrorBurst, "OlderThanSyncs:1"). Ten per
// partition still lost history: a forwarded batch of a partition's 5,000 small records makes
// 50 syncs due at once, so the first ten went out and the rest replaced each other until the
// final one, and the checkpoint of a group at 3,001 translated through the sync at 900 (2,091
// re-reads where precise translation promises at most offset.lag.max; e2e
// TestCheckpointDefaultTranslation on a loaded machine). The producer-wide cap below is what
// keeps Produce from blocking; this one only keeps one partition from taking all of it.
const maxOutstandingSyncs = 256

// maxProducerSyncs caps the syncs in flight on one syncs producer, below its buffer (franz-go's
// 10,000 records), so that its Produce never blocks.
const maxProducerSyncs = 4096

// throttledSyncs caps the syncs in flight on a syncs producer the broker throttles (a produce
// quota on the offset-syncs topic's cluster), with one per partition: a request carries at most
// this many, so the throttle the broker answers it with (its bytes over the quota) stays short,
// and finish's final syncs wait behind no more than it. Handed over freely, the syncs due while
// the first throttle was answered went out together after it, were throttled in turn for their
// bytes, and finish waited for all of them: 300,000 x 512 B over 8 partitions took 46 s
// instead of 5.6 s with a 4 KiB/s quota on the syncs topic's cluster.
const throttledSyncs = 8

// throttledSyncRound is how often, while the broker throttles the syncs producer, a commit
// tick sends the newest sync of the partitions (at most throttledSyncs of them). Kafka keeps a
// quota's bytes in its window (11 one-second samples by default) and answers every request
// over it with a throttle of up to a sample (1 s), during which the connection carries nothing;
// syncs sent with every tick (500 ms) kept the producer throttled to the end of a burst, and
// its final syncs waited behind the last throttle: 300,000 x 512 B over 8 partitions with a
// 4 KiB/s quota on the syncs topic's cluster took 2.3 times as long as without it.
const throttledSyncRound = 5 * time.Second

// finalSyncsWait bounds how long finish waits for the final syncs once the broker's throttle
// of the syncs producer has passed (a throttle it announced is waited out first, at most
// finalSyncsThrottleMax of it). The copy's positions are stored before: a sync not answered by
// then costs only the precision of the translation of its partition's group offsets until a
// later copy writes one, and the summary names its partition (offset_syncs_unconfirmed).
const (
	finalSyncsWait        = 10 * time.Second
	finalSyncsThrottleMax = 5 * time.Second
)

// syncGate is what every emitter on one offset-syncs producer shares: the producer-wide permits
// (maxProducerSyncs, or half of the client's record buffer when that is smaller, a user's
// producer.buffer setting: every sync handed to the client holds one, so Produce never
// blocks), and whether the broker throttles the client. It is the client's throttle hook:
// throttled is set when a response carries a throttle (KIP-219: the broker answers at once and
// serves nothing more on the connection until it has passed) and cleared when a sync is
// acknowledged after the throttle has passed, a sync round after it began (answered).
type syncGate struct {
	log           *slog.Logger
	permits       chan struct{}
	throttled     atomic.Bool
	throttleUntil atomic.Int64 // UnixNano
	throttledAt   atomic.Int64 // UnixNano: when the latest throttle was answered
	// nextRound is when a commit tick may next send while throttled (UnixNano).
	nextRound atomic.Int64
}

// newSyncGate returns the gate of a syncs producer not dialed yet: dial it with the gate as
// a hook (kgo.WithHooks), then size its permits (size). log gets a line when a throttle begins.
func newSyncGate(log *slog.Logger) *syncGate { return &syncGate{log: log} }

// size sets the gate's permits from cl's record buffer (see syncGate).
func (g *syncGate) size(cl *kgo.Client) *syncGate {
	n := maxProducerSyncs
	if cl != nil {
		var buffered int64
		switch v := cl.OptValue(kgo.MaxBufferedRecords).(type) {
		case int:
			buffered = int64(v)
		case int64:
			buffered = v
		}
		if half := buffered / 2; half >= 1 && half < int64(n) {
			n = int(half)
		}
	}
	g.permits = make(chan struct{}, n)
	return g
}

// OnBrokerThrottle implements kgo.HookBrokerThrottle.
func (g *syncGate) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	now := time.Now()
	g.throttledAt.Store(now.UnixNano())
	until := now.Add(d).UnixNano()
	for {
		cur := g.throttleUntil.Load()
		if cur >= until || g.throttleUntil.CompareAndSwap(cur, until) {
			break
		}
	}
	if !g.throttled.Swap(true) && g.log != nil {
		g.log.Info("the broker throttles the offset-syncs producer (a produce quota); until an answer comes without a throttle, the newest sync of each partition is sent every "+throttledSyncRound.String()+" and the copy does not wait for them",
			"throttle", d.String())
	}
}

// answered notes a sync acknowledged: the producer is no longer throttled once an answer
// comes after the last throttle has passed and at least throttledSyncRound after it began (an
// answer that carries a new one moves both before its promises run). Kafka measures a quota
// over its window (11 s by default): an answer a moment after a short throttle ended the
// throttled mode, the per-record path handed over every sync due, and the broker answered
// them with a throttle of seconds that the final syncs waited behind (300,000 x 512 B over 8
// partitions, 4 KiB/s on the syncs topic's cluster: a throttle of 86 ms, then one of 1.47 s,
// and the run took 4.6 s against 1.1 s without the quota).
func (g *syncGate) answered() {
	now := time.Now().UnixNano()
	if g.throttled.Load() && now >= g.throttleUntil.Load() && now >= g.throttledAt.Load()+int64(throttledSyncRound) {
		g.throttled.Store(false)
	}
}

// roundDue reports whether a commit tick may send while the producer is throttled: the
// throttle has passed and no round was sent within throttledSyncRound. It starts the round.
func (g *syncGate) roundDue() bool {
	now := time.Now().UnixNano()
	next := g.nextRound.Load()
	if now < g.throttleUntil.Load() || now < next {
		return false
	}
	return g.nextRound.CompareAndSwap(next, now+int64(throttledSyncRound))
}

// finalDeadline is when finish stops waiting for the final syncs: finalSyncsWait after the
// broker's throttle has passed, at most finalSyncsThrottleMax of it.
func (g *syncGate) finalDeadline() time.Time {
	now := time.Now()
	throttle := time.Unix(0, g.throttleUntil.Load()).Sub(now)
	return now.Add(min(max(throttle, 0), finalSyncsThrottleMax) + finalSyncsWait)
}

// tryAcquire takes a permit for the per-record path if one is free, at most throttledSyncs
// in flight while throttled; it never waits.
func (g *syncGate) tryAcquire() bool {
	if g.throttled.Load() && len(g.permits) >= throttledSyncs {
		return false
	}
	select {
	case g.permits <- struct{}{}:
		return true
	default:
		return false
	}
}

// acquire waits, within ctx, for a permit (finish and flushAll, never a promise).
func (g *syncGate) acquire(ctx context.Context) error {
	select {
	case g.permits <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release returns a permit.
func (g *syncGate) release() { <-g.permits }

// syncPartition is an emitter's partition: its handle in the rules and its syncs in flight.
type syncPartition struct {
	h        offsetsync.Partition
	inflight atomic.Int32
}

// disabledEmitter is the emitter of a flow with emit.offset-syncs.enabled=false: no topic, no
// producer, no sync.
func disabledEmitter() *syncEmitter { return &syncEmitter{off: true, ready: readyTopic(1)} }

// syncLinger is how long a burst's offset-syncs producer waits to fill a request. A shared
// (mirror serve) one does not wait: a request's syncs are awaited before it is answered.
const syncLinger = 20 * time.Millisecond

// syncProducerOpts are an offset-syncs producer's options: partition 0 as given, linger, one
// request in flight, and its gate as the hook that sees the broker's throttles. A broker that
// throttles a connection reads its next request only once the throttle has passed, so each of
// several requests in flight waited out the throttle of the one before it, and the final syncs
// the throttles of all of them.
func syncProducerOpts(linger time.Duration, gate *syncGate) []kgo.Opt {
	return []kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(linger),
		kgo.MaxProduceRequestsInflightPerBroker(1), kgo.WithHooks(gate)}
}

// partition returns the handle of tp in the offset-sync rules (the zero handle when syncs
// are off), for recordAt, and makes tp's syncs this emitter's.
func (s *syncEmitter) partition(tp TP) *syncPartition {
	if s.off {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.owned[tp]
	if !ok {
		p = &syncPartition{h: s.w.Partition(tp.Topic, tp.Partition)}
		s.owned[tp] = p
	}
	return p
}

// recordAt registers an acknowledged (exactly-once: committed) copy of upstream to downstream
// through the partition's handle p and sends a sync at once if one is due and a permit is
// free, as MirrorSourceTask.commitRecord does (it runs in producer promises and never blocks).
// It is the per-record path, with no lookup of the partition (two map lookups per record were
// 40% of the engine's own work per record).
func (s *syncEmitter) recordAt(ctx context.Context, p *syncPartition, upstream, downstream int64) {
	if s.off || !p.h.Record(upstream, downstream) {
		return // nothing due: no second lock per record
	}
	if s.gate.throttled.Load() {
		return // pending until a commit tick's round (see syncEmitter)
	}
	s.tryFire(ctx, p)
}

// tryFire sends p's pending sync if permits are free (the partition's and the producer's);
// otherwise the sync stays pending. It never waits.
func (s *syncEmitter) tryFire(ctx context.Context, p *syncPartition) {
	limit := int32(maxOutstandingSyncs)
	if s.gate.throttled.Load() {
		limit = 1
	}
	if p.inflight.Add(1) > limit {
		p.inflight.Add(-1)
		return
	}
	if !s.gate.tryAcquire() {
		p.inflight.Add(-1)
		return
	}
	sy, ok := p.h.TakePending()
	if !ok {
		s.gate.release()
		p.inflight.Add(-1)
		return
	}
	s.produce(ctx, sy, p, nil)
}

// produce writes sy, holding a permit of the gate (and, with p, one of p's), returned when it
// is answered; confirmed, if not nil, is set once the broker acknowledged it. Its promise
// produces nothing.
func (s *syncEmitter) produce(ctx context.Context, sy mm2.OffsetSync, p *syncPartition, confirmed *atomic.Bool) {
	answered := func() {
		s.gate.release()
		if p != nil {
			p.inflight.Add(-1)
		}
	}
	k, v, err := sy.Encode()
	if err != nil {
		answered()
		s.setErr(fmt.Errorf("encoding offset sync %v: %w", sy, err))
		return
	}
	s.mu.Lock()
	s.inflight++
	s.mu.Unlock()
	s.cl.Produce(ctx, &kgo.Record{Topic: s.topic, Partition: 0, Key: k, Value: v}, func(_ *kgo.Record, err error) {
		if err == nil {
			s.gate.answered()
			if confirmed != nil {
				confirmed.Store(true)
			}
		}
		answered()
		s.done(err)
	})
}

// produceFinal writes sy under ctx once a permit is free within wait (finish, flushAll: never
// in a promise); confirmed as in produce. wait bounds only the wait for the permit: franz-go
// fails a record whose context has ended when it retries it, so a record produced under a
// shorter context than the copy's writes fails once that context ends.
func (s *syncEmitter) produceFinal(ctx, wait context.Context, sy mm2.OffsetSync, confirmed *atomic.Bool) error {
	if err := wait.Err(); err != nil {
		return fmt.Errorf("waiting to write offset sync %v: %w", sy, err)
	}
	if err := s.gate.acquire(wait); err != nil {
		return fmt.Errorf("waiting to write offset sync %v: %w", sy, err)
	}
	s.produce(ctx, sy, nil, confirmed)
	return nil
}

// owners returns the emitter's partitions.
func (s *syncEmitter) owners() []*syncPartition {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*syncPartition, 0, len(s.owned))
	for _, p := range s.owned {
		out = append(out, p)
	}
	return out
}

// send writes the pending syncs of the emitter's partitions asynchronously, as far as permits
// allow (a sync without one stays pending). With promote, delayed syncs are promoted first
// (MM2's commit()).
func (s *syncEmitter) send(ctx context.Context, promote bool) error {
	if s.off {
		return nil
	}
	if s.gate.throttled.Load() && !s.gate.roundDue() {
		return s.error()
	}
	for _, p := range s.owners() {
		if promote {
			p.h.PromoteDelayed()
		}
		s.tryFire(ctx, p)
	}
	return s.error()
}

func (s *syncEmitter) done(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil && s.err == nil {
		s.err = fmt.Errorf("writing offset sync to %q: %w", s.topic, err)
	}
	if err == nil {
		s.sent++
	}
	s.inflight--
	if s.inflight == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

func (s *syncEmitter) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

func (s *syncEmitter) error() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// wait waits until every sync this emitter produced was answered.
func (s *syncEmitter) wait(ctx context.Context) error {
	s.mu.Lock()
	if s.inflight == 0 {
		s.mu.Unlock()
		return nil
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finish promotes and sends the final sync of every partition of the emitter, pending or
// delayed (each once a permit is free), and waits until all its syncs are answered, at most
// until the gate's finalDeadline: the partitions whose final sync was not answered by then are
// unconfirmed (logged, and the summary's), not an error. A sync the broker refused is one.
// The bound ends only the waits (for permits, for the answers): the syncs are produced under
// ctx, the copy's writes, so one still retried when the bound ends is neither failed by it nor
// fails the copy, and a sync that found no permit goes back to the writer, pending (a writer
// shared by serve's copies sends it later).
func (s *syncEmitter) finish(ctx context.Context) error {
	if s.off {
		return nil
	}
	if _, err := s.ready.wait(ctx); err != nil {
		if s.ready.failed() != nil {
			return err
		}
		return fmt.Errorf("waiting for the offset-syncs topic %q: %w", s.topic, err)
	}
	begun := time.Now()
	bound, cancel := context.WithDeadline(ctx, s.gate.finalDeadline())
	defer cancel()
	s.mu.Lock()
	owned := maps.Clone(s.owned)
	s.mu.Unlock()
	finals := map[TP]*atomic.Bool{}
	for tp, p := range owned {
		if s.promote == nil || s.promote(tp) {
			p.h.PromoteDelayed()
		}
		if sy, ok := p.h.TakePending(); ok {
			confirmed := new(atomic.Bool)
			finals[tp] = confirmed
			if err := s.produceFinal(ctx, bound, sy, confirmed); err != nil {
				p.h.PutBack(sy) // no permit within the bound: unconfirmed, and still pending
			}
		}
	}
	if err := s.error(); err != nil {
		return err
	}
	flush := s.cl.Flush // a burst's own client: no linger at the end
	if s.shared {
		flush = s.wait
	}
	if err := flush(bound); err != nil && ctx.Err() != nil {
		return fmt.Errorf("flushing offset syncs: %w", err)
	}
	if err := s.error(); err != nil {
		return err
	}
	log := s.gate.log
	if log == nil {
		log = slog.Default()
	}
	var unconfirmed []string
	for tp, confirmed := range finals {
		if !confirmed.Load() {
			unconfirmed = append(unconfirmed, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
		}
	}
	if len(unconfirmed) > 0 {
		slices.Sort(unconfirmed)
		s.mu.Lock()
		s.unconfirmed = unconfirmed
		s.mu.Unlock()
		log.Warn("final offset syncs not confirmed in time: the copy and its positions are complete; the group offsets of these partitions translate through earlier syncs until a later copy writes new ones",
			"topic", s.topic, "partitions", unconfirmed, "waited_ms", time.Since(begun).Milliseconds())
		return nil
	}
	log.Debug("final offset syncs written", "topic", s.topic, "partitions", len(finals),
		"waited_ms", time.Since(begun).Milliseconds(), "throttled", s.gate.throttled.Load())
	return nil
}

// unconfirmedFinals returns the partitions ("topic-partition") whose final sync finish saw no
// answer to within its bound.
func (s *syncEmitter) unconfirmedFinals() []string {
	if s.off {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unconfirmed
}

// flushAll sends every pending and delayed sync of the emitter's writer, whichever copy
// recorded it, and waits for them: the last syncs of a shared writer when the engine closes
// (no copy runs any more).
func (s *syncEmitter) flushAll(ctx context.Context) error {
	if s.off {
		return nil
	}
	s.w.PromoteDelayed()
	for _, sy := range s.w.TakePending() {
		if err := s.produceFinal(ctx, ctx, sy, nil); err != nil {
			return err
		}
	}
	if err := s.wait(ctx); err != nil {
		return fmt.Errorf("flushing offset syncs: %w", err)
	}
	return s.error()
}

func (s *syncEmitter) close() {
	if !s.shared && s.cl != nil {
		s.cl.Close()
	}
	_, _ = s.ready.wait(context.Background()) // the background creation ends with the burst's context
}
