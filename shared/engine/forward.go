package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mm2go/mm2go/shared/recordbatch"
)

// Batch forwarding. A plain burst copies the source's record batches as they are where the
// target can take them: each fetched batch is produced to the same partition of the remote
// topic with a new header (this burst's producer ID, epoch and sequence, CRC recomputed),
// without decoding a record. Keys, values, headers, timestamps and their type are the
// batch's own bytes, so the remote records are what a record-by-record copy writes, and the
// compressed bytes are not decompressed and compressed again. Positions and offset syncs
// come from the batch's offsets (record i of a batch at upstream base+i is at downstream
// base'+i), through the same rules as the record path.
//
// A batch is forwarded only if it is exactly what the record path would write: magic v2, a
// record for every offset it spans (no compaction gap), CreateTime timestamps, no delete
// horizon, inside the burst's offsets, compressed with the target producer's codec and not
// larger than its batches. The first batch of a partition that is not, and any error the
// forwarder does not ride out, hands the partition to the record path from the first offset
// not acknowledged: the burst then copies it record by record, as it did before, with its
// own producer ID (so no sequence of the forwarder's is reused).
//
// Not forwarded at all: exactly-once runs (transactions), burst groups, copies on the
// engine's shared producers (serve, CopyPartition), read_committed, record budgets,
// Event Hubs targets, bursts over maxForwardPartitions, and Options.DecodeRecords.

// maxForwardPartitions bounds the partitions of a burst that forwards batches. The forwarder
// runs a goroutine per partition, and at 1,000 partitions the collector's scans of their
// stacks alone took a fifth of its CPU: 7.6-8.5 CPU s/GB against the record path's 4.5-4.9
// (docs/performance.md, session 12).
const maxForwardPartitions = 64

// maxRequestBytes bounds the batches one produce request carries and the bytes one fetch
// request asks for (a single batch may be larger).
const maxRequestBytes = 512 << 10

// forwardBudgetFactor scales the automatic in-flight budget (Options.MaxBufferedBytes 0)
// while batches are forwarded. What the forwarder holds is the fetch responses themselves,
// without the record path's per-record structures and producer buffers, so twice the bytes
// fit the same memory: test/perf, interleaved pairs on a noisy machine, peak RSS 55-58 MiB
// either way; with twice the bytes (larger fetch shares, fewer round trips) the copy was
// shorter in 4 of 5 pairs on 1M x 512 B (median 2.19 s against 2.33 s) and 3 of 5 on
// 200k x 4 KiB, at the same CPU.
const forwardBudgetFactor = 2

// forwarding reports whether a burst over partitions forwards batches where it can.
func (e *core) forwarding(bo BurstOptions, reuse bool, partitions int) bool {
	return !e.opts.DecodeRecords && !reuse && bo.Group == "" && !e.opts.ExactlyOnce && !e.opts.ReadCommitted &&
		bo.MaxRecords == 0 && !e.opts.TargetProfile.EventHubs && partitions > 0 && partitions <= maxForwardPartitions
}

// forwarder is the batch forwarding of one copier.
type forwarder struct {
	c          *copier
	sink       sink // batchSink{f}
	producerID int64
	epoch      int16
	codec      int8  // the target producer's compression codec
	maxBatch   int   // the target producer's largest batch
	skipCRC    bool  // the source consumer does not check fetched batches' CRC either
	timeoutMS  int32 // produce request timeout
	fetchMax   int32 // bytes fetched per partition and request
	// budget is the forwarder's in-flight bound (the copier's, times forwardBudgetFactor when
	// automatic); it counts on the copier's inflight. Set once, before the run.
	budget int64

	// Requests of many partitions to one broker go out together (see lanes): fetches on the
	// loop's context, produce requests on the copy's write context.
	fetches  lanes
	produces lanes

	// spare holds the memory of joined batches the target acknowledged, for the next joins:
	// a fresh large buffer costs the runtime its zeroing on top of the copy (a tenth of the
	// forwarder's CPU on a topic written in 16 KiB batches).
	spare chan []byte
	// gate lets one fetching partition at a time wait for the in-flight budget (reserve).
	gate chan struct{}
	// served holds a partition's first batch, and every retry, until its leader serves it.
	served *servedWatch
	// bytesDue wakes forwardLoop (one slot) when the bytes acknowledged reach dueAt, the commit
	// policy's byte mark.
	bytesDue chan struct{}
	dueAt    atomic.Int64
}

// spareBuffers is how many joined batches' memory the forwarder keeps for reuse; the
// in-flight budget bounds how many are in use at once.
const spareBuffers = 16

// forwardLoop forwards the batches of every active partition that it can, and returns the
// exit reason. Partitions it finished are done; the others have their work's start moved to
// the first offset not copied, for the record path to copy (or the next burst, if the loop
// was asked to stop).
func (c *copier) forwardLoop(ctx context.Context, start time.Time) string {
	e := c.e
	if c.loopStart.IsZero() {
		c.loopStart = time.Now()
	}
	stopCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var timeUp atomic.Bool
	if c.bo.MaxDuration > 0 {
		t := time.AfterFunc(c.bo.MaxDuration-time.Since(c.loopStart), func() {
			timeUp.Store(true)
			cancel()
		})
		defer t.Stop()
	}
	c.mu.Lock()
	var states []*partLedger
	for _, st := range c.states {
		if !st.done {
			states = append(states, st)
		}
	}
	c.mu.Unlock()
	f, parts, err := c.newForwarder(stopCtx, states)
	if err != nil {
		e.log.Info("batches not forwarded; copying record by record", "err", err)
		return ReasonDone
	}
	f.fetches.start(stopCtx, f.sendFetch, func(call *laneCall) int { return int(call.p.fetchMax) }, maxRequestBytes)
	f.produces.start(c.writeCtx, f.sendProduce, func(call *laneCall) int { return len(call.batch) }, maxRequestBytes)
	leaders := make(map[servedKey]int32, len(parts))
	for _, p := range parts {
		leaders[p.remoteKey()] = p.dstLeader
	}
	f.served.watch(leaders) // checked while the first fetches run
	go f.served.run(stopCtx)
	var wg sync.WaitGroup
	for _, p := range parts {
		wg.Go(func() { f.run(stopCtx, p) })
	}
	ended := make(chan struct{})
	go func() {
		wg.Wait()
		close(ended)
	}()
	// The loop waits for events, never polls: its partitions' end, the commit policy's interval
	// (due) or bytes (f.bytesDue, from acked), the copy's first failure, the offsets topic a
	// first burst creates behind the copy failing, and the progress report's second.
	due := time.NewTimer(positionFlushInterval)
	defer due.Stop()
	var progress <-chan time.Time
	if c.bo.Progress != nil {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		progress = t.C
	}
	failed, offsetsDone := c.failed, c.offsets.done
	for running := true; running; {
		c.forwardWakes.Add(1)
		select {
		case <-ended:
			running = false
		case <-due.C:
		case <-f.bytesDue:
		case <-failed:
			failed = nil
			cancel() // a position or offset sync the committer could not write: stop forwarding
		case <-offsetsDone:
			offsetsDone = nil
			if err := c.offsets.failed(); err != nil {
				// Copying on without a place for positions would only make duplicates.
				c.fail(fmt.Errorf("positions cannot be stored: %w", err))
				cancel()
			}
		case <-progress:
			c.bo.Progress(c.progress(start))
		}
		if running && c.policy.due(c.bytes.Load()) {
			c.commits.request(commitTick) // never waits: the committer's goroutine runs the cycle
		}
		f.dueAt.Store(c.policy.acked + positionFlushBytes)
		if !due.Stop() {
			select { // drained if it fired and was not received
			case <-due.C:
			default:
			}
		}
		due.Reset(max(time.Until(c.policy.last.Add(positionFlushInterval)), time.Millisecond))
	}
	handed := 0
	for _, p := range parts {
		st := p.st
		next, finished := st.handOver() // the record path starts at next
		if finished {
			c.mu.Lock()
			if !st.done {
				st.done = true
				c.active--
			}
			c.mu.Unlock()
		} else if p.handover != "" {
			handed++
			e.log.Info("partition goes on record by record", "partition", st.w.tp.String(), "offset", next, "reason", p.handover)
		}
	}
	e.log.Debug("batches forwarded", "partitions", len(parts), "handed_over", handed, "elapsed", time.Since(start).String())
	return c.endReason(ctx, ReasonDone, timeUp.Load())
}

// newForwarder gets a producer ID on the target (unless the target producer is not
// idempotent), reads the target producer's codec and batch bound, and looks up the leaders
// and topic IDs of states' partitions on both clusters.
func (c *copier) newForwarder(ctx context.Context, states []*partLedger) (*forwarder, []*fwdPartition, error) {
	e := c.e
	f := &forwarder{c: c, producerID: -1, epoch: -1, timeoutMS: 30000, spare: make(chan []byte, spareBuffers), gate: make(chan struct{}, 1),
		bytesDue: make(chan struct{}, 1)}
	f.dueAt.Store(c.policy.acked + positionFlushBytes)
	f.sink = batchSink{f}
	f.served = newServedWatch(e)
	codec, err := producerCodec(c.prod)
	if err != nil {
		return nil, nil, err
	}
	f.codec = codec
	f.skipCRC, _ = e.src.OptValue(kgo.DisableFetchCRCValidation).(bool)
	f.maxBatch = 1 << 20
	if n, ok := c.prod.OptValue(kgo.ProducerBatchMaxBytes).(int32); ok && n > 0 {
		f.maxBatch = int(n)
	}
	if d, ok := c.prod.OptValue(kgo.ProduceRequestTimeout).(time.Duration); ok && d > 0 {
		f.timeoutMS = int32(min(d.Milliseconds(), math.MaxInt32))
	}
	f.budget = c.budget
	if e.opts.MaxBufferedBytes == 0 {
		f.budget *= forwardBudgetFactor
	}
	f.fetchMax = int32(min(max(f.budget/int64(2*len(states)), 64<<10), 1<<20))
	if idem, _ := c.prod.OptValue(kgo.DisableIdempotentWrite).(bool); !idem {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.ProducerID, req.ProducerEpoch, req.TransactionTimeoutMillis = -1, -1, 60000
		resp, err := req.RequestWith(ctx, c.prod)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("getting a producer ID from the target: %w", err)
		}
		f.producerID, f.epoch = resp.ProducerID, resp.ProducerEpoch
	}
	var topics, remotes []string
	seen := map[string]bool{}
	for _, st := range states {
		if !seen[st.w.tp.Topic] {
			seen[st.w.tp.Topic] = true
			topics, remotes = append(topics, st.w.tp.Topic), append(remotes, st.w.remote)
		}
	}
	// A remote topic the burst has just created may be missing from the metadata of a broker
	// that has not caught up with it yet (UNKNOWN_TOPIC_OR_PARTITION for some milliseconds,
	// seconds on a loaded machine): asked again as a new partition's serving is waited for,
	// before its partitions go on record by record.
	var smeta, tmeta kadm.Metadata
	err = servingBackoff.retry(ctx, func() error {
		var err error
		if smeta, err = e.srcAdm.Metadata(ctx, topics...); err != nil {
			return fmt.Errorf("describing source topics: %w", err)
		}
		if tmeta, err = e.tgtAdm.Metadata(ctx, remotes...); err != nil {
			return fmt.Errorf("describing remote topics: %w", err)
		}
		return missingPartition(states, smeta, tmeta)
	}, nil, nil)
	if err != nil && (smeta.Topics == nil || tmeta.Topics == nil) {
		return nil, nil, err
	}
	parts := make([]*fwdPartition, 0, len(states))
	for _, st := range states {
		sd, dd := smeta.Topics[st.w.tp.Topic], tmeta.Topics[st.w.remote]
		sp, ok := sd.Partitions[st.w.tp.Partition]
		dp, ok2 := dd.Partitions[st.w.tp.Partition]
		if sd.Err != nil || dd.Err != nil || !ok || !ok2 {
			// Metadata that does not know the partition yet: the record path's clients wait
			// for it.
			e.log.Info("partition goes on record by record", "partition", st.w.tp.String(), "offset", st.w.start,
				"reason", fmt.Sprintf("partition %d of %s or %q not in metadata (%v)", st.w.tp.Partition, st.w.tp.Topic, st.w.remote, errors.Join(sd.Err, dd.Err)))
			continue
		}
		parts = append(parts, &fwdPartition{st: st, topicID: sd.ID, remoteID: dd.ID, srcLeader: sp.Leader, dstLeader: dp.Leader, next: st.w.start, fetchMax: f.fetchMax})
	}
	return f, parts, nil
}

// missingPartition returns a retriable error naming the first partition of states (or its
// remote partition) that smeta (tmeta) does not hold, nil if both hold all.
func missingPartition(states []*partLedger, smeta, tmeta kadm.Metadata) error {
	for _, st := range states {
		sd, dd := smeta.Topics[st.w.tp.Topic], tmeta.Topics[st.w.remote]
		if err := errors.Join(sd.Err, dd.Err); err != nil {
			return err
		}
		if _, ok := sd.Partitions[st.w.tp.Partition]; !ok {
			return fmt.Errorf("partition %d of %s: %w", st.w.tp.Partition, st.w.tp.Topic, kerr.UnknownTopicOrPartition)
		}
		if _, ok := dd.Partitions[st.w.tp.Partition]; !ok {
			return fmt.Errorf("partition %d of %s: %w", st.w.tp.Partition, st.w.remote, kerr.UnknownTopicOrPartition)
		}
	}
	return nil
}

// producerCodec returns the compression codec cl's producer writes batches with.
func producerCodec(cl *kgo.Client) (int8, error) {
	codecs, _ := cl.OptValue(kgo.ProducerBatchCompression).([]kgo.CompressionCodec)
	comp, err := kgo.DefaultCompressor(codecs...)
	if err != nil || comp == nil {
		return 0, err
	}
	_, codec := comp.Compress(new(bytes.Buffer), []byte("codec"))
	if codec < 0 {
		return 0, errors.New("the target producer's compression codec is unknown")
	}
	return int8(codec), nil
}

// run forwards one partition: a fetch side and a produce side, a few batches between them.
func (f *forwarder) run(ctx context.Context, p *fwdPartition) {
	items := make(chan fwdItem, 1)
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var why string
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(items)
		why = f.fetch(pctx, p, items)
	})
	f.produceAll(ctx, p, items, cancel)
	wg.Wait()
	if p.handover == "" {
		p.handover = why
	}
}

// fetch reads p's batches from next to the work's end into items. It returns why it stopped
// short of the end ("" if it did not, or was asked to stop).
//
// Consecutive uncompressed batches of a fetch are joined (recordbatch.Builder) up to the
// target producer's batch size: a produce request holds one batch per partition, so a topic
// written in small batches would otherwise be copied one small batch per round trip.
func (f *forwarder) fetch(ctx context.Context, p *fwdPartition, items chan<- fwdItem) string {
	c, st := f.c, p.st
	empty := 0
	var run []fwdItem // forwardable uncompressed batches that follow each other, to join
	runBytes := 0
	// The in-flight budget counts what a fetch brought (its memory stays referenced while any
	// of its batches waits) from the fetch until each batch is acknowledged; held is what this
	// fetch holds that no queued item took over yet.
	var held int64
	defer func() { f.release(held) }()
	queue := func(it fwdItem) bool {
		it.held = int64(len(it.batch))
		held -= it.held
		select {
		case items <- it:
			p.next = it.last + 1
			return true
		case <-ctx.Done():
			f.release(it.held)
			return false
		}
	}
	flush := func() bool {
		if len(run) == 0 {
			return true
		}
		it := f.joinItems(run, runBytes)
		clear(run) // the batches pin their fetch's memory
		run, runBytes = run[:0], 0
		return queue(it)
	}
	for p.next < st.w.end {
		// Reserved before the fetch (what it may bring), then what it brought.
		if !f.reserve(ctx, int64(p.fetchMax)) {
			return ""
		}
		held = int64(p.fetchMax)
		recs, err := f.fetchOnce(ctx, p)
		if err != nil {
			if ctx.Err() != nil {
				return ""
			}
			return fmt.Sprintf("fetching at offset %d: %v", p.next, err)
		}
		c.inflight.add(int64(len(recs)) - held)
		held = int64(len(recs))
		got := false
		for {
			b, rest, ok := recordbatch.Next(recs)
			if n := recordbatch.Size(recs); n > f.maxBatch {
				return fmt.Sprintf("the batch at offset %d has %d bytes, over the target producer's %d", p.next, n, f.maxBatch)
			} else if n > int(p.fetchMax) {
				// A batch larger than the partition's share: ask for whole ones from now on,
				// so that the request's byte budget counts them.
				p.fetchMax = int32(n)
				got = got || !ok // only part of it came: not a stall
			}
			if !ok {
				break
			}
			recs = rest
			it, why := f.item(p, b)
			if why == "" && it.batch == nil {
				continue // wholly before next: the fetch started inside an earlier batch
			}
			joinable := why == "" && !it.control && it.batch.Codec() == 0 && len(it.batch) < joinBelow
			if len(run) > 0 && (!joinable || it.base != run[len(run)-1].last+1 || runBytes+it.batch.RecordsSize() > f.maxBatch-recordbatch.HeaderSize) {
				if !flush() {
					return ""
				}
			}
			if why != "" {
				return why
			}
			got = true
			if joinable {
				run = append(run, it)
				runBytes += it.batch.RecordsSize()
				p.next = it.last + 1 // item checks the next batch against it
				continue
			}
			if !queue(it) {
				return ""
			}
		}
		if !flush() {
			return ""
		}
		f.release(held) // a batch cut by the fetch's size, batches skipped
		held = 0
		if p.next >= st.w.end {
			break
		}
		if got {
			empty = 0
		} else if empty++; empty >= maxEmptyFetches {
			// Nothing fetchable before the end (empty batches left by compaction, say): the
			// record path has the rules for giving up on such a tail.
			return fmt.Sprintf("no batch fetched at offset %d", p.next)
		}
	}
	return ""
}

// joinBelow is the size under which uncompressed batches are joined: larger ones already
// fill a good part of a request, and joining costs a copy of their bytes.
const joinBelow = 64 << 10

// joinItems returns the item of run's batches: the batch itself if there is one, else the
// batches joined into one in memory of the forwarder's (size: their records' bytes).
func (f *forwarder) joinItems(run []fwdItem, size int) fwdItem {
	if len(run) == 1 {
		return run[0]
	}
	var bd recordbatch.Builder
	bd.Reset(f.buffer(recordbatch.HeaderSize + size + size/8)) // rewritten deltas may take more varint bytes
	for _, it := range run {
		bd.Add(it.batch, it.payloadSize) // item checked each, and they follow each other
	}
	return fwdItem{batch: bd.Batch(), base: bd.BaseOffset(), last: bd.LastOffset(), payloadSize: bd.PayloadBytes(), joined: true}
}

// buffer returns empty memory for a joined batch of up to n bytes: a spare one if it is large
// enough, else a new one rounded up to 64 KiB (so that spares fit the joins that follow).
func (f *forwarder) buffer(n int) []byte {
	select {
	case b := <-f.spare:
		if cap(b) >= n {
			return b[:0]
		}
	default:
	}
	return make([]byte, 0, (n+joinBelow-1)/joinBelow*joinBelow)
}

// recycle keeps the memory of an acknowledged joined batch for the next joins. Only batches
// acknowledged at the first try come back: after a failed or abandoned try the client may
// still hold a request that refers to it.
func (f *forwarder) recycle(it fwdItem) {
	if !it.joined {
		return
	}
	select {
	case f.spare <- it.batch:
	default:
	}
}

// item checks batch b, fetched for p: an item to queue, an empty item for a batch wholly
// before p.next, or why the partition goes on record by record from p.next.
func (f *forwarder) item(p *fwdPartition, b recordbatch.Batch) (fwdItem, string) {
	if b.Magic() != 2 {
		return fwdItem{}, fmt.Sprintf("a batch of message format v%d", b.Magic())
	}
	base, last := b.BaseOffset(), b.LastOffset()
	switch {
	case last < p.next:
		return fwdItem{}, ""
	case base < p.next:
		return fwdItem{}, fmt.Sprintf("the copy resumes inside the batch at offsets %d-%d", base, last)
	case last >= p.st.w.end:
		return fwdItem{}, fmt.Sprintf("the batch at offsets %d-%d ends past the burst's end %d", base, last, p.st.w.end)
	}
	if b.Control() {
		return fwdItem{batch: b, base: base, last: last, control: true}, ""
	}
	switch {
	case !f.skipCRC && !b.ValidCRC():
		// The record path's consumer refuses it too, and says so: a batch damaged on the way
		// is never forwarded with a new CRC over the damage.
		return fwdItem{}, fmt.Sprintf("the batch at offsets %d-%d fails its CRC check", base, last)
	case !b.Contiguous():
		return fwdItem{}, fmt.Sprintf("the batch at offsets %d-%d has gaps (compaction)", base, last)
	case b.LogAppendTime():
		return fwdItem{}, fmt.Sprintf("the batch at offset %d has LogAppendTime timestamps", base)
	case b.DeleteHorizon() || b.FirstTimestamp() < 0:
		return fwdItem{}, fmt.Sprintf("the batch at offset %d has records without a timestamp or a delete horizon", base)
	case b.Codec() != f.codec:
		return fwdItem{}, fmt.Sprintf("the batch at offset %d has codec %d, the target producer writes %d", base, b.Codec(), f.codec)
	case len(b) > f.maxBatch:
		return fwdItem{}, fmt.Sprintf("the batch at offset %d has %d bytes, over the target producer's %d", base, len(b), f.maxBatch)
	}
	size := int64(b.RecordsSize())
	if b.Codec() == 0 {
		n, ok := b.PayloadBytes()
		if !ok {
			return fwdItem{}, fmt.Sprintf("the batch at offset %d does not hold its %d records as a producer writes them", base, b.Count())
		}
		size = n
	}
	return fwdItem{batch: b, base: base, last: last, payloadSize: size}, ""
}

// laneCall is one partition's part of a request sent through lanes (a fetch from offset, or
// the produce request of batch); its answer comes on done.
type laneCall struct {
	p      *fwdPartition
	offset int64
	batch  recordbatch.Batch
	done   chan laneAnswer
}

// laneAnswer is a partition's part of a broker's answer: a fetch's batches, or the target's
// first offset of a produced batch.
type laneAnswer struct {
	records []byte
	base    int64
	err     error
}

// ask sends call in broker's next request and waits for its answer.
func (l *lanes) ask(ctx context.Context, broker int32, call *laneCall) (laneAnswer, error) {
	call.done = make(chan laneAnswer, 1)
	if !l.submit(ctx, broker, call) {
		return laneAnswer{}, context.Canceled
	}
	select {
	case a := <-call.done:
		return a, a.err
	case <-ctx.Done():
		return laneAnswer{}, ctx.Err()
	}
}

// laneKey finds a call by a response's partition: by topic ID (requests since Kafka 4's
// versions name topics by ID) or by name.
type laneKey struct {
	id        [16]byte
	name      string
	partition int32
}

// reply hands each call its partition's answer (give, for every partition of the response,
// gets the answer of the call asking for id or name, partition) and err to the calls the
// response left out, or to all of them if err is not nil.
func reply(calls []*laneCall, topic func(*laneCall) ([16]byte, string), err error, each func(give func(id [16]byte, name string, partition int32, a laneAnswer))) {
	answered := make([]bool, len(calls))
	if err == nil {
		at := make(map[laneKey]int, 2*len(calls))
		for i, call := range calls {
			id, name := topic(call)
			at[laneKey{id: id, partition: call.p.st.w.tp.Partition}] = i
			at[laneKey{name: name, partition: call.p.st.w.tp.Partition}] = i
		}
		each(func(id [16]byte, name string, partition int32, a laneAnswer) {
			k := laneKey{id: id, partition: partition}
			if id == ([16]byte{}) {
				k = laneKey{name: name, partition: partition}
			}
			if i, ok := at[k]; ok && !answered[i] {
				answered[i] = true
				calls[i].done <- a
			}
		})
		err = errNoAnswer
	}
	for i, call := range calls {
		if !answered[i] {
			call.done <- laneAnswer{err: err}
		}
	}
}

// maxEmptyFetches bounds the answers in a row that bring a partition nothing before the
// forwarder leaves it to the record path. An answer brings nothing when others of the same
// request used its bytes (a batch larger than its share is returned whole to the first
// partition of an answer, KIP-74), so some are normal; a tail of empty batches left by
// compaction brings nothing for ever, and the record path has the rules for that.
const maxEmptyFetches = 20

// fetchOnce fetches p's records from next, riding out retriable errors.
func (f *forwarder) fetchOnce(ctx context.Context, p *fwdPartition) ([]byte, error) {
	var out []byte
	err := f.retry(ctx, func() error {
		a, err := f.fetches.ask(ctx, p.srcLeader, &laneCall{p: p, offset: p.next})
		out = a.records
		return err
	}, func(ctx context.Context) {
		if l, ok := f.sourceLeader(ctx, p.st.w.tp.Topic, p.st.w.tp.Partition); ok {
			p.srcLeader = l
		}
	})
	return out, err
}

// sendFetch sends calls, all for partitions led by broker, as one fetch request.
func (f *forwarder) sendFetch(ctx context.Context, broker int32, calls []*laneCall) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 250
	req.MinBytes = 1
	req.SessionEpoch = -1
	req.MaxBytes = 0 // the partitions' shares, added below (kmsg's default is MaxInt32)
	byTopic := map[string]int{}
	for _, call := range calls {
		tp := call.p.st.w.tp
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[tp.Topic] = i
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = tp.Topic, call.p.topicID
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = tp.Partition, call.offset, call.p.fetchMax
		req.MaxBytes += call.p.fetchMax
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	resp, err := req.RequestWith(ctx, f.c.e.src.Broker(int(broker)))
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	reply(calls, func(call *laneCall) ([16]byte, string) { return call.p.topicID, call.p.st.w.tp.Topic }, err,
		func(give func([16]byte, string, int32, laneAnswer)) {
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					give(rt.TopicID, rt.Topic, rp.Partition, laneAnswer{records: rp.RecordBatches, err: kerr.ErrorForCode(rp.ErrorCode)})
				}
			}
		})
}

// errNoAnswer is a request's error for a partition its answer left out.
var errNoAnswer = errors.New("the broker's answer left the partition out")

// produceAll produces p's fetched batches in order, one at a time, until items closes. After
// a batch it could not write it only releases what the fetch side still hands it.
func (f *forwarder) produceAll(stop context.Context, p *fwdPartition, items <-chan fwdItem, cancelFetch context.CancelFunc) {
	st := p.st
	// A batch being written when the copy is asked to stop gets the grace period, as the
	// record path's writes do, not the forwarder's whole retry budget.
	wctx, cancelWrite := context.WithCancel(st.ctx)
	defer cancelWrite()
	defer context.AfterFunc(stop, func() {
		t := time.AfterFunc(f.c.bo.Grace, cancelWrite)
		context.AfterFunc(wctx, func() { t.Stop() }) // done before the grace ran out
	})()
	failed := false
	for it := range items {
		size := it.held
		if failed || stop.Err() != nil {
			f.release(size)
			continue
		}
		if it.control {
			st.seen(it.last)
			f.release(size)
			continue
		}
		seq := int32(-1)
		if f.producerID >= 0 {
			seq = p.seq
		}
		it.batch.Rewrite(f.producerID, f.epoch, seq)
		if !p.served {
			// Checked while the first fetch ran, for every partition at once: a new topic's
			// partitions are refused for a while after their leader is named.
			p.served = true
			if l, err := f.served.wait(st.ctx, p.remoteKey(), p.dstLeader, false, servedWait); err == nil {
				p.dstLeader = l
			} else {
				f.c.e.log.Debug("writing to a partition not seen served", "partition", p.st.w.remote, "err", err)
			}
		}
		_, err := f.sink.write(wctx, st, sinkInput{part: p, item: &it})
		f.release(size)
		if err != nil {
			// The target may hold the batch (a write that timed out, a stop): its records
			// count as unconfirmed in the summary.
			f.c.unconfirmed.Add(int64(it.batch.Count()))
			failed = true
			p.handover = fmt.Sprintf("writing the batch at offset %d: %v", it.base, err)
			cancelFetch()
			continue
		}
		if p.tries == 1 {
			f.recycle(it)
		}
	}
}

// acked records that the target wrote the batch of it from downstream offset down: the
// partition's sequence, position and counters, and MM2's offset-sync rules for every record.
func (f *forwarder) acked(p *fwdPartition, it fwdItem, down int64) {
	c, st, n := f.c, p.st, it.batch.Count()
	if p.seq += n; p.seq < 0 {
		p.seq -= math.MinInt32 // sequences wrap to 0 after MaxInt32, as Kafka's producers do
	}
	st.confirmBatch(it.last, n, it.payloadSize)
	if c.firstAckNS.Load() == 0 {
		c.firstAckNS.CompareAndSwap(0, time.Now().UnixNano())
	}
	c.records.Add(int64(n))
	c.forwarded.Add(int64(n))
	if c.bytes.Add(it.payloadSize) >= f.dueAt.Load() {
		select {
		case f.bytesDue <- struct{}{}:
		default:
		}
	}
	for i := range int64(n) {
		c.syncs.recordAt(st.ctx, st.sync, it.base+i, down+i)
	}
}

// produce writes one rewritten batch to p's remote partition and returns the offset the
// target gave its first record and how many tries it took. Retriable errors are retried with
// the same batch (the same sequence: a batch the target already has is answered with its
// first offset, not written twice).
func (f *forwarder) produce(ctx context.Context, p *fwdPartition, b recordbatch.Batch) (base int64, tries int, err error) {
	err = f.retry(ctx, func() error {
		tries++
		a, err := f.produces.ask(ctx, p.dstLeader, &laneCall{p: p, batch: b})
		base = a.base
		return err
	}, func(ctx context.Context) {
		// The next try says what is wrong if the wait did not end well.
		if l, err := f.served.wait(ctx, p.remoteKey(), -1, true, forwardBackoff.max); err == nil {
			p.dstLeader = l
		}
	})
	return base, tries, err
}

// sendProduce sends calls, all for partitions led by broker (one batch per partition), as one
// produce request.
func (f *forwarder) sendProduce(ctx context.Context, broker int32, calls []*laneCall) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = f.timeoutMS
	byTopic := map[string]int{}
	for _, call := range calls {
		w := call.p.st.w
		i, ok := byTopic[w.remote]
		if !ok {
			i = len(req.Topics)
			byTopic[w.remote] = i
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic, rt.TopicID = w.remote, call.p.remoteID
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = w.tp.Partition, call.batch
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	resp, err := req.RequestWith(ctx, f.c.e.tgt.Broker(int(broker)))
	reply(calls, func(call *laneCall) ([16]byte, string) { return call.p.remoteID, call.p.st.w.remote }, err,
		func(give func([16]byte, string, int32, laneAnswer)) {
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					give(rt.TopicID, rt.Topic, rp.Partition, laneAnswer{base: rp.BaseOffset, err: kerr.ErrorForCode(rp.ErrorCode)})
				}
			}
		})
}

// lanes send the calls of many partitions to a broker in as few requests as they can: at most
// laneRequests requests per broker are out at a time, and the calls that queue meanwhile travel
// together in the next one (up to maxBytes of them: franz-go writes a request into a buffer of
// its pool, which a collection empties, and a large one grows there by doubling). A broker
// handles one connection's requests one after another, so more requests out would only wait
// in its queue, each with its own cost on both sides. A partition has one call at a time, so
// a request holds at most one of its.
type lanes struct {
	ctx      context.Context
	send     func(ctx context.Context, broker int32, calls []*laneCall)
	size     func(*laneCall) int
	maxBytes int
	mu       sync.Mutex
	byID     map[int32]chan *laneCall
}

// laneRequests is how many requests a lane has out at a broker at once: one being answered,
// one queued behind it so that the broker does not wait for the next.
const laneRequests = 2

// start readies the lanes: send sends one request, size tells a call's bytes in it; ctx
// bounds their goroutines.
func (l *lanes) start(ctx context.Context, send func(context.Context, int32, []*laneCall), size func(*laneCall) int, maxBytes int) {
	l.ctx, l.send, l.size, l.maxBytes, l.byID = ctx, send, size, maxBytes, map[int32]chan *laneCall{}
}

// submit queues call for broker's next request. It reports false if ctx or the lanes ended
// first.
func (l *lanes) submit(ctx context.Context, broker int32, call *laneCall) bool {
	l.mu.Lock()
	ch := l.byID[broker]
	if ch == nil {
		ch = make(chan *laneCall, 64)
		l.byID[broker] = ch
		go l.run(broker, ch)
	}
	l.mu.Unlock()
	select {
	case ch <- call:
		return true
	case <-ctx.Done():
		return false
	case <-l.ctx.Done():
		return false
	}
}

// run sends the calls queued for broker until the lanes end.
func (l *lanes) run(broker int32, ch chan *laneCall) {
	slots := make(chan struct{}, laneRequests)
	var next *laneCall // a call that did not fit in the request before
	for {
		if next == nil {
			select {
			case next = <-ch:
			case <-l.ctx.Done():
				return
			}
		}
		select {
		case slots <- struct{}{}:
		case <-l.ctx.Done():
			return
		}
		// The partitions answered by one request ask again one after another: let them.
		runtime.Gosched()
		calls, bytes := []*laneCall{next}, l.size(next)
		next = nil
		for more := true; more; {
			select {
			case call := <-ch:
				if n := l.size(call); bytes+n > l.maxBytes {
					next, more = call, false
					break
				}
				calls = append(calls, call)
				bytes += l.size(call)
			default:
				more = false
			}
		}
		go func() {
			defer func() { <-slots }()
			l.send(l.ctx, broker, calls)
		}()
	}
}

// retry runs do under forwardBackoff until it succeeds, fails with an error that is fatal or
// fenced (classify), or ctx ends; before each retry it calls refresh (a leader may have moved). An
// error whose outcome is unknown is retried too: a fetch reads only, and a produce sends the
// same batch with the same sequence, which the broker answers instead of writing it twice.
func (f *forwarder) retry(ctx context.Context, do func() error, refresh func(context.Context)) error {
	return forwardBackoff.retry(ctx, do, func(c errClass) bool { return c == errRetriable || c == errOutcomeUnknown }, refresh)
}

// sourceLeader looks up the leader of the source topic's partition (the target's are the
// served watch's).
func (f *forwarder) sourceLeader(ctx context.Context, topic string, partition int32) (int32, bool) {
	md, err := f.c.e.srcAdm.Metadata(ctx, topic)
	if err != nil {
		return 0, false
	}
	pd, ok := md.Topics[topic].Partitions[partition]
	if !ok || pd.Leader < 0 {
		return 0, false
	}
	return pd.Leader, true
}

// reserve waits until need more bytes fit in the in-flight budget and takes them; false if
// ctx ended first. Partitions wait their turn on the gate, in order, so that only one of
// them watches the budget: a thousand partitions polling it cost more CPU than the copy.
func (f *forwarder) reserve(ctx context.Context, need int64) bool {
	select {
	case f.gate <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	defer func() { <-f.gate }()
	if !f.waitSpace(ctx, need) {
		return false
	}
	f.c.inflight.add(need)
	return true
}

// waitSpace waits until need more bytes fit in the forwarder's in-flight budget (or nothing
// is in flight). It returns false if ctx ended first.
func (f *forwarder) waitSpace(ctx context.Context, need int64) bool {
	return f.c.inflight.wait(ctx, need, func() int64 { return f.budget })
}

// release returns size bytes to the in-flight budget.
func (f *forwarder) release(size int64) { f.c.inflight.release(size) }

// batchSink writes whole source batches through the forwarder's produce lanes, one batch in
// flight per partition; an acknowledged batch is confirmed in the ledger (confirmBatch) and
// its records fed to the offset-sync rules.
type batchSink struct{ f *forwarder }

// write produces in.item's batch to in.part's remote partition, riding out retriable errors
// and those of unknown outcome (forwardBackoff), and returns its records once acknowledged.
func (s batchSink) write(ctx context.Context, st *partLedger, in sinkInput) (int64, error) {
	f, p, it := s.f, in.part, in.item
	down, tries, err := f.produce(ctx, p, it.batch)
	f.c.resent.Add(int64(tries - 1))
	p.tries = tries
	if err != nil {
		return 0, err
	}
	f.acked(p, *it, down)
	return int64(it.batch.Count()), nil
}

// flush: the batch sink's write returns once its batch is answered.
func (batchSink) flush(context.Context) error { return nil }
