package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// inflightBytes counts bytes read from the source and not yet acknowledged by the target, and
// lets producers wait until more fit under a bound. The count is an atomic (the producer's
// promise changes it per record); a waiter sleeps on freed, a channel closed by the first
// release that finds waiters, so every waiter wakes (there may be many: serve's copies share
// one count) and none polls.
//
// Lock: mu guards freed only; it is taken by releases only while someone waits.
type inflightBytes struct {
	n       atomic.Int64
	waiting atomic.Int32

	mu    sync.Mutex
	freed chan struct{}
}

// add counts size more bytes in flight.
func (b *inflightBytes) add(size int64) { b.n.Add(size) }

// load returns the bytes in flight.
func (b *inflightBytes) load() int64 { return b.n.Load() }

// release counts size bytes acknowledged (or dropped) and wakes the waiters.
func (b *inflightBytes) release(size int64) {
	b.n.Add(-size)
	if b.waiting.Load() == 0 {
		return
	}
	b.mu.Lock()
	if b.freed != nil {
		close(b.freed)
		b.freed = nil
	}
	b.mu.Unlock()
}

// wait waits until need more bytes fit under bound() (or nothing is in flight); false if ctx
// ended first. bound is read again after every wake-up (a copy's bound grows after its first
// acknowledgement).
func (b *inflightBytes) wait(ctx context.Context, need int64, bound func() int64) bool {
	fits := func() bool { n := b.n.Load(); return n+need <= bound() || n <= 0 }
	for !fits() {
		b.waiting.Add(1)
		b.mu.Lock()
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		freed := b.freed
		b.mu.Unlock()
		if fits() { // a release between the check and the registration found no waiter
			b.waiting.Add(-1)
			return true
		}
		select {
		case <-freed:
			b.waiting.Add(-1)
		case <-ctx.Done():
			b.waiting.Add(-1)
			return false
		}
	}
	return true
}

// zeroCount counts records (or syncs) produced and not yet answered, and lets a copy wait
// until all of its own were: a shared client's Flush would also wait for other copies'. The
// count is an atomic; a waiter sleeps on zero, closed when the count reaches 0.
type zeroCount struct {
	n atomic.Int64

	mu   sync.Mutex // guards zero
	zero chan struct{}
}

// Add changes the count by d.
func (z *zeroCount) Add(d int64) {
	if z.n.Add(d) != 0 {
		return
	}
	z.mu.Lock()
	// Not if the count left 0 meanwhile: a waiter that registered since would wake while
	// records are still unanswered. The next drop to 0 closes it.
	if z.zero != nil && z.n.Load() == 0 {
		close(z.zero)
		z.zero = nil
	}
	z.mu.Unlock()
}

// Load returns the count.
func (z *zeroCount) Load() int64 { return z.n.Load() }

// wait waits until the count is 0.
func (z *zeroCount) wait(ctx context.Context) error {
	z.mu.Lock()
	if z.n.Load() == 0 {
		z.mu.Unlock()
		return nil
	}
	if z.zero == nil {
		z.zero = make(chan struct{})
	}
	zero := z.zero
	z.mu.Unlock()
	select {
	case <-zero:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// throttleMemory is how long after the last throttled answer a copy keeps the throttled bound.
const throttleMemory = 5 * time.Second

// throttleWatch is a kgo.HookBrokerThrottle of the records' producer: it says whether the target
// throttled one of its requests within the last mem (a timer clears it, so that the in-flight
// bound, read per record, needs no clock).
type throttleWatch struct {
	on    atomic.Bool
	mem   time.Duration
	mu    sync.Mutex
	until time.Time // under mu: when on ends unless throttled again
	armed bool      // under mu: timer pending
	timer *time.Timer
}

// newThrottleWatch returns a watch that forgets a throttle after mem.
func newThrottleWatch(mem time.Duration) *throttleWatch {
	w := &throttleWatch{mem: mem}
	w.timer = time.AfterFunc(time.Hour, w.expire)
	w.timer.Stop()
	return w
}

// OnBrokerThrottle implements kgo.HookBrokerThrottle.
func (w *throttleWatch) OnBrokerThrottle(_ kgo.BrokerMetadata, throttle time.Duration, _ bool) {
	if throttle <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.until = time.Now().Add(w.mem)
	w.on.Store(true)
	if !w.armed {
		w.armed = true
		w.timer.Reset(w.mem)
	}
}

// expire clears on once mem passed since the last throttle, or waits on.
func (w *throttleWatch) expire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if left := time.Until(w.until); left > 0 {
		w.timer.Reset(left)
		return
	}
	w.on.Store(false)
	w.armed = false
}

// throttled reports whether the target throttled the producer recently (false for nil).
func (w *throttleWatch) throttled() bool {
	return w != nil && w.on.Load()
}
