package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
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

// maxForwardPartitions bounds the partitions of a burst that forwards batches: every
// partition has a fetch and a produce request of its own per batch, where the record path's
// clients put many partitions in one request.
const maxForwardPartitions = 64

// forwardRetries bounds the attempts at one fetch or produce that meets a retriable error
// (a leader moving, a broker restarting, a new partition not yet served), with
// forwardBackoff doubling from its first value up to its last between them: some 10 s in all.
// Then the partition goes on record by record, which waits out longer outages.
const forwardRetries = 16

var forwardBackoff = [2]time.Duration{10 * time.Millisecond, time.Second}

// forwarding reports whether a burst over partitions forwards batches where it can.
func (e *Engine) forwarding(bo BurstOptions, reuse bool, partitions int) bool {
	return !e.opts.DecodeRecords && !reuse && bo.Group == "" && !e.opts.ExactlyOnce && !e.opts.ReadCommitted &&
		bo.MaxRecords == 0 && !e.opts.TargetProfile.EventHubs && partitions > 0 && partitions <= maxForwardPartitions
}

// forwarder is the batch forwarding of one copier.
type forwarder struct {
	c          *copier
	producerID int64
	epoch      int16
	codec      int8  // the target producer's compression codec
	maxBatch   int   // the target producer's largest batch
	timeoutMS  int32 // produce request timeout
	fetchMax   int32 // bytes fetched per partition and request
}

// fwdPartition is one partition being forwarded. next is the fetch side's, seq and the
// handover reason the produce side's (read after both ended).
type fwdPartition struct {
	st                *partState
	topicID, remoteID [16]byte
	srcLeader         int32
	dstLeader         int32
	next              int64
	seq               int32
	handover          string
}

// fwdItem is a fetched batch on its way to the produce side: a data batch to produce, or a
// control batch (transaction marker) that only moves the position.
type fwdItem struct {
	batch       recordbatch.Batch
	base, last  int64
	control     bool
	payloadSize int64 // what the record path counts as the records' bytes
}

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
	var states []*partState
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
	var wg sync.WaitGroup
	for _, p := range parts {
		wg.Go(func() { f.run(stopCtx, p) })
	}
	ended := make(chan struct{})
	go func() {
		wg.Wait()
		close(ended)
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	lastFlush, flushedBytes, lastProgress := time.Now(), int64(0), time.Now()
	for running := true; running; {
		select {
		case <-ended:
			running = false
		case <-tick.C:
		}
		if acked := c.bytes.Load(); running && (time.Since(lastFlush) >= positionFlushInterval || acked-flushedBytes >= positionFlushBytes) {
			lastFlush, flushedBytes = time.Now(), acked
			c.writePositions(context.WithoutCancel(ctx))
			if err := c.syncs.send(context.WithoutCancel(ctx), false); err != nil {
				c.fail(err)
				cancel()
			}
		}
		if c.bo.Progress != nil && time.Since(lastProgress) >= time.Second {
			lastProgress = time.Now()
			c.bo.Progress(c.progress(start))
		}
	}
	handed := 0
	for _, p := range parts {
		st := p.st
		st.mu.Lock()
		if pos := st.position(); pos >= 0 {
			st.w.start = max(st.w.start, pos+1)
		}
		finished := st.w.start >= st.w.end
		st.mu.Unlock()
		if finished {
			c.mu.Lock()
			if !st.done {
				st.done = true
				c.active--
			}
			c.mu.Unlock()
		} else if p.handover != "" {
			handed++
			e.log.Info("partition goes on record by record", "partition", st.w.tp.String(), "offset", st.w.start, "reason", p.handover)
		}
	}
	e.log.Debug("batches forwarded", "partitions", len(parts), "handed_over", handed, "elapsed", time.Since(start).String())
	return c.endReason(ctx, ReasonDone, timeUp.Load())
}

// newForwarder gets a producer ID on the target (unless the target producer is not
// idempotent), reads the target producer's codec and batch bound, and looks up the leaders
// and topic IDs of states' partitions on both clusters.
func (c *copier) newForwarder(ctx context.Context, states []*partState) (*forwarder, []*fwdPartition, error) {
	e := c.e
	f := &forwarder{c: c, producerID: -1, epoch: -1, timeoutMS: 30000}
	codec, err := producerCodec(c.prod)
	if err != nil {
		return nil, nil, err
	}
	f.codec = codec
	f.maxBatch = 1 << 20
	if n, ok := c.prod.OptValue(kgo.ProducerBatchMaxBytes).(int32); ok && n > 0 {
		f.maxBatch = int(n)
	}
	if d, ok := c.prod.OptValue(kgo.ProduceRequestTimeout).(time.Duration); ok && d > 0 {
		f.timeoutMS = int32(min(d.Milliseconds(), math.MaxInt32))
	}
	f.fetchMax = int32(min(max(c.budget/int64(2*len(states)), 64<<10), 1<<20))
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
	smeta, err := e.srcAdm.Metadata(ctx, topics...)
	if err != nil {
		return nil, nil, fmt.Errorf("describing source topics: %w", err)
	}
	tmeta, err := e.tgtAdm.Metadata(ctx, remotes...)
	if err != nil {
		return nil, nil, fmt.Errorf("describing remote topics: %w", err)
	}
	parts := make([]*fwdPartition, 0, len(states))
	for _, st := range states {
		sd, dd := smeta.Topics[st.w.tp.Topic], tmeta.Topics[st.w.remote]
		if sd.Err != nil || dd.Err != nil {
			return nil, nil, fmt.Errorf("describing %s or %q: %w", st.w.tp, st.w.remote, errors.Join(sd.Err, dd.Err))
		}
		sp, ok := sd.Partitions[st.w.tp.Partition]
		dp, ok2 := dd.Partitions[st.w.tp.Partition]
		if !ok || !ok2 {
			return nil, nil, fmt.Errorf("partition %d of %s or %q not in metadata", st.w.tp.Partition, st.w.tp.Topic, st.w.remote)
		}
		parts = append(parts, &fwdPartition{st: st, topicID: sd.ID, remoteID: dd.ID, srcLeader: sp.Leader, dstLeader: dp.Leader, next: st.w.start})
	}
	return f, parts, nil
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
	items := make(chan fwdItem, 4)
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
func (f *forwarder) fetch(ctx context.Context, p *fwdPartition, items chan<- fwdItem) string {
	c, st := f.c, p.st
	empty := 0
	for p.next < st.w.end {
		if !c.waitSpace(ctx, int64(f.fetchMax)) {
			return ""
		}
		recs, err := f.fetchOnce(ctx, p)
		if err != nil {
			if ctx.Err() != nil {
				return ""
			}
			return fmt.Sprintf("fetching at offset %d: %v", p.next, err)
		}
		got := false
		for {
			b, rest, ok := recordbatch.Next(recs)
			if !ok {
				break
			}
			recs = rest
			it, why := f.item(p, b)
			if why != "" {
				return why
			}
			if it.batch == nil {
				continue // before next: the fetch started inside it, which item checked
			}
			got = true
			c.inflight.Add(int64(len(it.batch)))
			select {
			case items <- it:
			case <-ctx.Done():
				c.release(int64(len(it.batch)))
				return ""
			}
			p.next = it.last + 1
			if p.next >= st.w.end {
				return ""
			}
		}
		if got {
			empty = 0
		} else if empty++; empty >= 3 {
			// Nothing fetchable before the end (empty batches left by compaction, say): the
			// record path has the rules for giving up on such a tail.
			return fmt.Sprintf("no batch fetched at offset %d", p.next)
		}
	}
	return ""
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

// fetchOnce fetches p's records from next, riding out retriable errors.
func (f *forwarder) fetchOnce(ctx context.Context, p *fwdPartition) ([]byte, error) {
	st := p.st
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 250
	req.MinBytes = 1
	req.MaxBytes = f.fetchMax
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = st.w.tp.Topic, p.topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.PartitionMaxBytes = st.w.tp.Partition, f.fetchMax
	rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
	var out []byte
	err := f.retry(ctx, func() error {
		rp.FetchOffset = p.next
		rt.Partitions = append(rt.Partitions[:0], rp)
		req.Topics = append(req.Topics[:0], rt)
		resp, err := req.RequestWith(ctx, f.c.e.src.Broker(int(p.srcLeader)))
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return fmt.Errorf("the broker answered for %d topics", len(resp.Topics))
		}
		part := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
			return err
		}
		out = part.RecordBatches
		return nil
	}, func(ctx context.Context) {
		if l, ok := f.leader(ctx, f.c.e.srcAdm.Metadata, st.w.tp.Topic, st.w.tp.Partition); ok {
			p.srcLeader = l
		}
	})
	return out, err
}

// produceAll produces p's fetched batches in order, one at a time, until items closes. After
// a batch it could not write it only releases what the fetch side still hands it.
func (f *forwarder) produceAll(stop context.Context, p *fwdPartition, items <-chan fwdItem, cancelFetch context.CancelFunc) {
	c, st := f.c, p.st
	failed := false
	for it := range items {
		size := int64(len(it.batch))
		if failed || stop.Err() != nil {
			c.release(size)
			continue
		}
		if it.control {
			st.mu.Lock()
			st.lastSeen = it.last
			st.mu.Unlock()
			c.release(size)
			continue
		}
		n := it.batch.Count()
		seq := int32(-1)
		if f.producerID >= 0 {
			seq = p.seq
		}
		it.batch.Rewrite(f.producerID, f.epoch, seq)
		down, err := f.produce(st.ctx, p, it.batch)
		c.release(size)
		if err != nil {
			failed = true
			p.handover = fmt.Sprintf("writing the batch at offset %d: %v", it.base, err)
			cancelFetch()
			continue
		}
		if p.seq += n; p.seq < 0 {
			p.seq -= math.MinInt32 // sequences wrap to 0 after MaxInt32, as Kafka's producers do
		}
		st.mu.Lock()
		st.lastAcked = it.last
		st.records += int64(n)
		st.bytes += it.payloadSize
		st.mu.Unlock()
		if c.firstAckNS.Load() == 0 {
			c.firstAckNS.CompareAndSwap(0, time.Now().UnixNano())
		}
		c.records.Add(int64(n))
		c.forwarded.Add(int64(n))
		c.bytes.Add(it.payloadSize)
		for i := range int64(n) {
			c.syncs.recordAt(st.ctx, st.sync, it.base+i, down+i)
		}
	}
}

// produce writes one rewritten batch to p's remote partition and returns the offset the
// target gave its first record. Retriable errors are retried with the same batch (the same
// sequence: a batch the target already has is answered with its first offset, not written
// twice).
func (f *forwarder) produce(ctx context.Context, p *fwdPartition, b recordbatch.Batch) (int64, error) {
	st := p.st
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = f.timeoutMS
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = st.w.remote, p.remoteID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = st.w.tp.Partition, b
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	var base int64
	err := f.retry(ctx, func() error {
		resp, err := req.RequestWith(ctx, f.c.e.tgt.Broker(int(p.dstLeader)))
		if err != nil {
			return err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return fmt.Errorf("the broker answered for %d topics", len(resp.Topics))
		}
		part := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
			return err
		}
		base = part.BaseOffset
		return nil
	}, func(ctx context.Context) {
		if l, ok := f.leader(ctx, f.c.e.tgtAdm.Metadata, st.w.remote, st.w.tp.Partition); ok {
			p.dstLeader = l
		}
	})
	return base, err
}

// retry runs do until it succeeds, fails with an error that is not retriable, ctx ends or
// forwardRetries attempts failed; before each retry it calls refresh (a leader may have moved).
func (f *forwarder) retry(ctx context.Context, do func() error, refresh func(context.Context)) error {
	backoff := forwardBackoff[0]
	for attempt := 1; ; attempt++ {
		err := do()
		if err == nil || ctx.Err() != nil || attempt == forwardRetries || !retriable(err) {
			return err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return err
		}
		backoff = min(2*backoff, forwardBackoff[1])
		refresh(ctx)
	}
}

// retriable reports whether a forwarder request that failed with err may be sent again: a
// retriable Kafka error, or the connection's (a broker restarting).
func retriable(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// leader looks up the leader of topic's partition with meta (a kadm Metadata method).
func (f *forwarder) leader(ctx context.Context, meta func(context.Context, ...string) (kadm.Metadata, error), topic string, partition int32) (int32, bool) {
	md, err := meta(ctx, topic)
	if err != nil {
		return 0, false
	}
	pd, ok := md.Topics[topic].Partitions[partition]
	if !ok || pd.Leader < 0 {
		return 0, false
	}
	return pd.Leader, true
}

// waitSpace waits until need more bytes fit in the in-flight budget (or nothing is in
// flight). It returns false if ctx ended first.
func (c *copier) waitSpace(ctx context.Context, need int64) bool {
	for c.inflight.Load()+need > c.budget && c.inflight.Load() > 0 {
		// Several partitions wait on the one signal: never sleep on it for long.
		t := time.NewTimer(5 * time.Millisecond)
		select {
		case <-t.C:
		case <-c.space:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
	return true
}

// release returns size bytes to the in-flight budget.
func (c *copier) release(size int64) {
	if c.inflight.Add(-size) < c.budget {
		select {
		case c.space <- struct{}{}:
		default:
		}
	}
}
