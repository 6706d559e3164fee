package e2e

import (
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/app"
	"github.com/mm2go/mm2go/shared/config"
	"github.com/mm2go/mm2go/shared/ops"
	"github.com/mm2go/mm2go/test/testkit"
)

// TestOpsStatusAndVerifyMirror: after a complete mm2go copy and a checkpoint round, status
// shows every position at the source end (lag 0), the newest offset syncs, the group's
// checkpoints and what a failover would re-read; `mirror status -o json` says the same;
// `mirror verify` exits 0 and reports every record matched.
func TestOpsStatusAndVerifyMirror(t *testing.T) {
	c := testkit.Require(t)
	ctx := testkit.Context(t, 3*time.Minute)
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "status"), 2, nil)
	remote := "source." + topic
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, remote)
	testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 2, 40)...)
	group := testkit.Name(t, "g")
	env := MirrorEnv(c, topic, "MM2_GROUPS="+group, "MM2_CHECKPOINTS_TOPIC_REPLICATION_FACTOR=1")

	if r := RunMirror(t, env); r.Code != 0 || r.Records() != 40 {
		t.Fatalf("mirror run: exit %d, %d records\n%s", r.Code, r.Records(), r.Stderr)
	}
	commitGroup(t, c.Source.Bootstrap, group, topic, map[int32]int64{0: 10, 1: 20}, "")
	cfg, err := config.Load(envMap(env), nil)
	if err != nil {
		t.Fatal(err)
	}
	job, err := app.CheckpointJob(ctx, cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close()
	if sum, err := job.Round(ctx); err != nil || sum.CheckpointsWritten < 2 {
		t.Fatalf("checkpoint round: %v %+v", err, sum)
	}

	st, err := opsFor(t, env).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		ps := partitionStatus(t, st, topic, p)
		if ps.Position == nil || *ps.Position != 19 || ps.SourceEnd != 20 || ps.Lag != 0 || ps.TargetEnd != 20 || ps.Remote != remote {
			t.Errorf("partition %d: %+v (position %s), want position 19, end 20, lag 0, target end 20", p, ps, optStr(ps.Position))
		}
		if ps.LastSync == nil || ps.LastSync.Upstream > 19 || ps.LastSync.Upstream-ps.LastSync.Downstream != 0 || ps.LastSync.AgeMS < 0 {
			t.Errorf("partition %d: last sync %+v, want one within the copy, offsets aligned", p, ps.LastSync)
		}
	}
	if st.TotalLag != 0 {
		t.Errorf("total lag %d", st.TotalLag)
	}
	committed := map[int32]int64{0: 10, 1: 20}
	seen := 0
	for _, g := range st.Groups {
		if g.Group != group {
			continue
		}
		seen++
		if g.Checkpoint == nil || g.Checkpoint.Upstream != committed[g.Partition] || g.SourceCommitted != committed[g.Partition] || g.Remote != remote {
			t.Errorf("group row %+v checkpoint %+v", g, g.Checkpoint)
			continue
		}
		// Offsets are aligned (the target started empty): a consumer starting at the
		// checkpoint's downstream offset re-reads exactly the records up to its commit.
		if want := committed[g.Partition] - g.Checkpoint.Downstream; g.ReReads != want || g.ReReadsBound {
			t.Errorf("partition %d: re-reads %d (bound %v), want %d", g.Partition, g.ReReads, g.ReReadsBound, want)
		}
	}
	if seen != 2 {
		t.Errorf("%d group rows for %s, want 2: %+v", seen, group, st.Groups)
	}
	if g := findGroup(st, group, 1); g == nil || g.ReReads != 0 {
		t.Errorf("a group committed at the end of a fully copied partition re-reads nothing: %+v", g)
	}

	// The CLI says the same.
	code, out, stderr := runMirrorCmd(t, env, "status", "-o", "json")
	if code != 0 {
		t.Fatalf("mirror status: exit %d\n%s", code, stderr)
	}
	var fromCLI ops.Status
	decodeJSON(t, out, &fromCLI)
	if ps := partitionStatus(t, &fromCLI, topic, 1); ps.Position == nil || *ps.Position != 19 || ps.Lag != 0 {
		t.Errorf("status -o json: %+v", ps)
	}
	if code, out, _ = runMirrorCmd(t, env, "status"); code != 0 || !strings.Contains(out, remote) || !strings.Contains(out, "total lag") {
		t.Errorf("mirror status (text): exit %d\n%s", code, out)
	}

	code, out, stderr = runMirrorCmd(t, env, "verify", "-o", "json")
	var v ops.Verification
	decodeJSON(t, out, &v)
	if code != ops.VerifyComplete || !v.Complete || len(v.Partitions) != 2 {
		t.Fatalf("verify: exit %d %+v\n%s", code, v, stderr)
	}
	for _, p := range v.Partitions {
		if p.Matched != 20 || p.SourceRecords != 20 || p.TargetRecords != 20 || p.SourceHash != p.TargetHash || p.Missing+p.Extra+p.Differing != 0 {
			t.Errorf("verify partition %d: %+v", p.Partition, p)
		}
	}
	// One JSON log line sums it up (MirrorEnv sets MM2_LOG_FORMAT=json).
	var logLine map[string]any
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, `"verify summary"`) {
			decodeJSON(t, l, &logLine)
		}
	}
	if logLine["complete"] != true || logLine["function"] != "mirror" || logLine["differences"] != float64(0) {
		t.Errorf("verify summary log line: %v\n%s", logLine, stderr)
	}

	// New records (stamped in January 2020) not copied yet: lag in records and in time, and
	// verify calls the copy incomplete (exit 1) although every copied record matches.
	testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 2, 4)...)
	if st, err = opsFor(t, env).Status(ctx); err != nil {
		t.Fatal(err)
	}
	minLag := time.Since(time.Date(2020, 1, 3, 0, 0, 0, 0, time.UTC)).Milliseconds()
	for p := int32(0); p < 2; p++ {
		if ps := partitionStatus(t, st, topic, p); ps.Lag != 2 || ps.LagMS == nil || *ps.LagMS < minLag {
			t.Errorf("partition %d after new records: lag %d, lag time %s ms; want 2 and >= %d", p, ps.Lag, optStr(ps.LagMS), minLag)
		}
	}
	code, out, _ = runMirrorCmd(t, env, "verify", "-o", "json")
	v = ops.Verification{}
	decodeJSON(t, out, &v)
	if code != ops.VerifyDifferences || v.Complete || v.Differences != 0 || v.Lag != 4 {
		t.Errorf("verify with records left to copy: exit %d, %+v", code, v)
	}
}

func findGroup(st *ops.Status, group string, p int32) *ops.GroupStatus {
	for i, g := range st.Groups {
		if g.Group == group && g.Partition == p {
			return &st.Groups[i]
		}
	}
	return nil
}

func optStr(p *int64) string {
	if p == nil {
		return "nil"
	}
	return strconv.FormatInt(*p, 10)
}

// TestOpsVerifyFindsTampering builds a copy with one record skipped, one altered and one extra
// on the target (by moving the stored position and producing into the remote partition, as a
// buggy or foreign writer would) and checks that verify names each with its offsets and exits 1,
// and that -last checks only the tail.
func TestOpsVerifyFindsTampering(t *testing.T) {
	c := testkit.Require(t)
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "tamper"), 1, nil)
	remote := "source." + topic
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, remote)
	src := testkit.SampleRecords(topic, 1, 30)
	testkit.Produce(t, c.Source.Bootstrap, src...)
	env := MirrorEnv(c, topic)
	offsets := "mm2-offsets.source.internal"

	if r := RunMirror(t, append(env, "MM2_BURST_MAX_RECORDS=10")); r.Records() != 10 {
		t.Fatalf("first run: %d records\n%s", r.Records(), r.Stderr)
	}
	writePosition(t, c, offsets, topic, 0, 10) // source offset 10 is never copied
	if r := RunMirror(t, append(env, "MM2_BURST_MAX_RECORDS=5")); r.Records() != 5 {
		t.Fatalf("second run: %d records\n%s", r.Records(), r.Stderr)
	}
	altered := &kgo.Record{Topic: remote, Partition: 0, Key: src[16].Key, Value: []byte("altered"), Headers: src[16].Headers, Timestamp: src[16].Timestamp}
	testkit.Produce(t, c.Target.Bootstrap, altered) // target offset 15 stands for source offset 16
	writePosition(t, c, offsets, topic, 0, 16)
	if r := RunMirror(t, env); r.Code != 0 || r.Records() != 13 {
		t.Fatalf("third run: exit %d, %d records\n%s", r.Code, r.Records(), r.Stderr)
	}
	testkit.Produce(t, c.Target.Bootstrap, &kgo.Record{Topic: remote, Partition: 0, Value: []byte("extra")}) // target offset 29

	code, out, stderr := runMirrorCmd(t, env, "verify", "-o", "json")
	if code != ops.VerifyDifferences {
		t.Fatalf("verify: exit %d, want %d\n%s\n%s", code, ops.VerifyDifferences, out, stderr)
	}
	var v ops.Verification
	decodeJSON(t, out, &v)
	if len(v.Partitions) != 1 || v.Complete || v.Differences != 3 {
		t.Fatalf("verify: %+v", v)
	}
	p := v.Partitions[0]
	want := []ops.Difference{
		{Kind: ops.Missing, SourceOffset: 10, TargetOffset: -1},
		{Kind: ops.Differing, SourceOffset: 16, TargetOffset: 15},
		{Kind: ops.Extra, SourceOffset: -1, TargetOffset: 29},
	}
	if p.SourceRecords != 30 || p.TargetRecords != 30 || p.Matched != 28 || p.Missing != 1 || p.Differing != 1 || p.Extra != 1 || p.SourceHash == p.TargetHash {
		t.Errorf("verify counts: %+v", p)
	}
	if len(p.Differences) != len(want) {
		t.Fatalf("differences %+v, want %+v", p.Differences, want)
	}
	for i := range want {
		if p.Differences[i] != want[i] {
			t.Errorf("difference %d: %+v, want %+v", i, p.Differences[i], want[i])
		}
	}
	// Text output names them too.
	_, text, _ := runMirrorCmd(t, env, "verify")
	for _, w := range []string{"missing source offset 10", "differing source offset 16 target offset 15", "extra source offset - target offset 29", "DIFFERENCES: 3"} {
		if !strings.Contains(text, w) {
			t.Errorf("text output lacks %q:\n%s", w, text)
		}
	}

	// Only the tail: the copy from the last burst's first offset sync on, where only the extra
	// record differs.
	o := opsFor(t, env)
	tail, err := o.Verify(testkit.Context(t, time.Minute), ops.VerifyOptions{Last: 5})
	if err != nil {
		t.Fatal(err)
	}
	tp := tail.Partitions[0]
	if tp.SourceFrom <= 16 || tp.Missing != 0 || tp.Differing != 0 || tp.Extra != 1 || tp.SourceTo != 30 {
		t.Errorf("verify -last 5: %+v", tp)
	}
}

// TestOpsVerifyExactlyOnceCopy: an exactly-once copy puts transaction markers on the target,
// so target offsets drift from source offsets; verify aligns by offset syncs and walks past the
// markers, and finds the copy complete.
func TestOpsVerifyExactlyOnceCopy(t *testing.T) {
	c := testkit.Require(t)
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "eos"), 2, nil)
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, "source."+topic)
	testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 2, 50)...)
	env := MirrorEnv(c, topic, "MM2_EXACTLY_ONCE=true")
	if r := RunMirror(t, append(env, "MM2_BURST_MAX_RECORDS=20")); r.Records() != 20 {
		t.Fatalf("first run: %d records\n%s", r.Records(), r.Stderr)
	}
	if r := RunMirror(t, env); r.Code != 0 || r.Records() != 30 {
		t.Fatalf("second run: exit %d, %d records\n%s", r.Code, r.Records(), r.Stderr)
	}
	code, out, stderr := runMirrorCmd(t, env, "verify", "-o", "json")
	var v ops.Verification
	decodeJSON(t, out, &v)
	if code != ops.VerifyComplete || !v.Complete {
		t.Fatalf("verify: exit %d %+v\n%s", code, v, stderr)
	}
	drift := false
	for _, p := range v.Partitions {
		if p.Matched != 25 || p.SourceRecords != 25 || p.TargetRecords != 25 {
			t.Errorf("partition %d: %+v", p.Partition, p)
		}
		drift = drift || p.TargetTo > p.SourceTo
	}
	if !drift {
		t.Errorf("no transaction markers on the target? %+v", v.Partitions)
	}
}
