package e2e

import (
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/app"
	"github.com/mm2go/mm2go/shared/config"
	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/shared/ops"
	"github.com/mm2go/mm2go/test/testkit"
)

// cutoverFlow is one mm2go flow of the cutover tests, with aliases of its own, so that genuine
// MM2 (aliases source and target) copies the same topics beside it into other remote topics.
type cutoverFlow struct {
	c        testkit.Clusters
	src, tgt string // aliases
	env      []string
}

func newCutoverFlow(t *testing.T, c testkit.Clusters, topics []string, extra ...string) *cutoverFlow {
	name := testkit.Name(t, "")
	id := name[len(name)-8:] // the random part
	return newCutoverFlowAliases(t, c, "s"+id, "t"+id, topics, extra...)
}

// newCutoverFlowAliases is newCutoverFlow with the given source and target aliases (a
// reversed flow swaps the clusters and the aliases of the forward one).
func newCutoverFlowAliases(t *testing.T, c testkit.Clusters, src, tgt string, topics []string, extra ...string) *cutoverFlow {
	f := &cutoverFlow{c: c, src: src, tgt: tgt}
	quoted := make([]string, len(topics))
	for i, tp := range topics {
		quoted[i] = regexp.QuoteMeta(tp)
	}
	f.env = MirrorEnv(c, strings.Join(quoted, ","), append([]string{"MM2_SOURCE_ALIAS=" + f.src, "MM2_TARGET_ALIAS=" + f.tgt,
		"MM2_CHECKPOINTS_TOPIC_REPLICATION_FACTOR=1"}, extra...)...)
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, "mm2-offsets."+f.src+".internal", f.src+".checkpoints.internal")
	testkit.DeleteTopicsAtEnd(t, c.Source.Bootstrap, "mm2-offset-syncs."+f.tgt+".internal")
	for _, tp := range topics {
		testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, f.remote(tp))
	}
	return f
}

func (f *cutoverFlow) remote(topic string) string { return f.src + "." + topic }

// run is `mirror run` on the flow; it must copy everything.
func (f *cutoverFlow) run(t *testing.T) {
	t.Helper()
	r := RunMirror(t, f.env)
	if r.Code != 0 {
		t.Fatalf("mirror run: exit %d\n%s", r.Code, tail(r.Stderr, 3000))
	}
	t.Logf("mirror run: %d records in %v ms", r.Records(), r.Summary["duration_ms"])
}

// cutover runs `mirror cutover args... -o json` and decodes its table.
func (f *cutoverFlow) cutover(t *testing.T, args ...string) (int, *ops.Cutover, string) {
	t.Helper()
	code, stdout, stderr := runMirrorCmd(t, f.env, append([]string{"cutover", "-o", "json", "-watch", "1s"}, args...)...)
	var res ops.Cutover
	if strings.TrimSpace(stdout) == "" {
		t.Fatalf("mirror cutover %v: exit %d, no output\n%s", args, code, tail(stderr, 3000))
	}
	decodeJSON(t, stdout, &res)
	return code, &res, stderr
}

// values returns the data records of topic/partition on a cluster by offset.
func values(t *testing.T, bootstrap, topic string) map[int32][]*kgo.Record {
	t.Helper()
	out := map[int32][]*kgo.Record{}
	for _, r := range testkit.ReadAll(t, bootstrap, topic) {
		out[r.Partition] = append(out[r.Partition], r)
	}
	return out
}

// targetGroupOffsets returns the group's committed offsets on the target.
func targetGroupOffsets(t *testing.T, c testkit.Clusters, group string) kadm.OffsetResponses {
	t.Helper()
	resp, err := testkit.Admin(t, c.Target.Bootstrap).FetchOffsets(testkit.Context(t, 30*time.Second), group)
	if err != nil {
		t.Fatalf("fetching offsets of %s on the target: %v", group, err)
	}
	return resp
}

// checkpointsOf counts the checkpoints of group in the flow's checkpoints topic.
func (f *cutoverFlow) checkpointsOf(t *testing.T, group string) int {
	t.Helper()
	topic := f.src + ".checkpoints.internal"
	n := 0
	recs, err := testkit.ReadAllErr(testkit.Context(t, 30*time.Second), f.c.Target.Bootstrap, topic)
	if err != nil {
		return 0 // no checkpoints topic
	}
	for _, r := range recs {
		if cp, err := mm2.DecodeCheckpoint(r.Key, r.Value); err == nil && cp.Group == group {
			n++
		}
	}
	return n
}

// TestCutover moves a consumer group from the source to the target with `mirror cutover`, on
// topics with compaction gaps, transaction markers, a partition grown after the first copy and
// records deleted by retention, and checks:
//
//   - producers still writing: exit ops.CutoverLive naming the partition, nothing written to
//     the target's groups or checkpoints;
//   - a dry run reports the partitions not copied yet (exit ops.CutoverNoGo) and writes nothing;
//   - the cutover drains the flow, and every partition is exact: the target offset read back
//     holds the byte-identical copy of the record the group reads next (0 re-reads, 0 skips);
//   - a genuine Java consumer (kafka-console-consumer's class) in the group reads first
//     exactly the copy of that record on every partition;
//   - a group whose offset falls in records the flow never copied (deleted before they were
//     mirrored) is a no-go naming the gap;
//   - beside it, genuine MM2 on the same topics: the records its checkpoints
//     (RemoteClusterUtils.translateOffsets) make the same group read again.
func TestCutover(t *testing.T) {
	c := testkit.Require(t)
	testkit.KafkaLib(t)
	begin := time.Now()
	phase := func(what string) { t.Logf("[%5.1fs] %s", time.Since(begin).Seconds(), what) }
	ctx := testkit.Context(t, 3*time.Minute)

	str := func(s string) *string { return &s }
	compacted := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "cmp"), 2, map[string]*string{
		"cleanup.policy": str("compact"), "segment.ms": str("100"), "min.cleanable.dirty.ratio": str("0.01")})
	txTopic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "tx"), 2, nil)
	grown := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "grow"), 1, nil)
	retained := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "ret"), 1, nil)
	gapTopic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "gap"), 1, nil)
	all := []string{compacted, txTopic, grown, retained, gapTopic}
	val := func(topic string, p int32, i int) []byte { return []byte(fmt.Sprintf("%s/%d/%d", topic[:4], p, i)) }
	plain := func(topic string, p int32, from, n int) []*kgo.Record {
		var out []*kgo.Record
		for i := from; i < from+n; i++ {
			out = append(out, &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("k%d", i)), Value: val(topic, p, i),
				Headers: []kgo.RecordHeader{{Key: "h", Value: []byte{byte(i)}}}})
		}
		return out
	}

	// Compaction: every third key is unique, the others repeat; the segment rolls after 100 ms
	// and the broker's cleaner removes the older records of each key (it looks every 15 s).
	var recs []*kgo.Record
	for p := int32(0); p < 2; p++ {
		for i := 0; i < 120; i++ {
			key := fmt.Sprintf("k%d", i%5) // overwritten: compacted away but for the last five
			if i%3 == 0 {
				key = fmt.Sprintf("u%d", i) // kept
			}
			recs = append(recs, &kgo.Record{Topic: compacted, Partition: p, Key: []byte(key), Value: val(compacted, p, i)})
		}
	}
	testkit.Produce(t, c.Source.Bootstrap, recs...)
	// A transactional producer: six transactions per partition (a marker after each), one
	// of them aborted.
	txp := testkit.Client(t, c.Source.Bootstrap, kgo.TransactionalID(testkit.Name(t, "txid")), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 6; i++ {
		if err := txp.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < 2; p++ {
			for _, r := range plain(txTopic, p, i*10, 10) {
				if err := txp.ProduceSync(ctx, r).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := txp.EndTransaction(ctx, kgo.TransactionEndTry(i != 3)); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Produce(t, c.Source.Bootstrap, plain(grown, 0, 0, 100)...)
	testkit.Produce(t, c.Source.Bootstrap, plain(retained, 0, 0, 100)...)
	testkit.Produce(t, c.Source.Bootstrap, plain(gapTopic, 0, 0, 50)...)
	time.Sleep(150 * time.Millisecond) // time past segment.ms (nothing to poll): the next record rolls the segment
	var roll []*kgo.Record
	for p := int32(0); p < 2; p++ {
		roll = append(roll, &kgo.Record{Topic: compacted, Partition: p, Key: []byte("roll"), Value: val(compacted, p, 999)})
	}
	testkit.Produce(t, c.Source.Bootstrap, roll...)

	// Genuine MM2 on the same topics, started now: it copies beside the steps below.
	group := testkit.Name(t, "app")
	commitGroup(t, c.Source.Bootstrap, group, grown, map[int32]int64{0: 0}, "")
	props := MM2Properties(c, compacted, txTopic, grown, retained) + "source->target.groups = " + group + "\n"
	mm2Name := testkit.StartMM2(t, props)
	for _, tp := range []string{compacted, txTopic, grown, retained} {
		testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, "source."+tp)
	}
	phase("MM2 started")

	testkit.WaitFor(t, 60*time.Second, "the broker's cleaner compacting "+compacted, func() bool {
		return len(testkit.ReadAll(t, c.Source.Bootstrap, compacted)) < 2*121
	})
	phase("source topic compacted")

	f := newCutoverFlow(t, c, all)
	f.run(t)
	phase("mirror run copied the topics")

	// After the copy: the grown topic gets two partitions, records are deleted by retention
	// (retained: all copied before; gapTopic: 50 more records, 30 of them deleted before they
	// were mirrored).
	adm := testkit.Admin(t, c.Source.Bootstrap)
	if _, err := adm.UpdatePartitions(ctx, 3, grown); err != nil {
		t.Fatal(err)
	}
	testkit.Produce(t, c.Source.Bootstrap, append(append(plain(grown, 1, 0, 30), plain(grown, 2, 0, 30)...), plain(grown, 0, 100, 10)...)...)
	testkit.Produce(t, c.Source.Bootstrap, plain(gapTopic, 0, 50, 50)...)
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: retained, Partition: 0, At: 60})
	del.Add(kadm.Offset{Topic: gapTopic, Partition: 0, At: 80})
	if resp, err := adm.DeleteRecords(ctx, del); err != nil || resp.Error() != nil {
		t.Fatalf("deleting records: %v %v", err, resp.Error())
	}

	// The group's positions: in a compaction gap and at the end; on a transaction marker and
	// inside a transaction; mid-partition, at the log start of a grown partition, and in one;
	// before the log start of a topic trimmed by retention.
	srcRecs := map[string]map[int32][]*kgo.Record{}
	for _, tp := range all {
		srcRecs[tp] = values(t, c.Source.Bootstrap, tp)
	}
	inGap := int64(-1)
	cr := srcRecs[compacted][0]
	for i := 1; i < len(cr); i++ {
		if cr[i].Offset > cr[i-1].Offset+1 {
			inGap = cr[i].Offset - 1
			break
		}
	}
	if inGap < 0 {
		t.Fatalf("no compaction gap in %s-0: %d records", compacted, len(cr))
	}
	ends := func(topic string) map[int32]int64 {
		e, err := testkit.Admin(t, c.Source.Bootstrap).ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]int64{}
		e.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
		return out
	}
	marker := int64(-1)
	tr := srcRecs[txTopic][0]
	for i := 1; i < len(tr); i++ {
		if tr[i].Offset > tr[i-1].Offset+1 {
			marker = tr[i-1].Offset + 1 // the commit marker after the first transaction
			break
		}
	}
	commitGroup(t, c.Source.Bootstrap, group, compacted, map[int32]int64{0: inGap, 1: ends(compacted)[1]}, "md")
	commitGroup(t, c.Source.Bootstrap, group, txTopic, map[int32]int64{0: marker, 1: 35}, "")
	commitGroup(t, c.Source.Bootstrap, group, grown, map[int32]int64{0: 50, 1: 0, 2: 10}, "")
	commitGroup(t, c.Source.Bootstrap, group, retained, map[int32]int64{0: 10}, "")
	gapGroup := testkit.Name(t, "gapped")
	commitGroup(t, c.Source.Bootstrap, gapGroup, gapTopic, map[int32]int64{0: 60}, "")
	phase("topics grown and trimmed, group committed")

	// Producers still writing: no-go, nothing written on the target.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Source.Bootstrap), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			return
		}
		defer cl.Close()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			_ = cl.ProduceSync(ctx, plain(grown, 0, 110+i, 1)...).FirstErr()
		}
	}()
	code, res, _ := f.cutover(t, "-groups", group)
	close(stop)
	wg.Wait()
	if code != ops.CutoverLive || len(res.Live) != 1 || res.Live[0].Topic != grown || res.Live[0].Partition != 0 || !strings.Contains(res.Verdict, grown+"-0") {
		t.Errorf("cutover with a producer writing to %s-0: exit %d, live %+v, verdict %q; want exit %d naming it", grown, code, res.Live, res.Verdict, ops.CutoverLive)
	}
	if got := targetGroupOffsets(t, c, group); len(got) != 0 || f.checkpointsOf(t, group) != 0 {
		t.Errorf("no-go wrote to the target: group offsets %v, %d checkpoints", got, f.checkpointsOf(t, group))
	}
	phase("producers writing: no-go")
	srcRecs[grown] = values(t, c.Source.Bootstrap, grown)

	// Dry run: the grown partitions are not copied yet; nothing is written.
	code, res, _ = f.cutover(t, "-groups", group, "-dry-run")
	notCopied := 0
	for _, r := range res.Partitions {
		if r.State == ops.StateNotCopied {
			notCopied++
		}
	}
	if code != ops.CutoverNoGo || notCopied == 0 || res.Drain != nil {
		t.Errorf("dry run: exit %d, %d rows not copied, drain %+v; want exit %d with the grown partitions not copied", code, notCopied, res.Drain, ops.CutoverNoGo)
	}
	if got := targetGroupOffsets(t, c, group); len(got) != 0 || f.checkpointsOf(t, group) != 0 {
		t.Errorf("dry run wrote to the target: group offsets %v, %d checkpoints", got, f.checkpointsOf(t, group))
	}
	phase("dry run")

	// The cutover.
	code, res, stderr := f.cutover(t, "-groups", group)
	res0 := res
	if code != ops.CutoverGo || !res.Go || len(res.Partitions) != 8 {
		t.Fatalf("cutover: exit %d, %d rows, verdict %q\n%+v\n%s", code, len(res.Partitions), res.Verdict, res.Partitions, tail(stderr, 3000))
	}
	committed := targetGroupOffsets(t, c, group)
	want := map[string]map[int32]*kgo.Record{} // remote topic -> partition -> source record read next (nil: end)
	for _, r := range res.Partitions {
		at, ok := committed.Lookup(r.Remote, r.Partition)
		if r.State != ops.StateExact || r.ReReads != 0 || r.Skips != 0 || !ok || at.At != r.TargetOffset || r.TargetCommitted != r.TargetOffset {
			t.Errorf("row %+v (target holds %+v): want exact, 0 re-reads, 0 skips, committed at the target offset", r, at)
		}
		if want[r.Remote] == nil {
			want[r.Remote] = map[int32]*kgo.Record{}
		}
		want[r.Remote][r.Partition] = nil
		for _, s := range srcRecs[r.Topic][r.Partition] {
			if s.Offset == r.Next {
				want[r.Remote][r.Partition] = s
			}
		}
		if r.Next >= 0 && want[r.Remote][r.Partition] == nil {
			t.Errorf("row %+v: source record %d not found", r, r.Next)
		}
		t.Logf("%s-%d: committed %d, next record %d, target offset %d (%s)", r.Topic, r.Partition, r.Committed, r.Next, r.TargetOffset, r.Note)
	}
	phase("cutover: go")

	// A genuine Java consumer in the group on the target reads first the copy of each
	// partition's next record.
	remaining := 0
	var remotes []string
	for remote, parts := range want {
		remotes = append(remotes, regexp.QuoteMeta(remote))
		recs := values(t, c.Target.Bootstrap, remote)
		for p := range parts {
			at, _ := committed.Lookup(remote, p)
			for _, r := range recs[p] {
				if r.Offset >= at.At {
					remaining++
				}
			}
		}
	}
	out := testkit.Tool(t, "org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", c.Target.Bootstrap,
		"--include", strings.Join(remotes, "|"), "--group", group, "--max-messages", strconv.Itoa(remaining), "--timeout-ms", "60000",
		"--property", "print.partition=true", "--property", "print.offset=true", "--property", "print.key=false")
	first := map[string]string{} // "remote partition" -> first value
	line := regexp.MustCompile(`^Partition:(\d+)\s+Offset:(\d+)\s+(.*)$`)
	// The console consumer does not print topics: values name them ("<topic prefix>/<partition>/<i>").
	read := 0
	for _, l := range strings.Split(out, "\n") {
		m := line.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			continue
		}
		read++
		v := m[3]
		key := v[:strings.LastIndex(v, "/")]
		if _, ok := first[key]; !ok {
			first[key] = v
		}
	}
	if read != remaining {
		t.Errorf("java consumer read %d records, want %d:\n%s", read, remaining, tail(out, 2000))
	}
	for remote, parts := range want {
		for p, r := range parts {
			if r == nil {
				continue
			}
			v := string(r.Value)
			if got := first[v[:strings.LastIndex(v, "/")]]; got != v {
				t.Errorf("%s-%d: the Java consumer read first %q, want the copy of source record %d (%q)", remote, p, got, r.Offset, v)
			}
		}
	}
	phase(fmt.Sprintf("java consumer read %d records from the group's positions", read))

	// A group inside records the flow never copied: no-go naming the gap.
	code, res, _ = f.cutover(t, "-groups", gapGroup)
	if code != ops.CutoverNoGo || len(res.Partitions) != 1 || res.Partitions[0].State != ops.StateGap || !strings.Contains(res.Partitions[0].Note, "offsets 50-79") {
		t.Errorf("cutover of a group in a retention gap: exit %d, rows %+v; want exit %d, state gap naming offsets 50-79", code, res.Partitions, ops.CutoverNoGo)
	}
	if got := targetGroupOffsets(t, c, gapGroup); len(got) != 0 {
		t.Errorf("no-go committed %v on the target", got)
	}
	phase("gap: no-go")

	// Genuine MM2's checkpoints of the same group: the records a consumer starting at
	// RemoteClusterUtils.translateOffsets reads again (negative: skips).
	type lineKey struct {
		topic string
		p     int32
	}
	// (retained is left out: MM2 has no offset sync old enough to translate a group at 10.)
	mm2Topics := []string{compacted, txTopic, grown}
	sourceAt := map[string]map[int32]int64{}
	for _, r := range res0.Partitions {
		if sourceAt[r.Topic] == nil {
			sourceAt[r.Topic] = map[int32]int64{}
		}
		sourceAt[r.Topic][r.Partition] = r.Committed
	}
	// MM2 checkpoints a position it can translate within emit.checkpoints.interval (2 s): wait
	// for each partition's, at most 30 s (a partition still missing then is reported as such).
	stale := map[string]string{}
	mm2Checkpoints := map[string]map[int32]mm2.Checkpoint{} // source topic -> partition -> MM2's last checkpoint of the group
	for deadline := time.Now().Add(30 * time.Second); ; {
		clear(stale)
		for _, tp := range mm2Topics {
			cps, _ := groupCheckpoints(testkit.Context(t, 20*time.Second), c.Target.Bootstrap, "source.checkpoints.internal", group, "source."+tp)
			mm2Checkpoints[tp] = cps
			for p, at := range sourceAt[tp] {
				if cp, ok := cps[p]; !ok || cp.UpstreamOffset != at {
					stale[fmt.Sprintf("source.%s %d", tp, p)] = fmt.Sprintf("checkpoint %+v for a group at %d", cp, at)
				}
			}
		}
		if len(stale) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond) // a bounded poll
	}
	phase(fmt.Sprintf("MM2 checkpointed the group (%d partitions not at its position)", len(stale)))
	translated := map[lineKey]int64{}
	var answer []string
	if len(stale) < len(sourceAt[compacted])+len(sourceAt[txTopic])+len(sourceAt[grown]) {
		answer = mirrorClientTool(t, c, "translate", c.Target.Bootstrap, "source", group)
	}
	for _, l := range answer {
		fs := strings.Fields(l)
		if len(fs) < 3 {
			continue
		}
		p, _ := strconv.Atoi(fs[1])
		o, _ := strconv.ParseInt(fs[2], 10, 64)
		translated[lineKey{fs[0], int32(p)}] = o
	}
	phase("RemoteClusterUtils.translateOffsets answered")
	testkit.StopMM2(t, mm2Name)
	var figures []string
	compared, positions := 0, 0
	for _, tp := range mm2Topics {
		mm2Remote := "source." + tp
		var tgt map[int32][]*kgo.Record // read once a partition of the topic is compared
		for p, nextRec := range want[f.remote(tp)] {
			positions++
			o, ok := translated[lineKey{mm2Remote, p}]
			if why, bad := stale[fmt.Sprintf("%s %d", mm2Remote, p)]; !ok || bad {
				figures = append(figures, fmt.Sprintf("%s-%d: none at the group's position (%s)", strings.SplitN(tp, "-", 2)[0], p, why))
				continue
			}
			// The position compared: MM2's checkpoint of the group at its committed offset on
			// the source, and RemoteClusterUtils' answer its downstream offset, within the
			// remote partition MM2 wrote.
			if tgt == nil {
				tgt = values(t, c.Target.Bootstrap, mm2Remote)
			}
			cp := mm2Checkpoints[tp][p]
			if cp.UpstreamOffset != sourceAt[tp][p] || cp.DownstreamOffset != o {
				t.Errorf("%s-%d: translateOffsets answered %d from the checkpoint %v, want the checkpoint of the group at %d and its downstream offset", mm2Remote, p, o, cp, sourceAt[tp][p])
			}
			if n := len(tgt[p]); o < 0 || (n > 0 && o > tgt[p][n-1].Offset+1) || (n == 0 && o != 0) {
				t.Errorf("%s-%d: MM2's translation %d is outside the %d records MM2 wrote there", mm2Remote, p, o, n)
			}
			compared++
			reReads, found := 0, nextRec == nil
			for _, r := range tgt[p] {
				if r.Offset < o {
					continue
				}
				if nextRec != nil && string(r.Value) == string(nextRec.Value) {
					found = true
					break
				}
				reReads++
			}
			if !found {
				t.Errorf("%s-%d: a consumer at MM2's translation %d never reads the copy of source record %d: MM2 skipped it", mm2Remote, p, o, nextRec.Offset)
			}
			figures = append(figures, fmt.Sprintf("%s-%d: %d", strings.SplitN(tp, "-", 2)[0], p, reReads))
		}
	}
	t.Logf("re-reads per partition after the move: mm2go cutover 0 on all 8 (0 skips); genuine MM2's checkpoints: %s", strings.Join(figures, ", "))
	if compared == 0 {
		t.Errorf("genuine MM2's checkpoints: none of the group's %d positions on %v compared (%s)", positions, mm2Topics, strings.Join(figures, ", "))
	}
	phase("MM2 compared")
}

// TestCheckpointDefaultTranslation: the checkpoint function's default translation on a 1:1
// copy (20,000 records in 4 partitions, a group at 3,001) leaves at most offset.lag.max
// re-reads per partition and never skips a record; MM2's (MM2_CHECKPOINT_TRANSLATION=mm2)
// is measured beside it.
func TestCheckpointDefaultTranslation(t *testing.T) {
	c := testkit.Require(t)
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "cpd"), 4, nil)
	var recs []*kgo.Record
	for p := int32(0); p < 4; p++ {
		for i := 0; i < 5000; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("p%d-u%d", p, i))})
		}
	}
	testkit.Produce(t, c.Source.Bootstrap, recs...)
	f := newCutoverFlow(t, c, []string{topic})
	f.run(t)
	const at, lagMax = 3001, 100
	positions := map[int32]int64{0: at, 1: at, 2: at, 3: at}
	rereads := func(extra ...string) map[int32]int64 {
		group := testkit.Name(t, "g")
		commitGroup(t, c.Source.Bootstrap, group, topic, positions, "")
		env := append(append([]string{}, f.env...), append([]string{"MM2_GROUPS=" + group}, extra...)...)
		cfg, err := config.Load(envMap(env), nil)
		if err != nil {
			t.Fatal(err)
		}
		job, err := app.CheckpointJob(testkit.Context(t, time.Minute), cfg, slog.New(slog.DiscardHandler), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer job.Close()
		if _, err := job.Round(testkit.Context(t, time.Minute)); err != nil {
			t.Fatal(err)
		}
		cps, err := groupCheckpoints(testkit.Context(t, 30*time.Second), c.Target.Bootstrap, f.src+".checkpoints.internal", group, f.remote(topic))
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]int64{}
		for p := int32(0); p < 4; p++ {
			cp, ok := cps[p]
			if !ok {
				t.Fatalf("no checkpoint for partition %d (%v)", p, extra)
			}
			out[p] = at - cp.DownstreamOffset // a 1:1 copy: downstream offsets are upstream offsets
		}
		return out
	}
	def, mm2Way := rereads(), rereads("MM2_CHECKPOINT_TRANSLATION=mm2")
	for p := int32(0); p < 4; p++ {
		if def[p] < 0 || def[p] > lagMax {
			t.Errorf("partition %d: default translation leaves %d re-reads, want 0..%d (negative: skips)", p, def[p], lagMax)
		}
		if mm2Way[p] < def[p] {
			t.Errorf("partition %d: MM2's translation leaves %d re-reads, fewer than the default's %d", p, mm2Way[p], def[p])
		}
	}
	t.Logf("re-reads per partition at 3,001 of 5,000: default (precise) %v, MM2's %v", def, mm2Way)
}
