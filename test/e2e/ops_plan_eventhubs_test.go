package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mm2go/mm2go/shared/app"
	"github.com/mm2go/mm2go/shared/engine"
	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/ehfake"
)

// TestOpsPlanEventHubsBudget plans a flow into the Event Hubs double: with a namespace that
// has room, the plan shows the budget check passing; with one topic too many, the plan says the
// run would stop and why, and the run indeed stops having created nothing. The plan itself
// never creates an event hub.
func TestOpsPlanEventHubsBudget(t *testing.T) {
	c := testkit.Require(t)
	var topics []string
	for i := 0; i < 3; i++ {
		topics = append(topics, testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "ehplan"), 2, nil))
	}
	for _, tc := range []struct {
		name     string
		selected []string
		fits     bool
		mm2Over  int // MirrorMaker 2 would also create checkpoints, heartbeats, configs, status
	}{
		{"fits", topics[:2], true, 4}, // 7 + 2 remote topics + the offsets topic = 10
		{"over", topics, false, 5},    // 7 + 3 + 1 = 11 > 10
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Standard tier: 10 event hubs, 7 of them taken.
			taken := map[string]int32{}
			for i := range 7 {
				taken[fmt.Sprintf("taken-%d", i)] = 1
			}
			f := ehfake.New(t, ehfake.Config{Topics: taken})
			m := ehEnv(c, f, strings.Join(tc.selected, ","))
			var env []string
			for k, v := range m {
				env = append(env, k+"="+v)
			}
			ctx := testkit.Context(t, 2*time.Minute)
			pl, err := opsFor(t, env).Plan(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if f.Topics() != 7 {
				t.Fatalf("plan created %d event hubs", f.Topics()-7)
			}
			if len(pl.EventHubs) != 1 || pl.EventHubs[0].Cluster != "target" || pl.EventHubs[0].MaxTopics != 10 || len(pl.EventHubs[0].Topics) != len(tc.selected)+1 {
				t.Fatalf("plan's Event Hubs budget: %+v", pl.EventHubs)
			}
			b := pl.EventHubs[0]
			if (b.Error == "") != tc.fits || !strings.Contains(b.Notice, "Event Hubs") {
				t.Errorf("budget: fits %v, want %v: %+v", b.Error == "", tc.fits, b)
			}
			if !tc.fits && !strings.Contains(b.Error, "would be 1 over") {
				t.Errorf("budget error does not say by how much: %s", b.Error)
			}
			for _, tp := range pl.Topics {
				if tp.Selected && len(tp.Configs) != 0 {
					t.Errorf("plan copies configs of %s to Event Hubs: %v", tp.Topic, tp.Configs)
				}
			}

			cfg := loadConfig(t, m)
			e, err := app.Engine(ctx, cfg, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			_, err = e.Burst(ctx, engine.BurstOptions{MaxRecords: 1})
			if (err == nil) != tc.fits {
				t.Fatalf("run: %v; plan said fits=%v", err, tc.fits)
			}
			if !tc.fits && f.Topics() != 7 {
				t.Errorf("the stopped run left %d event hubs", f.Topics()-7)
			}
			if tc.fits && f.Topics() != 7+len(b.Topics) {
				t.Errorf("the run created %d event hubs, the plan listed %d", f.Topics()-7, len(b.Topics))
			}
			// The namespace is then full: the checkpoint and heartbeat topics would not fit.
			if b.LaterError == "" || len(b.Later) == 0 {
				t.Errorf("plan does not warn that the other functions' topics do not fit: %+v", b)
			}
			// What MirrorMaker 2 would need beside them: its worker's configs and status topics.
			if len(b.MM2) != 2 || b.MM2["mm2-configs.source.internal"] != 1 || b.MM2["mm2-status.source.internal"] != 5 ||
				!strings.Contains(b.MM2Error, fmt.Sprintf("would be %d over", tc.mm2Over)) {
				t.Errorf("plan's MirrorMaker 2 budget: %v, %q; want configs and status topics, %d over", b.MM2, b.MM2Error, tc.mm2Over)
			}
			var text strings.Builder
			if err := pl.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(text.String(), "MirrorMaker 2 on this flow would also need mm2-configs.source.internal, mm2-status.source.internal") {
				t.Errorf("plan text does not say what MirrorMaker 2 would need:\n%s", text.String())
			}
		})
	}
}
