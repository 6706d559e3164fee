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
