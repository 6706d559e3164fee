package offsetsync

import (
	"sync"

	"github.com/mm2go/mm2go/shared/mm2"
)

// SlotsPerPartition is the number of syncs the Store keeps per source partition (MM2's
// OffsetSyncStore.SYNCS_PER_PARTITION = Long.SIZE).
const SlotsPerPartition = 64

// syncArray is one partition's slots. Slots hold pointers: MM2 compares OffsetSync objects by
// reference, so two syncs with equal contents read from the topic are still different.
type syncArray [SlotsPerPartition]*mm2.OffsetSync

// StoreOption configures a Store.
type StoreOption func(*Store)

// WithInitializationMustReadToEnd sets MM2's initializationMustReadToEnd flag (default false).
//
// When true, every sync added before ReadToEnd overwrites all 64 slots of its partition, so
// that after the initial catch-up only the newest sync of each partition is known and every
// translation is at least as far ahead as any checkpoint emitted before. MM2 3.4.1 to 3.7
// always behaved this way; 3.8+ (KAFKA-15905) does so only when the checkpoints topic failed
// to load at task start, and otherwise keeps history from the initial read (the default here).
func WithInitializationMustReadToEnd(must bool) StoreOption {
	return func(s *Store) { s.mustReadToEnd = must }
}

// Store is the translation index of MM2's OffsetSyncStore (KAFKA-14666): for each source
// partition an array of 64 slots holding past offset syncs, spaced roughly exponentially
// behind the newest one (slot 0), so that old consumer group positions can still be
// translated, coarsely.
//
// Feed it every record of the offset-syncs topic (partition 0) in order with Add, call
// ReadToEnd once the initial read reached the end offset, then Translate. A Store is safe for
// concurrent use.
type Store struct {
	mustReadToEnd bool

	mu        sync.RWMutex
	readToEnd bool
	syncs     map[topicPartition]*syncArray // arrays are replaced, never modified (copy-on-write)
}

// NewStore returns an empty Store that has not been read to end.
func NewStore(opts ...StoreOption) *Store {
	s := &Store{syncs: make(map[topicPartition]*syncArray)}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Add registers the next record of the offset-syncs topic. Each call creates a distinct sync
// object: like MM2, the slot algorithm tells records apart by identity, not by value.
func (s *Store) Add(sync mm2.OffsetSync) {
	fresh := &sync
	tp := topicPartition{sync.Topic, sync.Partition}

	s.mu.Lock()
	defer s.mu.Unlock()
	orig := s.syncs[tp]
	next := new(syncArray)
	if orig == nil {
		fill(next, fresh)
	} else {
		*next = *orig
		s.update(next, orig, fresh)
	}
	s.syncs[tp] = next
}

// ReadToEnd records that the initial read of the offset-syncs topic reached its end: from now
// on Translate answers, and (with WithInitializationMustReadToEnd) Add keeps history.
func (s *Store) ReadToEnd() {
	s.mu.Lock()
	s.readToEnd = true
	s.mu.Unlock()
}

// Translate maps a consumer group's committed upstream offset of topic/partition to the
// downstream offset a checkpoint should carry, like OffsetSyncStore.translateDownstream.
//
// ok is false (no checkpoint) before ReadToEnd and for a partition without any sync. Otherwise
// the newest retained sync with upstream offset <= upstream is used (slot 63 if none):
// downstream is -1 if even that sync is ahead of upstream (the group is older than every
// retained sync; MM2 drops such checkpoints), the sync's downstream offset if upstream equals
// its upstream offset, and one past it otherwise. Translation never goes further than one past
// a sync, because nothing says how many of the following records were replicated.
func (s *Store) Translate(topic string, partition int32, upstream int64) (downstream int64, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.readToEnd {
		return 0, false
	}
	arr := s.syncs[topicPartition{topic, partition}]
	if arr == nil {
		return 0, false
	}
	sync := arr[SlotsPerPartition-1]
	for _, cand := range arr {
		if cand.UpstreamOffset <= upstream {
			sync = cand
			break
		}
	}
	switch {
	case sync.UpstreamOffset > upstream:
		return -1, true
	case sync.UpstreamOffset == upstream:
		return sync.DownstreamOffset, true
	default:
		return sync.DownstreamOffset + 1, true
	}
}

// Slots returns a copy of the 64 slots of topic/partition, slot 0 (the newest sync) first, or
// nil if the partition has no sync. It is meant for diagnostics (the status command) and tests.
func (s *Store) Slots(topic string, partition int32) []mm2.OffsetSync {
	s.mu.RLock()
	defer s.mu.RUnlock()
	arr := s.syncs[topicPartition{topic, partition}]
	if arr == nil {
		return nil
	}
	out := make([]mm2.OffsetSync, SlotsPerPartition)
	for i, p := range arr {
		out[i] = *p
	}
	return out
}

func fill(arr *syncArray, sync *mm2.OffsetSync) {
	for i := range arr {
		arr[i] = sync
	}
}

// update is OffsetSyncStore.updateSyncArray: it rewrites syncs (a copy of orig) so that slot 0
// is fresh while keeping as many older syncs of orig as the invariants allow. The invariants
// between slots i < j holding distinct syncs are:
//
//	A: slot 0 is the newest sync;
//	B: syncs[i].up <= syncs[j].up + 2^j - 2^i (slot j is not too old);
//	C: syncs[i].up >= syncs[j].up + 2^max(i-2,0) (slots are separated);
//	D: slot 63 is the oldest sync still usable.
//
// Arithmetic wraps like Java's long. The caller holds s.mu.
func (s *Store) update(syncs, orig *syncArray, fresh *mm2.OffsetSync) {
	// During a catch-up that must read to end, and whenever upstream offsets rewind, all
	// older syncs are unusable: forget them.
	if (!s.readToEnd && s.mustReadToEnd) || syncs[0].UpstreamOffset > fresh.UpstreamOffset {
		fill(syncs, fresh)
		return
	}
	replacement := fresh
	ri := 0 // index into orig of the next candidate to keep
	syncs[0] = fresh
	for cur := 1; cur < SlotsPerPartition; cur++ {
		prev := cur - 1
		for {
			old := orig[ri]
			// Is old recent enough for slot cur? If not it may fit a later slot, so it is
			// not skipped.
			recent := invariantB(syncs[prev], old, prev, cur)
			// Is it far enough from the previous slot? More recent syncs of similar
			// precision (the current replacement) win over it.
			sepPrev := invariantC(syncs[prev], old, prev)
			// Is it far enough from the next slot? Existing coarser syncs win over it.
			sepNext := cur+1 >= SlotsPerPartition || invariantC(old, syncs[cur+1], cur)
			// Runs of the same object in orig count once.
			dup := ri+1 < SlotsPerPartition && orig[ri+1] == old

			promote := recent && sepPrev && sepNext
			if promote {
				replacement = old
			}
			skip := dup || !sepPrev
			if promote || skip {
				ri++
			}
			if ri >= cur || !skip {
				break
			}
		}
		if invariantB(syncs[prev], syncs[cur], prev, cur) {
			// The rest of the array already satisfies the invariants.
			break
		}
		syncs[cur] = replacement
	}
}

// invariantB reports whether x (slot i) and y (slot j > i) satisfy invariant B. A bound that
// overflows to a negative number counts as satisfied, as in MM2.
func invariantB(x, y *mm2.OffsetSync, i, j int) bool {
	bound := y.UpstreamOffset + (int64(1) << j) - (int64(1) << i)
	return x == y || bound < 0 || x.UpstreamOffset <= bound
}

// invariantC reports whether x (slot i) and y (slot i+1) satisfy invariant C. A bound that
// overflows to a negative number counts as violated, as in MM2.
func invariantC(x, y *mm2.OffsetSync, i int) bool {
	bound := y.UpstreamOffset + (int64(1) << max(i-2, 0))
	return x == y || (bound >= 0 && x.UpstreamOffset >= bound)
}
