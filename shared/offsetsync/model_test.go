package offsetsync

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/mm2go/mm2go/shared/mm2"
)

// linkedMap is the plainest model of Java's LinkedHashMap in insertion order: a slice of
// keys in order and a map of values. It is slow and obviously right.
type linkedMap struct {
	order []topicPartition
	vals  map[topicPartition]mm2.OffsetSync
}

func (m *linkedMap) put(tp topicPartition, s mm2.OffsetSync) {
	if m.vals == nil {
		m.vals = map[topicPartition]mm2.OffsetSync{}
	}
	if _, ok := m.vals[tp]; !ok {
		m.order = append(m.order, tp)
	}
	m.vals[tp] = s
}

func (m *linkedMap) remove(tp topicPartition) {
	if _, ok := m.vals[tp]; ok {
		delete(m.vals, tp)
		m.order = slices.DeleteFunc(m.order, func(x topicPartition) bool { return x == tp })
	}
}

func (m *linkedMap) take() []mm2.OffsetSync {
	var out []mm2.OffsetSync
	for _, tp := range m.order {
		out = append(out, m.vals[tp])
	}
	m.order, m.vals = nil, nil
	return out
}

// modelWriter is MM2's OffsetSyncWriter written out with linkedMaps.
type modelWriter struct {
	lag              int64
	states           map[topicPartition]*partitionState
	pending, delayed linkedMap
}

func (w *modelWriter) record(tp topicPartition, up, down int64) bool {
	st := w.states[tp]
	if st == nil {
		st = &partitionState{previousUpstream: -1, previousDownstream: -1, lastSyncDownstream: -1}
		w.states[tp] = st
	}
	s := mm2.OffsetSync{Topic: tp.topic, Partition: tp.partition, UpstreamOffset: up, DownstreamOffset: down}
	if st.update(up, down, w.lag) {
		w.delayed.remove(tp)
		w.pending.put(tp, s)
		st.shouldSync = false
	} else {
		w.delayed.put(tp, s)
	}
	return len(w.pending.order) > 0
}

// promoteOne is promote for tp alone.
func (w *modelWriter) promoteOne(tp topicPartition) {
	if s, ok := w.delayed.vals[tp]; ok {
		w.delayed.remove(tp)
		w.pending.put(tp, s)
	}
}

func (w *modelWriter) promote() {
	for _, s := range w.delayed.take() {
		w.pending.put(topicPartition{s.Topic, s.Partition}, s)
	}
}

// TestWriterMatchesModel drives the Writer (its per-partition handles and Record by name,
// mixed) and the plain model with the same random records, gaps, truncations, promotions and
// takes over up to 80 partitions, so the sets' slots survive compaction, and compares every
// answer.
func TestWriterMatchesModel(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		parts := 1 + rng.IntN(80)
		lag := int64(1 + rng.IntN(20))
		w := NewWriter(lag)
		m := &modelWriter{lag: lag, states: map[topicPartition]*partitionState{}}
		handles := map[topicPartition]Partition{}
		next := map[topicPartition][2]int64{}
		for i := range 20000 {
			tp := topicPartition{[]string{"a", "b"}[rng.IntN(2)], int32(rng.IntN(parts))}
			o := next[tp]
			switch r := rng.IntN(100); {
			case r < 3:
				o[0] += int64(2 + rng.IntN(5)) // upstream gap (compaction)
			case r < 4:
				o[1] -= int64(rng.IntN(3)) // downstream went back (truncation)
			}
			var got, want bool
			if h, ok := handles[tp]; ok && rng.IntN(2) == 0 {
				got = h.Record(o[0], o[1])
				m.record(tp, o[0], o[1])
				_, want = m.pending.vals[tp] // a handle reports its own partition's sync
			} else {
				handles[tp] = w.Partition(tp.topic, tp.partition)
				got = w.Record(tp.topic, tp.partition, o[0], o[1])
				want = m.record(tp, o[0], o[1])
			}
			if got != want {
				t.Fatalf("seed %d record %d (%v at %v): pending %v, model %v", seed, i, tp, o, got, want)
			}
			if h := handles[tp]; rng.IntN(50) == 0 {
				// One partition's own take or promotion (a copy sharing the writer).
				if rng.IntN(2) == 0 {
					h.PromoteDelayed()
					m.promoteOne(tp)
				} else {
					got, ok := h.TakePending()
					want, wok := m.pending.vals[tp]
					m.pending.remove(tp)
					if ok != wok || got != want {
						t.Fatalf("seed %d record %d: %v's TakePending %v %v, model %v %v", seed, i, tp, got, ok, want, wok)
					}
				}
			}
			next[tp] = [2]int64{o[0] + 1, o[1] + 1}
			switch r := rng.IntN(1000); {
			case r < 5:
				w.PromoteDelayed()
				m.promote()
			case r < 60:
				if got, want := w.TakePending(), m.pending.take(); !reflect.DeepEqual(got, want) {
					t.Fatalf("seed %d record %d: TakePending %v, model %v", seed, i, got, want)
				}
			}
		}
		w.PromoteDelayed()
		m.promote()
		if got, want := w.TakePending(), m.pending.take(); !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d at the end: TakePending %v, model %v", seed, got, want)
		}
	}
}
