package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/test/testkit"
)

// TestMirrorRunSlowSyncsTopic: the offset-syncs topic lives on the source by default, where
// the copy only reads; a produce quota there (4 KiB/s for the mirror's user) slows the offset
// syncs alone. The copy must not wait for them record by record: it caps the syncs in flight
// (MM2's 10 permits) and lets a sync without a permit wait for the partition's next one, and
// still writes the final sync of every partition. The test asserts the final syncs and both
// runs' records, and logs the two copy times (the figure: at most 1.2 times the
// unthrottled run; before the fix, 300,000 x 512 B took 21.9 s instead of 1.7 s).
func TestMirrorRunSlowSyncsTopic(t *testing.T) {
	c := testkit.Require(t)
	if c.Source.SASLSSL == "" || c.CA == "" {
		t.Fatal("the harness clusters have no SASL_SSL listener (kafka.sh env)")
	}
	const parts, n = 4, 60_000
	warm, free, slow := bigTopic(t, c, 1, 10, 512), bigTopic(t, c, parts, n, 512), bigTopic(t, c, parts, n, 512)
	// The source as the user alice (SASL PLAIN over TLS): the quota is hers only, so other
	// clients of the harness cluster are not slowed.
	env := func(topic string) []string {
		return MirrorEnv(c, topic,
			"MM2_SOURCE_BOOTSTRAP_SERVERS="+c.Source.SASLSSL,
			"MM2_SOURCE_SECURITY_PROTOCOL=SASL_SSL",
			"MM2_SOURCE_SASL_MECHANISM=PLAIN",
			"MM2_SOURCE_SASL_USERNAME="+testkit.PlainUser,
			"MM2_SOURCE_SASL_PASSWORD="+testkit.PlainPass,
			"MM2_SOURCE_SSL_TRUSTSTORE_LOCATION="+c.CA)
	}
	run := func(topic string, records int64) time.Duration {
		t.Helper()
		start := time.Now()
		r := RunMirror(t, env(topic))
		d := time.Since(start)
		if r.Code != 0 || r.Records() != records {
			t.Fatalf("mirror run of %s: exit %d, %d records, want 0, %d\n%s", topic, r.Code, r.Records(), records, r.Stderr)
		}
		return d
	}
	run(warm, 10) // creates the internal topics, so that the two timed runs start alike
	unthrottled := run(free, n)

	quota := func(remove bool) error {
		ctx := testkit.Context(t, 30*time.Second)
		res, err := testkit.Admin(t, c.Source.Bootstrap).AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
			Entity: kadm.ClientQuotaEntity{{Type: "user", Name: new(testkit.PlainUser)}},
			Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 4096, Remove: remove}},
		}})
		if err == nil && len(res) > 0 {
			err = res[0].Err
		}
		return err
	}
	if err := quota(false); err != nil {
		t.Fatalf("setting a produce quota for %s on the source: %v", testkit.PlainUser, err)
	}
	t.Cleanup(func() {
		if err := quota(true); err != nil {
			t.Errorf("removing the produce quota of %s on the source: %v", testkit.PlainUser, err)
		}
	})
	throttled := run(slow, n)
	t.Logf("copy of %d x 512 B over %d partitions: %v unthrottled, %v with the syncs topic at 4 KiB/s (%.2fx)",
		n, parts, unthrottled.Round(time.Millisecond), throttled.Round(time.Millisecond), throttled.Seconds()/unthrottled.Seconds())

	last := map[int32]mm2.OffsetSync{}
	for _, r := range testkit.ReadAll(t, c.Source.Bootstrap, "mm2-offset-syncs.target.internal") {
		sy, err := mm2.DecodeOffsetSync(r.Key, r.Value)
		if err != nil {
			t.Fatalf("offset sync %q/%q: %v", r.Key, r.Value, err)
		}
		if sy.Topic == slow {
			last[sy.Partition] = sy
		}
	}
	for p := range int32(parts) {
		want := int64(n/parts - 1)
		if sy, ok := last[p]; !ok || sy.UpstreamOffset != want || sy.DownstreamOffset != want {
			t.Errorf("last offset sync of %s-%d: %+v (found %v), want %d->%d", slow, p, sy, ok, want, want)
		}
	}
}
