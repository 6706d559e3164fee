package ops

import (
	"hash/fnv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/shared/offsetsync"
)

// feed returns a stream of items whose digests are the given values, at offsets from first.
func feed(first int64, values ...int) *stream {
	ch := make(chan item, len(values))
	for i, v := range values {
		var h [16]byte
		h[0], h[1] = byte(v), byte(v>>8)
		ch <- item{off: first + int64(i), h: h}
	}
	close(ch)
	return &stream{ch: ch, hash: fnv.New64a()}
}

func TestWalk(t *testing.T) {
	for _, tc := range []struct {
		name     string
		src, tgt []int
		want     []Difference
		matched  int64
	}{
		{name: "same", src: []int{1, 2, 3}, tgt: []int{1, 2, 3}, matched: 3},
		{name: "missing", src: []int{1, 2, 3, 4}, tgt: []int{1, 3, 4}, matched: 3,
			want: []Difference{{Missing, 1, -1}}},
		{name: "extra", src: []int{1, 2, 3}, tgt: []int{1, 9, 2, 3}, matched: 3,
			want: []Difference{{Extra, -1, 1}}},
		{name: "differing", src: []int{1, 2, 3}, tgt: []int{1, 8, 3}, matched: 2,
			want: []Difference{{Differing, 1, 1}}},
		{name: "replayed range is extra", src: []int{1, 2, 3, 4, 5}, tgt: []int{1, 2, 3, 2, 3, 4, 5}, matched: 5,
			want: []Difference{{Extra, -1, 3}, {Extra, -1, 4}}},
		{name: "trailing extra", src: []int{1, 2}, tgt: []int{1, 2, 7}, matched: 2,
			want: []Difference{{Extra, -1, 2}}},
		{name: "target short", src: []int{1, 2, 3}, tgt: []int{1}, matched: 1,
			want: []Difference{{Missing, 1, -1}, {Missing, 2, -1}}},
		{name: "empty target", src: []int{1}, tgt: nil,
			want: []Difference{{Missing, 0, -1}}},
		{name: "run of missing", src: []int{1, 2, 3, 4, 5, 6}, tgt: []int{1, 5, 6}, matched: 3,
			want: []Difference{{Missing, 1, -1}, {Missing, 2, -1}, {Missing, 3, -1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pv := &PartitionVerify{}
			src, tgt := feed(0, tc.src...), feed(0, tc.tgt...)
			walk(src, tgt, pv, VerifyOptions{MaxListed: 100, Lookahead: 64})
			if pv.Matched != tc.matched || len(pv.Differences) != len(tc.want) {
				t.Fatalf("matched %d, differences %+v; want %d, %+v", pv.Matched, pv.Differences, tc.matched, tc.want)
			}
			for i := range tc.want {
				if pv.Differences[i] != tc.want[i] {
					t.Errorf("difference %d: %+v, want %+v", i, pv.Differences[i], tc.want[i])
				}
			}
			if src.n != int64(len(tc.src)) || tgt.n != int64(len(tc.tgt)) {
				t.Errorf("counted %d/%d records, want %d/%d", src.n, tgt.n, len(tc.src), len(tc.tgt))
			}
			same := len(tc.want) == 0
			if (string(src.hash.Sum(nil)) == string(tgt.hash.Sum(nil))) != same {
				t.Errorf("digests equal = %v, want %v", !same, same)
			}
		})
	}
}

func TestWalkListsAtMostMaxListed(t *testing.T) {
	pv := &PartitionVerify{}
	walk(feed(0, 1, 2, 3, 4, 5), feed(0), pv, VerifyOptions{MaxListed: 2, Lookahead: 4})
	if pv.Missing != 5 || len(pv.Differences) != 2 {
		t.Fatalf("missing %d, listed %d", pv.Missing, len(pv.Differences))
	}
}

func TestAlign(t *testing.T) {
	syncs := []mm2.OffsetSync{
		{UpstreamOffset: 5, DownstreamOffset: 0}, // target started later than the source
		{UpstreamOffset: 50, DownstreamOffset: 45},
		{UpstreamOffset: 90, DownstreamOffset: 85},
	}
	for _, tc := range []struct {
		name                                   string
		syncs                                  []mm2.OffsetSync
		srcStart, srcTo, tgtStart, tgtTo, last int64
		u, d                                   int64
		bySync                                 bool
	}{
		{"oldest", syncs, 0, 100, 0, 95, 0, 5, 0, true},
		{"oldest inside the logs", syncs, 10, 100, 0, 95, 0, 50, 45, true},
		{"target truncated", syncs, 0, 100, 50, 95, 0, 90, 85, true},
		{"last", syncs, 0, 100, 0, 95, 20, 50, 45, true},
		{"last reaches back", syncs, 0, 100, 0, 95, 99, 5, 0, true},
		{"no sync", nil, 3, 100, 7, 95, 0, 3, 7, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, d, how := align(tc.syncs, tc.srcStart, tc.srcTo, tc.tgtStart, tc.tgtTo, tc.last)
			if u != tc.u || d != tc.d || strings.HasPrefix(how, "offset sync") != tc.bySync {
				t.Errorf("align = %d, %d, %q; want %d, %d (by sync %v)", u, d, how, tc.u, tc.d, tc.bySync)
			}
		})
	}
}

func TestMapBack(t *testing.T) {
	s := offsetsync.NewStore()
	s.Add(mm2.OffsetSync{Topic: "t", Partition: 0, UpstreamOffset: 0, DownstreamOffset: 0})
	s.Add(mm2.OffsetSync{Topic: "t", Partition: 0, UpstreamOffset: 200, DownstreamOffset: 150})
	s.ReadToEnd()
	for _, tc := range []struct {
		down, want int64
		ok         bool
	}{{1, 1, true}, {150, 200, true}, {151, 201, true}, {149, 149, true}} {
		got, ok := mapBack(s, "t", 0, tc.down)
		if got != tc.want || ok != tc.ok {
			t.Errorf("mapBack(%d) = %d, %v; want %d, %v", tc.down, got, ok, tc.want, tc.ok)
		}
	}
	if _, ok := mapBack(s, "t", 1, 10); ok {
		t.Error("mapBack on a partition without syncs")
	}
}

func TestDigest(t *testing.T) {
	hs := fnv.New128a()
	ts := time.UnixMilli(1700000000000)
	base := &kgo.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: ts, Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: nil}}}
	d0 := digest(hs, base)
	for name, mut := range map[string]func(r *kgo.Record){
		"nil key":        func(r *kgo.Record) { r.Key = nil },
		"empty value":    func(r *kgo.Record) { r.Value = []byte{} },
		"header order":   func(r *kgo.Record) { r.Headers[0], r.Headers[1] = r.Headers[1], r.Headers[0] },
		"header empty":   func(r *kgo.Record) { r.Headers[1].Value = []byte{} },
		"timestamp":      func(r *kgo.Record) { r.Timestamp = ts.Add(time.Millisecond) },
		"key into value": func(r *kgo.Record) { r.Key, r.Value = nil, []byte("kv") },
	} {
		r := *base
		r.Headers = append([]kgo.RecordHeader(nil), base.Headers...)
		mut(&r)
		if digest(hs, &r) == d0 {
			t.Errorf("%s: same digest", name)
		}
	}
	same := *base
	same.Offset, same.Partition, same.Topic = 99, 3, "other" // position is not content
	if digest(hs, &same) != d0 {
		t.Error("offset, partition or topic changed the digest")
	}
}
