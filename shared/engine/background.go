package engine

import (
	"context"
	"errors"
	"sync"
)

// errEngineClosed answers work asked of the engine after Close.
var errEngineClosed = errors.New("engine closed")

// background owns the goroutines the engine starts beyond a caller's call: the start-up warm-up,
// serve's copy loops and shared copies, a copy settling its last records, topic creations in the
// background, the batched CreateTopics requests and the early producer's warm-up. Engine.Close
// ends their context (ctx) and waits for every one of them before it closes the clients they
// use.
//
// A goroutine started by one that is still running (a copy loop starting the next copy) is
// tracked even while Close waits; once Close has seen the last one end, go refuses.
type background struct {
	ctx    context.Context // ends when the engine closes
	cancel context.CancelFunc

	mu      sync.Mutex
	running int
	closing bool
	idle    chan struct{} // closed once closing and nothing runs
}

func newBackground() *background {
	ctx, cancel := context.WithCancel(context.Background())
	return &background{ctx: ctx, cancel: cancel, idle: make(chan struct{})}
}

// goDo runs f in a goroutine that close waits for. It reports false, and runs nothing, once
// close has seen the last goroutine end (so a goroutine of b always starts the ones it asks for).
func (b *background) goDo(f func()) bool {
	b.mu.Lock()
	if b.closing && b.running == 0 {
		b.mu.Unlock()
		return false
	}
	b.running++
	b.mu.Unlock()
	go func() {
		defer b.exit()
		f()
	}()
	return true
}

func (b *background) exit() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running--; b.running == 0 && b.closing {
		close(b.idle)
	}
}

// bind returns a context with ctx's values and deadline that also ends when the engine closes.
// Call stop when done with it.
func (b *background) bind(ctx context.Context) (bound context.Context, stop context.CancelFunc) {
	bound, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(b.ctx, cancel)
	return bound, func() {
		unhook()
		cancel()
	}
}

// detach is bind on ctx's values only: the context outlives ctx's cancellation and deadline,
// and ends when the engine closes or stop is called.
func (b *background) detach(ctx context.Context) (detached context.Context, stop context.CancelFunc) {
	return b.bind(context.WithoutCancel(ctx))
}

// close ends the goroutines' context and waits until none runs. Calling it again waits too.
func (b *background) close() {
	b.cancel()
	b.mu.Lock()
	if !b.closing {
		b.closing = true
		if b.running == 0 {
			close(b.idle)
		}
	}
	b.mu.Unlock()
	<-b.idle
}
