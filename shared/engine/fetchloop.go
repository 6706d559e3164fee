package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
)

// dialConsumer connects an at-least-once source consumer over partitions (what it consumes is
// in extra: assigned partitions, which it starts fetching at once, or a group) with fetch
// budgets that follow the data's compression.
func (e *core) dialConsumer(ctx context.Context, pool *fetchPool, partitions int, extra ...kgo.Opt) (*kgo.Client, error) {
	b := e.opts.fetchBudget(partitions)
	sizer := newFetchSizer(b, partitionFetchBudget(b))
	if pool.ratio == nil {
		pool.ratio = sizer.ratio
	}
	return sizer.dial(ctx, e.dial, Source, append([]kgo.Opt{
		e.isolation(),
		kgo.KeepControlRecords(),
		kgo.WithPools(pool),
		kgo.FetchMaxWait(250 * time.Millisecond),
	}, extra...)...)
}

// startOffsets returns where the consumer starts for every work not already done.
func startOffsets(works []*work) map[string]map[int32]kgo.Offset {
	offs := map[string]map[int32]kgo.Offset{}
	for _, w := range works {
		if w.start >= w.end {
			continue
		}
		if offs[w.tp.Topic] == nil {
			offs[w.tp.Topic] = map[int32]kgo.Offset{}
		}
		offs[w.tp.Topic][w.tp.Partition] = kgo.NewOffset().At(w.start)
	}
	return offs
}

// startOffsets is startOffsets of the copier's partitions from where each goes on (next).
func (c *copier) startOffsets() map[string]map[int32]kgo.Offset {
	offs := map[string]map[int32]kgo.Offset{}
	for _, st := range c.states {
		st.mu.Lock()
		next := st.next
		st.mu.Unlock()
		if next >= st.w.end {
			continue
		}
		if offs[st.w.tp.Topic] == nil {
			offs[st.w.tp.Topic] = map[int32]kgo.Offset{}
		}
		offs[st.w.tp.Topic][st.w.tp.Partition] = kgo.NewOffset().At(next)
	}
	return offs
}

// copyLoop is the fetch-and-produce loop. It returns the exit reason.
func (c *copier) copyLoop(ctx context.Context, start time.Time, cons *kgo.Client) string {
	e := c.e
	group := c.bo.Group != ""

	stopCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	reason := ReasonDone
	var timeUp atomic.Bool
	if c.loopStart.IsZero() {
		c.loopStart = time.Now()
	}
	if c.bo.MaxDuration > 0 {
		t := time.AfterFunc(c.bo.MaxDuration-time.Since(c.loopStart), func() {
			timeUp.Store(true)
			cancel()
		})
		defer t.Stop()
	}
	lastProgress := time.Now()
	var stall stallWatch
	if c.gate != nil {
		c.gate.attach(cons)
	}
	for {
		if group {
			cons.AllowRebalance()
		}
		c.mu.Lock()
		finished := c.active == 0 && (!group || c.assigned)
		c.mu.Unlock()
		if finished {
			break
		}
		if c.error() != nil {
			return ReasonFailed
		}
		if err := c.offsets.failed(); err != nil {
			// Copying on without a place for positions would only make duplicates.
			c.fail(fmt.Errorf("positions cannot be stored: %w", err))
			return ReasonFailed
		}
		if err := c.syncs.ready.failed(); err != nil {
			c.fail(fmt.Errorf("offset syncs cannot be stored: %w", err))
			return ReasonFailed
		}
		if stopCtx.Err() != nil {
			break
		}
		pctx, pcancel := context.WithTimeout(stopCtx, positionFlushInterval)
		fs := cons.PollFetches(pctx)
		pcancel()
		if ferr := fetchError(fs); ferr != nil {
			c.fail(ferr)
			return ReasonFailed
		}
		if fs.NumRecords() == 0 && stopCtx.Err() == nil {
			// Partitions whose tail holds nothing fetchable (e.g. empty batches left by
			// compaction) never show their last offset; give up on them after a while, but
			// only while the source answers (a source broker restarting or hung yields
			// nothing either: that is ridden out within the burst's budget), and never while
			// a burst group's assignment is still being planned.
			c.mu.Lock()
			waiting := group && !c.assigned
			c.mu.Unlock()
			waiting = waiting || (c.gate != nil && c.gate.waiting())
			if waiting {
				stall.progress()
			} else if stall.empty(stopCtx, c.sourceAnswers) {
				e.log.Warn("source partitions stopped yielding records before their end offset; ending burst")
				c.mu.Lock()
				c.stalled = true
				c.mu.Unlock()
				return c.endReason(ctx, ReasonDone, false)
			}
		} else {
			stall.progress()
		}
		stop := false
		// Partitions that reached their end in this poll, paused together afterwards:
		// franz-go copies its whole paused set on every pause, so one call per partition
		// cost O(partitions²) (8.7% of a 1,000-partition burst's CPU).
		done := map[string][]int32{}
		fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
			if stop {
				return
			}
			c.mu.Lock()
			st := c.byTP[TP{ftp.Topic, ftp.Partition}]
			c.mu.Unlock()
			if st == nil || st.done {
				recycle(ftp.Records)
				return
			}
			c.observeFetch(st, ftp.Records)
			// The run of records to write: up to the end, within the MaxRecords budget
			// (control records are written as nothing, but a spent budget stops at them too).
			recs := ftp.Records
			cut, data, spent := 0, int64(0), false
			for cut < len(recs) {
				r := recs[cut]
				if r.Offset >= st.w.end {
					break
				}
				if c.bo.MaxRecords > 0 && c.produced+data >= c.bo.MaxRecords {
					spent = true
					break
				}
				if !r.Attrs.IsControl() {
					data++
				}
				cut++
				if r.Offset >= st.w.end-1 {
					break
				}
			}
			ended := (cut > 0 && recs[cut-1].Offset >= st.w.end-1) || (cut < len(recs) && recs[cut].Offset >= st.w.end)
			n, err := c.sink.write(stopCtx, st, sinkInput{recs: recs[:cut], ended: ended})
			c.produced += n
			if err != nil {
				stop = true
				return
			}
			if spent {
				stop = true
				return
			}
			if ended {
				c.markDone(done, st)
				recycle(recs[cut:])
			}
		})
		if len(done) > 0 {
			cons.PauseFetchPartitions(done)
		}
		if stop && c.bo.MaxRecords > 0 && c.produced >= c.bo.MaxRecords {
			reason = ReasonMaxRecords
			break
		}
		if c.policy.due(c.bytes.Load() + c.txnBytes.Load()) {
			// At-least-once never waits (the committer's goroutine runs the cycle); exactly-once
			// waits for the transactions to end (a producer holds one at a time).
			c.commits.request(commitTick)
		}
		if c.bo.Progress != nil && time.Since(lastProgress) >= time.Second {
			lastProgress = time.Now()
			c.bo.Progress(c.progress(start))
		}
	}
	return c.endReason(ctx, reason, timeUp.Load())
}

// endReason is the exit reason of a loop that ended with reason: failed if anything failed, and
// a budget or a stop request if partitions were left.
func (c *copier) endReason(ctx context.Context, reason string, timeUp bool) string {
	if c.error() != nil {
		return ReasonFailed
	}
	c.mu.Lock()
	left := c.active
	c.mu.Unlock()
	if left > 0 && reason == ReasonDone {
		switch {
		case timeUp:
			return ReasonMaxDuration
		case ctx.Err() != nil:
			return ReasonStopped
		}
	}
	return reason
}

// stallWatch decides when a copy gives up on partitions that yield nothing before their end
// offset (a tail that holds nothing fetchable, such as aborted records under read_committed):
// after two rounds of five empty polls in a row, each ending with the source answering a
// ListOffsets request. A source broker restarting or hung yields nothing either; it answers
// nothing until it is back, and the round after it is back brings its records, so it is ridden
// out within the copy's budget.
type stallWatch struct {
	idle     int
	answered bool
}

// progress records a poll that brought records (or a wait that does not count).
func (s *stallWatch) progress() { s.idle, s.answered = 0, false }

// empty records an empty poll and reports whether to give up.
func (s *stallWatch) empty(ctx context.Context, answers func(context.Context) bool) bool {
	if s.idle++; s.idle < 5 {
		return false
	}
	s.idle = 0
	if !answers(ctx) {
		s.answered = false
		return false
	}
	if s.answered {
		return true
	}
	s.answered = true
	return false
}

// sourceAnswers reports whether the source cluster answers a ListOffsets request for the
// copy's topics within a few seconds.
func (c *copier) sourceAnswers(ctx context.Context) bool {
	c.mu.Lock()
	topics := map[string]bool{}
	for _, st := range c.states {
		topics[st.w.tp.Topic] = true
	}
	c.mu.Unlock()
	return sourceAnswers(ctx, c.e.srcAdm, c.e.log, slices.Collect(maps.Keys(topics))...)
}

// sourceAnswers reports whether the source cluster answers a ListOffsets request for topics
// within a few seconds. A copy whose partitions yield nothing asks it before it gives up on
// them: a source broker restarting or hung yields nothing too, and that is waited out.
func sourceAnswers(ctx context.Context, adm *kadm.Client, log *slog.Logger, topics ...string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, _, err := cluster.ListOffsets(ctx, adm, false, topics...)
	if err != nil {
		log.Info("source cluster not answering while partitions have records left; waiting", "err", err)
	}
	return err == nil
}

// fetchError returns the first error of a poll that is not the poll's own deadline or
// cancellation.
func fetchError(fs kgo.Fetches) error {
	var ferr error
	fs.EachError(func(t string, p int32, err error) {
		if ferr == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			ferr = fmt.Errorf("fetching source %s-%d: %w", t, p, err)
		}
	})
	return ferr
}

// recycle returns records that will not be produced to the fetch pool.
func recycle(recs []*kgo.Record) {
	for _, r := range recs {
		r.Recycle()
	}
}

// markDone marks st finished and adds it to done, the partitions the fetch loop pauses after
// this poll.
func (c *copier) markDone(done map[string][]int32, st *partLedger) {
	c.mu.Lock()
	if !st.done {
		st.done = true
		c.active--
	}
	c.mu.Unlock()
	done[st.w.tp.Topic] = append(done[st.w.tp.Topic], st.w.tp.Partition)
}

// prepareCopy turns a fetched record into the record to produce: same key, value, headers
// and partition, the source timestamp as CreateTime, the remote topic.
func prepareCopy(r *kgo.Record, remote string) {
	r.Topic = remote
	if r.Timestamp.UnixMilli() < 0 {
		// A record without timestamp (-1): let the producer stamp it, as Java's would.
		r.Timestamp = time.Time{}
	}
	r.Attrs = kgo.RecordAttrs{}
	r.ProducerID, r.ProducerEpoch = 0, 0
}

// observeFetch records the age of the first record of a fetched batch and marks it as the
// partition's replication-latency sample unless one is still in flight.
func (c *copier) observeFetch(st *partLedger, recs []*kgo.Record) {
	m := c.e.opts.Metrics
	if m == nil {
		return
	}
	for _, r := range recs {
		if r.Attrs.IsControl() || r.Offset < st.w.start || r.Offset >= st.w.end {
			continue
		}
		m.RecordAge(context.Background(), st.w.tp.Topic, st.w.tp.Partition, time.Since(r.Timestamp))
		st.mu.Lock()
		if st.sampleUp < 0 {
			st.sampleUp = r.Offset
		}
		st.mu.Unlock()
		return
	}
}
