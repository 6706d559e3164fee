package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/mm2go/mm2go/shared/app"
	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/config"
	"github.com/mm2go/mm2go/shared/engine"
	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/ehfake"
)

// ehEnv is the environment of a flow from the harness source cluster to the
// Event Hubs double, reached with its connection string (as a user would).
func ehEnv(c testkit.Clusters, f *ehfake.Fake, topics string, extra ...string) map[string]string {
	env := map[string]string{
		"MM2_SOURCE_BOOTSTRAP_SERVERS":              c.Source.Bootstrap,
		"MM2_TARGET_BOOTSTRAP_SERVERS":              f.Addr,
		"MM2_TARGET_EVENTHUBS_CONNECTION_STRING":    f.ConnectionString,
		"MM2_TARGET_SSL_TRUSTSTORE_LOCATION":        f.CAFile,
		"MM2_TOPICS":                                topics,
		"MM2_HEARTBEATS_REPLICATION_ENABLED":        "false",
		"MM2_REPLICATION_FACTOR":                    "-1",
		"MM2_OFFSET_STORAGE_REPLICATION_FACTOR":     "-1",
		"MM2_OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR": "1",
	}
	for _, kv := range extra {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

func loadConfig(t *testing.T, env map[string]string) *config.Config {
	t.Helper()
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, nil)
	if err != nil {
		t.Fatalf("loading settings: %v", err)
	}
	return cfg
}

// ehRead reads every record of topic from the double.
func ehRead(t *testing.T, f *ehfake.Fake, topic string) []*kgo.Record {
	t.Helper()
	opts := []kgo.Opt{
		kgo.SeedBrokers(f.Addr),
		kgo.DialTLSConfig(&tls.Config{RootCAs: brokerTLS(t, f.CAFile).RootCAs, MinVersion: tls.VersionTLS12}),
		kgo.SASL(plain.Auth{User: cluster.EventHubsUser, Pass: f.ConnectionString}.AsMechanism()),
	}
	adm, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx := testkit.Context(t, time.Minute)
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s on the double: %v", topic, err)
	}
	want := 0
	ends.Each(func(o kadm.ListedOffset) { want += int(o.Offset) })
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("reading %s from the double: %v", topic, err)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// bigRecords are records large enough that a produce request carrying one
// batch per partition would pass Event Hubs' 1,046,528-byte cap.
func bigRecords(topic string, partitions int32, n int) []*kgo.Record {
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Key: []byte(fmt.Sprintf("big-%d", i)),
			Value: bytes.Repeat([]byte{byte(i)}, 300_000+i), Timestamp: time.Now().Add(-time.Hour).Truncate(time.Millisecond)})
	}
	return recs
}

// TestEventHubsDoubleBurst copies from real Kafka to the Event Hubs double
// with a connection string: the profile switches on by itself, the copy is
// byte-exact, no request passes the size cap, nothing is compressed, the
// internal topic is not compacted (Standard), topic configs are not synced
// (a second burst after a source config change still succeeds), one notice
// says so, and the connection string is in no log line.
func TestEventHubsDoubleBurst(t *testing.T) {
	c := testkit.Require(t)
	f := ehfake.New(t, ehfake.Config{})
	small := createTopic(t, c.Source.Bootstrap, testkit.Name(t, "eh-small"), 4, map[string]*string{"retention.ms": ptr(testkit.RetentionMS)})
	big := createTopic(t, c.Source.Bootstrap, testkit.Name(t, "eh-big"), 8, nil)
	wantSmall := testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(small, 4, 400)...)
	wantBig := testkit.Produce(t, c.Source.Bootstrap, bigRecords(big, 8, 40)...)

	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := loadConfig(t, ehEnv(c, f, small+","+big))
	burst := func() engine.Summary {
		t.Helper()
		ctx := testkit.Context(t, 3*time.Minute)
		e, err := app.Engine(ctx, cfg, nil, logger)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		s, err := e.Burst(ctx, engine.BurstOptions{})
		if err != nil {
			t.Fatalf("burst to the Event Hubs double: %v", err)
		}
		return s
	}
	s := burst()
	if s.Records != int64(len(wantSmall)+len(wantBig)) {
		t.Fatalf("burst copied %d records, want %d", s.Records, len(wantSmall)+len(wantBig))
	}
	testkit.AssertSameRecords(t, wantSmall, ehRead(t, f, "source."+small))
	testkit.AssertSameRecords(t, wantBig, ehRead(t, f, "source."+big))
	if f.Oversized.Load() != 0 || f.Compressed.Load() != 0 || f.LargestRequest.Load() > cluster.EventHubsProduceBytes {
		t.Fatalf("the double cut %d oversized requests (largest %d bytes) and refused %d compressed ones",
			f.Oversized.Load(), f.LargestRequest.Load(), f.Compressed.Load())
	}
	if f.LargestRequest.Load() < 500_000 {
		t.Errorf("largest request %d bytes: the big records did not exercise the cap", f.LargestRequest.Load())
	}
	info := f.Cluster.TopicInfo("mm2-offsets.source.internal")
	if info == nil {
		t.Fatal("no offsets topic on the double")
	}
	if p := info.Configs["cleanup.policy"]; p != nil && *p == "compact" {
		t.Errorf("offsets topic created compacted on a Standard namespace")
	}

	// A source config change and more records: the next burst must not try
	// AlterConfigs (unsupported) and must copy the new records.
	adm := testkit.Admin(t, c.Source.Bootstrap)
	if _, err := adm.AlterTopicConfigs(testkit.Context(t, 30*time.Second), []kadm.AlterConfig{{Name: "retention.ms", Value: ptr(testkit.RetentionMSLonger)}}, small); err != nil {
		t.Fatal(err)
	}
	more := testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(small, 4, 40)...)
	if s := burst(); s.Records != int64(len(more)) {
		t.Fatalf("second burst copied %d records, want %d", s.Records, len(more))
	}
	testkit.AssertSameRecords(t, append(wantSmall, more...), ehRead(t, f, "source."+small))

	out := logs.String()
	if strings.Count(out, "is Azure Event Hubs") < 1 || !strings.Contains(out, "not synced") {
		t.Errorf("no Event Hubs profile notice in the logs:\n%s", lastLines(out, 20))
	}
	key := f.ConnectionString[strings.Index(f.ConnectionString, "SharedAccessKey=")+len("SharedAccessKey="):]
	if strings.Contains(out, key) {
		t.Errorf("the connection string's key is in the logs")
	}
}

// TestEventHubsDoubleProfileOff shows what the profile prevents, with the
// profile forced off (MM2_TARGET_EVENTHUBS_PROFILE=off): topic creation stops midway at the
// namespace quota (leaving some topics behind) where the profile fails first
// and creates nothing; and topic config sync calls an API Event Hubs lacks.
func TestEventHubsDoubleProfileOff(t *testing.T) {
	c := testkit.Require(t)

	// run runs a burst with the profile as configured, or forced off with the
	// user's setting MM2_TARGET_EVENTHUBS_PROFILE=off.
	run := func(t *testing.T, env map[string]string, profileOff bool) error {
		t.Helper()
		if profileOff {
			env["MM2_TARGET_EVENTHUBS_PROFILE"] = "off"
		} else {
			delete(env, "MM2_TARGET_EVENTHUBS_PROFILE")
		}
		cfg := loadConfig(t, env)
		ctx := testkit.Context(t, 2*time.Minute)
		o, err := app.EngineOptions(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if o.TargetProfile.EventHubs == profileOff {
			t.Fatalf("profile off=%v but the engine's target profile is %+v", profileOff, o.TargetProfile)
		}
		e, err := engine.New(ctx, o, app.Dialer(cfg, nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		_, err = e.Burst(ctx, engine.BurstOptions{})
		return err
	}

	t.Run("topic budget", func(t *testing.T) {
		var topics []string
		for i := range 3 {
			topics = append(topics, createTopic(t, c.Source.Bootstrap, testkit.Name(t, fmt.Sprintf("eh-q%d", i)), 2, nil))
		}
		testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topics[0], 2, 10)...)
		// A Standard namespace (10 event hubs) with 7: 3 remote topics + the offsets topic is
		// one too many.
		existing := map[string]int32{}
		for i := range 7 {
			existing[fmt.Sprintf("existing-%d", i)] = 1
		}
		for _, off := range []bool{false, true} {
			f := ehfake.New(t, ehfake.Config{Topics: existing})
			err := run(t, ehEnv(c, f, strings.Join(topics, ",")), off)
			if err == nil {
				t.Fatalf("profile off=%v: burst over the namespace quota succeeded", off)
			}
			t.Logf("profile off=%v: %v (event hubs now %d)", off, err, f.Topics())
			if !off {
				var be *cluster.BudgetError
				if !errors.As(err, &be) || be.Over != 1 || f.Topics() != 7 || !strings.Contains(err.Error(), "nothing created") {
					t.Fatalf("profile on: err = %v, %d event hubs; want a BudgetError 1 over and nothing created", err, f.Topics())
				}
				for _, tp := range topics {
					if !strings.Contains(err.Error(), "source."+tp) {
						t.Errorf("budget error does not name source.%s", tp)
					}
				}
			} else if !errors.Is(err, kerr.PolicyViolation) || f.Topics() <= 7 {
				t.Fatalf("profile off: err = %v with %d event hubs; want a POLICY_VIOLATION after creating some topics", err, f.Topics())
			}
		}
	})

	t.Run("config sync", func(t *testing.T) {
		f := ehfake.New(t, ehfake.Config{})
		topic := createTopic(t, c.Source.Bootstrap, testkit.Name(t, "eh-cfg"), 1, map[string]*string{"retention.ms": ptr(testkit.RetentionMS)})
		testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 1, 5)...)
		env := ehEnv(c, f, topic)
		if err := run(t, env, true); err != nil {
			t.Fatalf("first burst: %v", err)
		}
		if _, err := testkit.Admin(t, c.Source.Bootstrap).AlterTopicConfigs(testkit.Context(t, 30*time.Second),
			[]kadm.AlterConfig{{Name: "retention.ms", Value: ptr(testkit.RetentionMSLonger)}}, topic); err != nil {
			t.Fatal(err)
		}
		err := run(t, env, true)
		if err == nil || !strings.Contains(err.Error(), "syncing configs") {
			t.Fatalf("profile off, changed source config: err = %v; want the config sync to fail on Event Hubs", err)
		}
		t.Logf("profile off: %v", err)
		if err := run(t, env, false); err != nil {
			t.Fatalf("profile on: %v", err)
		}
	})
}

// TestEventHubsDoubleAsSource copies from the Event Hubs double to real Kafka:
// the profile applies to the source's connections, the offset-syncs topic goes
// to the target (offset-syncs.topic.location=target, as the docs recommend),
// and a second burst resumes without re-copying.
func TestEventHubsDoubleAsSource(t *testing.T) {
	c := testkit.Require(t)
	hub := "orders-" + testkit.Name(t, "")[len(testkit.Name(t, ""))-8:]
	f := ehfake.New(t, ehfake.Config{Topics: map[string]int32{hub: 4}})
	// Records written to Event Hubs by some producer.
	prod := ehClientFor(t, f, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	want := testkit.SampleRecords(hub, 4, 200)
	ctx := testkit.Context(t, 2*time.Minute)
	if err := prod.ProduceSync(ctx, want...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	remote := "eh." + hub
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, remote, "mm2-offsets.eh.internal", "mm2-offset-syncs.eh.internal")
	env := map[string]string{
		"MM2_SOURCE_ALIAS":                          "eh",
		"MM2_SOURCE_BOOTSTRAP_SERVERS":              f.Addr,
		"MM2_SOURCE_EVENTHUBS_CONNECTION_STRING":    f.ConnectionString,
		"MM2_SOURCE_SSL_TRUSTSTORE_LOCATION":        f.CAFile,
		"MM2_TARGET_BOOTSTRAP_SERVERS":              c.Target.Bootstrap,
		"MM2_TOPICS":                                hub,
		"MM2_OFFSET_SYNCS_TOPIC_LOCATION":           "target",
		"MM2_HEARTBEATS_REPLICATION_ENABLED":        "false",
		"MM2_REPLICATION_FACTOR":                    "1",
		"MM2_OFFSET_STORAGE_REPLICATION_FACTOR":     "1",
		"MM2_OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR": "1",
		"MM2_OFFSET_STORAGE_TOPIC":                  "mm2-offsets.eh.internal",
	}
	cfg := loadConfig(t, env)
	burst := func() engine.Summary {
		t.Helper()
		e, err := app.Engine(ctx, cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		s, err := e.Burst(ctx, engine.BurstOptions{})
		if err != nil {
			t.Fatalf("burst from the Event Hubs double: %v", err)
		}
		return s
	}
	if s := burst(); s.Records != int64(len(want)) {
		t.Fatalf("copied %d records, want %d", s.Records, len(want))
	}
	testkit.AssertSameRecords(t, want, testkit.ReadAll(t, c.Target.Bootstrap, remote))
	if s := burst(); s.Records != 0 {
		t.Fatalf("second burst re-copied %d records", s.Records)
	}
	if f.Topics() != 1 {
		t.Errorf("the mirror created %d topics on the Event Hubs source; want none", f.Topics()-1)
	}
}

func ehClientFor(t *testing.T, f *ehfake.Fake, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(f.Addr),
		kgo.DialTLSConfig(&tls.Config{RootCAs: brokerTLS(t, f.CAFile).RootCAs, MinVersion: tls.VersionTLS12}),
		kgo.SASL(plain.Auth{User: cluster.EventHubsUser, Pass: f.ConnectionString}.AsMechanism()),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic is testkit.CreateTopic that also waits until every partition has a leader, so
// that a produce right after it does not race the metadata (UNKNOWN_TOPIC_OR_PARTITION on a
// busy broker).
func createTopic(t *testing.T, bootstrap, name string, partitions int32, configs map[string]*string) string {
	t.Helper()
	testkit.CreateTopic(t, bootstrap, name, partitions, configs)
	adm := testkit.Admin(t, bootstrap)
	testkit.WaitFor(t, 30*time.Second, "leaders of "+name, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, name)
		if err != nil || ends.Error() != nil {
			return false
		}
		n := 0
		ends.Each(func(kadm.ListedOffset) { n++ })
		return n == int(partitions)
	})
	return name
}
