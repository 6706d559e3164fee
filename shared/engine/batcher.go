package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
)

// topicBatcher coalesces concurrent remote-topic creations into one CreateTopics request at a
// time. mirror serve prepares each new topic in the call that first meets it, so the first
// events of many new topics ask for their topics all at once; a KRaft controller handles the
// topics of one request together, where separate requests queue one after the other (50 new
// topics: 50 requests of some 30 ms each).
type topicBatcher struct {
	bg *background // runs the requests; set by Engine.wire

	mu      sync.Mutex
	queue   []*createCall
	running bool
}

type createCall struct {
	topics []cluster.NewTopic
	done   chan struct{}
	err    error
}

// create asks for topics in the next request and waits for its answer. While a request is in
// flight, further calls queue and go together in the one after it.
func (b *topicBatcher) create(ctx context.Context, cl *kgo.Client, topics []cluster.NewTopic) error {
	call := &createCall{topics: topics, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, call)
	if !b.running {
		// The requests outlive the caller that started them: later callers wait on them too.
		rctx, stop := b.bg.detach(ctx)
		b.running = b.bg.goDo(func() {
			defer stop()
			b.run(rctx, cl)
		})
		if !b.running {
			stop()
			b.queue = b.queue[:len(b.queue)-1]
			b.mu.Unlock()
			return fmt.Errorf("creating topics: %w", errEngineClosed)
		}
	}
	b.mu.Unlock()
	select {
	case <-call.done:
		return call.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *topicBatcher) run(ctx context.Context, cl *kgo.Client) {
	for {
		b.mu.Lock()
		batch := b.queue
		b.queue = nil
		if len(batch) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		var all []cluster.NewTopic
		for _, c := range batch {
			all = append(all, c.topics...)
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		errs, err := cluster.CreateTopicsEach(rctx, cl, all...)
		cancel()
		for _, c := range batch {
			c.err = err
			if err == nil {
				var each []error
				for _, t := range c.topics {
					each = append(each, errs[t.Name])
				}
				c.err = errors.Join(each...)
			}
			close(c.done)
		}
	}
}
