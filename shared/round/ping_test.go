package round

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPingAsksTheCluster: Ping must ask each cluster every time. A target that answered once
// and then hangs (SIGSTOP: its connections stay open, nothing answers) is unavailable at the
// next Ping. kadm's BrokerMetadata answers from the client's known brokers once it has any,
// so a Ping after the first never left the process: a hung target passed it, and a
// checkpoint round then spent its budget on "describing topics: i/o timeout" retries that did
// not say the target was unavailable (loaded clean-clone CI at 8955440,
// TestFaultsCheckpointHeartbeat/checkpoint_target_hang), and a readiness probe (Job.Ready)
// said ready.
func TestPingAsksTheCluster(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dial := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	src, tgt := dial(), dial()
	clients := Clients{Src: src, Tgt: tgt, SrcAdm: kadm.NewClient(src), TgtAdm: kadm.NewClient(tgt)}
	f := &Flow{SourceAlias: "src", TargetAlias: "tgt"}
	if err := clients.Ping(context.Background(), f, true); err != nil {
		t.Fatalf("first ping: %v", err)
	}
	release := make(chan struct{})
	defer close(release)
	c.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		c.SleepControl(func() { <-release }) // hung: no answer until the test ends
		return nil, nil, false
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = clients.Ping(ctx, f, false)
	var u *UnavailableError
	if !errors.As(err, &u) || u.Cluster != "target" {
		t.Fatalf("ping of a hung target: %v, want the target cluster unavailable", err)
	}
}
