package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/mm2go/mm2go/shared/app"
	"github.com/mm2go/mm2go/shared/config"
	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/shared/ops"
	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/ehfake"
)

const identityPolicy = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"

// ehJavaProps are the client properties of a Java client (MirrorMaker 2, the Kafka consumer)
// reaching the double: SASL_SSL, PLAIN as $ConnectionString, the double's CA as PEM trust.
func ehJavaProps(f *ehfake.Fake, prefix string) string {
	return fmt.Sprintf(`%[1]sbootstrap.servers = %[2]s
%[1]ssecurity.protocol = SASL_SSL
%[1]ssasl.mechanism = PLAIN
%[1]ssasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username="$ConnectionString" password="%[3]s";
%[1]sssl.truststore.type = PEM
%[1]sssl.truststore.location = %[4]s
`, prefix, f.Addr, f.ConnectionString, f.CAFile)
}

// ehAdmin is an admin client on the double that commits by topic name (OffsetCommit v9),
// as a Kafka client must on Event Hubs, which has no topic IDs.
func ehAdmin(t *testing.T, f *ehfake.Fake) *kadm.Client {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.OffsetCommit), 9)
	return kadm.NewClient(ehClientFor(t, f, kgo.MaxVersions(v)))
}

// ehPositions reads every position of alias's topic in the offsets topic on the double.
func ehPositions(t *testing.T, f *ehfake.Fake, offsetsTopic, alias, topic string) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	for _, r := range ehRead(t, f, offsetsTopic) {
		k, err := mm2.DecodeOffsetKey(r.Key)
		if err != nil || k.Connector != mm2.SourceConnector || k.Cluster != alias || k.Topic != topic {
			continue
		}
		if v, err := mm2.DecodeOffsetValue(r.Value); err == nil {
			out[k.Partition] = v
		}
	}
	return out
}

// javaGroupRow is one partition as the genuine Java consumer in a group saw it.
type javaGroupRow struct {
	position, offset int64 // offset -1: nothing to read at the position
	key, value       []byte
}

// javaGroup joins group on topic with the Kafka jars' KafkaConsumer (test/java/GroupConsumer)
// and returns, per partition, its starting position and the first record it read.
func javaGroup(t *testing.T, props, topic, group string) map[int32]javaGroupRow {
	t.Helper()
	out := map[int32]javaGroupRow{}
	for _, line := range strings.Split(strings.TrimSpace(testkit.Java(t, "GroupConsumer", props, topic, group)), "\n") {
		f := strings.Fields(line)
		p, _ := strconv.Atoi(f[0])
		row := javaGroupRow{offset: -1}
		row.position, _ = strconv.ParseInt(f[1], 10, 64)
		if len(f) == 5 {
			row.offset, _ = strconv.ParseInt(f[2], 10, 64)
			row.key, _ = base64.StdEncoding.DecodeString(f[3])
			row.value, _ = base64.StdEncoding.DecodeString(f[4])
		}
		out[int32(p)] = row
	}
	return out
}

// TestEventHubsJourneyStandard and TestEventHubsJourneyPremium are the move from Kafka to an
// Event Hubs namespace (the double, answering as the tier does) as docs/migrating-to-event-hubs.md
// tells it, end to end; see ehJourney.
func TestEventHubsJourneyStandard(t *testing.T) { ehJourney(t, false) }

// TestEventHubsJourneyPremium: ehJourney on the Premium tier's double.
func TestEventHubsJourneyPremium(t *testing.T) { ehJourney(t, true) }

// ehJourney, every step asserting records byte for byte and group offsets:
//
//	a. genuine MirrorMaker 2 4.1.1 (dedicated mode, the Kafka jars) copies a topic into the
//	   namespace and stops;
//	b. mm2go's `mirror run` continues from MM2's positions: exactly the records written since,
//	   none twice;
//	c. scheduled rounds while producers write and a source group consumes: `mirror run`, then a
//	   checkpoint round syncing the group's offsets into the namespace (never ahead of the
//	   group, no offset commit throttled: under 4 per second per partition);
//	d. `mirror cutover` moves the group: exit 0, every partition exact, 0 re-reads and 0 skips,
//	   and a genuine Java consumer in the group on the namespace starts at the record after the
//	   last one it consumed on Kafka; `mirror verify` exits 0 and `mirror status` shows no lag;
//	e. fail back: the reversed flow (namespace -> Kafka) positioned at the namespace's ends,
//	   new records and group commits on the namespace, a run copying exactly those back, and the
//	   same `mirror cutover` on the reversed flow: exit 0, every partition exact.
//
// Topics keep their names (IdentityReplicationPolicy), as a move that fails back needs.
func ehJourney(t *testing.T, premium bool) {
	c := testkit.Require(t)
	begin := time.Now()
	phase := func(what string) { t.Logf("[%5.1fs] %s", time.Since(begin).Seconds(), what) }
	f := ehfake.New(t, ehfake.Config{Premium: premium})
	const parts = 2
	topic := createTopic(t, c.Source.Bootstrap, testkit.Name(t, "journey"), parts, nil)
	group := testkit.Name(t, "app")
	produced := testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, parts, 60)...)

	// a. Genuine MirrorMaker 2 into the namespace.
	props := testkit.MM2Properties(c.Source.Bootstrap, f.Addr, topic) + ehJavaProps(f, "target.") +
		"replication.policy.class = " + identityPolicy + "\n" +
		// Connect's reflective plugin scan took 35 s of a loaded run; MM2's plugins have manifests.
		"plugin.discovery = service_load\n"
	name := testkit.StartMM2(t, props)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("MirrorMaker 2 log:\n%s", tail(testkit.MM2Log(t, name), 4000))
		}
	})
	testkit.WaitFor(t, 3*time.Minute, "MirrorMaker 2 to copy the topic and store its positions", func() bool {
		if f.Cluster.TopicInfo(topic) == nil || f.Cluster.TopicInfo("mm2-offsets.source.internal") == nil {
			return false
		}
		pos := ehPositions(t, f, "mm2-offsets.source.internal", "source", topic)
		return pos[0] == 29 && pos[1] == 29
	})
	testkit.StopMM2(t, name)
	testkit.AssertSameRecords(t, produced, ehRead(t, f, topic))
	phase("a. MirrorMaker 2 copied 60 records and stored its positions")

	// b. mm2go takes over.
	env := []string{"PATH=" + os.Getenv("PATH"), "MM2_LOG_FORMAT=json",
		"MM2_SOURCE_BOOTSTRAP_SERVERS=" + c.Source.Bootstrap,
		"MM2_TARGET_EVENTHUBS_CONNECTION_STRING=" + f.ConnectionString,
		"MM2_TARGET_BOOTSTRAP_SERVERS=" + f.Addr,
		"MM2_TARGET_SSL_TRUSTSTORE_LOCATION=" + f.CAFile,
		"MM2_TOPICS=" + topic, "MM2_GROUPS=" + group,
		"MM2_REPLICATION_POLICY_CLASS=" + identityPolicy,
		"MM2_HEARTBEATS_REPLICATION_ENABLED=false",
		"MM2_OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR=1",
		"MM2_SYNC_GROUP_OFFSETS_ENABLED=true",
	}
	if premium {
		env = append(env, "MM2_TARGET_EVENTHUBS_TIER=premium")
	}
	more := testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, parts, 40)...)
	if r := RunMirror(t, env); r.Code != 0 || r.Records() != 40 {
		t.Fatalf("mm2go after MirrorMaker 2: exit %d, %d records; want 0, 40\n%s", r.Code, r.Records(), lastLines(r.Stderr, 20))
	}
	testkit.AssertSameRecords(t, append(produced, more...), ehRead(t, f, topic))
	phase("b. mm2go continued from MirrorMaker 2's positions: 40 records, none twice")

	// c. Scheduled rounds while producers write and the group consumes on Kafka.
	ctx, stop := context.WithCancel(testkit.Context(t, 5*time.Minute))
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // producers
		defer wg.Done()
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Source.Bootstrap), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			return
		}
		defer cl.Close()
		for i := 0; ctx.Err() == nil; i++ {
			r := &kgo.Record{Topic: topic, Partition: int32(i % parts), Key: []byte(fmt.Sprintf("live-%d", i)),
				Value: []byte(fmt.Sprintf("written while mirroring %d", i)), Headers: []kgo.RecordHeader{{Key: "n", Value: []byte{byte(i)}}}}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	go func() { // the application's consumers, committing every second
		defer wg.Done()
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Source.Bootstrap), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitInterval(time.Second))
		if err != nil {
			return
		}
		defer cl.Close() // commits what it consumed and leaves the group
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	cfg, err := config.Load(envMap(env), nil)
	if err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 3; round++ {
		time.Sleep(time.Second)
		if r := RunMirror(t, env); r.Code != 0 {
			t.Fatalf("round %d: mirror run: exit %d\n%s", round, r.Code, lastLines(r.Stderr, 20))
		}
		job, err := app.CheckpointJob(ctx, cfg, slog.New(slog.DiscardHandler), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = job.Round(ctx)
		job.Close()
		if err != nil {
			t.Fatalf("round %d: checkpoint: %v", round, err)
		}
	}
	stop()
	wg.Wait()
	srcGroup, err := testkit.Admin(t, c.Source.Bootstrap).FetchOffsets(testkit.Context(t, 30*time.Second), group)
	if err != nil {
		t.Fatal(err)
	}
	synced, err := ehAdmin(t, f).FetchOffsets(testkit.Context(t, 30*time.Second), group)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < parts; p++ {
		s, ok := synced.Lookup(topic, p)
		g, _ := srcGroup.Lookup(topic, p)
		if !ok || s.At < 0 || s.At > g.At {
			t.Errorf("group %s partition %d: synced into the namespace at %+v, source at %d; want an offset at or before the source's", group, p, s, g.At)
		}
	}
	if f.ThrottledCommits.Load() != 0 || f.Commits.Load() == 0 {
		t.Errorf("offset commits into the namespace: %d accepted, %d throttled (over 4/s per partition)", f.Commits.Load(), f.ThrottledCommits.Load())
	}
	if r := RunMirror(t, env); r.Code != 0 {
		t.Fatalf("last run: exit %d\n%s", r.Code, lastLines(r.Stderr, 20))
	}
	source := testkit.ReadAll(t, c.Source.Bootstrap, topic)
	testkit.AssertSameRecords(t, source, ehRead(t, f, topic))
	phase(fmt.Sprintf("c. 3 scheduled rounds while writing: %d records in both, group synced, %d commits, none throttled", len(source), f.Commits.Load()))

	// d. Cutover: the group moves to the namespace at the record it would read next.
	srcAt := map[int32]int64{0: 17, 1: int64(len(source)) / parts} // partition 1: at (or near) its end
	byPart := map[int32][]*kgo.Record{}
	for _, r := range source {
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	srcAt[1] = int64(len(byPart[1]))
	commitGroup(t, c.Source.Bootstrap, group, topic, srcAt, "")
	fwd := &cutoverFlow{c: c, src: "source", tgt: "target", env: env}
	code, res, stderr := fwd.cutover(t, "-groups", group)
	if code != ops.CutoverGo || !res.Go || len(res.Partitions) != parts {
		t.Fatalf("cutover onto the namespace: exit %d, verdict %q\n%+v\n%s", code, res.Verdict, res.Partitions, tail(stderr, 3000))
	}
	for _, r := range res.Partitions {
		if r.State != ops.StateExact || r.ReReads != 0 || r.Skips != 0 || r.TargetCommitted != srcAt[r.Partition] {
			t.Errorf("cutover row %+v: want exact, 0 re-reads, 0 skips, committed at %d", r, srcAt[r.Partition])
		}
	}
	for p, row := range javaGroup(t, ehJavaProps(f, ""), topic, group) {
		want := srcAt[p]
		if row.position != want {
			t.Errorf("Java consumer in %s on the namespace: partition %d starts at %d, want %d", group, p, row.position, want)
			continue
		}
		if want == int64(len(byPart[p])) {
			if row.offset != -1 {
				t.Errorf("partition %d: the group is at the end, yet the Java consumer read offset %d", p, row.offset)
			}
			continue
		}
		next := byPart[p][want]
		if row.offset != want || !bytes.Equal(row.key, next.Key) || !bytes.Equal(row.value, next.Value) {
			t.Errorf("partition %d: the Java consumer read offset %d %q=%q, want the record after the group's last one on Kafka: %d %q=%q",
				p, row.offset, row.key, row.value, want, next.Key, next.Value)
		}
	}
	if code, out, stderr := runMirrorCmd(t, env, "verify", "-o", "json"); code != 0 {
		t.Errorf("mirror verify on the namespace: exit %d\n%s\n%s", code, out, tail(stderr, 2000))
	}
	code, out, stderr := runMirrorCmd(t, env, "status", "-o", "json")
	var st ops.Status
	if code != 0 {
		t.Fatalf("mirror status on the namespace: exit %d\n%s", code, tail(stderr, 2000))
	}
	decodeJSON(t, out, &st)
	for p := int32(0); p < parts; p++ {
		if ps := partitionStatus(t, &st, topic, p); ps.Lag != 0 {
			t.Errorf("status of %s-%d: lag %d, want 0: %+v", topic, p, ps.Lag, ps)
		}
	}
	phase("d. cutover: exact on every partition; the Java consumer goes on at the right record; verify and status clean")

	// e. Fail back to Kafka with the same command on the reversed flow.
	id := group[len(group)-8:]
	ehAlias, kAlias := "eh"+id, "k"+id
	back := []string{"PATH=" + os.Getenv("PATH"), "MM2_LOG_FORMAT=json",
		"MM2_SOURCE_ALIAS=" + ehAlias, "MM2_TARGET_ALIAS=" + kAlias,
		"MM2_SOURCE_EVENTHUBS_CONNECTION_STRING=" + f.ConnectionString,
		"MM2_SOURCE_BOOTSTRAP_SERVERS=" + f.Addr,
		"MM2_SOURCE_SSL_TRUSTSTORE_LOCATION=" + f.CAFile,
		"MM2_TARGET_BOOTSTRAP_SERVERS=" + c.Source.Bootstrap,
		"MM2_TOPICS=" + topic, "MM2_GROUPS=" + group,
		"MM2_REPLICATION_POLICY_CLASS=" + identityPolicy,
		"MM2_HEARTBEATS_REPLICATION_ENABLED=false",
		"MM2_REPLICATION_FACTOR=1", "MM2_OFFSET_STORAGE_REPLICATION_FACTOR=1", "MM2_CHECKPOINTS_TOPIC_REPLICATION_FACTOR=1",
	}
	if premium {
		back = append(back, "MM2_SOURCE_EVENTHUBS_TIER=premium")
	}
	testkit.DeleteTopicsAtEnd(t, c.Source.Bootstrap, "mm2-offsets."+ehAlias+".internal", ehAlias+".checkpoints.internal")
	if r := RunMirror(t, append(back, "MM2_SOURCE_CONSUMER_AUTO_OFFSET_RESET=latest")); r.Code != 0 || r.Records() != 0 {
		t.Fatalf("reversed flow's first run: exit %d, %d records; want 0 and 0\n%s", r.Code, r.Records(), lastLines(r.Stderr, 20))
	}
	var news []*kgo.Record
	for i := range 30 {
		p := int32(i % parts)
		news = append(news, &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("eh-%d", i)), Value: []byte(fmt.Sprintf("written on the namespace %d", i))})
	}
	prod := ehClientFor(t, f, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err := prod.ProduceSync(testkit.Context(t, time.Minute), news...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ehAt := map[int32]int64{0: int64(len(byPart[0])) + 5, 1: int64(len(byPart[1])) + 15} // partition 1: the end
	offs := kadm.Offsets{}
	for p, o := range ehAt {
		offs.AddOffset(topic, p, o, -1)
	}
	if err := ehAdmin(t, f).CommitAllOffsets(testkit.Context(t, 30*time.Second), group, offs); err != nil {
		t.Fatal(err)
	}
	if r := RunMirror(t, back); r.Code != 0 || r.Records() != 30 {
		t.Fatalf("reversed flow: exit %d, %d records; want 0, 30\n%s", r.Code, r.Records(), lastLines(r.Stderr, 20))
	}
	testkit.AssertSameRecords(t, ehRead(t, f, topic), testkit.ReadAll(t, c.Source.Bootstrap, topic))
	rev := &cutoverFlow{c: testkit.Clusters{Source: c.Target, Target: c.Source}, src: ehAlias, tgt: kAlias, env: back}
	code, res, stderr = rev.cutover(t, "-groups", group)
	if code != ops.CutoverGo || !res.Go || len(res.Partitions) != parts {
		t.Fatalf("fail-back cutover: exit %d, verdict %q\n%+v\n%s", code, res.Verdict, res.Partitions, tail(stderr, 3000))
	}
	back2, err := testkit.Admin(t, c.Source.Bootstrap).FetchOffsets(testkit.Context(t, 30*time.Second), group)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Partitions {
		got, _ := back2.Lookup(topic, r.Partition)
		if r.State != ops.StateExact || r.ReReads != 0 || r.Skips != 0 || r.Committed != ehAt[r.Partition] || got.At != ehAt[r.Partition] {
			t.Errorf("fail-back row %+v (Kafka holds %d): want exact, 0 re-reads, 0 skips, at %d", r, got.At, ehAt[r.Partition])
		}
	}
	phase("e. failed back: 30 records copied back once, the group exact on Kafka")
}
