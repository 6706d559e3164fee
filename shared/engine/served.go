package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mm2go/mm2go/shared/cluster"
)

// servedWait bounds how long a forwarded partition's first batch waits for its remote
// partition to be served before it goes out regardless (and meets the produce retries'
// rules); a retry waits at most the longest backoff between retries (forwardBackoff).
const servedWait = 10 * time.Second

// servedWatch tells when the leader of a remote partition serves it: the leader in the
// target's metadata answers a ListOffsets request for it. A KRaft broker names a new
// partition's leader some milliseconds before it accepts writes to it, and a batch sent in
// between is refused whole (NOT_LEADER_OR_FOLLOWER): on 50 new topics, half the bytes the
// forwarder sent were such refused batches, each retry also a metadata request of its own.
// The watch checks every waiting partition together, one ListOffsets request per leader per
// check (cluster.ServedBy) (and a metadata request when a leader is not known or may have moved), every few
// milliseconds while any waits.
type servedWatch struct {
	e       *core
	mu      sync.Mutex
	entries map[servedKey]*servedEntry
	kick    chan struct{}
	// notify, if set, is called after a check that saw partitions served (it must not block).
	notify func()
}

// servedEntry is one partition's wait: ch is closed once it was seen served, by leader.
// leader is the broker to ask until then, -1 until metadata names one.
type servedEntry struct {
	ch     chan struct{}
	done   bool
	leader int32
}

func newServedWatch(e *core) *servedWatch {
	return &servedWatch{e: e, entries: map[servedKey]*servedEntry{}, kick: make(chan struct{}, 1)}
}

// watch starts checking the partitions of leaders (a leader to ask first each, or -1), for
// waits to come.
func (w *servedWatch) watch(leaders map[servedKey]int32) {
	w.mu.Lock()
	for k, l := range leaders {
		if w.entries[k] == nil {
			w.entries[k] = &servedEntry{ch: make(chan struct{}), leader: l}
		}
	}
	w.mu.Unlock()
	w.poke()
}

func (w *servedWatch) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// wait returns the leader that served k once k was seen served, or an error if ctx ended or
// limit passed first. leader is the broker to ask if k is not watched yet (-1: look it up).
// again asks for a new check after a refused write, rather than the one watch or an earlier
// wait asked for, and looks the leader up again.
func (w *servedWatch) wait(ctx context.Context, k servedKey, leader int32, again bool, limit time.Duration) (int32, error) {
	w.mu.Lock()
	e := w.entries[k]
	switch {
	case e == nil:
		e = &servedEntry{ch: make(chan struct{}), leader: leader}
		w.entries[k] = e
	case again && e.done:
		e = &servedEntry{ch: make(chan struct{}), leader: -1} // the leader may have moved
		w.entries[k] = e
	}
	w.mu.Unlock()
	w.poke()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-e.ch:
		w.mu.Lock()
		defer w.mu.Unlock()
		return e.leader, nil
	case <-ctx.Done():
		w.forget(k, e)
		return -1, ctx.Err()
	case <-t.C:
		w.forget(k, e)
		return -1, fmt.Errorf("partition %d of %q not served by a leader within %s", k.partition, k.topic, limit)
	}
}

// served reports whether k was seen served (it is watched and its check answered).
func (w *servedWatch) served(k servedKey) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.entries[k]
	return e != nil && e.done
}

// forget stops the wait e of a waiter that gave up.
func (w *servedWatch) forget(k servedKey, e *servedEntry) {
	w.mu.Lock()
	if w.entries[k] == e && !e.done {
		delete(w.entries, k)
	}
	w.mu.Unlock()
}

// run checks the waiting partitions until ctx ends: at once when one starts waiting, then
// every 5 ms while any waits, every 20 ms after 20 checks and every 50 ms after 100 (a
// thousand new partitions take the broker seconds to serve).
func (w *servedWatch) run(ctx context.Context) {
	checks := 0
	for {
		n := w.waitingCount()
		pause := 5 * time.Millisecond
		switch {
		case checks >= 100:
			pause = 50 * time.Millisecond
		case checks >= 20:
			pause = 20 * time.Millisecond
		}
		if n == 0 {
			checks = 0
			select {
			case <-w.kick:
			case <-ctx.Done():
				return
			}
		} else if checks > 0 {
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return
			}
		}
		w.check(ctx, checks%20 == 19)
		checks++
	}
}

// check asks the leaders of the waiting partitions for their end offsets, and releases the
// partitions they answered. Partitions without a leader to ask, or all with refresh, get their
// leader from the target's metadata first (a new partition's leader is named before it serves
// it, so refusals do not mean the metadata is stale).
func (w *servedWatch) check(ctx context.Context, refresh bool) {
	w.mu.Lock()
	var topics []string
	seen := map[string]bool{}
	waiting := map[servedKey]*servedEntry{}
	for k, e := range w.entries {
		if e.done {
			continue
		}
		waiting[k] = e
		if (refresh || e.leader < 0) && !seen[k.topic] {
			seen[k.topic] = true
			topics = append(topics, k.topic)
		}
	}
	w.mu.Unlock()
	if len(waiting) == 0 {
		return
	}
	leaders := map[servedKey]int32{}
	if len(topics) > 0 {
		md, err := w.e.tgtAdm.Metadata(ctx, topics...)
		if err != nil {
			return // the next check asks again
		}
		for k := range waiting {
			if pd, ok := md.Topics[k.topic].Partitions[k.partition]; ok && pd.Err == nil && pd.Leader >= 0 {
				leaders[k] = pd.Leader
			}
		}
	}
	byLeader := map[int32]map[string][]int32{}
	w.mu.Lock()
	for k, e := range waiting {
		if l, ok := leaders[k]; ok {
			e.leader = l
		}
		if e.leader < 0 {
			continue
		}
		if byLeader[e.leader] == nil {
			byLeader[e.leader] = map[string][]int32{}
		}
		byLeader[e.leader][k.topic] = append(byLeader[e.leader][k.topic], k.partition)
	}
	w.mu.Unlock()
	var (
		wg     sync.WaitGroup
		anyNew atomic.Bool
	)
	for leader, parts := range byLeader {
		wg.Go(func() {
			errs, err := cluster.ServedBy(ctx, w.e.tgt, leader, parts)
			if err != nil {
				return // the next check asks again
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			for topic, ps := range errs {
				for p, err := range ps {
					k := servedKey{topic, p}
					if e := waiting[k]; err == nil && e != nil && w.entries[k] == e && !e.done {
						e.leader, e.done = leader, true
						close(e.ch)
						anyNew.Store(true)
					}
				}
			}
		})
	}
	wg.Wait()
	if anyNew.Load() && w.notify != nil {
		w.notify()
	}
}

// waitingCount is how many partitions wait to be seen served.
func (w *servedWatch) waitingCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, e := range w.entries {
		if !e.done {
			n++
		}
	}
	return n
}
