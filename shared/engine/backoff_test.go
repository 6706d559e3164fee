package engine

import (
	"testing"
	"time"
)

// TestRetryBackoff: clientBackoff is Java's client backoff, 100 ms doubling to 1 s, within ±20% jitter.
func TestRetryBackoff(t *testing.T) {
	for fails, base := range map[int]time.Duration{0: 100, 1: 100, 2: 200, 3: 400, 4: 800, 5: 1000, 6: 1000, 60: 1000} {
		base *= time.Millisecond
		for range 100 {
			if d := clientBackoff.delay(fails); d < base*8/10 || d > base*12/10 {
				t.Fatalf("clientBackoff.delay(%d) = %s, want %s ±20%%", fails, d, base)
			}
		}
	}
}

// TestServingBackoffSteady: listOffsets polls a partition that is not served yet every 100 ms
// (±20%), 50 times, without doubling (in a bench round on 1,000 new partitions, doubling took
// the first record from 534 ms to 1,596 ms).
func TestServingBackoffSteady(t *testing.T) {
	r := servingBackoff.start()
	for n := 1; ; n++ {
		d, ok := r.next()
		if !ok {
			if n != 50 {
				t.Fatalf("servingBackoff gave up after %d attempts, want 50", n)
			}
			return
		}
		if d < 80*time.Millisecond || d > 120*time.Millisecond {
			t.Fatalf("servingBackoff wait %d = %s, want 100 ms ±20%%", n, d)
		}
	}
}
