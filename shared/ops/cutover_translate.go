package ops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/engine"
	"github.com/mm2go/mm2go/shared/mm2"
)

// pairing is what the translation of one row found.
type pairing struct {
	src, tgt *kgo.Record // the group's next source record and its copy (nil at the end)
}

// translate works out every row: the source record each group reads next and the offset of
// its copy on the target. It reads and writes nothing else.
func (o *Ops) translate(ctx context.Context, commits []commit, gaps map[engine.TP][]engine.Gap) ([]CutoverPartition, []pairing, map[engine.TP][]mm2.OffsetSync, error) {
	rows := make([]CutoverPartition, 0, len(commits))
	pairs := make([]pairing, 0, len(commits))
	if len(commits) == 0 {
		return rows, pairs, nil, nil
	}
	type bounds struct{ srcStart, srcEnd, tgtStart, tgtEnd int64 }
	offs := map[engine.TP]bounds{}
	var tps []engine.TP
	seen := map[string]bool{}
	for _, c := range commits {
		if seen[c.Topic] {
			continue
		}
		seen[c.Topic] = true
		f, err := o.bothOffsets(ctx, engine.Topic{Source: c.Topic, Remote: c.Remote})
		if err != nil {
			return nil, nil, nil, err
		}
		for p, s := range f.srcStarts {
			b := bounds{srcStart: s, srcEnd: f.srcEnds[p], tgtStart: -1, tgtEnd: -1}
			if e, ok := f.tgtEnds[p]; ok {
				b.tgtStart, b.tgtEnd = f.tgtStarts[p], e
			}
			offs[engine.TP{Topic: c.Topic, Partition: p}] = b
			tps = append(tps, engine.TP{Topic: c.Topic, Partition: p})
		}
	}
	positions, err := o.positions(ctx, tps, &Status{})
	if err != nil {
		return nil, nil, nil, err
	}
	for tp, pos := range positions {
		b := offs[tp]
		if g := engine.PositionGap(tp, pos, b.srcStart, b.srcEnd); g != nil && !hasGap(gaps[tp], *g) {
			gaps[tp] = append(gaps[tp], *g)
		}
	}
	syncs, err := o.allSyncs(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, c := range commits {
		tp := engine.TP{Topic: c.Topic, Partition: c.Part}
		b, ok := offs[tp]
		row := CutoverPartition{Group: c.Group, Topic: c.Topic, Remote: c.Remote, Partition: c.Part, Committed: c.At, Metadata: c.Metadata,
			Next: -1, TargetOffset: -1, TargetCommitted: -1, ReReads: -1, Skips: -1}
		var p pairing
		switch {
		case !ok:
			row.State, row.Note = StateNotCopied, "the source partition does not exist (any more)"
		case b.tgtEnd < 0:
			row.State, row.Note = StateNotCopied, "the remote partition does not exist on the target"
		default:
			if p, err = o.translateRow(ctx, &row, b.srcStart, b.srcEnd, b.tgtStart, b.tgtEnd, positions, gaps[tp], syncs[tp]); err != nil {
				return nil, nil, nil, err
			}
		}
		rows = append(rows, row)
		pairs = append(pairs, p)
	}
	return rows, pairs, syncs, nil
}

func hasGap(gs []engine.Gap, g engine.Gap) bool {
	for _, x := range gs {
		if x == g {
			return true
		}
	}
	return false
}

// translateRow fills one row's Next, TargetOffset and State.
func (o *Ops) translateRow(ctx context.Context, row *CutoverPartition, srcStart, srcEnd, tgtStart, tgtEnd int64, positions map[engine.TP]int64, gaps []engine.Gap, syncs []mm2.OffsetSync) (pairing, error) {
	tp := engine.TP{Topic: row.Topic, Partition: row.Partition}
	c := row.Committed
	for _, g := range gaps {
		if g.Kind == engine.GapDeleted && c < g.To {
			row.State = StateGap
			row.Note = g.String() + fmt.Sprintf("; the group at %d would miss them on the target", c)
			return pairing{}, nil
		}
	}
	if c < srcStart {
		row.Note = fmt.Sprintf("committed offset %d is before the source log start %d (deleted by retention): translated to the copy of the first retained record, where a source consumer with auto.offset.reset=earliest resumes", c, srcStart)
		c = srcStart
	}
	if c > srcEnd {
		row.State, row.Note = StateNotCopied, fmt.Sprintf("committed offset %d is beyond the source end %d", c, srcEnd)
		return pairing{}, nil
	}
	// The anchor: the newest sync (in the topic's order) at or before c whose copy is still in
	// the target log. Record u was copied to d, and the records after u follow d in order
	// (those deleted on the source since are skipped on the target below).
	var anchor *mm2.OffsetSync
	for i := range syncs {
		s := syncs[i]
		if s.UpstreamOffset <= c && s.DownstreamOffset >= tgtStart && s.DownstreamOffset <= tgtEnd {
			anchor = &syncs[i]
		}
	}
	if anchor == nil {
		row.State, row.Note = StateNoSync, fmt.Sprintf("no offset sync at or before source offset %d points into the target log", c)
		return pairing{}, nil
	}
	// Source: the data records from the anchor up to the first at or after c (next).
	var recs []*kgo.Record
	var next *kgo.Record
	err := o.readFrom(ctx, engine.Source, tp.Topic, tp.Partition, max(anchor.UpstreamOffset, srcStart), srcEnd, o.srcCommitted(), func(r *kgo.Record) bool {
		recs = append(recs, r)
		if r.Offset >= c {
			next = r
			return true
		}
		return false
	})
	if err != nil {
		return pairing{}, err
	}
	pos, hasPos := positions[tp]
	if next != nil {
		row.Next = next.Offset
		if !hasPos || pos < next.Offset {
			row.State, row.Note = StateNotCopied, appendNote(row.Note, fmt.Sprintf("source record %d is not copied yet (stored position %s)", next.Offset, posText(pos, hasPos)))
			return pairing{src: next}, nil
		}
	}
	// Target: from the anchor's copy, each of those records in order, matched by content
	// (key, value, headers, timestamp). Target records that match none are skipped: copies of
	// records compacted away on the source since, or written twice by an interrupted copy.
	matched := 0
	var copyRec *kgo.Record
	if len(recs) > 0 {
		if err := o.readFrom(ctx, engine.Target, row.Remote, tp.Partition, anchor.DownstreamOffset, tgtEnd, o.tgtCommitted(), func(r *kgo.Record) bool {
			if !sameRecord(recs[matched], r) {
				return false
			}
			if recs[matched] == next {
				copyRec = r
				return true
			}
			matched++
			return matched == len(recs)
		}); err != nil {
			return pairing{}, err
		}
	}
	switch {
	case next == nil && matched == len(recs):
		// c is the end (or only markers and compacted offsets follow): the remote end.
		row.TargetOffset, row.State = tgtEnd, StateExact
		return pairing{}, nil
	case next == nil || copyRec == nil:
		missing := recs[matched]
		row.State, row.Note = StateNotCopied, appendNote(row.Note, fmt.Sprintf("the target has no byte-identical copy of source record %d after offset sync %d->%d", missing.Offset, anchor.UpstreamOffset, anchor.DownstreamOffset))
		return pairing{src: next}, nil
	}
	row.TargetOffset, row.State = copyRec.Offset, StateExact
	return pairing{src: next, tgt: copyRec}, nil
}

func posText(pos int64, ok bool) string {
	if !ok {
		return "none"
	}
	return fmt.Sprint(pos)
}

func appendNote(note, s string) string {
	if note == "" {
		return s
	}
	return note + "; " + s
}

// srcCommitted and tgtCommitted say whether a side is read read_committed: the source when
// the copy reads it so (records of aborted transactions are not copied then), the target when
// the copy writes transactions.
func (o *Ops) srcCommitted() bool { return o.opts.ReadCommitted || o.opts.ExactlyOnce }
func (o *Ops) tgtCommitted() bool { return o.opts.ExactlyOnce }

// sameRecord compares what a consumer sees of two records: key, value, headers, timestamp.
func sameRecord(a, b *kgo.Record) bool {
	if !bytes.Equal(a.Key, b.Key) || !bytes.Equal(a.Value, b.Value) || (a.Key == nil) != (b.Key == nil) || (a.Value == nil) != (b.Value == nil) {
		return false
	}
	if !a.Timestamp.Equal(b.Timestamp) || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

// readFrom reads topic/partition on side from offset from (below end) in offset order and calls
// fn for every data record until fn returns true or the end is reached.
func (o *Ops) readFrom(ctx context.Context, side engine.Side, topic string, partition int32, from, end int64, committed bool, fn func(r *kgo.Record) bool) error {
	if from >= end {
		return nil
	}
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl, err := o.dial(ctx, side,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(iso), kgo.KeepControlRecords(),
		kgo.FetchMaxPartitionBytes(1<<20), kgo.FetchMaxWait(250*time.Millisecond))
	if err != nil {
		return fmt.Errorf("reading %s-%d on the %s: %w", topic, partition, side, err)
	}
	defer cl.Close()
	empty := 0
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("reading %s-%d on the %s: %w", topic, partition, side, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if ferr == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = err
			}
		})
		if ferr != nil {
			return fmt.Errorf("reading %s-%d on the %s at offset %d: %w", topic, partition, side, from, ferr)
		}
		if fs.NumRecords() == 0 {
			// Nothing more arrives below end: compacted tail, or an open transaction (read_committed).
			if empty++; empty >= 3 {
				return nil
			}
			continue
		}
		empty = 0
		stop := false
		fs.EachRecord(func(r *kgo.Record) {
			if stop || r.Offset >= end {
				stop = true
				return
			}
			if r.Offset == end-1 {
				stop = true
			}
			if !r.Attrs.IsControl() && fn(r) {
				stop = true
			}
		})
		if stop {
			return nil
		}
	}
}

// writeCutover writes, for the exact rows: offset syncs (where they do not rewind the
// partition's syncs), checkpoints, and the groups' offsets on the target.
func (o *Ops) writeCutover(ctx context.Context, co CutoverOptions, rows []CutoverPartition, syncs map[engine.TP][]mm2.OffsetSync) error {
	syncTopic, syncSide := o.eng.OffsetSyncsTopic()
	cpTopic := o.opts.Policy.CheckpointsTopic(o.opts.SourceAlias)
	configs := co.CheckpointsTopicConfigs
	if configs == nil {
		compact := "compact"
		configs = map[string]*string{"cleanup.policy": &compact}
	}
	rf := co.CheckpointsTopicReplicationFactor
	if rf == 0 {
		rf = -1
	}
	if _, _, err := cluster.EnsureTopic(ctx, o.tgt, cpTopic, 1, rf, configs); err != nil {
		return fmt.Errorf("checkpoints topic %s on the target: %w", cpTopic, err)
	}

	// Offset syncs, per partition in increasing order, never behind the newest one.
	newest := map[engine.TP]mm2.OffsetSync{}
	for tp, ss := range syncs {
		if len(ss) > 0 {
			newest[tp] = ss[len(ss)-1]
		}
	}
	idx := make([]int, 0, len(rows))
	for i := range rows {
		if rows[i].State == StateExact {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return rows[idx[a]].Committed < rows[idx[b]].Committed })
	var syncRecs, cpRecs []*kgo.Record
	now := o.now()
	for _, i := range idx {
		r := &rows[i]
		tp := engine.TP{Topic: r.Topic, Partition: r.Partition}
		s := mm2.OffsetSync{Topic: r.Topic, Partition: r.Partition, UpstreamOffset: r.Committed, DownstreamOffset: r.TargetOffset}
		last, has := newest[tp]
		switch {
		case has && last.UpstreamOffset == s.UpstreamOffset && last.DownstreamOffset == s.DownstreamOffset:
			r.OffsetSync = "present"
		case has && (last.UpstreamOffset > s.UpstreamOffset || last.DownstreamOffset > s.DownstreamOffset):
			r.OffsetSync = fmt.Sprintf("not written: the newest sync %d->%d is ahead, and an older one would reset MM2's sync store for the partition (the checkpoint carries the exact offset)", last.UpstreamOffset, last.DownstreamOffset)
		default:
			k, v, err := s.Encode()
			if err != nil {
				return fmt.Errorf("encoding offset sync %+v: %w", s, err)
			}
			syncRecs = append(syncRecs, &kgo.Record{Topic: syncTopic, Partition: 0, Key: k, Value: v})
			newest[tp] = s
			r.OffsetSync = "written"
		}
		cp := mm2.Checkpoint{Group: r.Group, Topic: r.Remote, Partition: r.Partition, UpstreamOffset: r.Committed, DownstreamOffset: r.TargetOffset, Metadata: r.Metadata}
		k, v, err := cp.Encode()
		if err != nil {
			return fmt.Errorf("encoding checkpoint %+v: %w", cp, err)
		}
		cpRecs = append(cpRecs, &kgo.Record{Topic: cpTopic, Partition: 0, Key: k, Value: v, Timestamp: now})
	}
	produce := func(side engine.Side, recs []*kgo.Record, what string) error {
		if len(recs) == 0 {
			return nil
		}
		cl, err := o.dial(ctx, side, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
		if err != nil {
			return fmt.Errorf("writing %s on the %s: %w", what, side, err)
		}
		defer cl.Close()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("writing %d %s to %s on the %s: %w", len(recs), what, recs[0].Topic, side, err)
		}
		return nil
	}
	if err := produce(syncSide, syncRecs, "offset syncs"); err != nil {
		return err
	}
	if err := produce(engine.Target, cpRecs, "checkpoints"); err != nil {
		return err
	}

	// The groups' offsets on the target.
	byGroup := map[string]kadm.Offsets{}
	for _, i := range idx {
		r := rows[i]
		offs := byGroup[r.Group]
		if offs == nil {
			offs = kadm.Offsets{}
			byGroup[r.Group] = offs
		}
		offs.Add(kadm.Offset{Topic: r.Remote, Partition: r.Partition, At: r.TargetOffset, LeaderEpoch: -1, Metadata: r.Metadata})
	}
	for _, g := range sortedKeys(byGroup) {
		resp, err := o.tgtAdm.CommitOffsets(ctx, g, byGroup[g])
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return fmt.Errorf("committing the offsets of group %q on the target: %w", g, err)
		}
	}
	return nil
}

// verifyCutover reads the groups' offsets back from the target and checks, per exact row, that
// the first record a consumer reads there is byte-identical to the source record it would
// have read next (or that it is at the remote end).
func (o *Ops) verifyCutover(ctx context.Context, groups []string, rows []CutoverPartition, pairs []pairing) error {
	committed := map[string]kadm.OffsetResponses{}
	for _, g := range groups {
		resp, err := o.tgtAdm.FetchOffsets(ctx, g)
		if err != nil {
			return fmt.Errorf("reading the offsets of group %q back from the target: %w", g, err)
		}
		committed[g] = resp
	}
	for i := range rows {
		r := &rows[i]
		if r.State != StateExact {
			continue
		}
		got, ok := committed[r.Group].Lookup(r.Remote, r.Partition)
		if !ok || got.Err != nil {
			r.State, r.Note = StateDiffers, appendNote(r.Note, "no offset committed on the target")
			continue
		}
		r.TargetCommitted = got.At
		if got.At != r.TargetOffset {
			r.State, r.Note = StateDiffers, appendNote(r.Note, fmt.Sprintf("the target holds offset %d, not %d", got.At, r.TargetOffset))
			continue
		}
		_, ends, err := o.offsets(ctx, engine.Target, r.Remote)
		if err != nil {
			return err
		}
		var first *kgo.Record
		if err := o.readFrom(ctx, engine.Target, r.Remote, r.Partition, got.At, ends[r.Partition], o.tgtCommitted(), func(rec *kgo.Record) bool {
			first = rec
			return true
		}); err != nil {
			return err
		}
		src := pairs[i].src
		switch {
		case src == nil && first == nil:
			r.ReReads, r.Skips = 0, 0
		case src == nil:
			r.State, r.Note = StateDiffers, appendNote(r.Note, fmt.Sprintf("the group is at the source end, but the target has record %d after offset %d", first.Offset, got.At))
		case first == nil:
			r.State, r.Note = StateDiffers, appendNote(r.Note, fmt.Sprintf("no record at or after target offset %d", got.At))
		case !sameRecord(src, first):
			r.State, r.Note = StateDiffers, appendNote(r.Note, fmt.Sprintf("target record %d is not byte-identical to source record %d", first.Offset, src.Offset))
		default:
			r.ReReads, r.Skips = 0, 0
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
