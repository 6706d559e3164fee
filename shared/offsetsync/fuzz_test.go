package offsetsync

import (
	"testing"

	"github.com/mm2go/mm2go/shared/mm2"
)

// FuzzStore feeds the Store random sync sequences and checks, after every sync, the
// properties MM2's design relies on. Upstream offsets mostly grow (steps from 0 to huge,
// including repeats) and sometimes rewind; downstream offsets always grow, as on a real
// target partition.
//
// Each input byte pair is one sync: the first byte picks the kind of upstream step, the second
// its size. The first byte of the input chooses the initial-read mode and when ReadToEnd
// happens.
func FuzzStore(f *testing.F) {
	f.Add([]byte{0, 3, 1, 100, 1, 100, 1, 100, 1, 100, 1, 100, 1, 100, 1, 100, 1, 100, 1, 100, 1, 100, 255, 1})
	dense := []byte{0x80 | 2}
	for range 200 {
		dense = append(dense, 1, 1)
	}
	f.Add(dense)
	f.Add([]byte{0x81, 2, 7, 9, 1, 3, 3, 200, 4, 1, 255, 0, 1, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		mode, in := in[0], in[1:]
		s := NewStore(WithInitializationMustReadToEnd(mode&0x40 != 0))
		readToEndAt := int(mode & 0x3f) // number of syncs of the initial catch-up
		up, down := int64(0), int64(0)
		var history []mm2.OffsetSync // syncs since the store last forgot everything
		strict := true               // history is strictly increasing in upstream offset
		const maxSyncs = 160         // keeps the quadratic checks fast enough for fuzzing
		for n := 0; len(in) >= 2 && n < maxSyncs; n++ {
			if n == readToEndAt {
				s.ReadToEnd()
			}
			kind, size := in[0], int64(in[1])
			in = in[2:]
			switch kind % 8 {
			case 0: // repeated upstream offset (a record replicated twice)
			case 1, 2, 3:
				up += size
			case 4:
				up += size << 20
			case 5:
				up += size << 55 // may overflow: wrapping arithmetic
			case 6: // rewind
				up -= size + 1
			case 7:
				up = 1<<63 - 1 - size
			}
			down += 1 + int64(kind/8)
			sync := mm2.OffsetSync{Topic: "t", Partition: 0, UpstreamOffset: up, DownstreamOffset: down}
			var newest *mm2.OffsetSync
			if arr := s.syncs[topicPartition{"t", 0}]; arr != nil {
				newest = arr[0]
			}
			s.Add(sync)
			arr := s.syncs[topicPartition{"t", 0}]
			if newest == nil || newest.UpstreamOffset > up || (n < readToEndAt && s.mustReadToEnd) {
				// The store forgets everything older: every slot holds the new sync.
				history = history[:0]
				strict = true
				for i, p := range arr {
					if p != arr[0] {
						t.Fatalf("after reset slot %d is %v, want the new sync", i, *p)
					}
				}
			}
			if up < 0 || (len(history) > 0 && history[len(history)-1].UpstreamOffset == up) {
				strict = false
			}
			history = append(history, sync)
			full := n%16 == 0 || len(in) < 4 || n == maxSyncs-1
			checkStore(t, s, arr, sync, history, full, strict)
		}
	})
}

// checkStore checks the slots of arr (the store's array after adding newest) and, if full,
// translations around every sync of history. Invariants B and C are only checked when history
// is strictly increasing and non-negative: a repeated upstream offset legitimately leaves two
// distinct syncs with the same upstream offset in adjacent slots, as in MM2, and MM2's
// predicates treat negative bounds as overflow (Kafka offsets are never negative).
func checkStore(t *testing.T, s *Store, arr *syncArray, newest mm2.OffsetSync, history []mm2.OffsetSync, full, strict bool) {
	t.Helper()
	// Slot 0 is the newest sync (invariant A), and every slot is a sync of the history.
	if *arr[0] != newest {
		t.Fatalf("slot 0 = %v, want newest %v", *arr[0], newest)
	}
	for i := 1; i < SlotsPerPartition; i++ {
		if arr[i].UpstreamOffset > arr[i-1].UpstreamOffset {
			t.Fatalf("slot %d upstream %d > slot %d upstream %d", i, arr[i].UpstreamOffset, i-1, arr[i-1].UpstreamOffset)
		}
	}
	// Invariants B and C of the slot algorithm, between distinct syncs.
	for i := 0; strict && i < SlotsPerPartition; i++ {
		for j := i + 1; j < SlotsPerPartition; j++ {
			if !invariantB(arr[i], arr[j], i, j) {
				t.Fatalf("invariant B fails for slots %d (%d) and %d (%d)", i, arr[i].UpstreamOffset, j, arr[j].UpstreamOffset)
			}
			if !invariantC(arr[i], arr[j], i) {
				t.Fatalf("invariant C fails for slots %d (%d) and %d (%d)", i, arr[i].UpstreamOffset, j, arr[j].UpstreamOffset)
			}
		}
	}
	if !s.readToEnd {
		if _, ok := s.Translate("t", 0, newest.UpstreamOffset); ok {
			t.Fatal("Translate answered before ReadToEnd")
		}
		return
	}
	// Queries around the newest sync and the extremes; with full, around every sync.
	queries := []int64{-1 << 63, -1, 0, 1<<63 - 1, newest.UpstreamOffset - 1, newest.UpstreamOffset, newest.UpstreamOffset + 1}
	if full {
		for _, h := range history {
			queries = append(queries, h.UpstreamOffset-1, h.UpstreamOffset, h.UpstreamOffset+1)
		}
	}
	oldest := arr[SlotsPerPartition-1].UpstreamOffset
	for _, q := range queries {
		got, ok := s.Translate("t", 0, q)
		if !ok {
			t.Fatalf("Translate(%d) not ok after ReadToEnd", q)
		}
		if got == -1 {
			if q >= oldest {
				t.Fatalf("Translate(%d) = -1 but slot 63 has upstream %d", q, oldest)
			}
			continue
		}
		if q < oldest {
			t.Fatalf("Translate(%d) = %d, want -1 (older than slot 63 upstream %d)", q, got, oldest)
		}
		if newest.DownstreamOffset < 1<<63-1 && got > newest.DownstreamOffset+1 {
			t.Fatalf("Translate(%d) = %d, beyond newest sync %v + 1", q, got, newest)
		}
		// The nearest older sync of the whole history bounds the result.
		var near *mm2.OffsetSync
		for i := range history {
			h := &history[i]
			if h.UpstreamOffset <= q && (near == nil || h.UpstreamOffset >= near.UpstreamOffset) {
				near = h
			}
		}
		if near == nil {
			t.Fatalf("Translate(%d) = %d, but no sync at or before it", q, got)
		}
		limit := near.DownstreamOffset
		if near.UpstreamOffset != q {
			limit++
		}
		if got > limit {
			t.Fatalf("Translate(%d) = %d, beyond nearest older sync %v (limit %d)", q, got, *near, limit)
		}
	}
}
