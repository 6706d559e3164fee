package ops

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSameRecord: what a consumer sees of a record decides, field by field.
func TestSameRecord(t *testing.T) {
	ts := time.UnixMilli(1_600_000_000_000)
	base := func() *kgo.Record {
		return &kgo.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: ts, Offset: 7,
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte{1}}}}
	}
	for _, tc := range []struct {
		name   string
		change func(r *kgo.Record)
		same   bool
	}{
		{"offset only", func(r *kgo.Record) { r.Offset = 3 }, true},
		{"key", func(r *kgo.Record) { r.Key = []byte("x") }, false},
		{"null key", func(r *kgo.Record) { r.Key = nil }, false},
		{"value", func(r *kgo.Record) { r.Value = []byte("w") }, false},
		{"tombstone", func(r *kgo.Record) { r.Value = nil }, false},
		{"timestamp", func(r *kgo.Record) { r.Timestamp = ts.Add(time.Millisecond) }, false},
		{"header value", func(r *kgo.Record) { r.Headers[0].Value = []byte{2} }, false},
		{"header added", func(r *kgo.Record) { r.Headers = append(r.Headers, kgo.RecordHeader{Key: "h2"}) }, false},
	} {
		b := base()
		tc.change(b)
		if got := sameRecord(base(), b); got != tc.same {
			t.Errorf("%s: sameRecord %v, want %v", tc.name, got, tc.same)
		}
	}
}

// TestCutoverVerdict: exit 0 only when every row is exact; a dry run says nothing was written.
func TestCutoverVerdict(t *testing.T) {
	exact := CutoverPartition{Group: "g", Topic: "t", Partition: 0, State: StateExact}
	gap := CutoverPartition{Group: "g", Topic: "t", Partition: 1, State: StateGap}
	c := (&Cutover{Partitions: []CutoverPartition{exact}}).conclude()
	if c.ExitCode != CutoverGo || !c.Go || !strings.HasPrefix(c.Verdict, "GO:") {
		t.Errorf("all exact: %+v", c)
	}
	c = (&Cutover{Partitions: []CutoverPartition{exact, gap}}).conclude()
	if c.ExitCode != CutoverNoGo || c.Go || !strings.Contains(c.Verdict, "g t-1 gap") {
		t.Errorf("one gap: %+v", c)
	}
	planned := exact
	planned.State = StatePlanned
	c = (&Cutover{DryRun: true, Partitions: []CutoverPartition{planned}}).conclude()
	if c.ExitCode != CutoverGo || !strings.Contains(c.Verdict, "nothing was written") {
		t.Errorf("dry run: %+v", c)
	}
	in := []GroupMembers{{Group: "g", Cluster: "target", ClientIDs: []string{"app-1", "app-2"}}}
	if d := describeInUse(in); !strings.Contains(d, "app-1, app-2") || !strings.Contains(d, "target") || !hasTarget(in) {
		t.Errorf("in use: %q", d)
	}
}
