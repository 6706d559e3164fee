package ehfake_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/mm2go/mm2go/test/testkit/ehfake"
)

// client dials the double as an Event Hubs client does: TLS with the double's CA, SASL PLAIN
// as "$ConnectionString" with the connection string as password.
func client(t *testing.T, f *ehfake.Fake) *kgo.Client {
	t.Helper()
	pem, err := os.ReadFile(f.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.Addr),
		kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}),
		kgo.SASL(plain.Auth{User: "$ConnectionString", Pass: f.ConnectionString}.AsMechanism()))
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
