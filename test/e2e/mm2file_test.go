package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
)

// TestProductionMM2File runs `mirror run` with MM2_CONFIG_FILE and nothing else on a file
// written as for MM2 in production: two flows (east->west and west->east, active/active),
// SASL_SSL with a SCRAM JAAS line and a PEM truststore, tasks.max, producer overrides
// (compression, linger, max.request.size big enough for a 1.5 MB record that franz-go's
// default batch limit would refuse), ByteArrayConverter, refresh intervals. One run copies
// both flows byte for byte; a second run shows DefaultReplicationPolicy's cycle rule: the
// records east->west copied are not sent back east (no west.east.<topic>), though
// west->east's topics pattern matches them.
func TestProductionMM2File(t *testing.T) {
	c := testkit.Require(t)
	if c.Source.SASLSSL == "" || c.Target.SASLSSL == "" || c.CA == "" {
		t.Fatal("the harness clusters have no SASL_SSL listener (kafka.sh env)")
	}
	ctx := testkit.Context(t, 4*time.Minute)
	big := "3000000"
	eastTopic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "east"), 3, map[string]*string{"max.message.bytes": &big})
	westTopic := testkit.CreateTopic(t, c.Target.Bootstrap, testkit.Name(t, "west"), 2, nil)
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, "east."+eastTopic, "mm2-offsets.east.internal", "mm2-offset-syncs.west.internal", "east.checkpoints.internal")
	testkit.DeleteTopicsAtEnd(t, c.Source.Bootstrap, "west."+westTopic, "west.east."+eastTopic, "mm2-offsets.west.internal", "mm2-offset-syncs.east.internal")

	eastRecs := testkit.SampleRecords(eastTopic, 3, 60)
	eastRecs = append(eastRecs, &kgo.Record{Topic: eastTopic, Partition: 1, Key: []byte("big"), Value: bytes.Repeat([]byte{0xab}, 1_500_000), Timestamp: time.UnixMilli(1_600_000_000_000)})
	producer := testkit.Client(t, c.Source.Bootstrap, kgo.ProducerBatchMaxBytes(4<<20), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := producer.ProduceSync(ctx, eastRecs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	westRecs := testkit.Produce(t, c.Target.Bootstrap, testkit.SampleRecords(westTopic, 2, 40)...)

	props := `# MirrorMaker 2, active/active between two data centres
clusters = east, west
east.bootstrap.servers = ` + c.Source.SASLSSL + `
west.bootstrap.servers = ` + c.Target.SASLSSL + `

security.protocol = SASL_SSL
sasl.mechanism = SCRAM-SHA-512
sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required \
    username="scram-user" password="scram-secret";
ssl.truststore.type = PEM
ssl.truststore.location = ` + c.CA + `
ssl.endpoint.identification.algorithm = https

east->west.enabled = true
east->west.topics = ` + eastTopic + `
west->east.enabled = true
west->east.topics = ` + westTopic + `, east\..*

tasks.max = 4
refresh.topics.interval.seconds = 30
sync.topic.configs.interval.seconds = 60
emit.checkpoints.interval.seconds = 30
heartbeats.replication.enabled = false
replication.factor = 1
offset-syncs.topic.replication.factor = 1
checkpoints.topic.replication.factor = 1
heartbeats.topic.replication.factor = 1
offset.storage.replication.factor = 1
offset.storage.partitions = 1
config.storage.replication.factor = 1
status.storage.replication.factor = 1
key.converter = org.apache.kafka.connect.converters.ByteArrayConverter
value.converter = org.apache.kafka.connect.converters.ByteArrayConverter

west.producer.compression.type = zstd
west.producer.linger.ms = 20
west.producer.max.request.size = 4194304
east.producer.compression.type = lz4
east->west.producer.override.delivery.timeout.ms = 120000
east.consumer.max.poll.records = 1000
`
	path := filepath.Join(t.TempDir(), "mm2.properties")
	if err := os.WriteFile(path, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func() (int, string, string) {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(rctx, MirrorBinary(t), "run")
		cmd.Env = []string{"MM2_CONFIG_FILE=" + path}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, stdout.String(), stderr.String()
	}
	code, stdout, stderr := run()
	if code != 0 {
		t.Fatalf("mirror run: exit %d\n%s", code, lastLines(stderr, 40))
	}
	if n := strings.Count(strings.TrimSpace(stdout), "\n") + 1; n != 2 {
		t.Errorf("%d summaries on stdout, want one per flow:\n%s", n, stdout)
	}
	for _, want := range []string{`"flow":"east->west"`, `"flow":"west->east"`, `"key":"tasks.max"`, `"key":"east.consumer.max.poll.records"`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("log lacks %s:\n%s", want, lastLines(stderr, 40))
		}
	}
	if strings.Contains(stderr, "scram-secret") {
		t.Error("the SCRAM password is in the log")
	}
	testkit.AssertSameRecords(t, eastRecs, testkit.ReadAll(t, c.Target.Bootstrap, "east."+eastTopic))
	testkit.AssertSameRecords(t, westRecs, testkit.ReadAll(t, c.Source.Bootstrap, "west."+westTopic))

	// Second run: west->east now sees east.<topic> on west, matched by its topics, and leaves
	// it alone (its source is east, the flow's target).
	if code, _, stderr := run(); code != 0 {
		t.Fatalf("second mirror run: exit %d\n%s", code, lastLines(stderr, 40))
	}
	if n := EndOffsetsSum(ctx, c.Source.Bootstrap, "west.east."+eastTopic); n != 0 {
		t.Errorf("west.east.%s has %d records: a replication cycle", eastTopic, n)
	}
	md, err := testkit.Admin(t, c.Source.Bootstrap).ListTopics(ctx, "west.east."+eastTopic)
	if err == nil && md.Has("west.east."+eastTopic) {
		t.Errorf("west.east.%s was created: a replication cycle", eastTopic)
	}
}
