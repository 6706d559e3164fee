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

// TestStableBackoffSteady: waitStable asks again every 100 ms (±20%) while a transaction on the
// offsets topic is open, and gives up once a little more than the transaction timeout has
// passed (the coordinator aborts a crashed copier's transaction by then).
func TestStableBackoffSteady(t *testing.T) {
	r := stableBackoff.start()
	for n := 1; n <= 200; n++ {
		d, ok := r.next()
		if !ok {
			t.Fatalf("stableBackoff gave up after %d attempts within its budget", n)
		}
		if d < 80*time.Millisecond || d > 120*time.Millisecond {
			t.Fatalf("stableBackoff wait %d = %s, want 100 ms ±20%%", n, d)
		}
	}
	if want := eosTransactionTimeout + 15*time.Second; stableBackoff.budget != want {
		t.Fatalf("stableBackoff budget %s, want %s", stableBackoff.budget, want)
	}
	r.began = time.Now().Add(-stableBackoff.budget) // the budget is spent
	if d, ok := r.next(); ok {
		t.Fatalf("stableBackoff waits %s more after its budget", d)
	}
}
