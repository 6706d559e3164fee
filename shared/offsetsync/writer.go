package offsetsync

import (
	"sync"

	"github.com/mm2go/mm2go/shared/mm2"
)

// DefaultMaxOffsetLag is MM2's default offset.lag.max.
const DefaultMaxOffsetLag = 100

// topicPartition identifies a source partition.
type topicPartition struct {
	topic     string
	partition int32
}

// partitionState is MM2's OffsetSyncWriter.PartitionState: what the writer remembers about one
// source partition during this task lifetime.
type partitionState struct {
	previousUpstream   int64
	previousDownstream int64
	lastSyncDownstream int64
	// shouldSync is sticky until a sync is queued as pending. Since MM2 3.7 (and here) a due
	// sync is always queued at once, so the stickiness is not observable; it is kept to
	// mirror MM2's PartitionState.
	shouldSync bool
}

// update applies rules 1 and 2 of the writer to an acknowledged record and reports whether a
// sync is due (possibly because an earlier record made it due).
func (p *partitionState) update(upstream, downstream, maxOffsetLag int64) bool {
	noSyncYet := p.lastSyncDownstream == -1
	// Translation goes one past the last sync, hence the +1.
	tooStale := downstream-(p.lastSyncDownstream+1) >= maxOffsetLag
	upstreamGap := upstream-p.previousUpstream != 1
	truncated := downstream < p.previousDownstream
	if noSyncYet || tooStale || upstreamGap || truncated {
		p.lastSyncDownstream = downstream
		p.shouldSync = true
	}
	p.previousUpstream = upstream
	p.previousDownstream = downstream
	return p.shouldSync
}

// Writer decides which replicated records become offset syncs, following MM2's
// OffsetSyncWriter. For each source partition it tracks the previous upstream and downstream
// offsets and the downstream offset of the last sync (all -1 at first). A record's sync is due
// when there was no sync yet, when the translation of the last sync would be at least
// maxOffsetLag behind (d - (lastSyncDownstream+1) >= maxOffsetLag), when upstream offsets have
// a gap (u - previousUpstream != 1) or when the downstream offset went back
// (d < previousDownstream). Once due, the partition stays due until a sync is queued.
//
// Due syncs go to the pending set, which TakePending drains; the others replace the
// partition's entry in the delayed set, which PromoteDelayed moves to pending (MM2 does this
// after every Connect offset commit). Each set holds at most one sync per partition, the
// latest, in the order the partitions were first inserted (Java's LinkedHashMap: replacing an
// entry keeps its place; removing and re-adding moves it to the end).
//
// Unlike MM2 there is no limit of 10 in-flight sends: callers send what TakePending returns in
// batches. A Writer is safe for concurrent use.
type Writer struct {
	maxOffsetLag int64

	mu      sync.Mutex
	states  map[topicPartition]*partitionState
	pending orderedSyncs
	delayed orderedSyncs
}

// NewWriter returns a Writer with offset.lag.max = maxOffsetLag (MM2's default is
// DefaultMaxOffsetLag).
func NewWriter(maxOffsetLag int64) *Writer {
	return &Writer{
		maxOffsetLag: maxOffsetLag,
		states:       make(map[topicPartition]*partitionState),
	}
}

// Record registers that the source record at offset upstream of topic/partition was written to
// the target at offset downstream (call it once the target acknowledged the write, in
// acknowledgement order per partition, like MirrorSourceTask.commitRecord). It queues an
// offset sync as pending or delayed. It reports whether any sync is pending afterwards (one
// for TakePending to return).
func (w *Writer) Record(topic string, partition int32, upstream, downstream int64) (pending bool) {
	tp := topicPartition{topic, partition}
	sync := mm2.OffsetSync{Topic: topic, Partition: partition, UpstreamOffset: upstream, DownstreamOffset: downstream}

	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.states[tp]
	if st == nil {
		st = &partitionState{previousUpstream: -1, previousDownstream: -1, lastSyncDownstream: -1}
		w.states[tp] = st
	}
	if st.update(upstream, downstream, w.maxOffsetLag) {
		w.delayed.remove(tp)
		w.pending.put(tp, sync)
		st.shouldSync = false
	} else {
		w.delayed.put(tp, sync)
	}
	return len(w.pending.index) > 0
}

// TakePending returns the pending offset syncs in insertion order and clears them. It returns
// nil when nothing is pending.
func (w *Writer) TakePending() []mm2.OffsetSync {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pending.take()
}

// PromoteDelayed moves every delayed sync to the pending set (MM2's commit(), KAFKA-15906):
// a delayed sync replaces a pending one of the same partition in place, others are appended
// in their delayed order. Afterwards nothing is delayed.
func (w *Writer) PromoteDelayed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.delayed.entries {
		if e.live {
			w.pending.put(e.tp, e.sync)
		}
	}
	w.delayed.clear()
}

// orderedSyncs is an insertion-ordered map from partition to its latest sync, with the
// semantics of Java's LinkedHashMap in insertion-order mode.
type orderedSyncs struct {
	entries []orderedEntry
	index   map[topicPartition]int // position in entries of the live entry
}

type orderedEntry struct {
	tp   topicPartition
	sync mm2.OffsetSync
	live bool // false once removed; dead entries are compacted away lazily
}

// put replaces the sync of tp in place, or appends it.
func (o *orderedSyncs) put(tp topicPartition, s mm2.OffsetSync) {
	if i, ok := o.index[tp]; ok {
		o.entries[i].sync = s
		return
	}
	if o.index == nil {
		o.index = make(map[topicPartition]int)
	}
	o.index[tp] = len(o.entries)
	o.entries = append(o.entries, orderedEntry{tp: tp, sync: s, live: true})
}

// remove deletes tp's entry, if any.
func (o *orderedSyncs) remove(tp topicPartition) {
	i, ok := o.index[tp]
	if !ok {
		return
	}
	o.entries[i].live = false
	delete(o.index, tp)
	if len(o.index) == 0 {
		o.clear()
	} else if dead := len(o.entries) - len(o.index); dead > 32 && dead > len(o.index) {
		o.compact()
	}
}

// compact drops dead entries, keeping the order of the live ones.
func (o *orderedSyncs) compact() {
	live := o.entries[:0]
	for _, e := range o.entries {
		if e.live {
			o.index[e.tp] = len(live)
			live = append(live, e)
		}
	}
	clear(o.entries[len(live):])
	o.entries = live
}

// take returns the live syncs in order and empties the map.
func (o *orderedSyncs) take() []mm2.OffsetSync {
	if len(o.index) == 0 {
		o.clear()
		return nil
	}
	out := make([]mm2.OffsetSync, 0, len(o.index))
	for _, e := range o.entries {
		if e.live {
			out = append(out, e.sync)
		}
	}
	o.clear()
	return out
}

func (o *orderedSyncs) clear() {
	o.entries = o.entries[:0]
	clear(o.index)
}
