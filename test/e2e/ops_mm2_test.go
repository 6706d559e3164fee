package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/ops"
	"github.com/mm2go/mm2go/test/testkit"
)

// TestOpsStatusAndVerifyRealMM2 reads state written by genuine MirrorMaker 2: its Connect
// positions, offset syncs, checkpoints and heartbeats show up in status; verify finds the copy
// complete, then finds a record added to the target behind MM2's back.
func TestOpsStatusAndVerifyRealMM2(t *testing.T) {
	c := testkit.Require(t)
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "opsmm2"), 2, nil)
	remote := "source." + topic
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, remote)
	testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 2, 40)...)
	group := testkit.Name(t, "g")
	committed := map[int32]int64{0: 5, 1: 20}
	commitGroup(t, c.Source.Bootstrap, group, topic, committed, "meta")

	name := testkit.StartMM2(t, MM2Properties(c, topic)+"source->target.groups = "+group+"\n")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("MirrorMaker 2 log:\n%s", tail(testkit.MM2Log(t, name), 4000))
		}
	})
	env := MirrorEnv(c, topic, "MM2_GROUPS="+group)
	o := opsFor(t, env)
	ctx := testkit.Context(t, 4*time.Minute)
	var st *ops.Status
	testkit.WaitFor(t, 3*time.Minute, "MM2 to copy everything, store its positions and checkpoint the group", func() bool {
		s, err := o.Status(ctx)
		if err != nil {
			return false
		}
		st = s
		for p := int32(0); p < 2; p++ {
			ps := partitionStatus(t, s, topic, p)
			g := findGroup(s, group, p)
			// TargetEnd is -1 until the status client's metadata knows MM2's new remote topic.
			if ps.Position == nil || ps.Lag != 0 || ps.LastSync == nil || ps.TargetEnd < 0 || g == nil || g.Checkpoint == nil || g.Checkpoint.Upstream != committed[p] {
				return false
			}
		}
		return s.Heartbeats.Emitted != nil
	})
	testkit.StopMM2(t, name)

	for p := int32(0); p < 2; p++ {
		ps := partitionStatus(t, st, topic, p)
		if *ps.Position != 19 || ps.TargetEnd != 20 || ps.Remote != remote {
			t.Errorf("partition %d: %+v", p, ps)
		}
		g := findGroup(st, group, p)
		if g.SourceCommitted != committed[p] || g.Checkpoint.Metadata != "meta" || g.ReReads < 0 || g.ReReads > committed[p] {
			t.Errorf("group partition %d: %+v checkpoint %+v", p, g, g.Checkpoint)
		}
		// MM2 copied into empty partitions, so offsets are aligned.
		if want := committed[p] - g.Checkpoint.Downstream; g.ReReads != want {
			t.Errorf("group partition %d: re-reads %d, want %d", p, g.ReReads, want)
		}
	}
	if hb := st.Heartbeats.Emitted; hb.SourceAlias != "source" || hb.TargetAlias != "target" || hb.AgeMS < 0 {
		t.Errorf("heartbeat emitted: %+v", hb)
	}
	code, text, stderr := runMirrorCmd(t, env, "status")
	if code != 0 || !strings.Contains(text, group) || !strings.Contains(text, remote) {
		t.Errorf("mirror status: exit %d\n%s\n%s", code, text, stderr)
	}
	t.Logf("status of MM2's state:\n%s", text)

	code, out, stderr := runMirrorCmd(t, env, "verify", "-o", "json")
	var v ops.Verification
	decodeJSON(t, out, &v)
	if code != ops.VerifyComplete || !v.Complete {
		t.Fatalf("verify after MM2: exit %d %+v\n%s", code, v, stderr)
	}
	for _, p := range v.Partitions {
		if p.Matched != 20 || !strings.HasPrefix(p.Alignment, "offset sync") {
			t.Errorf("verify partition %d: %+v", p.Partition, p)
		}
	}

	testkit.Produce(t, c.Target.Bootstrap, &kgo.Record{Topic: remote, Partition: 1, Key: []byte("intruder"), Value: []byte("x")})
	code, out, _ = runMirrorCmd(t, env, "verify", "-o", "json")
	v = ops.Verification{}
	decodeJSON(t, out, &v)
	if code != ops.VerifyDifferences || v.Differences != 1 {
		t.Fatalf("verify after an extra record: exit %d %+v", code, v)
	}
	for _, p := range v.Partitions {
		want := 0
		if p.Partition == 1 {
			want = 1
		}
		if int(p.Extra) != want || p.Missing+p.Differing != 0 || (want == 1 && (len(p.Differences) != 1 || p.Differences[0].TargetOffset != 20)) {
			t.Errorf("partition %d: %+v", p.Partition, p)
		}
	}
}
