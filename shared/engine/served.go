package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// servedWait bounds how long a forwarded partition's first batch waits for its remote
// partition to be served before it goes out regardless (and meets the produce retries'
// rules); a retry waits at most the longest backoff between retries (forwardBackoff).
const servedWait = 10 * time.Second

// servedWatch tells forwarded partitions when the leader of their remote partition serves it:
// the leader in the target's metadata answers a ListOffsets request for it. A KRaft broker
// names a new partition's leader some milliseconds before it accepts writes to it, and a batch
// sent in between is refused whole (NOT_LEADER_OR_FOLLOWER): on 50 new topics, half the bytes
// the forwarder sent were such refused batches, each retry also a metadata request of its own.
// The watch checks every waiting partition together, one metadata request and one ListOffsets
// request per leader per check, every few milliseconds while any waits.
type servedWatch struct {
	f       *forwarder
	mu      sync.Mutex
	entries map[*fwdPartition]*servedEntry
	kick    chan struct{}
}

// servedEntry is one partition's wait: ch is closed once it was seen served. leader is the
// broker to ask, -1 until metadata names one.
type servedEntry struct {
	ch     chan struct{}
	done   bool
	leader int32
}

func newServedWatch(f *forwarder) *servedWatch {
	return &servedWatch{f: f, entries: map[*fwdPartition]*servedEntry{}, kick: make(chan struct{}, 1)}
}

// watch starts checking ps, for waits to come.
func (w *servedWatch) watch(ps []*fwdPartition) {
	w.mu.Lock()
	for _, p := range ps {
		if w.entries[p] == nil {
			w.entries[p] = &servedEntry{ch: make(chan struct{}), leader: p.dstLeader}
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

// wait returns once p's remote partition was seen served (p.dstLeader then names the leader
// that served it), or an error if ctx ended or limit passed first. again asks for a new check
// after a refused write, rather than the one watch or an earlier wait asked for.
func (w *servedWatch) wait(ctx context.Context, p *fwdPartition, again bool, limit time.Duration) error {
	w.mu.Lock()
	e := w.entries[p]
	switch {
	case e == nil:
		e = &servedEntry{ch: make(chan struct{}), leader: p.dstLeader}
		w.entries[p] = e
	case again && e.done:
		e = &servedEntry{ch: make(chan struct{}), leader: -1} // the leader may have moved
		w.entries[p] = e
	}
	w.mu.Unlock()
	w.poke()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-e.ch:
		return nil
	case <-ctx.Done():
		w.forget(p, e)
		return ctx.Err()
	case <-t.C:
		w.forget(p, e)
		return fmt.Errorf("partition %d of %q not served by a leader within %s", p.st.w.tp.Partition, p.st.w.remote, limit)
	}
}

// forget stops the wait e of a waiter that gave up: p.dstLeader is not written after it.
func (w *servedWatch) forget(p *fwdPartition, e *servedEntry) {
	w.mu.Lock()
	if w.entries[p] == e && !e.done {
		delete(w.entries, p)
	}
	w.mu.Unlock()
}

// run checks the waiting partitions until ctx ends: at once when one starts waiting, then
// every 5 ms while any waits, every 20 ms after 20 checks and every 50 ms after 100 (a
// thousand new partitions take the broker seconds to serve).
func (w *servedWatch) run(ctx context.Context) {
	checks := 0
	for {
		n := len(w.pending())
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
	type key struct {
		topic     string
		partition int32
	}
	w.mu.Lock()
	var topics []string
	seen := map[string]bool{}
	waiting := map[*fwdPartition]*servedEntry{}
	for p, e := range w.entries {
		if e.done {
			continue
		}
		waiting[p] = e
		if (refresh || e.leader < 0) && !seen[p.st.w.remote] {
			seen[p.st.w.remote] = true
			topics = append(topics, p.st.w.remote)
		}
	}
	w.mu.Unlock()
	if len(waiting) == 0 {
		return
	}
	leaders := map[*fwdPartition]int32{}
	if len(topics) > 0 {
		md, err := w.f.c.e.tgtAdm.Metadata(ctx, topics...)
		if err != nil {
			return // the next check asks again
		}
		for p := range waiting {
			if pd, ok := md.Topics[p.st.w.remote].Partitions[p.st.w.tp.Partition]; ok && pd.Err == nil && pd.Leader >= 0 {
				leaders[p] = pd.Leader
			}
		}
	}
	byLeader := map[int32]map[key]*fwdPartition{}
	w.mu.Lock()
	for p, e := range waiting {
		if l, ok := leaders[p]; ok {
			e.leader = l
		}
		if e.leader < 0 {
			continue
		}
		if byLeader[e.leader] == nil {
			byLeader[e.leader] = map[key]*fwdPartition{}
		}
		byLeader[e.leader][key{p.st.w.remote, p.st.w.tp.Partition}] = p
	}
	w.mu.Unlock()
	var wg sync.WaitGroup
	for leader, led := range byLeader {
		wg.Go(func() {
			req := kmsg.NewPtrListOffsetsRequest()
			idx := map[string]int{}
			for k := range led {
				i, ok := idx[k.topic]
				if !ok {
					i = len(req.Topics)
					idx[k.topic] = i
					rt := kmsg.NewListOffsetsRequestTopic()
					rt.Topic = k.topic
					req.Topics = append(req.Topics, rt)
				}
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Partition, rp.Timestamp = k.partition, -1
				req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
			}
			resp, err := req.RequestWith(ctx, w.f.c.e.tgt.Broker(int(leader)))
			if err != nil {
				return
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					p := led[key{rt.Topic, rp.Partition}]
					if p == nil || kerr.ErrorForCode(rp.ErrorCode) != nil {
						continue
					}
					if e := w.entries[p]; e != nil && !e.done {
						p.dstLeader = leader // read by p's produce side once e.ch is closed
						e.done = true
						close(e.ch)
					}
				}
			}
		})
	}
	wg.Wait()
}

// pending lists the partitions waiting to be seen served.
func (w *servedWatch) pending() []*fwdPartition {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ps []*fwdPartition
	for p, e := range w.entries {
		if !e.done {
			ps = append(ps, p)
		}
	}
	return ps
}
