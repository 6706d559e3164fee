package checkpoint

import (
	"sort"

	"github.com/mm2go/mm2go/shared/mm2"
)

// DefaultHistorySyncs is how many recent offset syncs per source partition the precise
// translation keeps by default.
const DefaultHistorySyncs = 4096

// historyEntry is one offset sync of a partition's history.
type historyEntry struct{ up, down int64 }

// history keeps, per source partition, the most recent offset syncs (up to max) read since the
// last rewind, for Options.PreciseTranslation. MM2's OffsetSyncStore keeps 64 syncs spaced
// exponentially behind the newest, so a group far behind the head translates to a sync far
// behind it; with the history, the closest older sync is used instead.
//
// Each sync (u, d) says the target acknowledged source record u at offset d, and records after
// u were written after d, so resuming a group at u' >= u from d+1 (d if u' == u) never skips a
// record, whichever sync is chosen, as long as neither partition was rewound between that sync
// and now. A sync whose upstream or downstream offset goes back (source truncated or
// recreated, target truncated, a copy restarted from an earlier position) therefore clears the
// partition's history.
type history struct {
	max   int
	parts map[partitionKey][]historyEntry
}

func newHistory(max int) *history {
	if max <= 0 {
		max = DefaultHistorySyncs
	}
	return &history{max: max, parts: map[partitionKey][]historyEntry{}}
}

// add records the next sync read from the offset-syncs topic.
func (h *history) add(s mm2.OffsetSync) {
	k := partitionKey{s.Topic, s.Partition}
	es := h.parts[k]
	if n := len(es); n > 0 && (s.UpstreamOffset < es[n-1].up || s.DownstreamOffset < es[n-1].down) {
		es = es[:0]
	}
	if len(es) == h.max {
		// Drop the older half at once: amortized O(1) per sync.
		keep := h.max / 2
		copy(es, es[len(es)-keep:])
		es = es[:keep]
	}
	h.parts[k] = append(es, historyEntry{s.UpstreamOffset, s.DownstreamOffset})
}

// translate returns the downstream offset for a group at upstream offset upstream, from the
// newest sync at or before it; ok is false when the history has none.
func (h *history) translate(topic string, partition int32, upstream int64) (int64, bool) {
	es := h.parts[partitionKey{topic, partition}]
	// Last entry with up <= upstream; on equal upstream offsets the later sync wins.
	i := sort.Search(len(es), func(i int) bool { return es[i].up > upstream }) - 1
	if i < 0 {
		return 0, false
	}
	if es[i].up == upstream {
		return es[i].down, true
	}
	return es[i].down + 1, true
}
