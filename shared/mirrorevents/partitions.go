package mirrorevents

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// partitionCounts is what the handler knows of the source topics' partition counts, so that an
// event naming a topic or partition the source does not have is refused (400) before the
// handler keeps any state for it, and without a source request each.
//
// The counts come from listings of every source topic the flow selects (one metadata request
// each). An event naming a topic or partition not in the last listing waits for a listing that
// started after it arrived, which settles it: a genuine event's topic is in it (KafkaSource
// sends events for records the source holds), a made-up one is not (400). Listings run one at a
// time, at most one every partitionListingEvery, and every event waiting shares the next one:
// events naming made-up topics, however many, cost the source at most that many requests and
// never take a genuine event's turn (a budget of lookups per second, shared by both, answered
// genuine events 503 once made-up topics had spent it). A partition beyond a topic's count is
// refused from a listing less than partitionsRecheck old without another.
type partitionCounts struct {
	mu       sync.Mutex
	counts   map[string]int32 // selected source topics of the last listing
	listedAt time.Time        // start of the last listing that succeeded
	running  *listing         // the listing running, nil when none
	lastRun  time.Time        // start of the last listing, succeeded or not
}

// listing is one listing of the source's topics that events wait on.
type listing struct {
	started time.Time
	done    chan struct{}
	err     error
}

const (
	// partitionsRecheck is how long a listing answers "no such partition" alone.
	partitionsRecheck = 5 * time.Second
	// partitionListingEvery is the least time between the starts of two listings.
	partitionListingEvery = 50 * time.Millisecond
	// partitionListingTimeout bounds one listing, which may settle many events.
	partitionListingTimeout = 30 * time.Second
)

func (pc *partitionCounts) check(ctx context.Context, c Copier, topic string, partition int32) error {
	arrived := time.Now()
	for {
		pc.mu.Lock()
		n, known := pc.counts[topic]
		switch {
		case known && partition < n:
			pc.mu.Unlock()
			return nil
		case known && arrived.Sub(pc.listedAt) < partitionsRecheck:
			pc.mu.Unlock()
			return Permanent(fmt.Errorf("source topic %q has %d partitions: no partition %d", topic, n, partition))
		case !pc.listedAt.Before(arrived):
			// A listing that started after this event arrived does not hold the topic.
			pc.mu.Unlock()
			return Permanent(fmt.Errorf("the source has no topic %q", topic))
		}
		if l := pc.running; l != nil {
			pc.mu.Unlock()
			select {
			case <-l.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			if l.err != nil && !l.started.Before(arrived) {
				return fmt.Errorf("looking up the partitions of source topic %q: %w", topic, l.err)
			}
			continue
		}
		if wait := partitionListingEvery - time.Since(pc.lastRun); wait > 0 {
			pc.mu.Unlock()
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
			continue
		}
		l := &listing{started: time.Now(), done: make(chan struct{})}
		pc.running, pc.lastRun = l, l.started
		pc.mu.Unlock()

		// The listing settles every event waiting on it: the request that started it does not
		// bound it.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), partitionListingTimeout)
		counts, err := c.Topics(lctx)
		cancel()
		pc.mu.Lock()
		l.err = err
		if err == nil {
			pc.counts, pc.listedAt = map[string]int32{}, l.started
			for t, n := range counts {
				if c.Selected(t) {
					pc.counts[t] = n
				}
			}
		}
		pc.running = nil
		pc.mu.Unlock()
		close(l.done)
		if err != nil {
			return fmt.Errorf("looking up the partitions of source topic %q: %w", topic, err)
		}
	}
}
