package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/test/testkit"
)

// syncsThrottledLog is the line `mirror run` logs when the broker throttles its offset-syncs
// producer.
const syncsThrottledLog = "the broker throttles the offset-syncs producer"

// TestMirrorRunSlowSyncsTopic: the offset-syncs topic lives on the source by default, where
// the copy only reads; a produce quota there (4 KiB/s for the mirror's user) slows the offset
// syncs alone. With offset.lag.max at 50 the burst makes about 1,200 syncs due (some 85 KB), so
// the broker throttles their producer. The burst must say so, copy every record and still write
// the final sync of every partition while the quota holds: under a throttle it sends only the
// newest sync of each partition, in rounds of its commit ticks, and does not wait for the
// others; its summary names no partition whose final sync went unconfirmed. How long that takes
// against an unthrottled run is the bench's (test/bench, slow-syncs workload), not a threshold
// here.
func TestMirrorRunSlowSyncsTopic(t *testing.T) {
	c := testkit.Require(t)
	if c.Source.SASLSSL == "" || c.CA == "" {
		t.Fatal("the harness clusters have no SASL_SSL listener (kafka.sh env)")
	}
	const parts, n = 4, 60_000
	warm, slow := bigTopic(t, c, 1, 10, 512), bigTopic(t, c, parts, n, 512)
	// The source as the user alice (SASL PLAIN over TLS): the quota is hers only, so other
	// clients of the harness cluster are not slowed.
	env := func(topic string) []string {
		return MirrorEnv(c, topic,
			"MM2_SOURCE_BOOTSTRAP_SERVERS="+c.Source.SASLSSL,
			"MM2_SOURCE_SECURITY_PROTOCOL=SASL_SSL",
			"MM2_SOURCE_SASL_MECHANISM=PLAIN",
			"MM2_SOURCE_SASL_USERNAME="+testkit.PlainUser,
			"MM2_SOURCE_SASL_PASSWORD="+testkit.PlainPass,
			"MM2_SOURCE_SSL_TRUSTSTORE_LOCATION="+c.CA,
			"MM2_OFFSET_LAG_MAX=50")
	}
	if r := RunMirror(t, env(warm)); r.Code != 0 || r.Records() != 10 { // creates the internal topics
		t.Fatalf("warm-up mirror run: exit %d, %d records, want 0, 10\n%s", r.Code, r.Records(), r.Stderr)
	}

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
	r := RunMirror(t, env(slow))
	if r.Code != 0 || r.Records() != n {
		t.Fatalf("mirror run of %s: exit %d, %d records, want 0, %d\n%s", slow, r.Code, r.Records(), n, r.Stderr)
	}
	// The throttle is an event of this run: the broker answered a syncs request with one.
	throttled := false
	for line := range strings.SplitSeq(r.Stderr, "\n") {
		var l struct{ Msg string }
		if json.Unmarshal([]byte(line), &l) == nil && strings.HasPrefix(l.Msg, syncsThrottledLog) {
			throttled = true
		}
	}
	if u, ok := r.Summary["offset_syncs_unconfirmed"]; ok {
		t.Errorf("mirror run of %s: summary's offset_syncs_unconfirmed %v, want none (every final sync written)", slow, u)
	}
	if !throttled {
		t.Fatalf("mirror run of %s logged no throttle of its offset-syncs producer (%q) under a 4 KiB/s quota\n%s", slow, syncsThrottledLog, r.Stderr)
	}
	// Every record is on the target, each partition to its end.
	ctx := testkit.Context(t, 30*time.Second)
	ends, err := testkit.Admin(t, c.Target.Bootstrap).ListEndOffsets(ctx, "source."+slow)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(parts) {
		if o, ok := ends.Lookup("source."+slow, p); !ok || o.Offset != n/parts {
			t.Errorf("source.%s-%d ends at %d (found %v), want %d", slow, p, o.Offset, ok, n/parts)
		}
	}
	// The final sync of every partition was written while the quota held.
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
