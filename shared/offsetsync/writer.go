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

// The two ordered sets of a Writer, as indexes into partitionState.slot.
const (
	pendingSet = iota
	delayedSet
)

// partitionState is MM2's OffsetSyncWriter.PartitionState: what the writer remembers about one
// source partition during this task lifetime, plus where the partition's entries are in the
// writer's pending and delayed sets (slot; -1 when absent), so a record reaches both without a
// map lookup.
type partitionState struct {
	tp                 topicPartition
	previousUpstream   int64
	previousDownstream int64
	lastSyncDownstream int64
	// shouldSync is sticky until a sync is queued as pending. Since MM2 3.7 (and here) a due
	// sync is always queued at once, so the stickiness is not observable; it is kept to
	// mirror MM2's PartitionState.
	shouldSync bool
	slot       [2]int
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
// The Writer holds no limit of in-flight sends: MM2's 10 permits are the caller's (a sync
// that finds none stays pending). Several copies may share one Writer (the rules then span
// their calls, as one long-running MirrorSourceTask): each takes the syncs of its own
// partitions through their handles (Partition.TakePending, Partition.PromoteDelayed), never
// another copy's. A Writer is safe for concurrent use.
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
		pending:      orderedSyncs{set: pendingSet},
		delayed:      orderedSyncs{set: delayedSet},
	}
}

// Partition is one source partition of a Writer: Record without looking the partition up.
type Partition struct {
	w  *Writer
	st *partitionState
}

// Partition returns the handle of topic/partition, for callers that record many of its
// records. Handles of the same partition share its state.
func (w *Writer) Partition(topic string, partition int32) Partition {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Partition{w, w.state(topicPartition{topic, partition})}
}

// state returns tp's state, created on first use. w.mu must be held.
func (w *Writer) state(tp topicPartition) *partitionState {
	st := w.states[tp]
	if st == nil {
		st = &partitionState{tp: tp, previousUpstream: -1, previousDownstream: -1, lastSyncDownstream: -1, slot: [2]int{-1, -1}}
		w.states[tp] = st
	}
	return st
}

// Record registers that the source record at offset upstream of topic/partition was written to
// the target at offset downstream (call it once the target acknowledged the write, in
// acknowledgement order per partition, like MirrorSourceTask.commitRecord). It queues an
// offset sync as pending or delayed. It reports whether any sync is pending afterwards (one
// for TakePending to return).
func (w *Writer) Record(topic string, partition int32, upstream, downstream int64) (pending bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.record(w.state(topicPartition{topic, partition}), upstream, downstream)
}

// Record is Writer.Record for the handle's partition, without looking it up, except that it
// reports whether this partition has a sync pending afterwards (other partitions' syncs do
// not count: they are their owners' to take).
func (p Partition) Record(upstream, downstream int64) (pending bool) {
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	p.w.record(p.st, upstream, downstream)
	return p.st.slot[pendingSet] >= 0
}

// TakePending returns the partition's pending sync and removes it from the pending set; ok is
// false when none is pending. Other partitions' syncs stay where they are.
func (p Partition) TakePending() (sync mm2.OffsetSync, ok bool) {
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	i := p.st.slot[pendingSet]
	if i < 0 {
		return mm2.OffsetSync{}, false
	}
	sync = p.w.pending.entries[i].sync
	p.w.pending.remove(p.st)
	return sync, true
}

// PutBack returns sync, taken by TakePending and then not sent, to the pending set, unless the
// partition has a pending sync again (a newer one, which stands).
func (p Partition) PutBack(sync mm2.OffsetSync) {
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	if p.st.slot[pendingSet] >= 0 {
		return
	}
	p.w.pending.put(p.st, sync)
}

// PromoteDelayed is Writer.PromoteDelayed for the handle's partition alone: its delayed sync,
// if any, replaces its pending one or joins the pending set at the end.
func (p Partition) PromoteDelayed() {
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	i := p.st.slot[delayedSet]
	if i < 0 {
		return
	}
	sync := p.w.delayed.entries[i].sync
	p.w.delayed.remove(p.st)
	p.w.pending.put(p.st, sync)
}

// record is Record on st. w.mu must be held.
func (w *Writer) record(st *partitionState, upstream, downstream int64) bool {
	if st.update(upstream, downstream, w.maxOffsetLag) {
		sync := mm2.OffsetSync{Topic: st.tp.topic, Partition: st.tp.partition, UpstreamOffset: upstream, DownstreamOffset: downstream}
		w.delayed.remove(st)
		w.pending.put(st, sync)
		st.shouldSync = false
	} else {
		w.delayed.putOffsets(st, upstream, downstream)
	}
	return w.pending.live > 0
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
		if e.st != nil {
			w.pending.put(e.st, e.sync)
		}
	}
	w.delayed.clear()
}

// orderedSyncs is an insertion-ordered map from partition to its latest sync, with the
// semantics of Java's LinkedHashMap in insertion-order mode. A partition's position in entries
// is its state's slot[set].
type orderedSyncs struct {
	set     int // pendingSet or delayedSet
	entries []orderedEntry
	live    int // entries with a partition
}

type orderedEntry struct {
	st   *partitionState // nil once removed; dead entries are compacted away lazily
	sync mm2.OffsetSync
}

// put replaces the sync of st's partition in place, or appends it.
func (o *orderedSyncs) put(st *partitionState, s mm2.OffsetSync) {
	if i := st.slot[o.set]; i >= 0 {
		o.entries[i].sync = s
		return
	}
	st.slot[o.set] = len(o.entries)
	o.entries = append(o.entries, orderedEntry{st: st, sync: s})
	o.live++
}

// putOffsets is put of st's sync at upstream/downstream: a replaced entry only gets the new
// offsets (a delayed sync is replaced on almost every record).
func (o *orderedSyncs) putOffsets(st *partitionState, upstream, downstream int64) {
	if i := st.slot[o.set]; i >= 0 {
		o.entries[i].sync.UpstreamOffset, o.entries[i].sync.DownstreamOffset = upstream, downstream
		return
	}
	o.put(st, mm2.OffsetSync{Topic: st.tp.topic, Partition: st.tp.partition, UpstreamOffset: upstream, DownstreamOffset: downstream})
}

// remove deletes the entry of st's partition, if any.
func (o *orderedSyncs) remove(st *partitionState) {
	i := st.slot[o.set]
	if i < 0 {
		return
	}
	o.entries[i].st = nil
	st.slot[o.set] = -1
	o.live--
	if o.live == 0 {
		o.clear()
	} else if dead := len(o.entries) - o.live; dead > 32 && dead > o.live {
		o.compact()
	}
}

// compact drops dead entries, keeping the order of the live ones.
func (o *orderedSyncs) compact() {
	live := o.entries[:0]
	for _, e := range o.entries {
		if e.st != nil {
			e.st.slot[o.set] = len(live)
			live = append(live, e)
		}
	}
	clear(o.entries[len(live):])
	o.entries = live
}

// take returns the live syncs in order and empties the map.
func (o *orderedSyncs) take() []mm2.OffsetSync {
	if o.live == 0 {
		o.clear()
		return nil
	}
	out := make([]mm2.OffsetSync, 0, o.live)
	for _, e := range o.entries {
		if e.st != nil {
			out = append(out, e.sync)
		}
	}
	o.clear()
	return out
}

// clear empties the map.
func (o *orderedSyncs) clear() {
	for _, e := range o.entries {
		if e.st != nil {
			e.st.slot[o.set] = -1
		}
	}
	clear(o.entries)
	o.entries = o.entries[:0]
	o.live = 0
}
