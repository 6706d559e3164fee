package main

import (
	"encoding/binary"
	"math"
	"slices"
	"time"
)

// The freshness workload's records carry their identity in the first probeHeader bytes of the
// value: the phase (which rate of the run), the record's sequence number within its phase, and
// the producer's clock when it made the record (Unix nanoseconds, the same instant as the
// record's CreateTime timestamp, which Kafka keeps in milliseconds). The rest of the value is
// padding up to the record size.
const probeHeader = 20

// warmPhase marks the records written before a run's window to see that the replicator copies
// (they are not measured).
const warmPhase = math.MaxUint32

// encodeProbe writes a probe's header into v (len(v) >= probeHeader).
func encodeProbe(v []byte, phase uint32, seq uint64, created time.Time) {
	binary.BigEndian.PutUint32(v[0:4], phase)
	binary.BigEndian.PutUint64(v[4:12], seq)
	binary.BigEndian.PutUint64(v[12:20], uint64(created.UnixNano()))
}

// decodeProbe reads a probe's header; ok is false for a value too short to hold one.
func decodeProbe(v []byte) (phase uint32, seq uint64, created time.Time, ok bool) {
	if len(v) < probeHeader {
		return 0, 0, time.Time{}, false
	}
	return binary.BigEndian.Uint32(v[0:4]), binary.BigEndian.Uint64(v[4:12]),
		time.Unix(0, int64(binary.BigEndian.Uint64(v[12:20]))), true
}

// tally accounts for the records of one phase as they arrive on the target: the first arrival
// of each sequence number gives one latency sample (arrival minus the record's timestamp),
// later ones count as duplicates. Records the producer wrote that never arrived are missing.
type tally struct {
	arrived    []bool
	samples    []time.Duration
	duplicates int
	// stampSkew is the largest difference between a record's timestamp and the producer's
	// clock in its value: a replicator that does not keep the timestamp shows here.
	stampSkew time.Duration
}

// observe records the arrival at arrivedAt of the record seq stamped stamp (its Kafka
// timestamp) and created (the producer's clock in its value).
func (t *tally) observe(seq uint64, stamp, created, arrivedAt time.Time) {
	if seq >= uint64(len(t.arrived)) {
		n := max(2*len(t.arrived), int(seq)+1, 1024)
		grown := make([]bool, n)
		copy(grown, t.arrived)
		t.arrived = grown
	}
	if t.arrived[seq] {
		t.duplicates++
		return
	}
	t.arrived[seq] = true
	t.samples = append(t.samples, arrivedAt.Sub(stamp))
	skew := stamp.Sub(created)
	if skew < 0 {
		skew = -skew
	}
	t.stampSkew = max(t.stampSkew, skew)
}

// arrivedOf counts the distinct records among the first produced sequence numbers that
// arrived.
func (t *tally) arrivedOf(produced int) int {
	n := 0
	for i := 0; i < produced && i < len(t.arrived); i++ {
		if t.arrived[i] {
			n++
		}
	}
	return n
}

// latencySummary is a phase's end-to-end latency: over the records that arrived (each once),
// the median, 99th percentile and maximum; Missing counts produced records that never arrived.
type latencySummary struct {
	Arrived    int           `json:"arrived"`
	Missing    int           `json:"missing"`
	Duplicates int           `json:"duplicates"`
	P50        time.Duration `json:"p50_ns"`
	P99        time.Duration `json:"p99_ns"`
	Max        time.Duration `json:"max_ns"`
}

// summarize sums up t for a phase whose producer wrote produced records (sequence numbers 0
// to produced-1).
func (t *tally) summarize(produced int) latencySummary {
	s := latencySummary{Arrived: len(t.samples), Duplicates: t.duplicates}
	s.Missing = produced - t.arrivedOf(produced)
	sorted := slices.Clone(t.samples)
	slices.Sort(sorted)
	s.P50, s.P99 = percentile(sorted, 0.50), percentile(sorted, 0.99)
	if len(sorted) > 0 {
		s.Max = sorted[len(sorted)-1]
	}
	return s
}

// percentile is the nearest-rank q-quantile (0 < q <= 1) of sorted samples: the smallest
// sample that at least q of all samples are at or below. 0 for no samples.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// medianInt64 is the nearest-rank median of values (0 for none), e.g. of heartbeat figures.
func medianInt64(values []int64) int64 {
	if len(values) == 0 {
		return 0
	}
	s := slices.Clone(values)
	slices.Sort(s)
	return s[(len(s)+1)/2-1]
}

// phaseCPU splits cumulative CPU samples taken at each phase's start (and one at the end of
// the last) into each phase's CPU seconds.
func phaseCPU(samples []float64) []float64 {
	if len(samples) < 2 {
		return nil
	}
	out := make([]float64, len(samples)-1)
	for i := range out {
		out[i] = samples[i+1] - samples[i]
	}
	return out
}

// phaseOf returns the index of the phase that at belongs to, given the phases' start times in
// order (-1 before the first).
func phaseOf(starts []time.Time, at time.Time) int {
	i := -1
	for k, s := range starts {
		if !at.Before(s) {
			i = k
		}
	}
	return i
}
