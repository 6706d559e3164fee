package main

import (
	"testing"
	"time"
)

// TestPercentileNearestRank: the q-quantile is the smallest sample with at least q of all at or
// below it, so p99 of 1..100 ms is 99 ms, p50 of 1..4 is 2, and one sample is every quantile.
func TestPercentileNearestRank(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		out := make([]time.Duration, len(n))
		for i, v := range n {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, c := range []struct {
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{ms(hundred...), 0.99, 99 * time.Millisecond},
		{ms(hundred...), 0.50, 50 * time.Millisecond},
		{ms(hundred...), 1, 100 * time.Millisecond},
		{ms(1, 2, 3, 4), 0.50, 2 * time.Millisecond},
		{ms(1, 2, 3, 4), 0.99, 4 * time.Millisecond},
		{ms(7), 0.01, 7 * time.Millisecond},
		{nil, 0.5, 0},
	} {
		if got := percentile(c.sorted, c.q); got != c.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", c.sorted, c.q, got, c.want)
		}
	}
}

// TestTallySummarize: each record counts once, at its first arrival (a second arrival is a
// duplicate, not a sample), the latency is the arrival minus the record's timestamp, records
// produced but never seen are missing, and the timestamp's distance from the producer's clock
// is kept.
func TestTallySummarize(t *testing.T) {
	base := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	var ta tally
	// seq i stamped at base+i s, arriving 10*(i+1) ms later; seq 3 never arrives.
	for _, seq := range []uint64{0, 1, 2, 4} {
		stamp := base.Add(time.Duration(seq) * time.Second)
		ta.observe(seq, stamp, stamp.Add(300*time.Microsecond), stamp.Add(time.Duration(10*(seq+1))*time.Millisecond))
	}
	// seq 1 again, much later: a duplicate, its latency not counted.
	ta.observe(1, base.Add(time.Second), base.Add(time.Second), base.Add(time.Hour))
	got := ta.summarize(5)
	want := latencySummary{Arrived: 4, Missing: 1, Duplicates: 1, P50: 20 * time.Millisecond, P99: 50 * time.Millisecond, Max: 50 * time.Millisecond}
	if got != want {
		t.Errorf("summary %+v, want %+v", got, want)
	}
	if ta.stampSkew != 300*time.Microsecond {
		t.Errorf("stamp skew %v, want 300µs", ta.stampSkew)
	}
	// A sequence number far beyond the first ones grows the table without losing them.
	ta.observe(5000, base, base, base.Add(time.Millisecond))
	if got := ta.summarize(5001); got.Arrived != 5 || got.Missing != 4996 {
		t.Errorf("after seq 5000: arrived %d, missing %d; want 5 and 4996", got.Arrived, got.Missing)
	}
}

// TestProbeRoundTrip: a probe's header reads back as written, and a value too short is not a
// probe.
func TestProbeRoundTrip(t *testing.T) {
	v := make([]byte, 512)
	at := time.Unix(1764936000, 123456789)
	encodeProbe(v, 2, 987654321, at)
	phase, seq, created, ok := decodeProbe(v)
	if !ok || phase != 2 || seq != 987654321 || !created.Equal(at) {
		t.Errorf("decoded phase %d seq %d created %v ok %v; want 2 987654321 %v true", phase, seq, created, ok, at)
	}
	if _, _, _, ok := decodeProbe(v[:probeHeader-1]); ok {
		t.Error("a 19-byte value decoded as a probe")
	}
}

// TestPhaseAccounting: CPU samples at phase starts split into per-phase deltas, times map to
// the phase they fall in, and the median of heartbeat figures is the nearest-rank one.
func TestPhaseAccounting(t *testing.T) {
	cpu := phaseCPU([]float64{1.5, 2.0, 4.5, 10})
	if len(cpu) != 3 || cpu[0] != 0.5 || cpu[1] != 2.5 || cpu[2] != 5.5 {
		t.Errorf("phaseCPU = %v, want [0.5 2.5 5.5]", cpu)
	}
	base := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	starts := []time.Time{base, base.Add(40 * time.Second), base.Add(80 * time.Second)}
	for _, c := range []struct {
		at   time.Duration
		want int
	}{{-time.Second, -1}, {0, 0}, {39 * time.Second, 0}, {40 * time.Second, 1}, {time.Hour, 2}} {
		if got := phaseOf(starts, base.Add(c.at)); got != c.want {
			t.Errorf("phaseOf(+%v) = %d, want %d", c.at, got, c.want)
		}
	}
	if m := medianInt64([]int64{900, 40, 7000, 55}); m != 55 {
		t.Errorf("median of 900 40 7000 55 = %d, want 55", m)
	}
	if m := medianInt64(nil); m != 0 {
		t.Errorf("median of nothing = %d, want 0", m)
	}
}
