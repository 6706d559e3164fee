package engine

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff is the engine's one retry policy: the wait before retry n doubles from initial up
// to max, each with ±20% jitter; tries (0: no bound) bounds the attempts and budget (0: no
// bound) the time since the first one. Its instances below differ only in these numbers.
type backoff struct {
	initial, max time.Duration
	tries        int
	budget       time.Duration
}

// clientBackoff is Java's client backoff (retry.backoff.ms=100 doubling to
// retry.backoff.max.ms=1000), which every engine client uses for its own retries (see
// withClientDefaults).
var clientBackoff = backoff{initial: 100 * time.Millisecond, max: time.Second}

// servingBackoff is listOffsets' wait for a topic just created or a leader moving: a steady
// 100 ms, 50 tries. A new partition is served within a few hundred ms; doubling would wait up
// to a second past that, on the way to a new flow's first record.
var servingBackoff = backoff{initial: 100 * time.Millisecond, max: 100 * time.Millisecond, tries: 50}

// stableBackoff is waitStable's wait for the offsets topic's open transactions to be decided
// before positions are read under exactly-once: a steady 100 ms (a copier's transaction is
// usually committed within that; doubling would add up to a second to the read), for at most a
// little more than the transaction timeout, after which the coordinator aborts a crashed
// copier's transaction.
var stableBackoff = backoff{initial: 100 * time.Millisecond, max: 100 * time.Millisecond, budget: eosTransactionTimeout + 15*time.Second}

// forwardBackoff bounds the forwarder's attempts at one fetch or produce that meets a
// retriable error or one whose outcome is unknown (a leader moving, a broker restarting, a
// new partition not yet served): 16 tries, 10 ms doubling to 1 s between them, a produce
// retry also waiting (up to max) until the partition is served again: 10-26 s in all. Then
// the partition goes on record by record, which waits out longer outages.
var forwardBackoff = backoff{initial: 10 * time.Millisecond, max: time.Second, tries: 16}

// eosCommitBackoff bounds how long an exactly-once partition copy keeps starting over after a
// commit whose outcome is unknown (a target broker restarting or hung under the
// EndTransaction): 200 ms doubling to 5 s, for at most 2 minutes without progress (as
// cluster.DefaultBackoff).
var eosCommitBackoff = backoff{initial: 200 * time.Millisecond, max: 5 * time.Second, budget: 2 * time.Minute}

// createTopicBackoff bounds how long a burst keeps creating an internal topic it creates behind
// its copy (a flow's first burst: the offsets topic, the offset-syncs topic) while the cluster
// answers with retriable errors, as a broker restarting does (a KRaft broker fenced until it
// has caught up answers CreateTopics INVALID_REPLICATION_FACTOR): 100 ms doubling to 5 s, for
// at most finishWaitMax, as long as a burst's end waits for a cluster that stopped answering.
var createTopicBackoff = backoff{initial: 100 * time.Millisecond, max: 5 * time.Second, budget: finishWaitMax}

// delay is the wait before retry fails (1 for the first retry; 0 counts as 1).
func (b backoff) delay(fails int) time.Duration {
	d := b.initial
	for i := 1; i < fails && d < b.max; i++ {
		d *= 2
	}
	d = min(d, b.max)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// retrier is one series of attempts under a backoff.
type retrier struct {
	b     backoff
	began time.Time
	fails int
}

// start begins a series of attempts.
func (b backoff) start() *retrier { return &retrier{b: b, began: time.Now()} }

// next records a failed attempt and returns the wait before the next one, or false when the
// tries or the budget are spent.
func (r *retrier) next() (time.Duration, bool) {
	r.fails++
	if r.b.tries > 0 && r.fails >= r.b.tries {
		return 0, false
	}
	d := r.b.delay(r.fails)
	if r.b.budget > 0 && time.Since(r.began)+d > r.b.budget {
		return 0, false
	}
	return d, true
}

// attempts is how many attempts failed so far.
func (r *retrier) attempts() int { return r.fails }

// elapsed is the time since the series began (or was last reset).
func (r *retrier) elapsed() time.Duration { return time.Since(r.began) }

// reset starts the series again (progress was made: a later fault gets a whole budget).
func (r *retrier) reset() { r.began, r.fails = time.Now(), 0 }

// sleep waits d; false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// retry calls do until it succeeds, fails with an error again does not accept, ctx ends or
// the backoff is spent, and returns do's last error. Before each retry it waits the backoff
// and then calls between, if any (a leader may have moved). again nil retries errRetriable.
func (b backoff) retry(ctx context.Context, do func() error, again func(errClass) bool, between func(context.Context)) error {
	if again == nil {
		again = func(c errClass) bool { return c == errRetriable }
	}
	r := b.start()
	for {
		err := do()
		if err == nil || ctx.Err() != nil || !again(classify(err)) {
			return err
		}
		d, ok := r.next()
		if !ok || !sleep(ctx, d) {
			return err
		}
		if between != nil {
			between(ctx)
		}
	}
}

// finishWaitMax bounds how long a burst that was not asked to stop waits at its end for a
// cluster that does not answer (restarting, hung), when no MaxDuration bounds it.
const finishWaitMax = 2 * time.Minute
