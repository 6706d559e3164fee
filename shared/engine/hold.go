package engine

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
)

// The record path's hold (holdUnserved) looks for partitions the served watch has seen
// served every holdFirstRound until it resumed some, then every holdRound, and resumes those
// it found in one call. Each call has the consumer ask the source for the metadata of every
// topic it consumes at once: resumed every 20 ms, a thousand partitions served over seconds
// cost more metadata requests than the copy saved.
const (
	holdFirstRound = 5 * time.Millisecond
	holdRound      = 150 * time.Millisecond
)

// holdMax bounds the hold: partitions not seen served by then are resumed regardless, and
// the producer's retries wait for them as they would without the hold.
const holdMax = 30 * time.Second

// holdUnserved keeps the source partitions whose remote partitions were just created from
// being consumed until the target broker serves them (servedWatch), for a wide burst copying
// record by record (awaitServing does not wait for more than a few new partitions). Unheld, a
// thousand new partitions' records filled the in-flight budget while the broker created their
// logs, and every produce retry resent them whole: 167 MB written for 106 MB fetched (test/perf,
// franz-go debug log, docs/performance.md). Held, the partitions the broker serves first are
// copied while it creates the others. When ctx ends first, or after holdMax, every partition
// still held is resumed. Not for Event Hubs targets, nor up to servingWaitPartitions new
// partitions (awaitServing waited for those). It returns the count of partitions still held, which
// falls to 0; resuming happens in the background until then or until ctx ends.
func (c *copier) holdUnserved(ctx context.Context, cons *kgo.Client, created []cluster.NewTopic) *atomic.Int64 {
	held := &atomic.Int64{}
	news := map[string]bool{}
	parts := int32(0)
	for _, t := range created {
		news[t.Name] = true
		parts += t.Partitions
	}
	if parts <= servingWaitPartitions || c.e.opts.TargetProfile.EventHubs {
		return held // awaitServing waited for these; Event Hubs serves a hub once created
	}
	remove := map[string][]int32{}
	keys := map[servedKey]*partState{}
	c.mu.Lock()
	for _, st := range c.states {
		tp := st.w.tp
		if st.done || !news[c.remote[tp.Topic]] {
			continue
		}
		remove[tp.Topic] = append(remove[tp.Topic], tp.Partition)
		keys[servedKey{c.remote[tp.Topic], tp.Partition}] = st
	}
	c.mu.Unlock()
	if len(keys) == 0 {
		return held
	}
	held.Store(int64(len(keys)))
	// Held partitions leave the consumer and come back at their next offset: pausing them
	// instead made every later pause and resume copy franz-go's paused set (7% of the CPU).
	cons.RemoveConsumePartitions(remove)
	w := newServedWatch(c.e)
	leaders := make(map[servedKey]int32, len(keys))
	for k := range keys {
		leaders[k] = -1
	}
	w.watch(leaders)
	wctx, cancel := context.WithCancel(ctx)
	go w.run(wctx)
	c.e.log.Info("new remote partitions: each is copied once the target serves it", "partitions", len(keys))
	began := time.Now()
	go func() {
		defer cancel()
		deadline := time.NewTimer(holdMax)
		defer deadline.Stop()
		tick := time.NewTicker(holdFirstRound)
		defer tick.Stop()
		first := true
		for len(keys) > 0 {
			stopped := false
			select {
			case <-tick.C:
			case <-ctx.Done():
				stopped = true // a loop reopened after this one must find every partition fetched
			case <-deadline.C:
				c.e.log.Warn("new remote partitions not served in time: copying to them anyway", "partitions", len(keys), "after", holdMax)
				stopped = true
			}
			add := map[string]map[int32]kgo.Offset{}
			n := 0
			for k, st := range keys {
				if stopped || w.served(k) {
					tp := st.w.tp
					if add[tp.Topic] == nil {
						add[tp.Topic] = map[int32]kgo.Offset{}
					}
					add[tp.Topic][tp.Partition] = kgo.NewOffset().At(st.next())
					delete(keys, k)
					n++
				}
			}
			if n > 0 {
				cons.AddConsumePartitions(add)
				held.Add(int64(-n))
				if first {
					first = false
					tick.Reset(holdRound)
				}
				if len(keys) == 0 {
					c.e.log.Info("new remote partitions all served", "elapsed_ms", time.Since(began).Milliseconds())
				}
			}
		}
	}()
	return held
}

// next returns the offset a partition's consumption resumes at: after the newest record
// fetched, or its planned start.
func (st *partState) next() int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.lastSeen >= 0 {
		return st.lastSeen + 1
	}
	return st.w.start
}
