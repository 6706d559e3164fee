package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mm2go/mm2go/shared/cluster"
)

// TestTopicBatcher: 41 concurrent creations made while a first one's request is in flight
// (each topic asked for twice, as two partitions' first events would) go out together in one
// more request, every topic is created once with its own partition count, and a refused topic
// fails only its own callers. The first CreateTopics is held until the other 41 calls are
// queued.
func TestTopicBatcher(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	var requests atomic.Int32
	inFlight, release := make(chan struct{}), make(chan struct{})
	fake.ControlKey(int16(kmsg.CreateTopics), func(r kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if requests.Add(1) == 1 {
			close(inFlight)
			<-release // a controller's commit: later calls queue meanwhile
		}
		req := r.(*kmsg.CreateTopicsRequest)
		for _, rt := range req.Topics {
			if rt.Topic == "refused" {
				resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
				for _, rt := range req.Topics {
					st := kmsg.NewCreateTopicsResponseTopic()
					st.Topic = rt.Topic
					if rt.Topic == "refused" {
						st.ErrorCode = 29 // TOPIC_AUTHORIZATION_FAILED
					} else if err := fake.CreateTopic(rt.Topic, rt.NumPartitions, nil); err != nil {
						st.ErrorCode = 36 // TOPIC_ALREADY_EXISTS: asked for in an earlier batch too
					}
					resp.Topics = append(resp.Topics, st)
				}
				return resp, nil, true
			}
		}
		return nil, nil, false
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(fake.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	b := topicBatcher{bg: newBackground()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 42)
	call := func(i int) {
		wg.Go(func() {
			name := fmt.Sprintf("t%d", i/2)
			if i >= 40 {
				name = "refused"
			}
			errs[i] = b.create(ctx, cl, []cluster.NewTopic{{Name: name, Partitions: int32(i/2%3 + 1), ReplicationFactor: 1}})
		})
	}
	// The first call's request is in flight before the others come.
	call(0)
	select {
	case <-inFlight:
	case <-ctx.Done():
		t.Fatal("no CreateTopics request")
	}
	for i := 1; i < 42; i++ {
		call(i)
	}
	queued := func() int {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queue)
	}
	for queued() < 41 {
		select {
		case <-ctx.Done():
			t.Fatalf("%d calls queued behind the first request, want 41", queued())
		case <-time.After(time.Millisecond):
		}
	}
	close(release)
	wg.Wait()
	for i := range 40 {
		if errs[i] != nil {
			t.Errorf("creating t%d: %v", i/2, errs[i])
		}
	}
	for i := 40; i < 42; i++ {
		if errs[i] == nil || !strings.Contains(errs[i].Error(), `"refused"`) {
			t.Errorf("refused topic: error %v, want one naming it", errs[i])
		}
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("%d CreateTopics requests for 42 concurrent calls, want 2 (the first, then the other 41 together)", n)
	}
	st, err := cluster.DescribeTopics(ctx, cl, "t0", "t1", "t2", "t19")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int32{"t0": 1, "t1": 2, "t2": 3, "t19": 2} {
		if st[name].Partitions != want {
			t.Errorf("%s has %d partitions, want %d", name, st[name].Partitions, want)
		}
	}
}
