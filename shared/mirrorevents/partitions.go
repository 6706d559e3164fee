package mirrorevents

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// partitionCounts is what the handler knows of the source topics' partition counts, so that an
// event naming a partition the source does not have is refused (400) before the handler keeps
// any state for it, and without a source request each: a topic's count is looked up again only
// when an event names a partition beyond it and the last lookup is older than recheck. Lookups
// that find no topic are not remembered, but they share one budget (lookups per second), so
// events naming made-up topics cost the source a bounded number of requests; beyond it they
// are answered 503 (retried by a genuine sender).
type partitionCounts struct {
	mu     sync.Mutex
	counts map[string]partitionCount // only topics the source has

	window time.Time // start of the current lookup budget second
	spent  int
}

type partitionCount struct {
	n  int32
	at time.Time
}

const (
	// partitionsRecheck is how long a topic's count answers "no such partition" alone.
	partitionsRecheck = 5 * time.Second
	// partitionLookupsPerSecond bounds the source lookups caused by events.
	partitionLookupsPerSecond = 20
)

// errPartitionLookups is the refusal when the lookup budget is spent.
var errPartitionLookups = fmt.Errorf("too many events for partitions not known yet: checking them with the source again in a moment; retry")

func (pc *partitionCounts) check(ctx context.Context, c Copier, topic string, partition int32) error {
	now := time.Now()
	pc.mu.Lock()
	cnt, ok := pc.counts[topic]
	if ok && partition < cnt.n {
		pc.mu.Unlock()
		return nil
	}
	if ok && now.Sub(cnt.at) < partitionsRecheck {
		pc.mu.Unlock()
		return Permanent(fmt.Errorf("source topic %q has %d partitions: no partition %d", topic, cnt.n, partition))
	}
	if now.Sub(pc.window) >= time.Second {
		pc.window, pc.spent = now, 0
	}
	if pc.spent >= partitionLookupsPerSecond {
		pc.mu.Unlock()
		return errPartitionLookups
	}
	pc.spent++
	pc.mu.Unlock()

	n, exists, err := c.Partitions(ctx, topic)
	if err != nil {
		return fmt.Errorf("looking up the partitions of source topic %q: %w", topic, err)
	}
	if !exists {
		return Permanent(fmt.Errorf("the source has no topic %q", topic))
	}
	pc.mu.Lock()
	if pc.counts == nil {
		pc.counts = map[string]partitionCount{}
	}
	pc.counts[topic] = partitionCount{n: n, at: now}
	pc.mu.Unlock()
	if partition >= n {
		return Permanent(fmt.Errorf("source topic %q has %d partitions: no partition %d", topic, n, partition))
	}
	return nil
}
