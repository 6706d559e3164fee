package offsetsync

import (
	"reflect"
	"testing"

	"github.com/mm2go/mm2go/shared/mm2"
)

type rec struct {
	topic string
	part  int32
	up    int64
	down  int64
}

func osync(topic string, part int32, up, down int64) mm2.OffsetSync {
	return mm2.OffsetSync{Topic: topic, Partition: part, UpstreamOffset: up, DownstreamOffset: down}
}

// step is one action on a Writer in a table test: feed records, optionally call
// PromoteDelayed, then call TakePending and compare (unless keep is set, in which case
// pending syncs accumulate into the next step).
type step struct {
	record  []rec
	promote bool
	keep    bool
	want    []mm2.OffsetSync
}

func TestWriterRules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		maxLag int64
		steps  []step
	}{
		{
			name:   "first record of a partition is synced",
			maxLag: 100,
			steps: []step{
				{record: []rec{{"t", 0, 5, 50}}, want: []mm2.OffsetSync{osync("t", 0, 5, 50)}},
			},
		},
		{
			name:   "contiguous records within the lag are delayed",
			maxLag: 100,
			steps: []step{
				{record: []rec{{"t", 0, 0, 0}, {"t", 0, 1, 1}, {"t", 0, 2, 2}}, want: []mm2.OffsetSync{osync("t", 0, 0, 0)}},
				{want: nil},
				{promote: true, want: []mm2.OffsetSync{osync("t", 0, 2, 2)}},
				{promote: true, want: nil},
			},
		},
		{
			name:   "offset.lag.max: due when d-(lastSyncDownstream+1) >= maxLag",
			maxLag: 3,
			steps: []step{
				// last sync at d=0; d=3: 3-1=2 <3 not due; d=4: 4-1=3 >= 3 due.
				{record: []rec{{"t", 0, 0, 0}, {"t", 0, 1, 1}, {"t", 0, 2, 2}, {"t", 0, 3, 3}},
					want: []mm2.OffsetSync{osync("t", 0, 0, 0)}},
				{record: []rec{{"t", 0, 4, 4}}, want: []mm2.OffsetSync{osync("t", 0, 4, 4)}},
				// next due at d=8 (8-5 = 3).
				{record: []rec{{"t", 0, 5, 5}, {"t", 0, 6, 6}, {"t", 0, 7, 7}}, want: nil},
				{record: []rec{{"t", 0, 8, 8}}, want: []mm2.OffsetSync{osync("t", 0, 8, 8)}},
			},
		},
		{
			name:   "default lag 100",
			maxLag: DefaultMaxOffsetLag,
			steps: []step{
				{record: seq("t", 0, 0, 0, 101), want: []mm2.OffsetSync{osync("t", 0, 0, 0)}},
				{record: []rec{{"t", 0, 101, 101}}, want: []mm2.OffsetSync{osync("t", 0, 101, 101)}},
			},
		},
		{
			name:   "upstream gap (u - previousUpstream != 1)",
			maxLag: 100,
			steps: []step{
				{record: []rec{{"t", 0, 10, 0}, {"t", 0, 11, 1}}, want: []mm2.OffsetSync{osync("t", 0, 10, 0)}},
				{record: []rec{{"t", 0, 13, 2}}, want: []mm2.OffsetSync{osync("t", 0, 13, 2)}},
				// a repeated upstream offset (seek back / duplicate) is also a gap
				{record: []rec{{"t", 0, 13, 3}}, want: []mm2.OffsetSync{osync("t", 0, 13, 3)}},
				{record: []rec{{"t", 0, 5, 4}}, want: []mm2.OffsetSync{osync("t", 0, 5, 4)}},
			},
		},
		{
			name:   "downstream truncation (d < previousDownstream)",
			maxLag: 100,
			steps: []step{
				{record: []rec{{"t", 0, 0, 50}, {"t", 0, 1, 51}}, want: []mm2.OffsetSync{osync("t", 0, 0, 50)}},
				{record: []rec{{"t", 0, 2, 0}}, want: []mm2.OffsetSync{osync("t", 0, 2, 0)}},
				{record: []rec{{"t", 0, 3, 1}}, want: nil},
			},
		},
		{
			name:   "downstream jump forward is not a truncation and not a gap",
			maxLag: 100,
			steps: []step{
				{record: []rec{{"t", 0, 0, 0}, {"t", 0, 1, 10}}, want: []mm2.OffsetSync{osync("t", 0, 0, 0)}},
			},
		},
		{
			name:   "pending keeps only the latest per partition, in first-insertion order",
			maxLag: 100,
			steps: []step{
				// every sync below is due (first record of a partition, or an upstream gap)
				{record: []rec{{"a", 0, 0, 0}, {"b", 0, 0, 0}, {"a", 0, 5, 1}, {"c", 1, 0, 0}, {"b", 0, 7, 1}},
					want: []mm2.OffsetSync{osync("a", 0, 5, 1), osync("b", 0, 7, 1), osync("c", 1, 0, 0)}},
			},
		},
		{
			name:   "a due sync removes the delayed one; promote replaces in place or appends",
			maxLag: 100,
			steps: []step{
				{record: []rec{{"a", 0, 0, 0}, {"d", 0, 0, 0}}, want: []mm2.OffsetSync{osync("a", 0, 0, 0), osync("d", 0, 0, 0)}},
				{record: []rec{
					{"a", 0, 1, 1}, // delayed [a]
					{"d", 0, 1, 1}, // delayed [a d]
					{"b", 0, 0, 0}, // pending [b]
					{"c", 0, 0, 0}, // pending [b c]
				}, keep: true},
				{record: []rec{
					{"c", 0, 1, 1}, // delayed [a d c]
					{"a", 0, 9, 2}, // gap: pending [b c a], delayed [d c]
				}, promote: true, want: []mm2.OffsetSync{osync("b", 0, 0, 0), osync("c", 0, 1, 1), osync("a", 0, 9, 2), osync("d", 0, 1, 1)}},
				{promote: true, want: nil},
			},
		},
		{
			name:   "promote replaces a pending sync of the same partition in place",
			maxLag: 100,
			steps: []step{
				{record: []rec{
					{"a", 0, 0, 0}, // pending a (first)
					{"b", 0, 0, 0}, // pending b
					{"a", 0, 1, 1}, // delayed a
				}, promote: true, want: []mm2.OffsetSync{osync("a", 0, 1, 1), osync("b", 0, 0, 0)}},
			},
		},
		{
			name:   "delayed keeps only the latest per partition",
			maxLag: 100,
			steps: []step{
				{record: []rec{{"a", 0, 0, 0}, {"b", 0, 0, 0}}, want: []mm2.OffsetSync{osync("a", 0, 0, 0), osync("b", 0, 0, 0)}},
				{record: []rec{{"b", 0, 1, 1}, {"a", 0, 1, 1}, {"b", 0, 2, 2}, {"a", 0, 2, 2}}, want: nil},
				{promote: true, want: []mm2.OffsetSync{osync("b", 0, 2, 2), osync("a", 0, 2, 2)}},
			},
		},
		{
			name:   "partitions of the same topic are independent",
			maxLag: 100,
			steps: []step{
				{record: []rec{{"t", 0, 0, 0}, {"t", 1, 1, 1}, {"t", 0, 1, 1}, {"t", 1, 2, 2}},
					want: []mm2.OffsetSync{osync("t", 0, 0, 0), osync("t", 1, 1, 1)}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWriter(tc.maxLag)
			for i, st := range tc.steps {
				pending := false
				for _, r := range st.record {
					pending = w.Record(r.topic, r.part, r.up, r.down)
				}
				if len(st.record) > 0 && !st.promote && !st.keep && pending != (len(st.want) > 0) {
					t.Fatalf("step %d: Record reported pending=%v, want %v", i, pending, len(st.want) > 0)
				}
				if st.promote {
					w.PromoteDelayed()
				}
				if st.keep {
					continue
				}
				if got := w.TakePending(); !reflect.DeepEqual(got, st.want) {
					t.Fatalf("step %d: TakePending = %v, want %v", i, got, st.want)
				}
			}
		})
	}
}

func seq(topic string, part int32, up, down int64, n int) []rec {
	out := make([]rec, n)
	for i := range out {
		out[i] = rec{topic, part, up + int64(i), down + int64(i)}
	}
	return out
}
