package ehfake_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/mm2go/mm2go/test/testkit/ehfake"
)

// client dials the double as an Event Hubs client does: TLS with the double's CA, SASL PLAIN
// as "$ConnectionString" with the connection string as password.
func client(t *testing.T, f *ehfake.Fake, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	pem, err := os.ReadFile(f.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(f.Addr),
		kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}),
		kgo.SASL(plain.Auth{User: "$ConnectionString", Pass: f.ConnectionString}.AsMechanism())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestGroupsWithoutMembersDead: as Event Hubs does, the double describes a group with
// committed offsets and no members as Dead (not Empty, as Kafka would), with no members;
// cluster.Profile.GroupsDeadMeansIdle is about this answer.
func TestGroupsWithoutMembersDead(t *testing.T) {
	f := ehfake.New(t, ehfake.Config{Topics: map[string]int32{"t": 1}})
	adm := kadm.NewClient(client(t, f))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs := kadm.Offsets{}
	offs.AddOffset("t", 0, 0, -1)
	if _, err := adm.CommitOffsets(ctx, "app", offs); err != nil {
		t.Fatal(err)
	}
	groups, err := adm.DescribeGroups(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	if g := groups["app"]; g.State != "Dead" || len(g.Members) != 0 || g.ProtocolType != "consumer" {
		t.Fatalf("idle group described as %q (protocol type %q) with %d members; want Dead, consumer, none", g.State, g.ProtocolType, len(g.Members))
	}
}

// TestTierAnswers: the Standard double refuses to add partitions to an event hub, the Premium
// one adds them; both accept any replication factor (Event Hubs keeps its own copies).
func TestTierAnswers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, premium := range []bool{false, true} {
		f := ehfake.New(t, ehfake.Config{Premium: premium})
		adm := kadm.NewClient(client(t, f))
		resp, err := adm.CreateTopic(ctx, 2, 3, nil, "hub")
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("premium %v: creating an event hub with replication factor 3: %v", premium, err)
		}
		up, err := adm.UpdatePartitions(ctx, 4, "hub")
		if err == nil {
			err = up.Error()
		}
		md, merr := adm.Metadata(ctx, "hub")
		if merr != nil {
			t.Fatal(merr)
		}
		n := len(md.Topics["hub"].Partitions)
		if premium && (err != nil || n != 4) {
			t.Errorf("premium: adding partitions: %v, %d partitions", err, n)
		}
		if !premium && (!errors.Is(err, kerr.PolicyViolation) || n != 2) {
			t.Errorf("standard: adding partitions: %v, %d partitions; want POLICY_VIOLATION and 2", err, n)
		}
	}
}

// TestCommitThrottle: a fifth commit of one partition within a second is refused with
// THROTTLING_QUOTA_EXCEEDED and counted; another partition, or the next second, is not.
// (Commits by name, OffsetCommit v9, as mm2go's Event Hubs profile sends them.)
func TestCommitThrottle(t *testing.T) {
	f := ehfake.New(t, ehfake.Config{Topics: map[string]int32{"t": 2}})
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.OffsetCommit), 9)
	adm := kadm.NewClient(client(t, f, kgo.MaxVersions(v)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	commit := func(p int32, at int64) error {
		offs := kadm.Offsets{}
		offs.AddOffset("t", p, at, -1)
		r, err := adm.CommitOffsets(ctx, "app", offs)
		if err == nil {
			err = r.Error()
		}
		return err
	}
	start := time.Now()
	for i := range ehfake.CommitsPerSecond {
		if err := commit(0, int64(i)); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	err := commit(0, 9)
	if time.Since(start) < time.Second && (!errors.Is(err, kerr.ThrottlingQuotaExceeded) || f.ThrottledCommits.Load() != 1) {
		t.Fatalf("fifth commit within a second: %v, %d throttled; want THROTTLING_QUOTA_EXCEEDED, 1", err, f.ThrottledCommits.Load())
	}
	if err := commit(1, 1); err != nil {
		t.Fatalf("another partition: %v", err)
	}
	time.Sleep(time.Second)
	if err := commit(0, 10); err != nil {
		t.Fatalf("a second later: %v", err)
	}
}
