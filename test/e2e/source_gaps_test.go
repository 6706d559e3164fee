package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/mm2go/mm2go/shared/engine"
	"github.com/mm2go/mm2go/shared/ops"
	"github.com/mm2go/mm2go/test/testkit"
)

// TestSourceGapsReported: records deleted on the source (DeleteRecords) past the stored
// position, and a source topic deleted and recreated, are reported: `mirror status` and
// `mirror verify` before the run, then the run's WARN line and summary `gaps`, which copies
// from the log start.
func TestSourceGapsReported(t *testing.T) {
	c := testkit.Require(t)
	ctx := testkit.Context(t, 3*time.Minute)
	deleted := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "deleted"), 1, nil)
	recreated := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "recreated"), 1, nil)
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, "source."+deleted, "source."+recreated)
	testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(deleted, 1, 10)...)
	testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(recreated, 1, 10)...)
	env := MirrorEnv(c, deleted+","+recreated)
	if r := RunMirror(t, env); r.Code != 0 || r.Records() != 20 {
		t.Fatalf("first run: exit %d, %d records\n%s", r.Code, r.Records(), r.Stderr)
	}

	// 10 more records, of which DeleteRecords removes the first 5 before they were mirrored.
	testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(deleted, 1, 10)...)
	adm := testkit.Admin(t, c.Source.Bootstrap)
	resp, err := adm.DeleteRecords(ctx, kadm.Offsets{deleted: {0: {Topic: deleted, Partition: 0, At: 15, LeaderEpoch: -1}}})
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("DeleteRecords: %v", err)
	}
	// The other topic is deleted and recreated with 3 records: the stored position 9 is beyond
	// its end.
	if _, err := adm.DeleteTopics(ctx, recreated); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, time.Minute, "topic recreated", func() bool {
		r, err := adm.CreateTopic(ctx, 1, 1, nil, recreated)
		return err == nil && r.Err == nil
	})
	testkit.WaitFor(t, time.Minute, "recreated topic writable", func() bool {
		cl := testkit.Client(t, c.Source.Bootstrap)
		defer cl.Close()
		return cl.ProduceSync(ctx, testkit.SampleRecords(recreated, 1, 3)...).FirstErr() == nil
	})
	wantDeleted := engine.Gap{Topic: deleted, Partition: 0, Kind: engine.GapDeleted, Position: 9, From: 10, To: 15, Records: 5}
	wantRecreated := engine.Gap{Topic: recreated, Partition: 0, Kind: engine.GapRecreated, Position: 9, From: 10, To: -1, Records: -1}

	o := opsFor(t, env)
	st, err := o.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ps := partitionStatus(t, st, deleted, 0); ps.Gap == nil || *ps.Gap != wantDeleted || ps.Lag != 5 {
		t.Errorf("status of %s: gap %+v lag %d, want %+v lag 5", deleted, ps.Gap, ps.Lag, wantDeleted)
	}
	if ps := partitionStatus(t, st, recreated, 0); ps.Gap == nil || *ps.Gap != wantRecreated || ps.Lag != 3 {
		t.Errorf("status of %s: gap %+v lag %d, want %+v lag 3", recreated, ps.Gap, ps.Lag, wantRecreated)
	}
	if code, text, _ := runMirrorCmd(t, env, "status"); code != 0 || !strings.Contains(text, "offsets 10-14 (5 records) were deleted on the source before they were mirrored") {
		t.Errorf("mirror status: exit %d\n%s", code, text)
	}
	code, out, _ := runMirrorCmd(t, env, "verify", "-o", "json")
	var v ops.Verification
	decodeJSON(t, out, &v)
	if code == 0 || v.Complete || v.Gaps != 2 {
		t.Errorf("mirror verify: exit %d, complete %v, gaps %d; want a failure with 2 gaps\n%s", code, v.Complete, v.Gaps, out)
	}

	r := RunMirror(t, env)
	if r.Code != 0 || r.Records() != 5+3 {
		t.Fatalf("second run: exit %d, %d records, want 8\n%s", r.Code, r.Records(), r.Stderr)
	}
	var sum engine.Summary
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.Stdout)), &sum); err != nil {
		t.Fatal(err)
	}
	byTopic := map[string]engine.Gap{}
	for _, g := range sum.Gaps {
		byTopic[g.Topic] = g
	}
	if len(sum.Gaps) != 2 || byTopic[deleted] != wantDeleted || byTopic[recreated] != wantRecreated {
		t.Errorf("summary gaps %+v, want %+v and %+v", sum.Gaps, wantDeleted, wantRecreated)
	}
	warns := 0
	for _, line := range strings.Split(r.Stderr, "\n") {
		if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, "source records lost before they were mirrored") {
			warns++
			if strings.Contains(line, deleted) && !strings.Contains(line, `"missing_records":5`) {
				t.Errorf("WARN line without the count: %s", line)
			}
		}
	}
	if warns != 2 {
		t.Errorf("%d gap WARN lines, want 2\n%s", warns, r.Stderr)
	}
	if n := EndOffsetsSum(ctx, c.Target.Bootstrap, "source."+deleted); n != 15 {
		t.Errorf("remote %s holds %d records, want 10+5", deleted, n)
	}
	if n := EndOffsetsSum(ctx, c.Target.Bootstrap, "source."+recreated); n != 13 {
		t.Errorf("remote %s holds %d records, want 10+3", recreated, n)
	}
	// Reported once: the positions are back in the log.
	if r := RunMirror(t, env); r.Code != 0 || r.Records() != 0 || r.Summary["gaps"] != nil {
		t.Errorf("third run: exit %d, %d records, gaps %v", r.Code, r.Records(), r.Summary["gaps"])
	}
}
