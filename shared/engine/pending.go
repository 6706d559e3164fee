package engine

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/mm2go/mm2go/shared/cluster"
)

// pendingTopic is an internal topic a copier writes to (the Connect offsets topic, the
// offset-syncs topic): known at once when it exists, or once its creation in the background
// ends.
type pendingTopic struct {
	done  chan struct{}
	parts int32
	err   error
}

// readyTopic is a topic that exists with parts partitions.
func readyTopic(parts int32) *pendingTopic {
	t := &pendingTopic{done: make(chan struct{}), parts: parts}
	close(t.done)
	return t
}

// createInBackground runs ensure after start is closed (nil: at once) and records its outcome,
// in a goroutine of bg. ensure runs under ctx's values and deadline, and its context also ends
// when the engine closes: Close, which waits for bg's goroutines, stops the creation and its
// retries instead of waiting for them. If the engine closes first, ensure does not run and the
// outcome is errEngineClosed; a creation that failed once the engine was closing is
// errEngineClosed too (wrapping ensure's error).
func createInBackground(ctx context.Context, bg *background, start <-chan struct{}, ensure func(context.Context) (int32, error)) *pendingTopic {
	t := &pendingTopic{done: make(chan struct{})}
	if !bg.goDo(func() {
		defer close(t.done)
		if start != nil {
			select {
			case <-start:
			case <-bg.ctx.Done():
				t.err = errEngineClosed
				return
			}
		}
		ectx, stop := bg.bind(ctx)
		defer stop()
		t.parts, t.err = ensure(ectx)
		if t.err != nil && bg.ctx.Err() != nil {
			t.err = fmt.Errorf("%w: %w", errEngineClosed, t.err)
		}
	}) {
		t.err = errEngineClosed
		close(t.done)
	}
	return t
}

// rideOut runs ensure (the creation of an internal topic behind a copy) again under
// createTopicBackoff while it fails with an error a restarting or unreachable cluster gives
// (cluster.Retriable), and returns its last outcome. A copy that took the first such answer for
// the topic's fate copied on and could store no position of what the target acknowledged.
func rideOut(ctx context.Context, log *slog.Logger, topic string, ensure func(context.Context) (int32, error)) (int32, error) {
	r := createTopicBackoff.start()
	for {
		n, err := ensure(ctx)
		if err == nil || ctx.Err() != nil || !cluster.Retriable(err) {
			return n, err
		}
		d, ok := r.next()
		if !ok {
			return n, err
		}
		log.Warn("internal topic not created yet: the cluster answered with a retriable error; trying again", "topic", topic, "attempt", r.attempts(), "err", err)
		if !sleep(ctx, d) {
			return n, err
		}
	}
}

// ready returns the partition count if the topic is ready now.
func (t *pendingTopic) ready() (int32, bool) {
	select {
	case <-t.done:
		return t.parts, t.err == nil
	default:
		return 0, false
	}
}

// failed returns the error of a creation that has ended in failure, nil otherwise.
func (t *pendingTopic) failed() error {
	select {
	case <-t.done:
		return t.err
	default:
		return nil
	}
}

// wait waits until the topic is ready and returns its partition count.
func (t *pendingTopic) wait(ctx context.Context) (int32, error) {
	select {
	case <-t.done:
		return t.parts, t.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}
