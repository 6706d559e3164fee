package heartbeat_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mm2go/mm2go/shared/heartbeat"
	"github.com/mm2go/mm2go/shared/round"
	"github.com/mm2go/mm2go/test/testkit"
)

// TestCreatedTopicConfigs: MM2 creates "heartbeats" compacted; a cluster without compaction
// (an Event Hubs tier, via cluster.Profile) gets the topic without cleanup.policy.
func TestCreatedTopicConfigs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		configs map[string]*string
		want    string
	}{
		{"default", nil, "compact"},
		{"no-compaction", map[string]*string{}, "delete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			j, err := heartbeat.New(ctx, heartbeat.Options{Flow: round.Flow{SourceAlias: "a", TargetAlias: "b"}, TargetTopicConfigs: tc.configs, DisableReverse: true},
				dial("127.0.0.1:1"), dial(c.ListenAddrs()[0]), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			if _, err := j.Round(ctx); err != nil {
				t.Fatal(err)
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			rc, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, "heartbeats")
			if err != nil {
				t.Fatal(err)
			}
			r, err := rc.On("heartbeats", nil)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for _, cfg := range r.Configs {
				if cfg.Key == "cleanup.policy" && cfg.Value != nil {
					got = *cfg.Value
				}
			}
			if got != tc.want {
				t.Errorf("cleanup.policy %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCreatedTopicConfigsOnBroker repeats TestCreatedTopicConfigs on a real broker, one of its
// own (on the harness clusters "heartbeats" is every test's): the created topic's
// cleanup.policy as the broker describes it is compact, set on the topic, by default; without
// compaction configs it is the broker's default, delete.
func TestCreatedTopicConfigsOnBroker(t *testing.T) {
	c := testkit.Require(t)
	eb := testkit.StartExtraBroker(t, c, "hbconfigs", 3, func(int) []string { return nil })
	adm := testkit.Admin(t, eb.Plain)
	for _, tc := range []struct {
		name    string
		configs map[string]*string
		want    string
		source  kmsg.ConfigSource
	}{
		{"default", nil, "compact", kmsg.ConfigSourceDynamicTopicConfig},
		{"no-compaction", map[string]*string{}, "delete", kmsg.ConfigSourceDefaultConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testkit.Context(t, time.Minute)
			j, err := heartbeat.New(ctx, heartbeat.Options{Flow: round.Flow{SourceAlias: "a", TargetAlias: "b"}, TargetTopicConfigs: tc.configs, DisableReverse: true},
				dial("127.0.0.1:1"), dial(eb.Plain), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			if _, err := j.Round(ctx); err != nil {
				t.Fatal(err)
			}
			rc, err := adm.DescribeTopicConfigs(ctx, "heartbeats")
			if err != nil {
				t.Fatal(err)
			}
			r, err := rc.On("heartbeats", nil)
			if err != nil {
				t.Fatal(err)
			}
			var got *kadm.Config
			for i, cfg := range r.Configs {
				if cfg.Key == "cleanup.policy" {
					got = &r.Configs[i]
				}
			}
			if got == nil || got.Value == nil || *got.Value != tc.want || got.Source != tc.source {
				t.Errorf("cleanup.policy %+v, want %q from %v", got, tc.want, tc.source)
			}
			// The next case creates the topic again.
			if _, err := adm.DeleteTopics(ctx, "heartbeats"); err != nil {
				t.Fatal(err)
			}
			testkit.WaitFor(t, 30*time.Second, "heartbeats to be deleted", func() bool {
				topics, err := adm.ListTopics(ctx)
				return err == nil && !topics.Has("heartbeats")
			})
		})
	}
}
