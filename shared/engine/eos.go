package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mm2go/mm2go/shared/cluster"
)

// Exactly-once tuning: transactional producers open at once (the partitions being copied),
// producers initialized at once, fencing requests in flight at once, and partitions whose
// transactions end at once in a commit cycle. The transaction timeout, eosTransactionTimeout,
// is with the other commit bounds (commit.go): the backoffs are built on it too.
const (
	eosProducers  = 64
	eosWorkers    = 16
	eosFencing    = 32
	eosCommitters = 32
)

// transactionalID is Engine.TransactionalID: the transactional id of a source partition's
// exactly-once producers, the same in every instance copying the partition for the flow.
func (e *core) transactionalID(tp TP) string {
	return fmt.Sprintf("%s-%s-%s-%s-%d", e.opts.TransactionalIDPrefix, e.opts.SourceAlias, e.opts.TargetAlias, tp.Topic, tp.Partition)
}

// producerMark is the producer id and epoch a transactional id was left at by this copy: by
// its fencing, or by its own producer when it closed it. A producer of the id initialized
// later by this copy gets the same id and the epoch one above, unless another instance
// initialized one in between.
type producerMark struct {
	id    int64
	epoch int16
}

// neverInitialized is the mark of a transactional id the coordinator did not know when the copy
// started (no producer of it was ever initialized, or not within Kafka's
// transactional.id.expiration.ms): the first producer initialized for it gets a new producer
// id at epoch 0.
var neverInitialized = producerMark{id: -1, epoch: -1}

// follows reports whether n is the mark a producer initialized right after m gets: nobody
// else initialized one between them.
func (m producerMark) follows(n producerMark) bool {
	return (n.id == m.id || m == neverInitialized) && n.epoch == m.epoch+1
}

// eosCopier returns the copier of an exactly-once run over tps: the copier's fetch, stall and
// budget loop (copyLoop) with an eosCommitter as its sink, committer and fetch gate. Every
// partition's transactional id is fenced first (fence: one InitProducerId request each, on
// the engine's target client), which aborts the open transaction of any earlier copier of it
// and makes it unable to commit; only then are positions read and the copy planned.
func (e *core) eosCopier(ctx context.Context, bo BurstOptions, tps []TP, remote map[string]string, limit map[TP]int64, offsets *pendingTopic, syncs *syncEmitter) (*copier, error) {
	start := time.Now()
	marks, err := e.fence(ctx, tps)
	if err != nil {
		return nil, err
	}
	fresh := 0
	for _, m := range marks {
		if m == neverInitialized {
			fresh++
		}
	}
	e.log.Debug("exactly-once: earlier producers fenced", "partitions", len(tps), "fenced", len(tps)-fresh, "new_ids", fresh, "elapsed", time.Since(start).String())
	works, err := e.planner.plan(ctx, tps, remote, limit, offsets.parts)
	if err != nil {
		return nil, err
	}
	e.log.Debug("exactly-once: positions read", "partitions", len(works), "elapsed", time.Since(start).String())
	c := newCopier(e, bo, works, offsets, syncs)
	c.remote, c.tps = remote, tps
	k := newEOSCommitter(c, ctx, marks)
	c.sink, c.commits, c.gate = k, k, k
	return c, nil
}

// fence initializes a producer id for the transactional id of every partition of tps, a few
// at a time, without keeping a producer: the coordinator aborts any open transaction of the
// id and no earlier producer of it can commit any more. It returns where each id was left.
//
// An id the coordinator does not know (asked first, in one DescribeTransactions request per
// coordinator) has no earlier producer to fence: it is left at neverInitialized, and the
// partition's own producer, initialized later, tells whether another instance initialized one
// in between (its epoch is then above 0). A new flow's first exactly-once copy of 1,000
// partitions so saves 1,000 InitProducerId round trips, each a write to the transaction log
// (21.8 s of a 62 s copy on the bench's loaded broker).
func (e *core) fence(ctx context.Context, tps []TP) (map[TP]producerMark, error) {
	sem := make(chan struct{}, eosFencing)
	var (
		mu    sync.Mutex
		errs  []error
		wg    sync.WaitGroup
		marks = make(map[TP]producerMark, len(tps))
	)
	unknown := e.unknownTransactionalIDs(ctx, tps)
	for _, tp := range tps {
		if unknown[e.transactionalID(tp)] {
			marks[tp] = neverInitialized
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			m, err := e.initProducerID(ctx, e.transactionalID(tp))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("fencing earlier copiers of %s: %w", tp, err))
				return
			}
			marks[tp] = m
		})
	}
	wg.Wait()
	return marks, errors.Join(errs...)
}

// unknownTransactionalIDs returns the transactional ids of tps that the coordinator answers
// TRANSACTIONAL_ID_NOT_FOUND for. The ids it answers retriably for (COORDINATOR_NOT_AVAILABLE
// from a cluster that creates its transaction state topic on this first request, a coordinator
// loading or moving) are asked again under clientBackoff for up to describeIDsBudget; an id it
// could not be asked about by then is not in the set (it is fenced as any other).
func (e *core) unknownTransactionalIDs(ctx context.Context, tps []TP) map[string]bool {
	ask := make([]string, len(tps))
	for i, tp := range tps {
		ask[i] = e.transactionalID(tp)
	}
	unknown := map[string]bool{}
	r := backoff{initial: clientBackoff.initial, max: clientBackoff.max, budget: describeIDsBudget}.start()
	for {
		ds, err := e.tgtAdm.DescribeTransactions(ctx, ask...)
		var again []string
		for _, id := range ask {
			d, ok := ds[id]
			switch {
			case ok && errors.Is(d.Err, kerr.TransactionalIDNotFound):
				unknown[id] = true
			case ok && d.Err != nil && classify(d.Err) == errRetriable,
				!ok && err != nil && classify(err) == errRetriable:
				again = append(again, id)
			}
		}
		if len(again) == 0 {
			return unknown
		}
		d, ok := r.next()
		if !ok || !sleep(ctx, d) {
			e.log.Debug("exactly-once: transactional ids not described; fencing them", "ids", len(again), "attempts", r.attempts(), "err", err)
			return unknown
		}
		ask = again
	}
}

// describeIDsBudget bounds how long a copy asks the coordinator which transactional ids it
// knows before it fences those it could not ask about.
const describeIDsBudget = 10 * time.Second

// initProducerID sends InitProducerId for transactional id id (what a transactional
// producer's initialization and Kafka's Admin.fenceProducers send), riding out the
// coordinator's retriable answers (CONCURRENT_TRANSACTIONS while it aborts the transaction it
// found open, a coordinator loading or moving) under clientBackoff for up to the transaction
// timeout.
func (e *core) initProducerID(ctx context.Context, id string) (producerMark, error) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &id
	req.TransactionTimeoutMillis = int32(eosTransactionTimeout.Milliseconds())
	req.ProducerID, req.ProducerEpoch = -1, -1
	r := backoff{initial: clientBackoff.initial, max: clientBackoff.max, budget: eosTransactionTimeout}.start()
	for {
		resp, err := req.RequestWith(ctx, e.tgt)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil {
			return producerMark{resp.ProducerID, resp.ProducerEpoch}, nil
		}
		if classify(err) == errFatal && !errors.Is(err, kerr.ConcurrentTransactions) {
			return producerMark{}, fmt.Errorf("InitProducerId for transactional id %q: %w", id, err)
		}
		d, ok := r.next()
		if !ok || !sleep(ctx, d) {
			return producerMark{}, fmt.Errorf("InitProducerId for transactional id %q (%d attempts): %w", id, r.attempts(), err)
		}
	}
}

// eosCommitter is an exactly-once copy's writer and committer in one, in the shape of Kafka
// Connect's ExactlyOnceWorkerSourceTask: it owns the partitions' transactional producers,
// ends their transactions with each partition's position inside (the position record goes to
// the offsets topic in the same transaction, as Connect's exactly-once source tasks do),
// settles a commit whose outcome is unknown, and moves the source consumer (which partitions
// it fetches, and from where). The copy's loop sees a sink (write), a committer (request,
// finish) and a fetch gate (admit, attach, waiting), with no exactly-once branch of its own.
//
// Bounded: at most eosProducers partitions hold a transactional producer (each a franz-go
// client: connections, metadata, buffers) and are fetched at once; the others wait in queue,
// unfetched, and are admitted as partitions reach their end (release): for the first
// servedWait, those whose remote partition the target serves before the others (watchServed),
// then in plan order. A cycle so ends at most eosProducers transactions.
//
// Fencing and ownership. Each partition has its own transactional id (TransactionalID),
// stable across instances, so whichever instance initialized a producer of it last is the only
// one that can commit the partition's records and its position. Before planning, the copy
// fences every partition's id (core.fence) and notes where each was left (producerMark);
// positions read after that cannot move under an instance fenced before. A partition's own
// producer is initialized later (admit, or a position stored alone at the start): if its
// producer id and epoch follow the mark, nobody initialized one in between, and the position
// planned is still the stored one; otherwise another instance did (and may have committed
// since): the position is read again after this initialization, which fenced that instance,
// and the partition starts after it. The same holds whenever this copy initializes a producer
// again to settle a commit whose outcome is unknown (settle): the stored position read after
// it is the truth, and the copy goes on after it (seeking the consumer), whether this copy's
// transaction or another instance's put it there. A partition is given up only when another
// producer took it over for sure (PRODUCER_FENCED, or the coordinator showing another producer
// of the id: takenOver), never on an error of this copy's own producer.
//
// Ownership of its state: c, e, stop and the channels are set at construction, writeCtx by
// start; then read-only. mu guards parts (the partitions holding a producer), marks, queue,
// cons, ending and admitting. A txnPart is touched by the fetch loop (write) and by the
// goroutine (run: the cycles), never at once: the loop waits for the start and tick cycles
// (request), the finish runs after the loop, and the release cycles the loop does not wait for
// touch only partitions that reached their end (ending), which the loop writes no more. A
// txnPart's produce error is set by its producer's promises (errMu).
type eosCommitter struct {
	c      *copier
	e      *core
	runCtx context.Context // the run's context: a stop request ends the retries of a commit

	writeCtx context.Context // the copy's writes (start)

	mu      sync.Mutex
	parts   map[TP]*txnPart
	marks   map[TP]producerMark
	queue   []*partLedger // partitions with records to copy and no producer yet, in plan order
	ending  []*txnPart    // partitions that reached their end: to commit, close and replace
	cons    *kgo.Client
	opening int          // partitions taken from queue whose producers are being opened
	served  *servedWatch // which queued partitions' remote partitions the target serves
	// servedUntil ends served-first admission: from then on the queue is taken in plan order.
	servedUntil time.Time
	servedSig   chan struct{} // a partition was seen served, or servedUntil passed (one slot)

	kick    chan struct{} // a release is due (one slot: kicks coalesce)
	reqs    chan commitRequest
	cancel  context.CancelFunc
	stopped chan struct{}
}

// newEOSCommitter returns the exactly-once committer of c, whose partitions were fenced at
// marks; stop is the run's context.
func newEOSCommitter(c *copier, stop context.Context, marks map[TP]producerMark) *eosCommitter {
	k := &eosCommitter{c: c, e: c.e, runCtx: stop, parts: map[TP]*txnPart{}, marks: marks,
		kick: make(chan struct{}, 1), reqs: make(chan commitRequest), stopped: make(chan struct{}),
		servedSig: make(chan struct{}, 1)}
	for _, st := range c.states {
		if st.w.start < st.w.end {
			k.queue = append(k.queue, st)
		}
	}
	return k
}

// txnPart is one partition's transactional producer and its open transaction.
type txnPart struct {
	st      *partLedger
	prod    *kgo.Client
	mark    producerMark  // the producer's id and epoch as last known
	open    bool          // a transaction is begun
	last    int64         // newest upstream offset handed in (a record or a control record) not committed, -1 none
	handed  int64         // newest upstream offset ever handed in or skipped (records at or below it are not written again)
	written int64         // position last committed, -1 none
	recs    []*kgo.Record // records in the open transaction (their Offset is the target's once produced)
	ups     []int64       // their upstream offsets
	bytes   int64         // their bytes
	gone    bool          // given up (fenced, refused, abandoned): nothing more is written
	ending  bool          // reached its end: the loop writes no more, a release cycle commits and closes it
	rt      *retrier      // unsettled commits since the last commit (eosCommitBackoff)

	errMu sync.Mutex
	err   error // the open transaction's first produce error
}

func (p *txnPart) setErr(err error) {
	p.errMu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.errMu.Unlock()
}

func (p *txnPart) error() error {
	p.errMu.Lock()
	defer p.errMu.Unlock()
	return p.err
}

func (p *txnPart) clearErr() {
	p.errMu.Lock()
	p.err = nil
	p.errMu.Unlock()
}

// reset empties p's transaction once it is settled (committed or given up).
func (p *txnPart) reset() {
	clear(p.recs)
	p.recs, p.ups, p.bytes, p.last = p.recs[:0], p.ups[:0], 0, -1
	p.clearErr()
}

// producer connects and initializes tp's transactional producer, fencing every earlier one
// with the same transactional id, and returns it with its producer id and epoch.
func (k *eosCommitter) producer(ctx context.Context, tp TP) (*kgo.Client, producerMark, error) {
	e := k.e
	prod, err := e.dial(ctx, Target, e.producerOpts(
		kgo.TransactionalID(e.transactionalID(tp)),
		kgo.TransactionTimeout(eosTransactionTimeout),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedBytes(e.opts.producerBufferedBytes()),
		kgo.MaxBufferedRecords(maxBufferedRecords),
	)...)
	if err != nil {
		return nil, producerMark{}, fmt.Errorf("connecting transactional producer for %s: %w", tp, err)
	}
	id, epoch, err := prod.ProducerID(ctx)
	if err != nil {
		prod.Close()
		return nil, producerMark{}, fmt.Errorf("initializing transactional producer %q: %w", e.transactionalID(tp), err)
	}
	return prod, producerMark{id, epoch}, nil
}

// open gives st's partition a producer (its txnPart, not yet registered in parts) and reports
// whether another instance initialized a producer of its transactional id since this copy
// last left it (moved): then its stored position must be read again.
func (k *eosCommitter) open(ctx context.Context, st *partLedger) (p *txnPart, moved bool, err error) {
	prod, mark, err := k.producer(ctx, st.w.tp)
	if err != nil {
		return nil, false, err
	}
	k.mu.Lock()
	prev, ok := k.marks[st.w.tp]
	k.mu.Unlock()
	st.mu.Lock()
	next := st.next
	st.mu.Unlock()
	return &txnPart{st: st, prod: prod, mark: mark, last: -1, handed: next - 1, written: -1}, !ok || !prev.follows(mark), nil
}

// close closes p's producer, noting where it left the transactional id.
func (k *eosCommitter) close(p *txnPart) {
	if p.prod == nil {
		return
	}
	if id, epoch, err := p.prod.ProducerID(context.Background()); err == nil && !p.gone {
		p.mark = producerMark{id, epoch} // a commit of transactions V2 bumps the epoch
	}
	p.prod.Close() // before its slot is free: at most eosProducers are open at once
	p.prod = nil
	k.mu.Lock()
	k.marks[p.st.w.tp] = p.mark
	if k.parts[p.st.w.tp] == p {
		delete(k.parts, p.st.w.tp)
	}
	k.mu.Unlock()
}

// openAll opens producers for sts, eosWorkers at a time, reads the stored positions of those
// whose transactional id another instance initialized in between, and moves their start past
// what is stored (moveTo). It returns the parts opened for partitions that still have records
// to copy, and closes the others'.
func (k *eosCommitter) openAll(ctx context.Context, sts []*partLedger) ([]*txnPart, error) {
	sem := make(chan struct{}, eosWorkers)
	var (
		mu     sync.Mutex
		errs   []error
		wg     sync.WaitGroup
		opened = make([]*txnPart, len(sts)) // in plan order
		moved  []TP
	)
	for i, st := range sts {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			p, m, err := k.open(ctx, st)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			opened[i] = p
			if m {
				moved = append(moved, st.w.tp)
			}
		})
	}
	wg.Wait()
	out := slices.DeleteFunc(opened, func(p *txnPart) bool { return p == nil })
	if err := errors.Join(errs...); err != nil {
		for _, p := range out {
			k.close(p)
		}
		return nil, err
	}
	if len(moved) > 0 {
		parts, _ := k.c.offsets.ready()
		rctx, cancel := k.graceful(ctx)
		stored, err := k.e.positions.read(rctx, moved, parts)
		cancel()
		if err != nil {
			for _, p := range out {
				k.close(p)
			}
			return nil, fmt.Errorf("reading positions again after another instance initialized producers of %d partitions: %w", len(moved), err)
		}
		for _, p := range out {
			if s, ok := stored[p.st.w.tp]; ok && s > p.handed {
				k.e.log.Warn("exactly-once: another instance copied this partition since it was planned; going on after its stored position",
					"partition", p.st.w.tp.String(), "planned", p.handed+1, "stored", s)
				k.moveTo(p, s)
			}
		}
	}
	return out, nil
}

// moveTo takes stored, a position another instance committed past p's, as p's: the records
// up to it are on the target already, the consumer is moved past it (if the partition is
// fetched), and a partition whose end it reaches is done.
func (k *eosCommitter) moveTo(p *txnPart, stored int64) {
	st, tp := p.st, p.st.w.tp
	p.written, p.handed = stored, max(p.handed, stored)
	st.mu.Lock()
	st.next = max(st.next, stored+1)
	st.lastAcked = max(st.lastAcked, stored)
	st.mu.Unlock()
	k.e.positions.known.advance(tp, stored+1)
	if stored+1 >= st.w.end {
		k.done(p)
		return
	}
	k.mu.Lock()
	cons, fetched := k.cons, k.parts[tp] == p
	k.mu.Unlock()
	if cons != nil && fetched {
		cons.SetOffsets(map[string]map[int32]kgo.EpochOffset{tp.Topic: {tp.Partition: {Epoch: -1, Offset: stored + 1}}})
	}
}

// done marks p's partition finished (nothing more to fetch) and its part ending.
func (k *eosCommitter) done(p *txnPart) {
	c := k.c
	c.mu.Lock()
	if !p.st.done {
		p.st.done = true
		c.active--
	}
	closing := c.closing
	c.mu.Unlock()
	k.mu.Lock()
	cons := k.cons
	p.ending = true
	k.mu.Unlock()
	if cons != nil && !closing {
		cons.PauseFetchPartitions(map[string][]int32{p.st.w.tp.Topic: {p.st.w.tp.Partition}})
	}
}

// admit (the fetch gate, before the consumer starts) gives the first eosProducers partitions
// in queue their producers and returns where the consumer starts: those partitions only.
func (k *eosCommitter) admit(ctx context.Context, _ map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	for {
		ps, err := k.admitNext(ctx)
		if err != nil {
			return nil, err
		}
		k.mu.Lock()
		queued := len(k.queue)
		k.mu.Unlock()
		if len(ps) > 0 || queued == 0 {
			return startAt(ps), nil
		}
		// None of the queued partitions is served yet: wait for the first (or servedUntil).
		select {
		case <-k.servedSig:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// watchServed starts watching the remote partitions of the queued partitions until ctx ends:
// admission takes those the target already serves first, for up to servedWait. A new remote
// partition is served some time after its topic is created (on a loaded broker, or a disk
// where creating a partition's files is slow, seconds for a thousand), and a partition's
// producer admitted before that holds one of the eosProducers slots while its first writes
// wait to be accepted; at-least-once writes to every partition at once and meets each as it
// is served.
func (k *eosCommitter) watchServed(ctx context.Context) {
	w := newServedWatch(k.e)
	w.notify = k.signalServed
	k.mu.Lock()
	leaders := make(map[servedKey]int32, len(k.queue))
	for _, st := range k.queue {
		leaders[servedKey{st.w.remote, st.w.tp.Partition}] = -1
	}
	k.served, k.servedUntil = w, time.Now().Add(servedWait)
	k.mu.Unlock()
	if len(leaders) == 0 {
		return
	}
	w.watch(leaders)
	go w.run(ctx)
	t := time.AfterFunc(servedWait, k.signalServed)
	context.AfterFunc(ctx, func() { t.Stop() })
}

// signalServed tells a waiting admit and the goroutine (a release cycle admits) that
// partitions can be admitted: some were seen served, or servedUntil passed.
func (k *eosCommitter) signalServed() {
	select {
	case k.servedSig <- struct{}{}:
	default:
	}
	k.wake()
}

// startAt returns the consumer's start offsets of ps: where each partition goes on.
func startAt(ps []*txnPart) map[string]map[int32]kgo.Offset {
	offs := map[string]map[int32]kgo.Offset{}
	for _, p := range ps {
		tp := p.st.w.tp
		if offs[tp.Topic] == nil {
			offs[tp.Topic] = map[int32]kgo.Offset{}
		}
		offs[tp.Topic][tp.Partition] = kgo.NewOffset().At(p.handed + 1)
	}
	return offs
}

// admitNext opens producers for the partitions next in queue while fewer than eosProducers
// are held, registers those that still have records to copy and returns them. Partitions
// found copied to their end by another instance are closed again and others taken instead.
//
// Until servedUntil, only partitions whose remote partition the target serves are taken
// (watchServed), in plan order; the others keep their places in queue.
func (k *eosCommitter) admitNext(ctx context.Context) ([]*txnPart, error) {
	var out []*txnPart
	for {
		k.c.mu.Lock() // before k.mu: a ledger's done is the copier's
		k.mu.Lock()
		anyOrder := k.served == nil || !time.Now().Before(k.servedUntil)
		var next []*partLedger
		kept := k.queue[:0]
		for _, st := range k.queue {
			switch {
			case st.done: // given up while it waited
			case len(k.parts)+k.opening+len(next) < eosProducers &&
				(anyOrder || k.served.served(servedKey{st.w.remote, st.w.tp.Partition})):
				next = append(next, st)
			default:
				kept = append(kept, st)
			}
		}
		clear(k.queue[len(kept):])
		k.queue = kept
		k.opening += len(next)
		queued := len(k.queue)
		k.mu.Unlock()
		k.c.mu.Unlock()
		if len(next) == 0 {
			return out, nil
		}
		began := time.Now()
		ps, err := k.openAll(ctx, next)
		k.mu.Lock()
		k.opening -= len(next) // and the opened ones registered, under the same lock: the bound holds
		var found []*txnPart
		for _, p := range ps {
			if p.ending {
				found = append(found, p) // another instance copied it to its end
				continue
			}
			k.parts[p.st.w.tp] = p
			out = append(out, p)
		}
		k.mu.Unlock()
		for _, p := range found {
			k.close(p)
		}
		if err != nil {
			return out, err
		}
		k.e.log.Debug("exactly-once: partitions admitted", "partitions", len(next), "queued", queued, "elapsed", time.Since(began).String())
	}
}

// attach (the fetch gate) hands over the loop's consumer: partitions admitted later are added
// to it, a partition given up is paused, a settled one moved.
func (k *eosCommitter) attach(cons *kgo.Client) {
	k.mu.Lock()
	k.cons = cons
	k.mu.Unlock()
	k.wake() // partitions served since admit are admitted now
}

// waiting (the fetch gate) reports whether partitions are being admitted: the loop's empty
// polls meanwhile are no stall.
func (k *eosCommitter) waiting() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.opening > 0 || (len(k.queue) > 0 && len(k.parts) < eosProducers)
}

// start runs the committer's goroutine until ctx ends or stop; records and positions are
// produced under ctx (the copy's writes).
func (k *eosCommitter) start(ctx context.Context) {
	k.writeCtx = ctx
	ctx, k.cancel = context.WithCancel(ctx)
	k.watchServed(ctx)
	go k.run(ctx)
}

// stop ends the goroutine (a cycle in progress is abandoned), waits until it has returned and
// closes every producer still open.
func (k *eosCommitter) stop() {
	if k.cancel == nil {
		return
	}
	k.cancel()
	<-k.stopped
	k.mu.Lock()
	open := make([]*txnPart, 0, len(k.parts))
	for _, p := range k.parts {
		open = append(open, p)
	}
	k.mu.Unlock()
	for _, p := range open {
		k.close(p)
	}
}

// run serves requests one cycle at a time until ctx ends.
func (k *eosCommitter) run(ctx context.Context) {
	defer close(k.stopped)
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.kick:
			k.release(ctx)
		case r := <-k.reqs:
			r.done <- k.serve(ctx, r)
		}
	}
}

// request runs a cycle for why and waits for it (the start's and the ticks': a partition's
// producer holds one transaction at a time, so the loop writes on once the cycle ended them).
// Failures are the copy's.
func (k *eosCommitter) request(why commitReason) {
	if err := k.commit(k.writeCtx, why); err != nil {
		k.c.fail(err)
	}
}

// commit runs a cycle for why and waits, within ctx, until it has ended.
func (k *eosCommitter) commit(ctx context.Context, why commitReason) error {
	return askCycle(ctx, k.reqs, k.stopped, why)
}

// finish is the copy's last cycle: every open transaction ends with its position, every
// producer is closed, then the final offset syncs are written. Its failures are the copy's.
func (k *eosCommitter) finish(ctx context.Context) {
	if err := k.commit(ctx, commitFinish); err != nil {
		k.c.fail(fmt.Errorf("writing positions: %w", err))
	}
}

// serve runs the cycle r asks for, waiting for its answers within r's context and the
// committer's.
func (k *eosCommitter) serve(ctx context.Context, r commitRequest) error {
	wctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	if err := wctx.Err(); err != nil {
		return err
	}
	parts, ok := k.c.offsets.ready()
	switch r.why {
	case commitStart:
		if ok {
			k.positionsAlone(ctx, wctx, parts)
		}
	case commitFinish:
		if parts, err := k.c.offsets.wait(wctx); err != nil {
			k.c.fail(fmt.Errorf("positions not stored: waiting for the offsets topic: %w", err))
		} else {
			k.cycle(ctx, wctx, parts, true)
			k.release(ctx)
		}
		k.reportMetrics(ctx)
		if err := k.c.syncs.finish(wctx); err != nil {
			k.c.fail(err)
		}
		return nil
	default:
		if ok {
			k.cycle(ctx, wctx, parts, false)
		}
	}
	k.reportMetrics(ctx)
	if r.why == commitTick {
		if err := k.c.syncs.send(ctx, false); err != nil {
			k.c.fail(err)
		}
	}
	return nil
}

// reportMetrics reports the copy's metrics (what committed is copied).
func (k *eosCommitter) reportMetrics(ctx context.Context) {
	k.c.mu.Lock()
	states := k.c.states
	k.c.mu.Unlock()
	reportCopyMetrics(ctx, k.e.opts.Metrics, states)
}

// positionsAlone stores, at the start, the positions auto.offset.reset=latest chose for
// partitions without one, each in a transaction of its own (a producer opened for it and
// closed again, eosWorkers at a time), so they hold whatever the copy does next.
func (k *eosCommitter) positionsAlone(ctx, wait context.Context, parts int32) {
	var alone []*partLedger
	for _, st := range k.c.states {
		if st.w.initPos >= 0 {
			alone = append(alone, st)
		}
	}
	sem := make(chan struct{}, eosWorkers)
	var wg sync.WaitGroup
	for _, st := range alone {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			p, moved, err := k.open(wait, st)
			if err != nil {
				k.c.fail(err)
				return
			}
			defer k.close(p)
			if moved {
				// Another instance initialized a producer of it since the fencing: its
				// position (if any) is newer than "latest" as planned; leave it.
				return
			}
			k.end(ctx, wait, p, st.w.initPos, parts)
		})
	}
	wg.Wait()
}

// cycle ends the transaction of every held partition with records or a position not yet
// committed (all of them if all, else those the loop writes, not the ending ones), up to
// eosCommitters at once. The fetch loop waits for it (or it runs after the loop).
func (k *eosCommitter) cycle(ctx, wait context.Context, parts int32, all bool) {
	k.mu.Lock()
	held := make([]*txnPart, 0, len(k.parts))
	for _, p := range k.parts {
		if !p.gone && (all || !p.ending) {
			held = append(held, p)
		}
	}
	k.mu.Unlock()
	k.endAll(ctx, wait, held, parts)
}

// endAll ends the transactions of ps that hold something not yet committed, up to
// eosCommitters at once.
func (k *eosCommitter) endAll(ctx, wait context.Context, ps []*txnPart, parts int32) {
	sem := make(chan struct{}, eosCommitters)
	var wg sync.WaitGroup
	for _, p := range ps {
		if p.last < 0 || p.last <= p.written {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			k.end(ctx, wait, p, p.last, parts)
		})
	}
	wg.Wait()
}

// release commits the transactions of the partitions that reached their end, closes their
// producers and admits the partitions next in queue in their place (the consumer starts
// fetching them). It runs on the goroutine while the loop copies the other partitions.
func (k *eosCommitter) release(ctx context.Context) {
	k.mu.Lock()
	ending := k.ending
	k.ending = nil
	k.mu.Unlock()
	if len(ending) > 0 {
		if parts, ok := k.c.offsets.ready(); ok {
			k.endAll(ctx, ctx, ending, parts)
		}
		for _, p := range ending {
			if p.last < 0 || p.last <= p.written || p.gone {
				k.close(p)
			} else {
				// Not committed (the offsets topic not ready yet): kept for the finish.
				k.mu.Lock()
				p.ending = true
				k.mu.Unlock()
			}
		}
	}
	k.c.mu.Lock()
	closing := k.c.closing
	k.c.mu.Unlock()
	k.mu.Lock()
	cons := k.cons
	k.mu.Unlock()
	if closing || cons == nil {
		return // before the loop's consumer, admit admits (attach asks for a release then)
	}
	ps, err := k.admitNext(ctx)
	if err != nil && ctx.Err() == nil {
		k.c.fail(err)
	}
	if len(ps) > 0 {
		cons.AddConsumePartitions(startAt(ps))
	}
}

// end commits p's open transaction (begun for the position alone if none is) with position
// pos inside it. A commit refused for good (not UNKNOWN_SERVER_ERROR, whose outcome is unknown)
// fails the copy; one another producer took over
// gives the partition up to it; any other (a retriable error, an unknown outcome, an epoch or
// state error of this producer's own) is settled and, if it did not commit, written again
// (settle). Records (the position, offset syncs) are produced under ctx, the copy's writes;
// the waits end with wait.
func (k *eosCommitter) end(ctx, wait context.Context, p *txnPart, pos int64, parts int32) {
	st := p.st
	err := p.tryCommit(ctx, wait, k.e.positions.record(st.w.tp, pos, parts))
	for err != nil {
		if errors.Is(err, errGaveUp) {
			return
		}
		switch classify(err) {
		case errFenced:
			k.fenced(p, err)
			return
		case errFatal:
			if !errors.Is(err, kerr.UnknownServerError) {
				k.c.fail(fmt.Errorf("exactly-once copy of %s: %w", st.w.tp, err))
				k.giveUp(p, "failed")
				return
			}
			// The broker failed while handling the request: whether the transaction
			// committed is unknown, so it is settled as any unknown outcome (a Kafka 4.1
			// broker answered a commit so while another instance fenced the id).
		case errEpoch:
			if k.takenOver(wait, p) {
				k.fenced(p, err)
				return
			}
		}
		stored, settled, serr := k.settle(ctx, wait, p, pos, parts, err)
		if serr == nil && settled {
			if stored > pos {
				k.e.log.Warn("exactly-once: another instance committed past this copy's transaction; going on after its stored position",
					"partition", st.w.tp.String(), "position", pos, "stored", stored)
				k.c.txnBytes.Add(-p.bytes)
				p.reset()
				k.moveTo(p, stored)
				if p.rt != nil {
					p.rt.reset()
				}
				return
			}
			break
		}
		err = serr
	}
	k.committed(ctx, p, pos)
}

// fenced gives p's partition up to the producer that took it over: its transactions win,
// ours were aborted. That is the design working, not a failure: the instance whose producer
// fenced ours copies the partition now, so its records left are not this copy's lag (a `mirror
// run` overlapping another run of the flow, each taking every partition, exits 0 when the
// other took partitions from it).
func (k *eosCommitter) fenced(p *txnPart, err error) {
	k.e.log.Warn("partition taken over by another instance (fenced)", "partition", p.st.w.tp.String(), "err", err)
	p.st.mu.Lock()
	p.st.ownedElsewhere = true
	p.st.mu.Unlock()
	k.giveUp(p, "fenced: another instance took it over")
}

// takenOver reports whether another producer of p's transactional id was initialized since
// p's (the coordinator, asked with DescribeTransactions, shows another producer id, or an
// epoch above the one p's own commit or the coordinator's abort of it leaves, or a newer
// producer's empty or open transaction): an epoch or state error is only a takeover then.
// A coordinator that cannot be asked is no proof: the commit is settled.
func (k *eosCommitter) takenOver(ctx context.Context, p *txnPart) bool {
	id := k.e.transactionalID(p.st.w.tp)
	ds, err := k.e.tgtAdm.DescribeTransactions(ctx, id)
	if err != nil {
		return false
	}
	d, ok := ds[id]
	if !ok || d.Err != nil {
		return false
	}
	return transactionTakenOver(p.mark, d)
}

// transactionTakenOver reports whether d, the coordinator's description of a transactional
// id, shows a producer initialized after the one at mine.
func transactionTakenOver(mine producerMark, d kadm.DescribedTransaction) bool {
	switch {
	case d.ProducerID != mine.id:
		return true
	case d.ProducerEpoch > mine.epoch+1:
		return true // more than our own commit's bump (transactions V2) or an abort of it
	case d.ProducerEpoch > mine.epoch:
		return d.State == "Empty" || d.State == "Ongoing" // a new producer's, not our transaction's end
	}
	return false
}

// tryCommit produces position into p's transaction (beginning one if none is open), waits
// for its records and commits it. On an error the transaction is aborted as far as it can be.
func (p *txnPart) tryCommit(ctx, wait context.Context, position *kgo.Record) error {
	if !p.open {
		if err := p.prod.BeginTransaction(); err != nil {
			return fmt.Errorf("beginning transaction: %w", err)
		}
		p.open = true
	}
	p.prod.Produce(ctx, position, func(_ *kgo.Record, err error) {
		if err != nil {
			p.setErr(fmt.Errorf("writing position: %w", err))
		}
	})
	err := p.prod.Flush(wait)
	if err == nil {
		err = p.error()
	}
	p.open = false
	if err != nil {
		if aerr := p.prod.EndTransaction(wait, kgo.TryAbort); aerr != nil {
			err = errors.Join(err, fmt.Errorf("aborting transaction: %w", aerr))
		}
		return err
	}
	if err := p.prod.EndTransaction(wait, kgo.TryCommit); err != nil {
		return fmt.Errorf("committing transaction: %w", err)
	}
	return nil
}

// settle settles a transaction of p that did not commit for sure (cause): after a wait
// (eosCommitBackoff, reset by every commit), a new producer with the same transactional id
// fences it, which completes or aborts it, and the stored position is read back (never the
// one kept in memory). If it covers pos, settle reports it (settled): pos is committed, by
// this copy or by an instance fenced since, and the copy goes on after what is stored.
// Otherwise the records the stored position does not cover are written again in a new
// transaction, which is committed: its error, if any, is settled the same way by the caller.
// A stop request (waited for at most the copy's grace) or a spent budget fails the copy with
// the cause (the next run starts from the stored position).
func (k *eosCommitter) settle(ctx, wait context.Context, p *txnPart, pos int64, parts int32, cause error) (stored int64, settled bool, err error) {
	e, tp := k.e, p.st.w.tp
	if wait.Err() != nil {
		return 0, false, k.abandon(p, &unsettledCommit{err: cause})
	}
	if p.rt == nil {
		p.rt = eosCommitBackoff.start()
	}
	delay, ok := p.rt.next()
	if !ok {
		return 0, false, k.abandon(p, &cluster.RetryBudgetError{What: "exactly-once copy of " + tp.String(), Attempts: p.rt.attempts(), Elapsed: p.rt.elapsed(), Err: cause})
	}
	e.log.Warn("exactly-once commit not settled; fencing it and reading the stored position back",
		"partition", tp.String(), "attempt", p.rt.attempts(), "in", delay.Round(time.Millisecond).String(), "err", cause.Error())
	if !sleep(k.runCtx, delay) {
		return 0, false, k.abandon(p, &unsettledCommit{err: cause})
	}
	// A stop request during the settling (fencing, the wait for the offsets topic's open
	// transactions to be decided) is given the copy's grace, no more.
	sctx, cancel := k.graceful(wait)
	defer cancel()
	prod, mark, err := k.producer(sctx, tp)
	if err != nil {
		return 0, false, k.unsettled(p, sctx, cause, err)
	}
	p.prod.Close()
	p.prod, p.mark, p.open = prod, mark, false
	p.clearErr()
	read, err := e.positions.read(sctx, []TP{tp}, parts)
	if err != nil {
		return 0, false, k.unsettled(p, sctx, cause, err)
	}
	s, ok := read[tp]
	if ok && s >= pos {
		return s, true, nil
	}
	// Not committed: what the position covers (possibly written by an instance this
	// producer has just fenced) is on the target; the rest goes again.
	if ok && s > p.written {
		p.written = s
		k.c.txnBytes.Add(-p.drop(s))
	}
	return 0, false, p.rewrite(ctx, wait, p.st.w.remote, e.positions.record(tp, pos, parts))
}

// graceful returns a context that ends with ctx or the copy's grace (BurstOptions.Grace) after
// a stop request (the run's context ending): a settling or admission step that waits for the
// offsets topic (waitStable can wait out a transaction timeout) keeps a stopping copy no
// longer than its grace.
func (k *eosCommitter) graceful(ctx context.Context) (context.Context, context.CancelFunc) {
	gctx, cancel := context.WithCancel(ctx)
	unregister := context.AfterFunc(k.runCtx, func() {
		t := time.AfterFunc(k.c.bo.Grace, cancel)
		context.AfterFunc(gctx, func() { t.Stop() })
	})
	return gctx, func() {
		unregister()
		cancel()
	}
}

// unsettled is the error of a settling step that failed: the copy's stop (abandon) if the
// settling context ended with it, else err, settled again by the caller.
func (k *eosCommitter) unsettled(p *txnPart, sctx context.Context, cause, err error) error {
	if sctx.Err() != nil {
		return k.abandon(p, &unsettledCommit{err: errors.Join(cause, err)})
	}
	return err
}

// drop takes the records up to upstream offset through out of p's transaction (another
// instance, fenced since, committed them) and returns their bytes.
func (p *txnPart) drop(through int64) int64 {
	n, bytes := 0, int64(0)
	for i, r := range p.recs {
		if p.ups[i] <= through {
			bytes += recordSize(r)
			continue
		}
		p.recs[n], p.ups[n] = r, p.ups[i]
		n++
	}
	clear(p.recs[n:])
	p.recs, p.ups = p.recs[:n], p.ups[:n]
	p.bytes -= bytes
	return bytes
}

// rewrite writes the records of p's aborted transaction again in a new transaction, with
// position, and commits it.
func (p *txnPart) rewrite(ctx, wait context.Context, remote string, position *kgo.Record) error {
	if err := p.prod.BeginTransaction(); err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	p.open = true
	for i, r := range p.recs {
		prepareCopy(r, remote)
		p.prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				p.setErr(fmt.Errorf("writing offset %d to %q: %w", p.ups[i], remote, err))
			}
		})
	}
	return p.tryCommit(ctx, wait, position)
}

// errGaveUp: settle gave the partition up (abandon); nothing more to do for it.
var errGaveUp = errors.New("exactly-once partition given up")

// abandon ends p's retries: the copy fails with err and the partition's open records are
// dropped (the next run copies them from the stored position). It returns errGaveUp.
func (k *eosCommitter) abandon(p *txnPart, err error) error {
	k.c.fail(fmt.Errorf("exactly-once copy of %s: %w", p.st.w.tp, err))
	k.giveUp(p, "not settled: "+err.Error())
	return errGaveUp
}

// giveUp drops p's transaction and takes the partition off the copy (fenced, refused, or
// abandoned), saying why in the ledger (the summary's GivenUp): it copies nothing more and its
// records left are its lag. Its producer is closed by the cycle's release or the finish.
func (k *eosCommitter) giveUp(p *txnPart, why string) {
	p.gone = true
	k.c.txnBytes.Add(-p.bytes)
	p.reset()
	p.st.mu.Lock()
	p.st.gaveUp = why
	p.st.mu.Unlock()
	k.done(p)
	k.mu.Lock()
	k.ending = append(k.ending, p)
	k.mu.Unlock()
	k.wake()
}

// wake asks the goroutine for a release cycle without waiting for it.
func (k *eosCommitter) wake() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// committed does what follows p's transaction committed with position pos: the ledger
// confirms its records, the position is known durable, the records' offset syncs are fed and
// the copy's counts and latency move.
func (k *eosCommitter) committed(ctx context.Context, p *txnPart, pos int64) {
	c, st, tp := k.c, p.st, p.st.w.tp
	n, bytes := int64(len(p.recs)), p.bytes
	st.confirmBatch(pos, int32(n), bytes)
	p.written = pos
	c.e.positions.known.advance(tp, pos+1)
	for i, r := range p.recs {
		c.syncs.recordAt(ctx, st.sync, p.ups[i], r.Offset)
	}
	if n > 0 {
		c.records.Add(n)
		c.bytes.Add(bytes)
		c.firstAckNS.CompareAndSwap(0, time.Now().UnixNano())
		if m := c.e.opts.Metrics; m != nil {
			// Record age is not sampled in exactly-once mode: a record is only seen as
			// copied here, after its commit, where age and latency are the same figure.
			m.ReplicationLatency(ctx, tp.Topic, tp.Partition, time.Since(p.recs[0].Timestamp))
		}
	}
	c.txnBytes.Add(-bytes)
	if p.rt != nil {
		p.rt.reset() // progress: a later fault gets a whole budget
	}
	p.reset()
}

// write produces in.recs, one partition's run of fetched records, into the partition's open
// transaction (begun by the first record), each once there is room under the in-flight
// bound; an acknowledgement frees its room, and the records count as copied when their
// transaction commits. Control records only move the position the next commit stores;
// records at or below what the partition already handed in (a consumer moved back by a
// settled commit) are skipped. A run that reaches the partition's end (in.ended) hands the
// partition to a release cycle, which commits it and admits the next.
func (k *eosCommitter) write(ctx context.Context, st *partLedger, in sinkInput) (int64, error) {
	c, n := k.c, int64(0)
	k.mu.Lock()
	p := k.parts[st.w.tp]
	k.mu.Unlock()
	if p == nil || p.gone || p.ending {
		recycle(in.recs)
		return 0, nil
	}
	for i, r := range in.recs {
		if r.Offset <= p.handed {
			r.Recycle()
			continue
		}
		if r.Attrs.IsControl() {
			p.last, p.handed = r.Offset, r.Offset
			r.Recycle()
			continue
		}
		size := recordSize(r)
		if l := c.inflight.load(); l+size > c.bound() && l > 0 && !c.inflight.wait(ctx, size, c.bound) {
			recycle(in.recs[i:])
			return n, errSinkStopped
		}
		if !p.open {
			if err := p.prod.BeginTransaction(); err != nil {
				err = fmt.Errorf("beginning transaction for %s: %w", st.w.tp, err)
				c.fail(err)
				recycle(in.recs[i:])
				return n, err
			}
			p.open = true
		}
		c.inflight.add(size)
		c.txnBytes.Add(size)
		p.recs, p.ups, p.bytes, p.last, p.handed = append(p.recs, r), append(p.ups, r.Offset), p.bytes+size, r.Offset, r.Offset
		up := r.Offset
		prepareCopy(r, st.w.remote)
		p.prod.Produce(st.ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				p.setErr(fmt.Errorf("writing %s offset %d to %q: %w", st.w.tp, up, st.w.remote, err))
			} else if !c.txnAcked.Load() {
				c.txnAcked.Store(true) // before the release below: it lifts the start bound
			}
			c.inflight.release(size)
		})
		n++
	}
	c.policy.transaction(p.bytes) // the fetch loop's, as write is
	if in.ended {
		k.mu.Lock()
		p.ending = true
		k.ending = append(k.ending, p)
		k.mu.Unlock()
		k.wake()
	}
	return n, nil
}

// flush: a transaction's records are awaited by the commit that ends it.
func (*eosCommitter) flush(context.Context) error { return nil }
