package offsetsync

import (
	"math/rand/v2"
	"sort"
	"testing"
)

// TestWriterStoreNeverSkips replicates random source partitions (with gaps from compaction or
// transaction markers), runs the produced offset syncs through a Store, and checks the safety
// property of MM2's translation: a consumer group that resumes on the target at the translated
// offset never skips a record it had not consumed on the source. It also checks that after
// PromoteDelayed a caught-up group translates exactly to the end of the target partition.
func TestWriterStoreNeverSkips(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 42))
		maxLag := int64(1 + rng.IntN(150))
		w := NewWriter(maxLag)
		s := NewStore()
		s.ReadToEnd()

		var ups, downs []int64 // replicated records of partition 0, in order
		up, down := int64(rng.IntN(1000)), int64(rng.IntN(1000))
		for i := 0; i < 3000; i++ {
			if rng.IntN(20) == 0 {
				up += int64(rng.IntN(50)) // gap
			}
			ups, downs = append(ups, up), append(downs, down)
			w.Record("t", 0, up, down)
			up++
			down++
			if rng.IntN(7) == 0 {
				for _, sync := range w.TakePending() {
					s.Add(sync)
				}
			}
			if rng.IntN(500) == 0 {
				w.PromoteDelayed()
			}
		}
		w.PromoteDelayed()
		for _, sync := range w.TakePending() {
			s.Add(sync)
		}

		// firstAtOrAfter returns the downstream offset of the first replicated record with
		// upstream offset >= q, or the end of the target partition.
		firstAtOrAfter := func(q int64) int64 {
			i := sort.Search(len(ups), func(i int) bool { return ups[i] >= q })
			if i == len(ups) {
				return downs[len(downs)-1] + 1
			}
			return downs[i]
		}
		for n := 0; n < 2000; n++ {
			q := ups[0] + rng.Int64N(ups[len(ups)-1]-ups[0]+2)
			got, ok := s.Translate("t", 0, q)
			if !ok {
				t.Fatalf("seed %d: Translate(%d) not ok", seed, q)
			}
			if got == -1 {
				continue
			}
			if want := firstAtOrAfter(q); got > want {
				t.Fatalf("seed %d: Translate(%d) = %d skips records: the next unconsumed record is at %d", seed, q, got, want)
			}
		}
		end := ups[len(ups)-1] + 1
		if got, _ := s.Translate("t", 0, end); got != downs[len(downs)-1]+1 {
			t.Errorf("seed %d: caught-up group translates to %d, want end of target %d", seed, got, downs[len(downs)-1]+1)
		}
		// The promoted delayed sync makes the last record itself exactly translatable.
		if got, _ := s.Translate("t", 0, ups[len(ups)-1]); got != downs[len(downs)-1] {
			t.Errorf("seed %d: group at last record translates to %d, want %d", seed, got, downs[len(downs)-1])
		}
	}
}
