package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFakeCloseWaitsForWarmUp: Engine.Close returns only once the goroutines the engine started
// have ended. The start-up warm-up (WarmInBackground) is one: here it waits for the offsets
// topic to be served, which the target refuses (NOT_LEADER_OR_FOLLOWER) for as long as the test
// lasts. Close must end that wait and the warm-up must have reported (its done func) by the
// time Close returns; a warm-up left running would go on asking closed clients after Close. On
// kfake.
func TestFakeCloseWaitsForWarmUp(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"closing": 1})
	o := f.opts
	if err := o.withDefaults(); err != nil {
		t.Fatal(err)
	}
	offsetsTopic := o.OffsetStorageTopic
	f.createTopic(Target, offsetsTopic, o.OffsetStoragePartitions, nil)
	asked := make(chan struct{})
	var askedOnce sync.Once
	f.tgt.ControlKey(int16(kmsg.ListOffsets), func(r kmsg.Request) (kmsg.Response, error, bool) {
		f.tgt.KeepControl()
		req := r.(*kmsg.ListOffsetsRequest)
		for _, rt := range req.Topics {
			if rt.Topic != offsetsTopic {
				return nil, nil, false
			}
		}
		resp := listOffsetsAnswer(req, func(_ string, _ kmsg.ListOffsetsRequestTopicPartition, sp *kmsg.ListOffsetsResponseTopicPartition) {
			sp.Timestamp, sp.LeaderEpoch, sp.ErrorCode = 0, 0, kerr.NotLeaderForPartition.Code
		})
		askedOnce.Do(func() { close(asked) })
		return resp, nil, true
	})

	e := f.engine()
	warmed := make(chan error, 1)
	e.WarmInBackground(context.Background(), func(err error) { warmed <- err })
	<-asked // the warm-up waits for the offsets topic to be served
	e.Close()
	select {
	case err := <-warmed:
		if err == nil {
			t.Errorf("warm-up ended by Close reported no error")
		}
	default:
		t.Fatalf("Close returned while the warm-up it started still ran (its done func not called)")
	}
}

// TestFakeCopyPartitionAfterClose: a CopyPartition call after Close fails with the engine's
// closed error, also for a topic prepared moments before (whose call skips the metadata check
// and goes straight to the queue). Before the fix the queued call waited with no loop to run it
// (the background refuses new goroutines after Close) until its context ended: "waiting for a
// copy of one-0: context deadline exceeded". On kfake.
func TestFakeCopyPartitionAfterClose(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"one": 1})
	f.produce("one", 1, 5)
	e := f.engine()
	ctx := context.Background()
	if s, err := e.CopyPartition(ctx, "one", 0, -1); err != nil || s.Records != 5 {
		t.Fatalf("CopyPartition before Close: %d records, %v; want 5, no error", s.Records, err)
	}
	e.Close()
	// A deadline only so that the old behaviour ends the test; the call must not reach it.
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := e.CopyPartition(cctx, "one", 0, -1); !errors.Is(err, errEngineClosed) {
		t.Errorf("CopyPartition after Close: %v, want %v", err, errEngineClosed)
	}
}

// TestFakeCloseStopsTopicCreationBehindBurst: Close during a first burst whose offset-syncs
// topic is being created in the background (the source refusing CreateTopics with a retriable
// error for as long as the test lasts) stops that creation: Close returns, and the burst fails
// with the engine's closed error. Before the fix the creation ran under the burst's context,
// which Close does not end, so Close waited for its retries (two minutes, here until the test's
// own deadline ended the burst) and the burst failed with that deadline instead. On kfake.
func TestFakeCloseStopsTopicCreationBehindBurst(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 1})
	f.produce("orders", 1, 10)
	e := f.engine()
	topic, _ := e.OffsetSyncsTopic()
	refused := f.src.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.CreateTopics}, Topic: topic,
		Err: kerr.InvalidReplicationFactor, Count: -1})
	// A deadline only so that the old behaviour ends the test; the burst must not reach it.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := e.Burst(ctx, BurstOptions{})
		done <- err
	}()
	adm := f.admin(Target)
	for { // the creation is retrying and every record is copied: the burst waits for the topic
		if refused.Hits() > 0 {
			ends, err := adm.ListEndOffsets(ctx, "src.orders")
			if o, ok := ends.Lookup("src.orders", 0); err == nil && ok && o.Offset == 10 {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("the burst ended (%v) before it copied its records while its offset-syncs topic %q was refused", err, topic)
		case <-time.After(10 * time.Millisecond):
		}
	}
	e.Close()
	if err := <-done; !errors.Is(err, errEngineClosed) || ctx.Err() != nil {
		t.Errorf("burst closed while creating its offset-syncs topic: %v (the test's deadline passed: %t), want %v", err, ctx.Err() != nil, errEngineClosed)
	}
}
