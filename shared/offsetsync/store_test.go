package offsetsync

import (
	"testing"

	"github.com/mm2go/mm2go/shared/mm2"
)

const (
	tTopic = "orders"
	tPart  = int32(3)
)

func addSync(s *Store, up, down int64) {
	s.Add(mm2.OffsetSync{Topic: tTopic, Partition: tPart, UpstreamOffset: up, DownstreamOffset: down})
}

// slotUpstreams returns the upstream offsets of the 64 slots.
func slotUpstreams(t *testing.T, s *Store) []int64 {
	t.Helper()
	slots := s.Slots(tTopic, tPart)
	if len(slots) != SlotsPerPartition {
		t.Fatalf("Slots returned %d slots", len(slots))
	}
	out := make([]int64, len(slots))
	for i, sl := range slots {
		out[i] = sl.UpstreamOffset
	}
	return out
}

func checkTranslate(t *testing.T, s *Store, up, want int64) {
	t.Helper()
	got, ok := s.Translate(tTopic, tPart, up)
	if !ok || got != want {
		t.Errorf("Translate(%d) = %d, %v; want %d, true", up, got, ok, want)
	}
}

// TestStoreVerifiedExample reproduces the "Verified example" of mm2-internals.md section 4.3,
// which was produced by running MM2's real OffsetSyncStore.
func TestStoreVerifiedExample(t *testing.T) {
	s := NewStore()
	s.ReadToEnd() // live mode
	for up := int64(0); up <= 1000; up += 100 {
		addSync(s, up, up+7)
	}
	slots := s.Slots(tTopic, tPart)
	for i, sl := range slots {
		var want int64
		switch {
		case i <= 7:
			want = 1000
		case i == 8:
			want = 900
		case i == 9:
			want = 800
		case i == 10:
			want = 400
		default:
			want = 0
		}
		if sl.UpstreamOffset != want || sl.DownstreamOffset != want+7 || sl.Topic != tTopic || sl.Partition != tPart {
			t.Errorf("slot %d = %v, want %d->%d", i, sl, want, want+7)
		}
	}
	for _, tc := range []struct{ up, want int64 }{
		{0, 7}, {1, 8}, {100, 8}, {550, 408}, {999, 908}, {1000, 1007}, {1001, 1008}, {5000, 1008},
	} {
		checkTranslate(t, s, tc.up, tc.want)
	}

	// An upstream rewind replaces every slot.
	addSync(s, 20, 2000)
	for i, sl := range s.Slots(tTopic, tPart) {
		if sl.UpstreamOffset != 20 || sl.DownstreamOffset != 2000 {
			t.Errorf("after rewind slot %d = %v, want 20->2000", i, sl)
		}
	}
	checkTranslate(t, s, 10, -1)
	checkTranslate(t, s, 500, 2001)
	checkTranslate(t, s, 20, 2000)
}

func TestStoreDenseSyncs(t *testing.T) {
	s := NewStore()
	s.ReadToEnd()
	for up := int64(0); up <= 200; up++ {
		addSync(s, up, 2*up)
	}
	want := []int64{200, 199, 198, 196, 192, 176, 160, 128, 0}
	got := slotUpstreams(t, s)
	for i, up := range got {
		w := int64(0)
		if i < len(want) {
			w = want[i]
		}
		if up != w {
			t.Errorf("slot %d upstream = %d, want %d (slots %v)", i, up, w, got[:12])
		}
	}
	// Translation between retained syncs points one past the older one.
	checkTranslate(t, s, 197, 2*196+1)
	checkTranslate(t, s, 130, 2*128+1)
	checkTranslate(t, s, 128, 256)
	checkTranslate(t, s, 5, 1)
}

func TestStoreNotReadToEnd(t *testing.T) {
	s := NewStore()
	addSync(s, 10, 20)
	if _, ok := s.Translate(tTopic, tPart, 10); ok {
		t.Error("Translate answered before ReadToEnd")
	}
	s.ReadToEnd()
	checkTranslate(t, s, 10, 20)
	if _, ok := s.Translate(tTopic, tPart+1, 10); ok {
		t.Error("Translate answered for a partition without syncs")
	}
	if _, ok := s.Translate("other", tPart, 10); ok {
		t.Error("Translate answered for a topic without syncs")
	}
	if s.Slots("other", 0) != nil {
		t.Error("Slots of an unknown partition is not nil")
	}
}

func TestStoreEmptyBeforeAnySync(t *testing.T) {
	s := NewStore()
	s.ReadToEnd()
	if _, ok := s.Translate(tTopic, tPart, 0); ok {
		t.Error("Translate answered with no syncs at all")
	}
}

// TestStoreInitialRead contrasts the two initial-read modes of MM2 3.8+.
func TestStoreInitialRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		must bool
		// translations after the catch-up (syncs 0,100,...,1000) and one live sync at 1100
		want map[int64]int64
	}{
		{"keep history (checkpoints loaded)", false, map[int64]int64{0: 7, 550: 408, 1000: 1007, 1100: 1107}},
		// Only the newest sync of the catch-up survives: older groups translate to -1.
		{"must read to end (checkpoints failed to load)", true, map[int64]int64{0: -1, 550: -1, 999: -1, 1000: 1007, 1050: 1008, 1100: 1107}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore(WithInitializationMustReadToEnd(tc.must))
			for up := int64(0); up <= 1000; up += 100 {
				addSync(s, up, up+7)
			}
			s.ReadToEnd()
			addSync(s, 1100, 1107)
			for up, want := range tc.want {
				checkTranslate(t, s, up, want)
			}
		})
	}
}

func TestStoreIdentityNotValue(t *testing.T) {
	// Equal syncs read twice are distinct objects, as in Java: the second one does not
	// simply collapse into the first.
	s := NewStore()
	s.ReadToEnd()
	addSync(s, 0, 0)
	addSync(s, 5, 5)
	addSync(s, 5, 5)
	arr := s.syncs[topicPartition{tTopic, tPart}]
	if arr[0] == arr[1] {
		t.Fatalf("slot 0 and 1 are the same object")
	}
	if *arr[0] != *arr[1] {
		t.Fatalf("slot 1 = %v, want an equal copy of slot 0 = %v", *arr[1], *arr[0])
	}
	checkTranslate(t, s, 5, 5)
	checkTranslate(t, s, 4, 1)
}

func TestStoreWrappingArithmetic(t *testing.T) {
	s := NewStore()
	s.ReadToEnd()
	for i := int64(100); i >= 0; i-- {
		up := int64(1<<63-1) - i
		addSync(s, up, up)
	}
	checkTranslate(t, s, 1<<63-1, 1<<63-1)
	slots := slotUpstreams(t, s)
	if slots[0] != 1<<63-1 {
		t.Errorf("slot 0 = %d", slots[0])
	}
	// downstream+1 wraps like Java's long.
	s2 := NewStore()
	s2.ReadToEnd()
	addSync(s2, 0, 1<<63-1)
	checkTranslate(t, s2, 1, -1<<63)
}

func TestStorePartitionsIndependent(t *testing.T) {
	s := NewStore()
	s.ReadToEnd()
	s.Add(mm2.OffsetSync{Topic: "a", Partition: 0, UpstreamOffset: 10, DownstreamOffset: 100})
	s.Add(mm2.OffsetSync{Topic: "a", Partition: 1, UpstreamOffset: 10, DownstreamOffset: 200})
	s.Add(mm2.OffsetSync{Topic: "b", Partition: 0, UpstreamOffset: 5, DownstreamOffset: 300})
	for _, tc := range []struct {
		topic string
		part  int32
		up    int64
		want  int64
	}{
		{"a", 0, 10, 100}, {"a", 1, 11, 201}, {"b", 0, 5, 300}, {"b", 0, 4, -1},
	} {
		if got, ok := s.Translate(tc.topic, tc.part, tc.up); !ok || got != tc.want {
			t.Errorf("Translate(%s-%d, %d) = %d, %v; want %d", tc.topic, tc.part, tc.up, got, ok, tc.want)
		}
	}
}
