package e2e

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/ops"
	"github.com/mm2go/mm2go/test/testkit"
)

// TestCutoverFailBack rolls a migration back as docs/operations.md ("Fail back") says, on
// topics kept under their names (IdentityReplicationPolicy, both ways):
//
//   - forward: records on the source (in transactions, so that markers make source and
//     target offsets differ), copied, the group cut over to the target (exit 0, every row exact);
//   - the reversed flow (the target as its source cluster, the aliases swapped, the same
//     settings) runs once with auto.offset.reset=latest before anything is written on the
//     target, so that it starts at the copies' end;
//   - the rolled-back migration: producers write new records on the target and the group
//     commits further offsets there (in the new records, at their first one, at the end);
//   - a mirror run of the reversed flow copies exactly the new records back (none twice);
//   - `mirror cutover` on the reversed flow: exit 0, every row exact with 0 re-reads and 0
//     skips, and on each partition the record at the group's offset on the original cluster
//     is byte-identical (key, value, headers, timestamp) to the one at its offset on the target.
func TestCutoverFailBack(t *testing.T) {
	c := testkit.Require(t)
	begin := time.Now()
	phase := func(what string) { t.Logf("[%5.1fs] %s", time.Since(begin).Seconds(), what) }
	ctx := testkit.Context(t, 2*time.Minute)
	identity := "MM2_REPLICATION_POLICY_CLASS=org.apache.kafka.connect.mirror.IdentityReplicationPolicy"

	const parts, txs, perTx, added = 3, 3, 20, 40
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "fb"), parts, nil)
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, topic) // its copy, under the same name
	rec := func(where string, p int32, i int) *kgo.Record {
		return &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("%s/%d/%d", where, p, i)),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(where)}, {Key: "i", Value: []byte{byte(i)}}}}
	}
	txp := testkit.Client(t, c.Source.Bootstrap, kgo.TransactionalID(testkit.Name(t, "txid")), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for x := 0; x < txs; x++ {
		if err := txp.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < parts; p++ {
			for i := x * perTx; i < (x+1)*perTx; i++ {
				if err := txp.ProduceSync(ctx, rec("src", p, i)).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := txp.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	txp.Close()

	// Forward: copy, cut the group over (source offsets 25: a record; 41: a marker; the end).
	fwd := newCutoverFlow(t, c, []string{topic}, identity)
	fwd.run(t)
	group := testkit.Name(t, "app")
	srcEnd := int64(txs * (perTx + 1))
	commitGroup(t, c.Source.Bootstrap, group, topic, map[int32]int64{0: 25, 1: srcEnd, 2: 41}, "m")
	code, res, stderr := fwd.cutover(t, "-groups", group)
	if code != ops.CutoverGo || len(res.Partitions) != parts {
		t.Fatalf("forward cutover: exit %d, %d rows, verdict %q\n%+v\n%s", code, len(res.Partitions), res.Verdict, res.Partitions, tail(stderr, 3000))
	}
	for _, r := range res.Partitions {
		if r.State != ops.StateExact || r.Remote != topic {
			t.Errorf("forward row %+v: want exact on %s", r, topic)
		}
	}
	phase("forward cutover: go")

	// The reversed flow, started at the copies' end before the target gets new records.
	back := testkit.Clusters{Source: c.Target, Target: c.Source}
	rev := newCutoverFlowAliases(t, back, fwd.tgt, fwd.src, []string{topic}, identity, "MM2_SOURCE_CONSUMER_AUTO_OFFSET_RESET=latest")
	if r := RunMirror(t, rev.env); r.Code != 0 || r.Records() != 0 {
		t.Fatalf("reversed flow's first run: exit %d, %d records; want 0 and 0\n%s", r.Code, r.Records(), tail(r.Stderr, 3000))
	}
	phase("reversed flow positioned at the target's ends")

	// The rolled-back migration: producers and consumers worked on the target.
	var news []*kgo.Record
	for p := int32(0); p < parts; p++ {
		for i := txs * perTx; i < txs*perTx+added; i++ {
			news = append(news, rec("tgt", p, i))
		}
	}
	testkit.Produce(t, c.Target.Bootstrap, news...)
	copied := int64(txs * perTx)
	tgtAt := map[int32]int64{0: copied + 15, 1: copied + added, 2: copied}
	commitGroup(t, c.Target.Bootstrap, group, topic, tgtAt, "m2")
	phase("target: new records written, group committed further")

	rev.run(t)
	orig := values(t, c.Source.Bootstrap, topic)
	for p := int32(0); p < parts; p++ {
		if n := len(orig[p]); n != txs*perTx+added {
			t.Errorf("original %s-%d holds %d records after the reversed run, want %d (the %d new ones once)", topic, p, n, txs*perTx+added, added)
		}
	}
	phase("reversed flow copied the new records back")

	code, res, stderr = rev.cutover(t, "-groups", group)
	if code != ops.CutoverGo || !res.Go || len(res.Partitions) != parts {
		t.Fatalf("fail-back cutover: exit %d, %d rows, verdict %q\n%+v\n%s", code, len(res.Partitions), res.Verdict, res.Partitions, tail(stderr, 3000))
	}
	committed := targetGroupOffsets(t, back, group)
	tgt := values(t, c.Target.Bootstrap, topic)
	orig = values(t, c.Source.Bootstrap, topic)
	at := func(recs []*kgo.Record, o int64) *kgo.Record {
		for _, r := range recs {
			if r.Offset == o {
				return r
			}
		}
		return nil
	}
	for _, r := range res.Partitions {
		got, ok := committed.Lookup(topic, r.Partition)
		if r.State != ops.StateExact || r.ReReads != 0 || r.Skips != 0 || r.Remote != topic || r.Committed != tgtAt[r.Partition] ||
			!ok || got.At != r.TargetOffset || r.TargetCommitted != r.TargetOffset {
			t.Errorf("fail-back row %+v (original cluster holds %+v): want exact, 0 re-reads, 0 skips, committed at the target offset", r, got)
			continue
		}
		want, have := at(tgt[r.Partition], r.Committed), at(orig[r.Partition], got.At)
		switch {
		case want == nil && have == nil:
			if end := orig[r.Partition][len(orig[r.Partition])-1].Offset + 1; got.At != end {
				t.Errorf("%s-%d: group at the target's end, committed %d on the original cluster, want its end %d", topic, r.Partition, got.At, end)
			}
		case want == nil || have == nil:
			t.Errorf("%s-%d: record at the target offset %d: %v; at the original offset %d: %v", topic, r.Partition, r.Committed, want, got.At, have)
		case !bytes.Equal(want.Key, have.Key) || !bytes.Equal(want.Value, have.Value) || !slices.EqualFunc(want.Headers, have.Headers, sameHeader) ||
			!want.Timestamp.Equal(have.Timestamp):
			t.Errorf("%s-%d: original record %d (%q %q %v %v) is not target record %d (%q %q %v %v)", topic, r.Partition,
				have.Offset, have.Key, have.Value, have.Headers, have.Timestamp, want.Offset, want.Key, want.Value, want.Headers, want.Timestamp)
		}
		t.Logf("%s-%d: target offset %d -> original offset %d (%s)", topic, r.Partition, r.Committed, got.At, r.Note)
	}
	phase("fail-back cutover: go")
}

func sameHeader(a, b kgo.RecordHeader) bool { return a.Key == b.Key && bytes.Equal(a.Value, b.Value) }
