package engine

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/mm2go/mm2go/shared/filter"
	"github.com/mm2go/mm2go/test/testkit"
)

func remoteConfig(t *testing.T, bootstrap, topic, key string) (string, bool) {
	t.Helper()
	cfgs, err := testkit.Admin(t, bootstrap).DescribeTopicConfigs(testkit.Context(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cfgs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		t.Fatalf("describing configs of %s: %v", topic, err)
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			return c.MaybeValue(), c.Source.String() == "DYNAMIC_TOPIC_CONFIG"
		}
	}
	return "", false
}

// TestTopicConfigs: non-default source configs are copied at creation except excluded ones
// (message.timestamp.type); with SyncTopicConfigs a changed source config reaches the remote
// topic and a config reset on the source is reset on the target. On kfake (it reports a
// topic's own configs as DYNAMIC_TOPIC_CONFIG, as Kafka does).
func TestTopicConfigs(t *testing.T) {
	f := newFakeFlow(t, nil)
	f.createTopic(Source, "cfg", 1, map[string]*string{
		"retention.ms": strp("86400000"), "message.timestamp.type": strp("LogAppendTime"), "max.message.bytes": strp("500000"),
	})
	f.opts.SyncTopicConfigs = true
	ctx := context.Background()
	burst := func() {
		t.Helper()
		if s, err := f.engine().Burst(ctx, BurstOptions{}); err != nil {
			t.Fatalf("burst: %v (%+v)", err, s)
		}
	}
	burst()
	tgt := f.bootstrap(Target)
	if v, dyn := remoteConfig(t, tgt, "src.cfg", "retention.ms"); v != "86400000" || !dyn {
		t.Errorf("remote retention.ms = %q (dynamic %v), want 86400000", v, dyn)
	}
	if _, dyn := remoteConfig(t, tgt, "src.cfg", "message.timestamp.type"); dyn {
		t.Error("message.timestamp.type was copied; MM2 excludes it by default")
	}
	if _, dyn := remoteConfig(t, tgt, "src.cfg", "max.message.bytes"); !dyn {
		t.Error("max.message.bytes was not copied at creation")
	}
	if _, err := kadm.NewClient(f.client(Source)).AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: strp("172800000")},
		{Op: kadm.DeleteConfig, Name: "max.message.bytes"},
	}, "cfg"); err != nil {
		t.Fatal(err)
	}
	burst()
	if v, _ := remoteConfig(t, tgt, "src.cfg", "retention.ms"); v != "172800000" {
		t.Errorf("after sync remote retention.ms = %q, want 172800000", v)
	}
	if _, dyn := remoteConfig(t, tgt, "src.cfg", "max.message.bytes"); dyn {
		t.Error("max.message.bytes reset on the source is still set on the remote topic")
	}
}

// TestTopicSelection: internal topics and cycles are never replicated; a heartbeats topic is
// replicated with HeartbeatsReplication even when the topic filter rejects it. Pure logic:
// on kfake.
func TestTopicSelection(t *testing.T) {
	f := newFakeFlow(t, nil)
	flt, err := filter.Topics("orders", filter.DefaultTopicsExclude)
	if err != nil {
		t.Fatal(err)
	}
	f.opts.Topics = flt
	f.opts.HeartbeatsReplication = true
	e := f.engine()
	for topic, want := range map[string]bool{
		"orders":                 true,
		"payments":               false, // filter
		"heartbeats":             true,
		"src.heartbeats":         true,
		"tgt.orders":             false, // came from the target: cycle
		"mm2-offsets.x.internal": false,
		"__consumer_offsets":     false,
		"tgt.heartbeats":         false,
	} {
		if got := e.Selected(topic); got != want {
			t.Errorf("Selected(%q) = %v, want %v", topic, got, want)
		}
	}
}
