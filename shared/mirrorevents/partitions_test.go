package mirrorevents

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
)

// TestMadeUpPartitionsRefused (F5): events naming 1,000 partitions a 1-partition source topic
// does not have are each answered 400 naming the partition count, keep no state per partition
// and cost one source lookup in all (the topic's count is remembered), not a copy each.
func TestMadeUpPartitionsRefused(t *testing.T) {
	f := newFake()
	f.partitions = map[string]int32{"orders": 1}
	f.ends[tp{"orders", 0}] = 5
	h, srv := newTestHandler(t, f, Options{})
	for p := int32(1); p <= 1000; p++ {
		code, body := post(t, srv, kafkaEvent("orders", p, 0))
		if code != http.StatusBadRequest || !strings.Contains(body, `source topic "orders" has 1 partitions: no partition`) {
			t.Fatalf("event for made-up partition %d: answer %d %q, want 400 naming the partition count", p, code, body)
		}
	}
	if code, body := post(t, srv, kafkaEvent("orders", 0, 4)); code != http.StatusOK {
		t.Fatalf("event for the real partition: answer %d %q, want 200", code, body)
	}
	h.mu.Lock()
	n := len(h.parts)
	h.mu.Unlock()
	if n != 1 {
		t.Errorf("handler keeps state for %d partitions, want 1 (the real one)", n)
	}
	if c, l := f.copies.Load(), f.lookups.Load(); c != 1 || l != 1 {
		t.Errorf("%d copies and %d partition lookups for 1,000 made-up partitions and one real event, want 1 and 1", c, l)
	}
	// A topic the source does not have: 400, and nothing remembered for it.
	if code, body := post(t, srv, kafkaEvent("made-up", 0, 0)); code != http.StatusBadRequest || !strings.Contains(body, `the source has no topic "made-up"`) {
		t.Errorf("event for a made-up topic: answer %d %q, want 400", code, body)
	}
}

// TestBurstUnauthenticated (F6): without sender authentication an empty MM2_BURST_EVENT_TYPES
// starts bursts for PingSource's type only, and the answer carries the burst's reason, not its
// topics, counts or errors.
func TestBurstUnauthenticated(t *testing.T) {
	f := newFake()
	_, srv := newTestHandler(t, f, Options{})
	other := event.New()
	other.SetID("u2")
	other.SetSource("/x")
	other.SetType("com.example.other")
	if code, body := post(t, srv, other); code != http.StatusBadRequest || !strings.Contains(body, "only with sender authentication") {
		t.Errorf("unauthenticated event of another type: answer %d %q, want 400", code, body)
	}
	ping := other.Clone()
	ping.SetType(TypePing)
	if code, body := post(t, srv, ping); code != http.StatusOK || strings.Contains(body, "records") {
		t.Errorf("unauthenticated PingSource tick: answer %d %q, want 200 without the summary's counts", code, body)
	}
	f.err = errors.New("source down at 10.1.2.3:9093")
	if code, body := post(t, srv, ping); code != http.StatusServiceUnavailable || strings.Contains(body, "10.1.2.3") {
		t.Errorf("unauthenticated tick, failed burst: answer %d %q, want 503 without the cluster's error", code, body)
	}
}

// TestMadeUpTopicsDoNotStarveGenuineEvents: events naming 200 topics the source does not have,
// sent at once by a sender who is not the KafkaSource, are each answered 400 (the source has no
// such topic), never 503; and a genuine event for a topic of the source, arriving among them or
// right after, is copied (200), not refused for a lookup budget the made-up topics used up
// (which KafkaSource retries a few times and then dead-letters).
func TestMadeUpTopicsDoNotStarveGenuineEvents(t *testing.T) {
	f := newFake()
	f.partitions = map[string]int32{"orders": 2, "payments": 1}
	f.ends[tp{"orders", 0}] = 5
	f.ends[tp{"payments", 0}] = 3
	_, srv := newTestHandler(t, f, Options{})
	var wg sync.WaitGroup
	codes := make([]int, 200)
	bodies := make([]string, 200)
	for i := range codes {
		wg.Go(func() { codes[i], bodies[i] = post(t, srv, kafkaEvent(fmt.Sprintf("made-up-%d", i), 0, 0)) })
	}
	if code, body := post(t, srv, kafkaEvent("orders", 0, 4)); code != http.StatusOK {
		t.Errorf("genuine event among 200 for made-up topics: answer %d %q, want 200", code, body)
	}
	wg.Wait()
	if code, body := post(t, srv, kafkaEvent("payments", 0, 2)); code != http.StatusOK {
		t.Errorf("genuine event for another topic after 200 for made-up topics: answer %d %q, want 200", code, body)
	}
	for i, code := range codes {
		if code != http.StatusBadRequest || !strings.Contains(bodies[i], "the source has no topic") {
			t.Fatalf("event for made-up topic %d: answer %d %q, want 400", i, code, bodies[i])
		}
	}
}
