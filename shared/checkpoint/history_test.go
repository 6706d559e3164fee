package checkpoint

import (
	"testing"

	"github.com/mm2go/mm2go/shared/mm2"
)

func TestHistory(t *testing.T) {
	h := newHistory(8)
	add := func(up, down int64) {
		h.add(mm2.OffsetSync{Topic: "t", Partition: 0, UpstreamOffset: up, DownstreamOffset: down})
	}
	tr := func(up int64) (int64, bool) { return h.translate("t", 0, up) }
	check := func(name string, up, want int64, wantOK bool) {
		t.Helper()
		got, ok := tr(up)
		if ok != wantOK || (ok && got != want) {
			t.Errorf("%s: translate(%d) = %d, %v; want %d, %v", name, up, got, ok, want, wantOK)
		}
	}
	check("empty", 5, 0, false)
	for u := int64(10); u <= 50; u += 10 {
		add(u, u+100)
	}
	check("before the first sync", 5, 0, false)
	check("exactly on a sync", 30, 130, true)
	check("between syncs", 37, 131, true)
	check("past the newest", 99, 151, true)
	check("other partition", 0, 0, false)

	add(50, 160) // the same record copied again later: the later copy wins
	check("equal upstream, later sync", 50, 160, true)
	check("after the later sync", 55, 161, true)

	for u := int64(60); u < 200; u += 10 { // more than 8: the older half goes
		add(u, u+110)
	}
	if n := len(h.parts[partitionKey{"t", 0}]); n > 8 {
		t.Errorf("history holds %d syncs, want at most 8", n)
	}
	check("evicted", 20, 0, false)
	check("kept", 190, 300, true)

	add(5, 500) // upstream rewind (source truncated or recreated)
	check("after an upstream rewind, older position", 190, 501, true)
	check("after an upstream rewind, before the new sync", 3, 0, false)
	add(6, 400) // downstream rewind (target truncated)
	check("after a downstream rewind", 7, 401, true)
	if n := len(h.parts[partitionKey{"t", 0}]); n != 1 {
		t.Errorf("after a rewind the history holds %d syncs, want 1", n)
	}
}
