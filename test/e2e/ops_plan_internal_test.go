package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/mm2go/mm2go/shared/ops"
	"github.com/mm2go/mm2go/test/testkit"
)

// TestOpsPlanCreatesNoInternalTopics uses aliases of its own, so the flow's internal topics do
// not exist yet: plan lists them as to be created and creates none of them (nor the remote
// topic); the run then creates exactly the ones plan attributed to the mirror function.
func TestOpsPlanCreatesNoInternalTopics(t *testing.T) {
	c := testkit.Require(t)
	ctx := testkit.Context(t, 2*time.Minute)
	suffix := strings.ReplaceAll(testkit.Name(t, ""), "-", "")
	suffix = suffix[len(suffix)-8:]
	src, tgt := "src"+suffix, "tgt"+suffix
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "own"), 1, nil)
	testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 1, 5)...)
	remote := src + "." + topic
	offsets, syncs := "mm2-offsets."+src+".internal", "mm2-offset-syncs."+tgt+".internal"
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, remote, offsets, src+".checkpoints.internal")
	testkit.DeleteTopicsAtEnd(t, c.Source.Bootstrap, syncs)
	env := MirrorEnv(c, topic, "MM2_SOURCE_ALIAS="+src, "MM2_TARGET_ALIAS="+tgt)

	code, out, stderr := runMirrorCmd(t, env, "plan", "-o", "json")
	if code != 0 {
		t.Fatalf("plan: exit %d\n%s", code, stderr)
	}
	var pl ops.Plan
	decodeJSON(t, out, &pl)
	byName := map[string]ops.InternalTopic{}
	for _, it := range pl.Internal {
		byName[it.Name] = it
	}
	if it := byName[offsets]; it.Exists || it.Cluster != "target" || it.CreatedBy != "mirror" || it.Partitions != 25 {
		t.Errorf("offsets topic in plan: %+v", it)
	}
	if it := byName[syncs]; it.Exists || it.Cluster != "source" || it.CreatedBy != "mirror" {
		t.Errorf("offset-syncs topic in plan: %+v", it)
	}
	if strings.Join(pl.Create, ",") != remote || pl.Records != 5 {
		t.Errorf("plan: create %v, %d records", pl.Create, pl.Records)
	}
	exists := func(bootstrap, name string) bool {
		md, err := testkit.Admin(t, bootstrap).Metadata(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		d, ok := md.Topics[name]
		return ok && d.Err == nil
	}
	for _, chk := range []struct{ bootstrap, name string }{{c.Target.Bootstrap, offsets}, {c.Source.Bootstrap, syncs}, {c.Target.Bootstrap, remote}} {
		if exists(chk.bootstrap, chk.name) {
			t.Errorf("plan created %s", chk.name)
		}
	}

	if r := RunMirror(t, env); r.Code != 0 || r.Records() != pl.Records {
		t.Fatalf("run: exit %d, %d records, plan said %d\n%s", r.Code, r.Records(), pl.Records, r.Stderr)
	}
	for _, chk := range []struct{ bootstrap, name string }{{c.Target.Bootstrap, offsets}, {c.Source.Bootstrap, syncs}, {c.Target.Bootstrap, remote}} {
		if !exists(chk.bootstrap, chk.name) {
			t.Errorf("the run did not create %s", chk.name)
		}
	}
}

// TestOpsVerifyUsageError: verify's own errors exit 2, not 1 (which means differences); help
// lists the operator commands.
func TestOpsVerifyUsageError(t *testing.T) {
	c := testkit.Require(t)
	code, help, _ := runMirrorCmd(t, MirrorEnv(c, "x"), "help")
	for _, cmd := range []string{"status", "verify", "plan"} {
		if code != 0 || !strings.Contains(help, "\n  "+cmd+" ") {
			t.Errorf("help (exit %d) does not list %s:\n%s", code, cmd, help)
		}
	}
	if code, _, stderr := runMirrorCmd(t, MirrorEnv(c, "x"), "verify", "-no-such-flag"); code != ops.VerifyError {
		t.Errorf("verify with a bad flag: exit %d, want %d\n%s", code, ops.VerifyError, stderr)
	}
	if code, _, stderr := runMirrorCmd(t, MirrorEnv(c, "x"), "verify", "-topics", "not-replicated-by-this-flow"); code != ops.VerifyError {
		t.Errorf("verify of a topic outside the flow: exit %d, want %d\n%s", code, ops.VerifyError, stderr)
	}
}
