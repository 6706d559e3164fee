package replay

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
)

// TestScaleOut (MM2GO_REPLAY_SCALEOUT=1, not in CI): 1, 2 and 4 `mirror run` instances in one
// burst group, each with its own pod name as KEDA or Knative would start them, copy a backlog
// through a per-client produce quota on the target (one instance's bandwidth). docs/performance.md.
func TestScaleOut(t *testing.T) {
	if os.Getenv("MM2GO_REPLAY_SCALEOUT") == "" {
		t.Skip("set MM2GO_REPLAY_SCALEOUT=1 (docs/performance.md, scale-out)")
	}
	c := testkit.Require(t)
	bin := functionBinaries(t)
	const records, size, quota = 200_000, 512, 8 << 20
	// A target of its own whose quota is measured over 2 one-second windows: with the default 11
	// a new client id may send 10 s of its quota before the broker throttles it.
	tb := testkit.StartExtraBroker(t, c, "scale", 3, func(int) []string { return []string{"quota.window.num=2", "quota.window.size.seconds=1"} })
	c.Target.Bootstrap = tb.Addr(0)
	tgtAdm := testkit.Admin(t, c.Target.Bootstrap)
	ctx := context.Background()
	// The default quota of every client id on the target.
	def := kadm.ClientQuotaEntityComponent{Type: "client-id"}
	rate := float64(quota)
	if _, err := tgtAdm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{def},
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: rate}}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = tgtAdm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{def},
			Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}}}})
	})
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "wide"), 8, nil)
	cl := testkit.Client(t, c.Source.Bootstrap, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	val := []byte(strings.Repeat("x", size))
	for i := 0; i < records; i += 10_000 {
		recs := make([]*kgo.Record, 0, 10_000)
		for j := i; j < i+10_000; j++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(j % 8), Key: []byte(fmt.Sprintf("%08d", j)), Value: val})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var base time.Duration
	for _, n := range []int{1, 2, 4} {
		sfx := suffix(t)
		env := []string{
			"MM2_SOURCE_ALIAS=s" + sfx, "MM2_TARGET_ALIAS=target", "MM2_SOURCE_BOOTSTRAP_SERVERS=" + c.Source.Bootstrap,
			"MM2_TARGET_BOOTSTRAP_SERVERS=" + c.Target.Bootstrap, "MM2_TOPICS=" + topic, "MM2_BURST_GROUP=scale-" + sfx,
			"MM2_REPLICATION_FACTOR=1", "MM2_OFFSET_STORAGE_REPLICATION_FACTOR=1", "MM2_OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR=1",
			"MM2_BURST_MAX_DURATION=2m", "MM2_LOG_FORMAT=json", "PATH=" + os.Getenv("PATH"),
		}
		start := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, n)
		sums := make([]string, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := exec.Command(filepath.Join(bin, "mirror"), "run")
				cmd.Env = append(env, fmt.Sprintf("POD_NAME=mm2go-mirror-lag-%s-%d", sfx, i))
				out, err := cmd.CombinedOutput()
				if err != nil {
					errs[i] = fmt.Errorf("instance %d: %v: %s", i, err, errorLines(string(out)))
				}
				for _, l := range strings.Split(string(out), "\n") {
					if strings.Contains(l, `"msg":"burst summary"`) {
						sums[i] = l
					}
				}
			}()
		}
		wg.Wait()
		took := time.Since(start)
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		got := testkit.ReadAll(t, c.Target.Bootstrap, "s"+sfx+"."+topic)
		seen := map[string]bool{}
		for _, r := range got {
			seen[string(r.Key)] = true
		}
		if len(seen) != records || len(got) != records {
			t.Errorf("%d instances: %d records on the target, %d distinct, want %d once each; summaries:\n%s", n, len(got), len(seen), records, strings.Join(sums, "\n"))
		}
		if n == 1 {
			base = took
		}
		t.Logf("%d instance(s) in one burst group: %d x %d B in %v, %.2fx the rate of one; %d copied twice", n, records, size, took.Round(10*time.Millisecond), base.Seconds()/took.Seconds(), len(got)-len(seen))
	}
}
