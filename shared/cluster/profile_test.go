package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/mm2go/mm2go/test/testkit/ehfake"
)

func TestNewProfile(t *testing.T) {
	eh := []string{"ns.servicebus.windows.net:9093"}
	for _, test := range []struct {
		name        string
		pc          ProfileConfig
		bootstrap   []string
		connStr     bool
		compression string
		wantOn      bool
		wantCompact bool
		wantTopics  int
		wantParts   int32
		errPart     string
	}{
		{name: "plain kafka", bootstrap: []string{"kafka:9092"}, wantOn: false, wantCompact: true},
		{name: "eh host auto", bootstrap: eh, wantOn: true, wantTopics: 10, wantParts: 32},
		{name: "china cloud host", bootstrap: []string{"ns.servicebus.chinacloudapi.cn:9093"}, wantOn: true, wantTopics: 10, wantParts: 32},
		{name: "connection string", bootstrap: []string{"127.0.0.1:9093"}, connStr: true, wantOn: true, wantTopics: 10, wantParts: 32},
		{name: "forced on", pc: ProfileConfig{Mode: "ON"}, bootstrap: []string{"10.0.0.4:9093"}, wantOn: true, wantTopics: 10, wantParts: 32},
		{name: "forced off", pc: ProfileConfig{Mode: "off"}, bootstrap: eh, connStr: true, wantOn: false, wantCompact: true},
		{name: "premium", pc: ProfileConfig{Tier: "Premium"}, bootstrap: eh, compression: "gzip", wantOn: true, wantCompact: true, wantTopics: 100, wantParts: 100},
		{name: "dedicated with overrides", pc: ProfileConfig{Tier: "dedicated", MaxTopics: 3000, MaxPartitions: 2000, Compaction: "false"}, bootstrap: eh,
			wantOn: true, wantCompact: false, wantTopics: 3000, wantParts: 2000},
		{name: "standard compaction by setting", pc: ProfileConfig{Compaction: "true"}, bootstrap: eh, wantOn: true, wantCompact: true, wantTopics: 10, wantParts: 32},
		{name: "snappy refused", bootstrap: eh, compression: "snappy", errPart: "MM2_TARGET_PRODUCER_COMPRESSION_TYPE (target.producer.compression.type): Event Hubs refuses snappy"},
		{name: "gzip on standard", bootstrap: eh, compression: "gzip", errPart: "gzip needs Premium or Dedicated: set MM2_TARGET_EVENTHUBS_TIER"},
		{name: "snappy fine on kafka", bootstrap: []string{"kafka:9092"}, compression: "snappy", wantCompact: true},
		{name: "bad mode", pc: ProfileConfig{Mode: "yes"}, bootstrap: eh, errPart: "MM2_TARGET_EVENTHUBS_PROFILE (target.eventhubs.profile): unknown value \"yes\""},
		{name: "bad tier", pc: ProfileConfig{Tier: "basic"}, bootstrap: eh, errPart: "eventhubs.tier): unknown value \"basic\""},
	} {
		t.Run(test.name, func(t *testing.T) {
			p, err := NewProfile("target", test.pc, test.bootstrap, test.connStr, test.compression)
			if test.errPart != "" {
				if err == nil || !strings.Contains(err.Error(), test.errPart) {
					t.Fatalf("error = %v, want it to contain %q", err, test.errPart)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.EventHubs != test.wantOn || p.CompactInternalTopics != test.wantCompact || p.MaxTopics != test.wantTopics || p.MaxPartitionsPerTopic != test.wantParts {
				t.Fatalf("profile = %+v; want on=%v compact=%v topics=%d partitions=%d", p, test.wantOn, test.wantCompact, test.wantTopics, test.wantParts)
			}
			if p.EventHubs {
				if p.SyncConfigs || p.SyncACLs || !p.GroupsDeadMeansIdle || p.Notice() == "" || len(p.ClientOpts()) == 0 {
					t.Fatalf("Event Hubs profile %+v: want no config/ACL sync, Dead groups idle, a notice and client options", p)
				}
				_, compact := p.InternalTopicConfigs()["cleanup.policy"]
				if compact != p.CompactInternalTopics {
					t.Fatalf("InternalTopicConfigs %v disagrees with CompactInternalTopics=%v", p.InternalTopicConfigs(), p.CompactInternalTopics)
				}
			} else if !p.SyncConfigs || !p.SyncACLs || p.Notice() != "" || p.ClientOpts() != nil || p.MaxTopics != 0 {
				t.Fatalf("plain Kafka profile %+v: want everything allowed, no limits", p)
			}
		})
	}
}

// ehClient connects to the Event Hubs double the way Event Hubs is reached:
// TLS and PLAIN $ConnectionString.
func ehClient(t *testing.T, f *ehfake.Fake, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	pem, err := os.ReadFile(f.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(f.Addr),
		kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}),
		kgo.SASL(plain.Auth{User: EventHubsUser, Pass: f.ConnectionString}.AsMechanism()),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestCheckBudget(t *testing.T) {
	f := ehfake.New(t, ehfake.Config{Topics: map[string]int32{"a": 4, "b": 4, "c": 4, "d": 4, "e": 4, "f": 4, "g": 4, "h": 4}})
	adm := kadm.NewClient(ehClient(t, f))
	p, err := NewProfile("target", ProfileConfig{}, []string{"mm2go-test.servicebus.windows.net:9093"}, true, "none")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// 8 existing + 2 new fits in 10; existing topics are not counted again.
	if err := p.CheckBudget(ctx, adm, map[string]int32{"a": 4, "src.x": 4, "mm2-offsets.src.internal": 25}); err != nil {
		t.Fatalf("within budget: %v", err)
	}
	// 8 + 3 = 11: one over, nothing created.
	err = p.CheckBudget(ctx, adm, map[string]int32{"src.x": 4, "src.y": 4, "mm2-offsets.src.internal": 25})
	var be *BudgetError
	if !errors.As(err, &be) || be.Over != 1 || be.Existing != 8 || len(be.New) != 3 {
		t.Fatalf("over budget: err = %v (%+v), want a BudgetError 1 over with 8 existing and 3 new", err, be)
	}
	for _, want := range []string{`cluster "target"`, "allows 10 event hubs", "has 8", "creating 3 more (mm2-offsets.src.internal, src.x, src.y) would be 1 over", "MM2_TARGET_EVENTHUBS_MAX_TOPICS"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	// Too many partitions for an event hub.
	err = p.CheckBudget(ctx, adm, map[string]int32{"src.wide": 64})
	if !errors.As(err, &be) || be.TooWide["src.wide"] != 64 || !strings.Contains(err.Error(), "src.wide needs 64 (32 over)") {
		t.Fatalf("too wide: err = %v", err)
	}
	if f.Topics() != 8 {
		t.Fatalf("CheckBudget created topics: namespace has %d", f.Topics())
	}
	// A plain Kafka cluster has no budget.
	if err := (Profile{}).CheckBudget(ctx, adm, map[string]int32{"x": 5000}); err != nil {
		t.Fatal(err)
	}
}

// TestEventHubsDoubleRefusesWhatTheProfilePrevents checks the double and the
// profile's client options against each other: oversized requests are cut
// unless the profile caps them, compressed batches are refused, and the
// management APIs Event Hubs lacks are missing.
func TestEventHubsDoubleRefusesWhatTheProfilePrevents(t *testing.T) {
	const parts = 8
	f := ehfake.New(t, ehfake.Config{Topics: map[string]int32{"big": parts}})
	p, err := NewProfile("target", ProfileConfig{Mode: ProfileOn}, []string{f.Addr}, true, "none")
	if err != nil {
		t.Fatal(err)
	}
	// 8 partitions x 400 KB: several batches per request unless capped.
	// Records are fresh per produce: kgo keeps a produced record's context.
	records := func() []*kgo.Record {
		var recs []*kgo.Record
		for i := range 3 * parts {
			v := bytes.Repeat([]byte{byte('a' + i%26)}, 400_000)
			recs = append(recs, &kgo.Record{Topic: "big", Partition: int32(i % parts), Key: []byte(fmt.Sprint(i)), Value: v})
		}
		return recs
	}
	common := []kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(50 * time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.DisableIdempotentWrite()}

	t.Run("profile on", func(t *testing.T) {
		cl := ehClient(t, f, append(common, p.ClientOpts()...)...)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		recs := records()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce with the profile: %v", err)
		}
		if f.Oversized.Load() != 0 || f.LargestRequest.Load() > EventHubsProduceBytes {
			t.Fatalf("with the profile: %d oversized requests, largest %d bytes", f.Oversized.Load(), f.LargestRequest.Load())
		}
		// Byte-exact read back.
		cons := ehClient(t, f, kgo.ConsumeTopics("big"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		got := map[string][]byte{}
		for len(got) < len(recs) {
			fs := cons.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatal(err)
			}
			fs.EachRecord(func(r *kgo.Record) { got[string(r.Key)] = r.Value })
		}
		for _, r := range recs {
			if !bytes.Equal(got[string(r.Key)], r.Value) {
				t.Fatalf("record %s differs after the round trip", r.Key)
			}
		}
	})

	t.Run("profile off", func(t *testing.T) {
		cl := ehClient(t, f, append(common, kgo.RecordDeliveryTimeout(5*time.Second), kgo.RecordRetries(2))...)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		err := cl.ProduceSync(ctx, records()...).FirstErr()
		if err == nil || f.Oversized.Load() == 0 {
			t.Fatalf("without the profile: err = %v, %d oversized requests; want the double to cut an oversized request", err, f.Oversized.Load())
		}
	})

	t.Run("compression refused", func(t *testing.T) {
		cl := ehClient(t, f, kgo.ProducerBatchCompression(kgo.SnappyCompression()), kgo.DisableIdempotentWrite(),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: "big", Value: bytes.Repeat([]byte("compressible "), 1000)}).FirstErr()
		if !errors.Is(err, kerr.UnsupportedForMessageFormat) || f.Compressed.Load() == 0 {
			t.Fatalf("snappy batch: err = %v, want UNSUPPORTED_FOR_MESSAGE_FORMAT", err)
		}
	})

	t.Run("no config or ACL APIs", func(t *testing.T) {
		cl := ehClient(t, f)
		adm := kadm.NewClient(cl)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		v := "1000"
		_, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &v}}, "big")
		if err == nil {
			t.Fatal("IncrementalAlterConfigs succeeded on the Event Hubs double")
		}
		if _, err := kmsg.NewPtrDescribeACLsRequest().RequestWith(ctx, cl); err == nil {
			t.Fatal("DescribeACLs succeeded on the Event Hubs double")
		}
	})

	t.Run("quota refused", func(t *testing.T) {
		adm := kadm.NewClient(ehClient(t, f))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := adm.CreateTopic(ctx, 64, -1, nil, "too-wide")
		if err == nil {
			err = resp.Err
		}
		if !errors.Is(err, kerr.InvalidPartitions) {
			t.Fatalf("64 partitions: err = %v, want INVALID_PARTITIONS", err)
		}
	})
}

// TestEventHubsDoubleIdleCut checks that a client with the profile keeps
// working when Azure drops its idle connections (scaled down: the double cuts
// after one second instead of 240).
func TestEventHubsDoubleIdleCut(t *testing.T) {
	f := ehfake.New(t, ehfake.Config{IdleCut: time.Second, Topics: map[string]int32{"t": 1}})
	p, err := NewProfile("target", ProfileConfig{Mode: ProfileOn}, []string{f.Addr}, true, "none")
	if err != nil {
		t.Fatal(err)
	}
	cl := ehClient(t, f, append(p.ClientOpts(), kgo.DisableIdempotentWrite())...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d after an idle period: %v", i, err)
		}
		time.Sleep(1500 * time.Millisecond) // longer than the cut
	}
	if f.IdleCuts.Load() == 0 {
		t.Fatal("the double cut no idle connection")
	}
}
