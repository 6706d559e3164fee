package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/mirrorevents"
	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/kafkasource"
)

// TestServeFetchModeByteExact: KafkaSource-like delivery of records with binary keys, binary
// header values, duplicate and empty headers, null and empty values: in fetch mode the target
// gets them byte for byte, and redelivering everything (a new consumer group, then an
// unordered one) writes nothing twice.
func TestServeFetchModeByteExact(t *testing.T) {
	c := testkit.Require(t)
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "sf"), 3, nil)
	remote := "source." + topic
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, remote)
	want := testkit.SampleRecords(topic, 3, 300)
	testkit.Produce(t, c.Source.Bootstrap, want...)
	ends := endOffsets(t, c.Source.Bootstrap, topic)

	fn := startServeMirror(t, c.Source.Bootstrap, c.Target.Bootstrap, topic, serveOpts{})
	group := testkit.Name(t, "ks")
	start := time.Now()
	d, stop := runDriver(t, kafkasource.Config{Bootstrap: c.Source.Bootstrap, Topics: []string{topic}, Group: group, Sink: fn.URL,
		Source: kafkasource.Source{Namespace: "mirror", Name: "orders", KeyType: "byte-array"}})
	waitDelivered(t, c.Source.Bootstrap, group, topic, ends, 2*time.Minute)
	stop()
	s := d.Stats()
	t.Logf("fetch mode: %d events in %s, %d copies; stats %+v", s.Delivered, time.Since(start).Round(time.Millisecond), fn.copier.copies.Load(), s)
	if s.DeadLettered != 0 || s.Delivered != int64(len(want)) {
		t.Fatalf("delivered %d, dead-lettered %d", s.Delivered, s.DeadLettered)
	}
	got := testkit.ReadAll(t, c.Target.Bootstrap, remote)
	testkit.AssertSameRecords(t, want, got)
	assertPositionsAndSyncs(t, fn, c.Source.Bootstrap, topic, ends, want, got)
	targetEnds := endOffsets(t, c.Target.Bootstrap, remote)

	// Redelivery: every record again, in order, then all at once (unordered).
	copies := fn.copier.copies.Load()
	for i, unordered := range []bool{false, true} {
		g := fmt.Sprintf("%s-again-%d", group, i)
		d2, stop2 := runDriver(t, kafkasource.Config{Bootstrap: c.Source.Bootstrap, Topics: []string{topic}, Group: g, Sink: fn.URL,
			Unordered: unordered, Source: kafkasource.Source{Namespace: "mirror", Name: "orders"}})
		waitDelivered(t, c.Source.Bootstrap, g, topic, ends, 2*time.Minute)
		stop2()
		if s := d2.Stats(); s.Delivered != int64(len(want)) || s.Retries != 0 {
			t.Fatalf("redelivery (unordered %v): %+v", unordered, s)
		}
	}
	if n := fn.copier.copies.Load(); n != copies {
		t.Errorf("redeliveries started %d copies, want none", n-copies)
	}
	if after := endOffsets(t, c.Target.Bootstrap, remote); fmt.Sprint(after) != fmt.Sprint(targetEnds) {
		t.Fatalf("redelivery wrote to the target: end offsets %v, were %v", after, targetEnds)
	}
}

// TestServeFetchModeCoalescesAndRestarts: an unordered driver sends many concurrent events per
// partition; a fresh function process (empty cache) then answers redeliveries with one copy
// per partition that resumes from the stored position and writes nothing.
func TestServeFetchModeCoalescesAndRestarts(t *testing.T) {
	c := testkit.Require(t)
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "sc"), 2, nil)
	remote := "source." + topic
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, remote)
	want := testkit.SampleRecords(topic, 2, 400)
	testkit.Produce(t, c.Source.Bootstrap, want...)
	ends := endOffsets(t, c.Source.Bootstrap, topic)

	fn := startServeMirror(t, c.Source.Bootstrap, c.Target.Bootstrap, topic, serveOpts{})
	group := testkit.Name(t, "ks")
	_, stop := runDriver(t, kafkasource.Config{Bootstrap: c.Source.Bootstrap, Topics: []string{topic}, Group: group, Sink: fn.URL, Unordered: true})
	waitDelivered(t, c.Source.Bootstrap, group, topic, ends, 2*time.Minute)
	stop()
	if n := fn.copier.copies.Load(); n > 8 {
		t.Errorf("%d copies for %d concurrent events on 2 partitions: not coalesced", n, len(want))
	}
	t.Logf("%d events, %d copies", len(want), fn.copier.copies.Load())
	testkit.AssertSameRecords(t, want, testkit.ReadAll(t, c.Target.Bootstrap, remote))
	targetEnds := endOffsets(t, c.Target.Bootstrap, remote)
	fn.stop()

	fn2 := startServeMirror(t, c.Source.Bootstrap, c.Target.Bootstrap, topic, serveOpts{})
	g2 := group + "-restart"
	_, stop2 := runDriver(t, kafkasource.Config{Bootstrap: c.Source.Bootstrap, Topics: []string{topic}, Group: g2, Sink: fn2.URL})
	waitDelivered(t, c.Source.Bootstrap, g2, topic, ends, 2*time.Minute)
	stop2()
	if n := fn2.copier.copies.Load(); n > 2 {
		t.Errorf("restarted function copied %d times for already copied offsets of 2 partitions, want at most one each", n)
	}
	if after := endOffsets(t, c.Target.Bootstrap, remote); fmt.Sprint(after) != fmt.Sprint(targetEnds) {
		t.Fatalf("redelivery after restart wrote to the target: %v, were %v", after, targetEnds)
	}
}

// TestServePayloadModeDocumentedLoss: in payload mode (key-type byte-array) the target records
// are exactly the documented transformation of the source records (docs/events.md), written
// from the events (not fetched), and redeliveries write nothing.
func TestServePayloadModeDocumentedLoss(t *testing.T) {
	c := testkit.Require(t)
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "sp"), 2, nil)
	remote := "source." + topic
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, remote)
	fn := startServeMirror(t, c.Source.Bootstrap, c.Target.Bootstrap, topic, serveOpts{mode: mirrorevents.ModePayload, keyType: mirrorevents.KeyByteArray})
	group := testkit.Name(t, "ks")
	src := kafkasource.Source{Namespace: "mirror", Name: "orders", KeyType: "byte-array"}
	_, stop := runDriver(t, kafkasource.Config{Bootstrap: c.Source.Bootstrap, Topics: []string{topic}, Group: group, Sink: fn.URL, Source: src})

	// A first record per partition: no stored position yet, so it is fetched (exact).
	seeds := []*kgo.Record{{Topic: topic, Partition: 0, Value: []byte("seed0")}, {Topic: topic, Partition: 1, Value: []byte("seed1")}}
	testkit.Produce(t, c.Source.Bootstrap, seeds...)
	waitDelivered(t, c.Source.Bootstrap, group, topic, map[int32]int64{0: 1, 1: 1}, time.Minute)
	copies := fn.copier.copies.Load()

	// Live traffic: each event is the partition's next offset and is written from its payload.
	recs := testkit.SampleRecords(topic, 2, 140)
	recs = append(recs,
		&kgo.Record{Topic: topic, Partition: 0, Key: []byte{0, 1, 2, 0xff}, Value: []byte(`{"a":1}`), Timestamp: time.UnixMilli(1_700_000_000_123),
			Headers: []kgo.RecordHeader{{Key: "Content-Type", Value: []byte("Application/JSON")}, {Key: "X-Trace_ID", Value: []byte("abc")}, {Key: "x.trace.id", Value: []byte("wins")}, {Key: "utf8", Value: []byte("héllo wörld %41")}}},
	)
	testkit.Produce(t, c.Source.Bootstrap, recs...)
	ends := endOffsets(t, c.Source.Bootstrap, topic)
	waitDelivered(t, c.Source.Bootstrap, group, topic, ends, 2*time.Minute)
	stop()
	if n := fn.copier.copies.Load(); n != copies {
		t.Errorf("live events started %d fetches, want 0 (payload writes)", n-copies)
	}
	if n := fn.copier.writes.Load(); n != int64(len(recs)) {
		t.Errorf("%d payload writes, want %d", n, len(recs))
	}
	got := testkit.ReadAll(t, c.Target.Bootstrap, remote)
	var gotLive []*kgo.Record
	seen := map[int32]bool{}
	for _, r := range got {
		if !seen[r.Partition] {
			seen[r.Partition] = true
			if string(r.Value) != fmt.Sprintf("seed%d", r.Partition) {
				t.Fatalf("first record of partition %d: %q", r.Partition, r.Value)
			}
			continue
		}
		gotLive = append(gotLive, r)
	}
	want := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		want[i] = payloadExpectation(r)
	}
	testkit.AssertSameRecords(t, want, gotLive)
	assertPositionsAndSyncs(t, fn, c.Source.Bootstrap, topic, ends, append(seeds, recs...), got)

	// Redelivery of everything writes nothing.
	targetEnds := endOffsets(t, c.Target.Bootstrap, remote)
	g2 := group + "-again"
	_, stop2 := runDriver(t, kafkasource.Config{Bootstrap: c.Source.Bootstrap, Topics: []string{topic}, Group: g2, Sink: fn.URL, Source: src})
	waitDelivered(t, c.Source.Bootstrap, g2, topic, ends, 2*time.Minute)
	stop2()
	if after := endOffsets(t, c.Target.Bootstrap, remote); fmt.Sprint(after) != fmt.Sprint(targetEnds) {
		t.Fatalf("redelivery wrote to the target: %v, were %v", after, targetEnds)
	}
}

// TestServeTargetOutage uses a third cluster of its own as the target, pauses it while the
// driver delivers, and resumes it: meanwhile the function answers 503 (and /readyz says not
// ready); afterwards every record is on the target exactly once, nothing dead-lettered.
func TestServeTargetOutage(t *testing.T) {
	c := testkit.Require(t)
	name := "serve-outage-" + strconv.FormatInt(time.Now().UnixNano()%1_000_000, 36)
	port := freePortBlock(t)
	script := testkit.KafkaScript(t)
	kafka := func(args ...string) {
		t.Helper()
		out, err := exec.Command(script, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("kafka.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	kafka("start", name, strconv.Itoa(port))
	t.Cleanup(func() {
		_ = exec.Command(script, "stop", name).Run()
		if !t.Failed() && c.KafkaHome != "" {
			_ = os.RemoveAll(filepath.Join(c.KafkaHome, name)) // keep its logs only when the test failed
		}
	})
	target := fmt.Sprintf("127.0.0.1:%d", port)

	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "so"), 2, nil)
	remote := "source." + topic
	fn := startServeMirror(t, c.Source.Bootstrap, target, topic, serveOpts{requestTimeout: 3 * time.Second, copyTimeout: 2500 * time.Millisecond})
	group := testkit.Name(t, "ks")
	d, stop := runDriver(t, kafkasource.Config{Bootstrap: c.Source.Bootstrap, Topics: []string{topic}, Group: group, Sink: fn.URL,
		Retry: 60, BackoffDelay: 500 * time.Millisecond, LinearBackoff: true, Timeout: 10 * time.Second})

	first := testkit.SampleRecords(topic, 2, 40)
	testkit.Produce(t, c.Source.Bootstrap, first...)
	waitDelivered(t, c.Source.Bootstrap, group, topic, endOffsets(t, c.Source.Bootstrap, topic), time.Minute)

	kafka("pause", name)
	paused := time.Now()
	more := testkit.SampleRecords(topic, 2, 60)
	for _, r := range more {
		r.Value = append([]byte("during-outage-"), r.Value...)
	}
	testkit.Produce(t, c.Source.Bootstrap, more...)
	testkit.WaitFor(t, 60*time.Second, "the function to answer 503 while the target is down", func() bool {
		return d.Stats().Status[503] > 0
	})
	if resp, err := http.Get(strings.TrimSuffix(fn.URL, "/") + "/readyz"); err != nil || resp.StatusCode != 503 {
		t.Errorf("readyz during the outage: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	time.Sleep(3 * time.Second)
	kafka("resume", name)
	t.Logf("target paused for %s", time.Since(paused).Round(time.Millisecond))

	ends := endOffsets(t, c.Source.Bootstrap, topic)
	waitDelivered(t, c.Source.Bootstrap, group, topic, ends, 3*time.Minute)
	stop()
	s := d.Stats()
	t.Logf("outage stats: %+v", s)
	if s.DeadLettered != 0 {
		t.Fatalf("%d records dead-lettered", s.DeadLettered)
	}
	got := testkit.ReadAll(t, target, remote)
	testkit.AssertSameRecords(t, append(first, more...), got)
}

// TestServeCloudEventRecords: records that already are CloudEvents reach the function as their
// own events (KafkaSource drops their key and non-ce_ headers); the topic comes from the
// KafkaSource's ceOverrides (mm2gotopic). Payload mode cannot rebuild such a record, so it
// fetches it: from the first CloudEvent record on, the copies are exact; the raw records before
// it carry the documented payload-mode transformation.
func TestServeCloudEventRecords(t *testing.T) {
	c := testkit.Require(t)
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "sce"), 1, nil)
	remote := "source." + topic
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, remote)
	fn := startServeMirror(t, c.Source.Bootstrap, c.Target.Bootstrap, topic, serveOpts{mode: mirrorevents.ModePayload, keyType: mirrorevents.KeyByteArray})
	group := testkit.Name(t, "ks")
	src := kafkasource.Source{Namespace: "mirror", Name: "orders", KeyType: "byte-array", CEOverrides: map[string]string{"mm2gotopic": topic}}
	_, stop := runDriver(t, kafkasource.Config{Bootstrap: c.Source.Bootstrap, Topics: []string{topic}, Group: group, Sink: fn.URL, Source: src})
	testkit.Produce(t, c.Source.Bootstrap, &kgo.Record{Topic: topic, Value: []byte("seed")})
	waitDelivered(t, c.Source.Bootstrap, group, topic, map[int32]int64{0: 1}, time.Minute)

	ts := time.UnixMilli(1_700_000_000_000)
	raw := func(i int) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: []byte{byte(i), 0xff}, Value: []byte(fmt.Sprint("raw-", i)), Timestamp: ts,
			Headers: []kgo.RecordHeader{{Key: "Trace-ID", Value: []byte("t")}}}
	}
	ce := &kgo.Record{Topic: topic, Key: []byte("ce-key"), Value: []byte(`{"n":1}`), Timestamp: ts, Headers: []kgo.RecordHeader{
		{Key: "ce_specversion", Value: []byte("1.0")}, {Key: "ce_id", Value: []byte("order-1")},
		{Key: "ce_source", Value: []byte("/shop")}, {Key: "ce_type", Value: []byte("order.created")},
		{Key: "content-type", Value: []byte("application/json")}, {Key: "not-ce", Value: []byte{0, 1}},
	}}
	recs := []*kgo.Record{raw(1), raw(2), ce, raw(3)}
	testkit.Produce(t, c.Source.Bootstrap, recs...)
	waitDelivered(t, c.Source.Bootstrap, group, topic, endOffsets(t, c.Source.Bootstrap, topic), time.Minute)
	stop()

	got := testkit.ReadAll(t, c.Target.Bootstrap, remote)
	want := []*kgo.Record{{Topic: topic, Value: []byte("seed")}, payloadExpectation(raw(1)), payloadExpectation(raw(2)), ce, raw(3)}
	want[0].Timestamp = got[0].Timestamp
	testkit.AssertSameRecords(t, want, got)
	if w := fn.copier.writes.Load(); w != 2 {
		t.Errorf("%d payload writes, want 2 (the raw records before the CloudEvent record)", w)
	}
}

// TestServeRecreatedTopic: the source topic is deleted and created again (offsets restart at 0)
// while positions of the old one are stored. A fresh function must not take the old positions
// for "already copied": the new records reach the target.
func TestServeRecreatedTopic(t *testing.T) {
	c := testkit.Require(t)
	name := testkit.Name(t, "srt")
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, name, 1, nil)
	remote := "source." + topic
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, remote)
	old := testkit.SampleRecords(topic, 1, 50)
	testkit.Produce(t, c.Source.Bootstrap, old...)
	fn := startServeMirror(t, c.Source.Bootstrap, c.Target.Bootstrap, topic, serveOpts{})
	group := testkit.Name(t, "ks")
	_, stop := runDriver(t, kafkasource.Config{Bootstrap: c.Source.Bootstrap, Topics: []string{topic}, Group: group, Sink: fn.URL})
	waitDelivered(t, c.Source.Bootstrap, group, topic, endOffsets(t, c.Source.Bootstrap, topic), time.Minute)
	stop()
	fn.stop()

	adm := testkit.Admin(t, c.Source.Bootstrap)
	ctx := testkit.Context(t, time.Minute)
	if _, err := adm.DeleteTopics(ctx, topic); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "the topic to be recreated", func() bool {
		resp, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
		return err == nil && resp.Err == nil
	})
	fresh := testkit.SampleRecords(topic, 1, 10)
	for _, r := range fresh {
		r.Value = append([]byte("new-"), r.Value...)
	}
	testkit.Produce(t, c.Source.Bootstrap, fresh...)

	fn2 := startServeMirror(t, c.Source.Bootstrap, c.Target.Bootstrap, topic, serveOpts{})
	g2 := group + "-new"
	_, stop2 := runDriver(t, kafkasource.Config{Bootstrap: c.Source.Bootstrap, Topics: []string{topic}, Group: g2, Sink: fn2.URL})
	waitDelivered(t, c.Source.Bootstrap, g2, topic, endOffsets(t, c.Source.Bootstrap, topic), time.Minute)
	stop2()
	testkit.AssertSameRecords(t, append(old, fresh...), testkit.ReadAll(t, c.Target.Bootstrap, remote))
}

// TestServePayloadModeUnordered: with unordered delivery events overtake each other, so payload
// mode sees gaps and fetches them; every record still lands on the target once, in order.
func TestServePayloadModeUnordered(t *testing.T) {
	c := testkit.Require(t)
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "spu"), 2, nil)
	remote := "source." + topic
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, remote)
	fn := startServeMirror(t, c.Source.Bootstrap, c.Target.Bootstrap, topic, serveOpts{mode: mirrorevents.ModePayload, keyType: mirrorevents.KeyByteArray})
	group := testkit.Name(t, "ks")
	_, stop := runDriver(t, kafkasource.Config{Bootstrap: c.Source.Bootstrap, Topics: []string{topic}, Group: group, Sink: fn.URL,
		Unordered: true, Source: kafkasource.Source{KeyType: "byte-array"}})
	var all []*kgo.Record
	for round := 0; round < 5; round++ {
		var recs []*kgo.Record
		for i := 0; i < 60; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Key: []byte{byte(i)}, Value: []byte(fmt.Sprintf("r%d-%d", round, i))})
		}
		testkit.Produce(t, c.Source.Bootstrap, recs...)
		all = append(all, recs...)
		time.Sleep(100 * time.Millisecond)
	}
	waitDelivered(t, c.Source.Bootstrap, group, topic, endOffsets(t, c.Source.Bootstrap, topic), 2*time.Minute)
	stop()
	got := testkit.ReadAll(t, c.Target.Bootstrap, remote)
	if len(got) != len(all) {
		t.Fatalf("target has %d records, source %d", len(got), len(all))
	}
	byPart := map[int32][]string{}
	for _, r := range all {
		byPart[r.Partition] = append(byPart[r.Partition], string(r.Value))
	}
	gotPart := map[int32][]string{}
	for _, r := range got {
		gotPart[r.Partition] = append(gotPart[r.Partition], string(r.Value))
	}
	if fmt.Sprint(byPart) != fmt.Sprint(gotPart) {
		t.Fatalf("target values differ from source values per partition:\n got %v\nwant %v", gotPart, byPart)
	}
	t.Logf("%d records: %d payload writes, %d fetches", len(all), fn.copier.writes.Load(), fn.copier.copies.Load())
}
