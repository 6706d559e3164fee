// Package testkit gives integration tests the real Kafka clusters that the harness in
// test/kafka started: their addresses, uniquely named topics, clients and cleanup.
//
// The harness exports MM2GO_TEST_SOURCE, MM2GO_TEST_TARGET and friends (see docs/design.md).
// Without them a local `go test ./...` skips integration tests with one line saying how to run
// them; with CI=true a missing broker fails the test instead, so CI can never pass by skipping.
package testkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Env names set by test/kafka/kafka.sh env.
const (
	EnvSource        = "MM2GO_TEST_SOURCE"
	EnvTarget        = "MM2GO_TEST_TARGET"
	EnvSourceSASLSSL = "MM2GO_TEST_SOURCE_SASL_SSL"
	EnvTargetSASLSSL = "MM2GO_TEST_TARGET_SASL_SSL"
	EnvCA            = "MM2GO_TEST_CA"
	EnvKafkaHome     = "MM2GO_TEST_KAFKA_HOME"
	EnvKafkaLib      = "MM2GO_TEST_KAFKA_LIB"
)

// Credentials of the harness's SASL_SSL listener.
const (
	PlainUser          = "alice"
	PlainPass          = "alice-secret"
	ScramUser          = "scram-user"
	ScramPass          = "scram-secret"
	EHConnectionString = "Endpoint=sb://localhost/;SharedAccessKeyName=test;SharedAccessKey=fake-key-do-not-log"
)

// Cluster is one running harness cluster.
type Cluster struct {
	// Name is the harness name ("source" or "target").
	Name string
	// Bootstrap is the PLAINTEXT listener address.
	Bootstrap string
	// SASLSSL is the SASL_SSL listener address (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
	SASLSSL string
}

// Clusters are the two clusters of a flow test.
type Clusters struct {
	Source, Target Cluster
	// CA is the path of the PEM file that signed the brokers' certificates.
	CA string
	// KafkaHome is the harness state directory; KafkaLib holds the Kafka jars.
	KafkaHome, KafkaLib string
}

// Require returns the running clusters or ends the test: a skip on a developer machine,
// a failure under CI=true.
func Require(t testing.TB) Clusters {
	t.Helper()
	c := Clusters{
		Source:    Cluster{Name: "source", Bootstrap: os.Getenv(EnvSource), SASLSSL: os.Getenv(EnvSourceSASLSSL)},
		Target:    Cluster{Name: "target", Bootstrap: os.Getenv(EnvTarget), SASLSSL: os.Getenv(EnvTargetSASLSSL)},
		CA:        os.Getenv(EnvCA),
		KafkaHome: os.Getenv(EnvKafkaHome),
		KafkaLib:  os.Getenv(EnvKafkaLib),
	}
	if c.Source.Bootstrap == "" || c.Target.Bootstrap == "" {
		msg := "integration test needs real Kafka clusters: run `make test` (or `eval $(test/kafka/kafka.sh env)` after starting them)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + "; CI=true, so this is a failure, not a skip")
		}
		t.Skip(msg)
	}
	return c
}

// Context returns a context bounded by d that ends with the test.
func Context(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// Name returns a name unique to this test run, starting with a readable form of the test name.
func Name(t testing.TB, prefix string) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("random name: %v", err)
	}
	base := unsafeChars.ReplaceAllString(t.Name(), "_")
	if len(base) > 60 {
		base = base[len(base)-60:]
	}
	if prefix != "" {
		base = prefix + "-" + base
	}
	return strings.ToLower(base) + "-" + hex.EncodeToString(b)
}

// Client returns a franz-go client for a bootstrap address, closed when the test ends.
func Client(t testing.TB, bootstrap string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bootstrap)}, opts...)...)
	if err != nil {
		t.Fatalf("client for %s: %v", bootstrap, err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns an admin client for a bootstrap address, closed when the test ends.
func Admin(t testing.TB, bootstrap string) *kadm.Client {
	t.Helper()
	return kadm.NewClient(Client(t, bootstrap))
}

// CreateTopic creates a topic with the given partitions and configs (replication factor 1) and
// deletes it when the test ends. It returns the topic name.
func CreateTopic(t testing.TB, bootstrap, name string, partitions int32, configs map[string]*string) string {
	t.Helper()
	adm := Admin(t, bootstrap)
	ctx := Context(t, 30*time.Second)
	resp, err := adm.CreateTopic(ctx, partitions, 1, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s on %s: %v", name, bootstrap, err)
	}
	DeleteTopicsAtEnd(t, bootstrap, name)
	// CreateTopics returns once the KRaft controller committed the topic; the broker applies
	// that metadata a moment later. Wait until its metadata lists every partition with a
	// leader, so the code under test never races the topic's appearance.
	if err := waitLed(ctx, Client(t, bootstrap), name, partitions, false); err != nil {
		t.Fatalf("topic %s on %s has no leader for all %d partitions: %v", name, bootstrap, partitions, err)
	}
	return name
}

// waitLed waits until the broker's metadata lists at least partitions partitions of topic,
// every one with a leader; if ctx ends first it returns ctx's error with the last request's
// failure, if any. With ifExists, a topic the broker does not know ends the wait at once. (A
// direct request: kadm's Metadata may answer from franz-go's cache, stale for up to 5 s.)
func waitLed(ctx context.Context, cl *kgo.Client, topic string, partitions int32, ifExists bool) error {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	var last error
	for {
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && len(resp.Topics) == 1 {
			tm := resp.Topics[0]
			if ifExists && tm.ErrorCode != 0 {
				return nil
			}
			if tm.ErrorCode == 0 && int32(len(tm.Partitions)) >= partitions && allLed(tm) {
				return nil
			}
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%w (last metadata request: %v)", ctx.Err(), last)
			}
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func allLed(t kmsg.MetadataResponseTopic) bool {
	for _, p := range t.Partitions {
		if p.Leader < 0 || p.ErrorCode != 0 {
			return false
		}
	}
	return true
}

// DeleteTopicsAtEnd deletes topics (if they exist) when the test ends, so reruns start clean.
func DeleteTopicsAtEnd(t testing.TB, bootstrap string, topics ...string) {
	t.Helper()
	t.Cleanup(func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
		if err != nil {
			return
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, _ = kadm.NewClient(cl).DeleteTopics(ctx, topics...)
	})
}

// Produce writes records synchronously (acks=all) and fails the test on any error.
// Each record's Topic must be set. It returns the produced records with offsets filled in.
func Produce(t testing.TB, bootstrap string, recs ...*kgo.Record) []*kgo.Record {
	t.Helper()
	cl := Client(t, bootstrap, kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := Context(t, 60*time.Second)
	// A topic grown a moment ago (UpdatePartitions) is listed with its new partitions only
	// once the broker applied the change; a record for one of them before that fails at once
	// ("invalid record partitioning choice").
	need := map[string]int32{}
	for _, r := range recs {
		need[r.Topic] = max(need[r.Topic], r.Partition+1)
	}
	for topic, n := range need {
		if err := waitLed(ctx, cl, topic, n, true); err != nil {
			t.Fatalf("producing to %s on %s: partition %d not listed with a leader: %v", topic, bootstrap, n-1, err)
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing %d records to %s: %v", len(recs), bootstrap, err)
	}
	return recs
}

// ReadAll consumes every record of topic (all partitions) from the start up to the end offsets
// seen when called. Records come back per partition in offset order, partitions ascending.
func ReadAll(t testing.TB, bootstrap, topic string, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	recs, err := ReadAllErr(Context(t, 60*time.Second), bootstrap, topic, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// ReadAllErr is ReadAll returning an error instead of failing a test.
func ReadAllErr(ctx context.Context, bootstrap, topic string, opts ...kgo.Opt) ([]*kgo.Record, error) {
	adm, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	starts, err := kadm.NewClient(adm).ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("start offsets of %s: %w", topic, err)
	}
	want := map[int32]int64{}
	remaining := 0
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(o.Topic, o.Partition)
		if o.Offset > s.Offset {
			want[o.Partition] = o.Offset
			remaining++
		}
	})
	parts := map[int32][]*kgo.Record{}
	if remaining > 0 {
		offs := map[string]map[int32]kgo.Offset{topic: {}}
		for p := range want {
			offs[topic][p] = kgo.NewOffset().AtStart()
		}
		// Transaction markers are kept so that a partition whose last offsets are markers is
		// read to its end too (they are not returned). An empty poll proves nothing: on a busy
		// machine a fetch can take seconds.
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.ConsumePartitions(offs), kgo.KeepControlRecords()}, opts...)...)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		for remaining > 0 {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("reading %s: %d partitions not read to end: %w", topic, remaining, err)
			}
			var ferr error
			fs.EachError(func(_ string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) {
					ferr = fmt.Errorf("fetching %s[%d]: %w", topic, p, err)
				}
			})
			if ferr != nil {
				return nil, ferr
			}
			fs.EachRecord(func(r *kgo.Record) {
				end, ok := want[r.Partition]
				if !ok || r.Offset >= end {
					return
				}
				if !r.Attrs.IsControl() {
					parts[r.Partition] = append(parts[r.Partition], r)
				}
				if r.Offset == end-1 {
					remaining--
				}
			})
		}
	}
	var out []*kgo.Record
	for p := int32(0); p < int32(len(ends[topic])); p++ {
		out = append(out, parts[p]...)
	}
	return out, nil
}

// RepoRoot returns the repository's root directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot find the repository root")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// KafkaScript returns the path of the harness script.
func KafkaScript(t testing.TB) string {
	return filepath.Join(RepoRoot(t), "test", "kafka", "kafka.sh")
}

// StartMM2 starts real MirrorMaker 2 (dedicated mode) with the given properties under a unique
// name and stops it when the test ends. It returns the name (for logs under KafkaHome).
func StartMM2(t testing.TB, properties string) string {
	t.Helper()
	name := Name(t, "mm2")
	dir := t.TempDir()
	file := filepath.Join(dir, "mm2.properties")
	if err := os.WriteFile(file, []byte(properties), 0o600); err != nil {
		t.Fatal(err)
	}
	runScript(t, "mm2", "start", name, file)
	t.Cleanup(func() { StopMM2(t, name) })
	return name
}

// StopMM2 stops a MirrorMaker 2 started by StartMM2 (SIGTERM; it shuts its herders down).
func StopMM2(t testing.TB, name string) {
	t.Helper()
	runScript(t, "mm2", "stop", name)
}

// MM2Log returns the stdout log of a MirrorMaker 2 started by StartMM2.
func MM2Log(t testing.TB, name string) string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(os.Getenv(EnvKafkaHome), name, "logs", "stdout.log"))
	return string(b)
}

// Tool runs a Kafka command-line tool class from the harness jars and returns its stdout.
func Tool(t testing.TB, class string, args ...string) string {
	t.Helper()
	return runScript(t, append([]string{"tool", class}, args...)...)
}

func runScript(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(KafkaScript(t), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) || err != nil {
			t.Fatalf("kafka.sh %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
	}
	return string(out)
}

// WaitFor polls cond every 200 ms until it returns true or the timeout passes, then fails with msg.
// It bounds waits on asynchronous systems (MM2 start-up); it asserts nothing about speed.
func WaitFor(t testing.TB, timeout time.Duration, msg string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, msg)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
