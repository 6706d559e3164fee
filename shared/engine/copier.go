package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// copier is one copy (a burst, a shared event-driven copy, or a payload write): a source
// consumer over all partitions with work, one idempotent target producer for the records, a
// ledger per partition (partLedger) and the committer of positions and offset syncs
// (committer, with its own producer). An exactly-once copy runs the same loop with an
// eosCommitter as its sink, committer and fetch gate (gate: transactional producers for the
// partitions it admits, positions inside the transactions; eosCopier).
//
// Ownership of its mutable state, by the goroutines that touch it: the fetch loop (copyLoop,
// produce), franz-go's promise goroutine (partLedger.ack), group callbacks (assign, revoke:
// group mode only, while the loop waits in a poll) and the committer's goroutine (its cycles:
// the loop, revoke, finish and settle only ask for them).
//   - set before the copy starts, then read-only: e, bo, offsets, syncs, remote, prod,
//     commits, reuse, pool, budget, wide, inflight, writeCtx, forward (the forwarder
//     keeps a budget of its own), sink and gate (exactly-once: the eosCommitter, whose own
//     ownership rules are in its comment);
//   - mu: states, byTP, active, assigned, closing, and each partLedger's done;
//   - partLedger.mu: the rest of a partition's ledger (see partLedger), including next, where
//     the forwarder hands a partition over;
//   - the committer's goroutine: the commit cycles, one at a time (committer.go); it reads
//     states under mu;
//   - errMu: err, the first failure;
//   - atomics, for counters the promise updates per record and others read: pending,
//     the committer's pending, records, bytes, txnBytes, txnAcked, firstAckNS, and the shared
//     *inflight byte count.
type copier struct {
	e       *core
	bo      BurstOptions
	offsets *pendingTopic
	syncs   *syncEmitter
	remote  map[string]string // source topic -> remote topic (group mode plans late)
	// tps are the flow's partitions and ends their end offsets at the start (group mode: what
	// the last member out checks, see rejoin).
	tps  []TP
	ends map[TP]int64
	// held (group mode) are the partitions the member held when it decided to leave: only
	// their records left are its lag. Those revoked before went to other members.
	held map[TP]*partLedger

	// states lists every partition this burst worked on (appended under mu); byTP
	// holds those still assigned, active counts those not done. Group callbacks change them
	// while the fetch loop waits in PollFetches.
	mu       sync.Mutex
	states   []*partLedger
	byTP     map[TP]*partLedger
	active   int
	assigned bool // group mode: the latest rebalance's assignment arrived
	closing  bool // group mode: the loop ended; callbacks only record what changed
	stalled  bool // the loop gave up on partitions that stopped yielding records
	writeCtx context.Context

	prod *kgo.Client // replicated records
	// sink writes the records (recordSink on prod, or an exactly-once copy's eosCommitter,
	// set before open); the forwarder has its own (batchSink).
	sink sink
	// gate, if not nil, decides which partitions the source consumer fetches (exactly-once:
	// those holding a transactional producer; fetchGate).
	gate fetchGate
	// txnBytes counts the bytes an exactly-once copy's open transactions hold (acknowledged or
	// not, not yet committed), which commitPolicy counts as written; txnAcked says a record was
	// acknowledged inside a transaction (it lifts the start bound).
	txnBytes atomic.Int64
	txnAcked atomic.Bool

	// reuse: prod (and the committer's) are the engine's (CopyPartition), shared with
	// concurrent calls; this copier waits for its own records (pending) instead of flushing them.
	reuse   bool
	pending zeroCount
	// commits writes positions and offset syncs: alo (committer.go), or an exactly-once copy's
	// eosCommitter.
	commits commitDriver
	alo     *committer

	pool  *fetchPool
	early *kgo.Client // source consumer started while the topics were prepared, until used
	// earlyProd is the records' producer started while the topics were prepared, until used.
	earlyProd *kgo.Client
	// throttle watches the target's throttling of the copy's own records producer (nil on
	// the engine's shared producers and exactly-once ones).
	throttle *throttleWatch
	// inflight counts bytes produced, not yet acknowledged, and wakes producers waiting for
	// room under budget. Both are the engine's (one bound for all concurrent calls) with
	// reuse.
	budget    int64
	wide      bool // more than narrowPartitions partitions at the start: no start bound
	inflight  *inflightBytes
	records   atomic.Int64
	bytes     atomic.Int64
	forwarded atomic.Int64 // records copied in forwarded batches
	// forwardWakes counts the forwarder loop's wake-ups (it waits for events, never polls).
	forwardWakes atomic.Int64
	resent       atomic.Int64 // forwarded batches sent again after the target refused them
	// unconfirmed counts the records of forwarded batches whose write failed: the target may
	// hold them (Summary.Unconfirmed, with the record path's ledgers).
	unconfirmed atomic.Int64
	firstAckNS  atomic.Int64

	errMu sync.Mutex
	err   error
	// failed is closed with the first failure (err set): the forwarder's loop waits on it.
	failed chan struct{}

	// started is when run began; stopRequested is set when the loop ended on a stop request or
	// a budget (both read by finishWait).
	started       time.Time
	stopRequested atomic.Bool
	// loopStart is when the first copy loop began (MaxDuration counts from it, across a
	// reopened loop); produced counts records produced against MaxRecords. Fetch loop only.
	loopStart time.Time
	produced  int64
	// forward: the copy forwards whole batches where it can before the record path runs
	// (forwardLoop). Set before the copy starts.
	forward bool
	// policy says when positions are due while copying. Fetch loop only.
	policy commitPolicy
}

func newCopier(e *core, bo BurstOptions, works []*work, offsets *pendingTopic, syncs *syncEmitter) *copier {
	c := &copier{e: e, bo: bo, byTP: map[TP]*partLedger{}, offsets: offsets, syncs: syncs,
		budget: e.opts.inflightBudget(len(works)), wide: len(works) > narrowPartitions, inflight: &inflightBytes{},
		pool: &fetchPool{}, policy: newCommitPolicy(), failed: make(chan struct{})}
	c.alo = newCommitter(e, offsets, syncs, c.fail, func() []*partLedger {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.states // appended only: the ledgers below its length never change
	})
	c.commits = c.alo
	for _, w := range works {
		st := c.newState(w)
		c.states = append(c.states, st)
		c.byTP[w.tp] = st
	}
	return c
}

// newState returns the state of a partition this copier works on.
func (c *copier) newState(w *work) *partLedger {
	st := &partLedger{w: w, lastAcked: -1, lastSeen: -1, written: -1, sampleUp: -1, next: w.start, sync: c.syncs.partition(w.tp)}
	st.ack = func(r *kgo.Record, err error) { c.acked(st, r, err) }
	return st
}

// addWork registers a partition assigned during the burst (group mode) and returns its state.
func (c *copier) addWork(w *work) *partLedger {
	st := c.newState(w)
	st.ctx = c.writeCtx
	c.mu.Lock()
	c.states = append(c.states, st)
	c.byTP[w.tp] = st
	if w.start >= w.end {
		st.done = true
	} else {
		c.active++
	}
	c.mu.Unlock()
	return st
}

func (c *copier) fail(err error) {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	if c.err == nil {
		c.err = err
		close(c.failed)
	}
}

func (c *copier) error() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

func recordSize(r *kgo.Record) int64 {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// acked is st's producer promise: franz-go calls it serially, in produce order per partition.
// An acknowledgement that is not for the oldest record in flight breaks that contract (a
// record acknowledged twice, or one this state never produced): the partition then fails,
// so its position can never move past a record whose fate is unknown, instead of the process
// crashing or storing a wrong position.
func (c *copier) acked(st *partLedger, r *kgo.Record, err error) {
	size := recordSize(r)
	up, failed, sample, dropped, bad := st.confirm(r, size, err)
	// The record counts as answered (pending) only once its outcome is recorded (the copy's
	// error, its offset sync): a copy waiting for its records reads them as soon as the count
	// reaches 0. Every answer counts, a bad one too: the record is out of the producer.
	defer c.pending.Add(-1)
	if bad != nil {
		c.fail(bad)
		c.inflight.release(size)
		return
	}
	if dropped { // left to the partition's next holder (revoke)
		c.inflight.release(size)
		return
	}
	if sample && err == nil {
		c.e.opts.Metrics.ReplicationLatency(st.ctx, st.w.tp.Topic, st.w.tp.Partition, time.Since(r.Timestamp))
	}
	if failed == nil && c.firstAckNS.Load() == 0 { // not time.Now per record: it was 3% of a burst's CPU
		c.firstAckNS.CompareAndSwap(0, time.Now().UnixNano()) // before the signal: it lifts bound
	}
	c.inflight.release(size)
	if failed != nil {
		c.fail(fmt.Errorf("writing %s offset %d to %q: %w", st.w.tp, up, st.w.remote, failed))
		return
	}
	c.records.Add(1)
	c.bytes.Add(size)
	c.syncs.recordAt(st.ctx, st.sync, up, r.Offset)
	r.Recycle()
}

// mayGoOn reports whether a copy that ended with reason may copy more: it was done, not stopped,
// nothing failed and no budget is spent.
func (c *copier) mayGoOn(ctx context.Context, reason string) bool {
	if reason != ReasonDone || ctx.Err() != nil || c.error() != nil {
		return false
	}
	if c.bo.MaxDuration > 0 && time.Since(c.loopStart) >= c.bo.MaxDuration {
		return false
	}
	return c.bo.MaxRecords <= 0 || c.produced < c.bo.MaxRecords
}

// finishWait is how long finish waits. A copy asked to stop (a signal, its MaxDuration, a
// record budget) or one on the shared producers (which settle later) waits the grace period;
// a burst that reached its end waits out a cluster that stopped answering, until its
// MaxDuration if it has one, else finishWaitMax, so a broker restart or hang of some seconds
// right at the end neither fails the burst nor costs the positions of what it copied.
func (c *copier) finishWait() time.Duration {
	if c.reuse || c.stopRequested.Load() {
		return c.bo.Grace
	}
	if c.bo.MaxDuration > 0 {
		return max(c.bo.Grace, time.Until(c.started.Add(c.bo.MaxDuration)))
	}
	return max(c.bo.Grace, finishWaitMax)
}

// bound is the in-flight bound now: startInflightBytes until the first acknowledgement of a
// narrow burst on its own producer (exactly-once: of a record inside its transaction, txnAcked;
// firstAckNS waits for the first commit), then (and for every other copy) the budget, at most
// throttledInflightBytes while the target throttles the copy's own producer.
func (c *copier) bound() int64 {
	if !c.reuse && !c.wide && c.firstAckNS.Load() == 0 && !c.txnAcked.Load() {
		return min(c.budget, startInflightBytes)
	}
	if c.throttle.throttled() {
		return min(c.budget, throttledInflightBytes)
	}
	return c.budget
}

// shareEngineBudget makes c a copy on the engine's long-lived producers: it waits for its own
// records instead of flushing them, and shares the engine's in-flight bound with every other
// such call.
func (c *copier) shareEngineBudget() {
	c.reuse = true
	c.budget, c.inflight = c.e.opts.sharedInflightBudget(), &c.e.reuse.inflight
}
