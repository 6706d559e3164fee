package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/mm2go/mm2go/shared/ops"
	"github.com/mm2go/mm2go/test/testkit"
)

// TestOpsPlanThenRun runs `mirror plan` on the seed's MM2 properties file (clusters=source,
// target; source->target.enabled=true; source->target.topics=<topic1>,<topic2>), checks that it
// wrote nothing, then runs the burst and checks that the run did exactly what the plan listed:
// the topics created and grown, the configs set, the records copied.
func TestOpsPlanThenRun(t *testing.T) {
	c := testkit.Require(t)
	ctx := testkit.Context(t, 3*time.Minute)
	retention := testkit.RetentionMS
	topic1 := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "topic1"), 2, map[string]*string{"retention.ms": &retention})
	topic2 := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "topic2"), 3, nil)
	topic3 := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "topic3"), 1, nil)
	remote1, remote2 := "source."+topic1, "source."+topic2
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, remote1)
	testkit.CreateTopic(t, c.Target.Bootstrap, remote2, 1, nil) // the run must grow it to 3
	testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic1, 2, 30)...)
	testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic2, 3, 10)...)
	testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic3, 1, 5)...)

	file := filepath.Join(t.TempDir(), "mm2.properties")
	props := fmt.Sprintf("clusters = source, target\nsource.bootstrap.servers = %s\ntarget.bootstrap.servers = %s\nsource->target.enabled = true\nsource->target.topics = %s,%s\n",
		c.Source.Bootstrap, c.Target.Bootstrap, topic1, topic2)
	if err := os.WriteFile(file, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	// The dev clusters have one broker (replication factor 1), and the shared "heartbeats" topic
	// of other tests is left alone; the environment wins over the file, as in production.
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"MM2_CONFIG_FILE=" + file,
		"MM2_REPLICATION_FACTOR=1",
		"MM2_OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR=1",
		"MM2_OFFSET_STORAGE_REPLICATION_FACTOR=1",
		"MM2_HEARTBEATS_REPLICATION_ENABLED=false",
		"MM2_LOG_FORMAT=json",
	}

	code, out, stderr := runMirrorCmd(t, env, "plan", "-o", "json")
	if code != 0 {
		t.Fatalf("mirror plan: exit %d\n%s", code, stderr)
	}
	var pl ops.Plan
	decodeJSON(t, out, &pl)
	byName := map[string]ops.TopicPlan{}
	for _, tp := range pl.Topics {
		byName[tp.Topic] = tp
	}
	p1, p2, p3 := byName[topic1], byName[topic2], byName[topic3]
	if !p1.Selected || p1.Remote != remote1 || p1.Action != "create" || p1.Configs["retention.ms"] != retention || p1.Records != 30 || len(p1.Copy) != 2 {
		t.Errorf("topic1 plan: %+v", p1)
	}
	if !p2.Selected || p2.Remote != remote2 || p2.Action != "grow" || p2.TargetPartitions != 1 || p2.Records != 10 {
		t.Errorf("topic2 plan: %+v", p2)
	}
	if p3.Selected || !strings.Contains(p3.Reason, "not matched by topics") {
		t.Errorf("topic3 plan: %+v", p3)
	}
	if hb, ok := byName["heartbeats"]; ok && hb.Selected {
		t.Errorf("heartbeats selected although heartbeats replication is off: %+v", hb)
	}
	if got := strings.Join(pl.Create, ","); got != remote1 {
		t.Errorf("plan creates %q, want %q", got, remote1)
	}
	if got := strings.Join(pl.Grow, ","); got != remote2 {
		t.Errorf("plan grows %q, want %q", got, remote2)
	}
	if pl.Records != 40 {
		t.Errorf("plan copies %d records, want 40", pl.Records)
	}
	if code, text, _ := runMirrorCmd(t, env, "plan"); code != 0 || !strings.Contains(text, "create "+remote1) || !strings.Contains(text, "retention.ms="+retention) || !strings.Contains(text, "grow 1->3") {
		t.Errorf("plan text: exit %d\n%s", code, text)
	}

	// The plan wrote nothing: no topic created or grown, no position, no offset sync.
	adm := testkit.Admin(t, c.Target.Bootstrap)
	md, err := adm.Metadata(ctx, remote1, remote2)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := md.Topics[remote1]; ok && d.Err == nil {
		t.Errorf("plan created %s", remote1)
	}
	if n := len(md.Topics[remote2].Partitions); n != 1 {
		t.Errorf("plan grew %s to %d partitions", remote2, n)
	}
	o := opsFor(t, env)
	st, err := o.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range st.Partitions {
		if (ps.Topic == topic1 || ps.Topic == topic2) && (ps.Position != nil || ps.LastSync != nil) {
			t.Errorf("plan wrote a position or offset sync for %s-%d: %+v", ps.Topic, ps.Partition, ps)
		}
	}

	// The run does what the plan said.
	r := RunMirror(t, env)
	if r.Code != 0 || r.Records() != pl.Records {
		t.Fatalf("mirror run: exit %d, %d records; the plan said %d\n%s", r.Code, r.Records(), pl.Records, r.Stderr)
	}
	topics, _ := r.Summary["topics"].(map[string]any)
	for _, tp := range []ops.TopicPlan{p1, p2} {
		ts, _ := topics[tp.Topic].(map[string]any)
		if n, _ := ts["records"].(float64); int64(n) != tp.Records {
			t.Errorf("run copied %v records of %s, the plan said %d", ts["records"], tp.Topic, tp.Records)
		}
	}
	if len(topics) != 2 {
		t.Errorf("run copied topics %v, the plan selected %s and %s", topics, topic1, topic2)
	}
	adm = testkit.Admin(t, c.Target.Bootstrap) // a new client: no cached metadata
	md, err = adm.Metadata(ctx, remote1, remote2)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(md.Topics[remote1].Partitions); n != 2 {
		t.Errorf("%s has %d partitions, want 2", remote1, n)
	}
	if n := len(md.Topics[remote2].Partitions); n != 3 {
		t.Errorf("%s has %d partitions, want 3", remote2, n)
	}
	cfgs, err := adm.DescribeTopicConfigs(ctx, remote1)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := cfgs.On(remote1, nil); err != nil || !hasConfig(v.Configs, "retention.ms", retention) {
		t.Errorf("%s configs: %v %+v", remote1, err, v)
	}
	for _, it := range pl.Internal {
		if it.CreatedBy != "mirror" {
			continue
		}
		bootstrap := c.Target.Bootstrap
		if it.Cluster == "source" {
			bootstrap = c.Source.Bootstrap
		}
		md, err := testkit.Admin(t, bootstrap).Metadata(ctx, it.Name)
		if err != nil || md.Topics[it.Name].Err != nil {
			t.Errorf("internal topic %s on %s after the run: %v %v", it.Name, it.Cluster, err, md.Topics[it.Name].Err)
		}
	}

	// Planned again, nothing is left to do.
	if code, out, _ = runMirrorCmd(t, env, "plan", "-o", "json"); code != 0 {
		t.Fatalf("second plan: exit %d", code)
	}
	var again ops.Plan
	decodeJSON(t, out, &again)
	if again.Records != 0 || len(again.Create) != 0 || len(again.Grow) != 0 {
		t.Errorf("second plan: %d records, create %v, grow %v; want nothing", again.Records, again.Create, again.Grow)
	}
}

func hasConfig(cs []kadm.Config, name, value string) bool {
	for _, c := range cs {
		if c.Key == name && c.Value != nil && *c.Value == value {
			return true
		}
	}
	return false
}
