package checkpoint

import (
	"log/slog"
	"testing"

	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/shared/policy"
	"github.com/mm2go/mm2go/shared/round"
)

func TestMoreRecent(t *testing.T) {
	last := mm2.Checkpoint{UpstreamOffset: 100, DownstreamOffset: 50}
	for _, tc := range []struct {
		name     string
		stored   bool
		up, down int64
		want     bool
	}{
		{"nothing stored", false, 100, 50, true},
		{"duplicate", true, 100, 50, false},
		{"downstream up", true, 120, 60, true},
		{"downstream up, same upstream", true, 100, 51, true},
		{"upstream down (group rewound on the source)", true, 90, 40, true},
		{"upstream down, downstream up", true, 90, 70, true},
		{"downstream down, same upstream (would rewind the target)", true, 100, 49, false},
		{"downstream down, upstream up", true, 130, 45, false},
		{"same downstream, upstream up", true, 130, 50, false},
	} {
		c := mm2.Checkpoint{UpstreamOffset: tc.up, DownstreamOffset: tc.down}
		if got := moreRecent(last, tc.stored, c); got != tc.want {
			t.Errorf("%s: moreRecent = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRenameTopic(t *testing.T) {
	for _, tc := range []struct {
		pol        policy.Policy
		topic, out string
	}{
		{policy.NewDefault(".", true), "orders", "A.orders"},
		{policy.NewDefault(".", true), "B.orders", "orders"},     // came from the target: back to its name
		{policy.NewDefault(".", true), "C.orders", "A.C.orders"}, // from a third cluster
		{policy.NewDefault(".", true), "C.B.orders", "A.C.B.orders"},
		{policy.NewDefault("_", true), "B_orders", "orders"},
		{policy.NewIdentity("A", ".", true), "orders", "orders"},
		{policy.NewIdentity("A", ".", true), "heartbeats", "A.heartbeats"},
	} {
		j := &Job{opts: Options{Flow: round.Flow{SourceAlias: "A", TargetAlias: "B", Policy: tc.pol}}}
		if got := j.renameTopic(tc.topic); got != tc.out {
			t.Errorf("%T: rename %q = %q, want %q", tc.pol, tc.topic, got, tc.out)
		}
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
