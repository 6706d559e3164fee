package mirrorevents

import (
	"net/http"
	"strings"
	"testing"
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
