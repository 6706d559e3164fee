package ops

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"hash/fnv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/engine"
	"github.com/mm2go/mm2go/shared/mm2"
)

// VerifyOptions bound a verification. Zero values mean the default named in each field's comment.
type VerifyOptions struct {
	// Topics limits the check to these source topics; empty means every topic the flow selects.
	Topics []string
	// Last, if > 0, checks only about the last Last copied records of each partition: from the
	// newest offset sync at or before position+1-Last. 0 checks everything that can be aligned:
	// from the oldest offset sync still in the offset-syncs topic.
	Last int64
	// MaxListed is how many differences are listed per partition (all are counted); 0 means 20.
	MaxListed int
	// Lookahead is how many records ahead a mismatch looks for the other side's record to tell
	// a missing or extra record from an altered one; 0 means 64.
	Lookahead int
}

// Difference kinds.
const (
	Missing   = "missing"   // a source record has no copy on the target
	Extra     = "extra"     // a target record is not the copy of a source record (or a duplicate)
	Differing = "differing" // the target record at a source record's place has other contents
)

// Difference is one record that is not where or what it should be. An offset is -1 where the
// record does not exist on that side.
type Difference struct {
	Kind         string `json:"kind"`
	SourceOffset int64  `json:"source_offset"`
	TargetOffset int64  `json:"target_offset"`
}

// PartitionVerify is the result for one source partition.
type PartitionVerify struct {
	Topic     string `json:"topic"`
	Remote    string `json:"remote"`
	Partition int32  `json:"partition"`
	// Position is the stored position, nil when none (nothing is compared then).
	Position *int64 `json:"position"`
	// The compared ranges [from, to) of source and target offsets.
	SourceFrom int64 `json:"source_from"`
	SourceTo   int64 `json:"source_to"`
	TargetFrom int64 `json:"target_from"`
	TargetTo   int64 `json:"target_to"`
	// Alignment says how SourceFrom and TargetFrom were paired.
	Alignment string `json:"alignment"`
	// Record counts in the compared ranges (transaction markers excluded) and the matches.
	SourceRecords int64 `json:"source_records"`
	TargetRecords int64 `json:"target_records"`
	Matched       int64 `json:"matched"`
	Missing       int64 `json:"missing"`
	Extra         int64 `json:"extra"`
	Differing     int64 `json:"differing"`
	// SourceHash and TargetHash digest the ranges' records (key, value, headers, timestamp) in
	// order: equal exactly when the ranges hold the same records.
	SourceHash string `json:"source_hash"`
	TargetHash string `json:"target_hash"`
	// Lag is the source records after the position, not copied yet.
	Lag int64 `json:"lag"`
	// Gap is set when the stored position is outside the source log: records deleted before
	// they were mirrored, or a recreated topic (see engine.Gap).
	Gap *engine.Gap `json:"gap,omitempty"`
	// Differences lists the first MaxListed differences.
	Differences []Difference `json:"differences,omitempty"`
	Note        string       `json:"note,omitempty"`
}

// Verification is the result of Verify.
type Verification struct {
	Source     string            `json:"source"`
	Target     string            `json:"target"`
	Partitions []PartitionVerify `json:"partitions"`
	// Differences is the number of missing, extra and differing records over all partitions.
	Differences int64 `json:"differences"`
	// Lag is the source records not copied yet over all partitions.
	Lag int64 `json:"lag"`
	// Gaps is the number of partitions whose stored position is outside the source log (see
	// engine.Gap): records lost before they were mirrored.
	Gaps int `json:"gaps"`
	// Complete is true when there is no difference, no lag and no gap.
	Complete bool `json:"complete"`
}

// Verify compares source and target partition by partition. It walks both sides in offset
// order from an aligned pair of offsets (an offset sync: source record u was copied to target
// offset d; without one, the two logs' start offsets, which assumes the target partition
// started empty) up to the stored position on the source and the current end on the target,
// comparing per-record digests. Memory is bounded by the fetch buffers and the lookahead
// window: no side is materialized. Run it on a quiesced flow: copies written after the stored
// position (a copy in progress) show up as extra records.
func (o *Ops) Verify(ctx context.Context, vo VerifyOptions) (*Verification, error) {
	if vo.MaxListed <= 0 {
		vo.MaxListed = 20
	}
	if vo.Lookahead <= 0 {
		vo.Lookahead = 64
	}
	topics, err := o.eng.DiscoverTopics(ctx)
	if err != nil {
		return nil, err
	}
	if len(vo.Topics) > 0 {
		want := map[string]bool{}
		for _, t := range vo.Topics {
			want[t] = true
		}
		var keep []engine.Topic
		for _, t := range topics {
			if want[t.Source] {
				keep = append(keep, t)
				delete(want, t.Source)
			}
		}
		for t := range want {
			return nil, fmt.Errorf("topic %q is not replicated by flow %s->%s", t, o.opts.SourceAlias, o.opts.TargetAlias)
		}
		topics = keep
	}
	var tps []engine.TP
	for _, t := range topics {
		for p := int32(0); p < t.Partitions; p++ {
			tps = append(tps, engine.TP{Topic: t.Source, Partition: p})
		}
	}
	st := &Status{}
	positions, err := o.positions(ctx, tps, st)
	if err != nil {
		return nil, err
	}
	syncs, err := o.allSyncs(ctx)
	if err != nil {
		return nil, err
	}
	v := &Verification{Source: o.opts.SourceAlias, Target: o.opts.TargetAlias, Partitions: []PartitionVerify{}}
	for _, t := range topics {
		off, err := o.bothOffsets(ctx, t)
		if err != nil {
			return nil, err
		}
		sStarts, sEnds, tStarts, tEnds := off.srcStarts, off.srcEnds, off.tgtStarts, off.tgtEnds
		for p := int32(0); p < t.Partitions; p++ {
			tp := engine.TP{Topic: t.Source, Partition: p}
			pv := PartitionVerify{Topic: t.Source, Remote: t.Remote, Partition: p, SourceFrom: sStarts[p], TargetFrom: -1, TargetTo: -1}
			pos, has := positions[tp]
			next := sStarts[p]
			if has {
				pv.Position = &pos
				next = max(next, pos+1)
				if pv.Gap = engine.PositionGap(tp, pos, sStarts[p], sEnds[p]); pv.Gap != nil {
					next = sStarts[p] // the next run copies from the log start
					v.Gaps++
				}
			}
			pv.Lag = max(0, sEnds[p]-next)
			pv.SourceTo = min(next, sEnds[p])
			switch {
			case pv.Gap != nil:
				pv.Note = pv.Gap.String() + "; nothing compared, the next run copies from the log start"
				pv.SourceTo = pv.SourceFrom
			case !has:
				pv.Note = "no position stored: nothing copied yet"
				pv.SourceTo = pv.SourceFrom
			case tEnds == nil:
				pv.Note = "remote topic does not exist on the target"
				pv.Missing = max(0, pv.SourceTo-pv.SourceFrom)
			default:
				if _, ok := tEnds[p]; !ok {
					pv.Note = "remote partition does not exist on the target"
					pv.Missing = max(0, pv.SourceTo-pv.SourceFrom)
					break
				}
				pv.TargetTo = tEnds[p]
				u, d, how := align(syncs[tp], sStarts[p], pv.SourceTo, tStarts[p], pv.TargetTo, vo.Last)
				pv.SourceFrom, pv.TargetFrom, pv.Alignment = u, d, how
				if err := o.comparePartition(ctx, &pv, vo); err != nil {
					return nil, err
				}
			}
			v.Differences += pv.Missing + pv.Extra + pv.Differing
			v.Lag += pv.Lag
			v.Partitions = append(v.Partitions, pv)
		}
	}
	v.Complete = v.Differences == 0 && v.Lag == 0 && v.Gaps == 0
	return v, nil
}

// allSyncs reads every offset sync in the offset-syncs topic, in topic order, per partition.
func (o *Ops) allSyncs(ctx context.Context) (map[engine.TP][]mm2.OffsetSync, error) {
	topic, side := o.eng.OffsetSyncsTopic()
	out := map[engine.TP][]mm2.OffsetSync{}
	err := o.readAll(ctx, side, topic, func(r *kgo.Record) error {
		if s, err := mm2.DecodeOffsetSync(r.Key, r.Value); err == nil {
			tp := engine.TP{Topic: s.Topic, Partition: s.Partition}
			out[tp] = append(out[tp], s)
		}
		return nil
	})
	return out, err
}

// align picks the pair of offsets to start comparing at: an offset sync inside both logs (the
// oldest, or with last > 0 the newest at or before srcTo-last), else the logs' start offsets.
func align(syncs []mm2.OffsetSync, srcStart, srcTo, tgtStart, tgtTo int64, last int64) (u, d int64, how string) {
	usable := func(s mm2.OffsetSync) bool {
		return s.UpstreamOffset >= srcStart && s.UpstreamOffset <= srcTo && s.DownstreamOffset >= tgtStart && s.DownstreamOffset <= tgtTo
	}
	ok := false
	if last > 0 {
		limit := srcTo - last
		for _, s := range syncs {
			if usable(s) && s.UpstreamOffset <= limit && (!ok || s.UpstreamOffset > u) {
				u, d, ok = s.UpstreamOffset, s.DownstreamOffset, true
			}
		}
	}
	if !ok {
		for _, s := range syncs {
			if usable(s) && (!ok || s.UpstreamOffset < u) {
				u, d, ok = s.UpstreamOffset, s.DownstreamOffset, true
			}
		}
	}
	if ok {
		return u, d, fmt.Sprintf("offset sync: source offset %d was copied to target offset %d", u, d)
	}
	return srcStart, tgtStart, "log start offsets (no usable offset sync): assumes the target partition started empty and neither log was truncated"
}

// item is one record's position and digest.
type item struct {
	off int64
	h   [16]byte
}

// digest hashes what a copy must preserve: key and value (nil and empty apart), headers in
// order, timestamp.
func digest(hs hash.Hash, r *kgo.Record) [16]byte {
	hs.Reset()
	var b [8]byte
	bytesField := func(p []byte) {
		if p == nil {
			hs.Write([]byte{0})
			return
		}
		hs.Write([]byte{1})
		binary.BigEndian.PutUint64(b[:], uint64(len(p)))
		hs.Write(b[:])
		hs.Write(p)
	}
	bytesField(r.Key)
	bytesField(r.Value)
	binary.BigEndian.PutUint64(b[:], uint64(len(r.Headers)))
	hs.Write(b[:])
	for _, h := range r.Headers {
		bytesField([]byte(h.Key))
		bytesField(h.Value)
	}
	binary.BigEndian.PutUint64(b[:], uint64(r.Timestamp.UnixMilli()))
	hs.Write(b[:])
	var out [16]byte
	copy(out[:], hs.Sum(nil))
	return out
}

// stream is one side's digests, read ahead into a small window.
type stream struct {
	ch   <-chan item
	buf  []item
	eof  bool
	n    int64
	hash hash.Hash64
}

func (s *stream) fill(n int) {
	for len(s.buf) < n && !s.eof {
		it, ok := <-s.ch
		if !ok {
			s.eof = true
			return
		}
		s.buf = append(s.buf, it)
	}
}

func (s *stream) peek() (item, bool) {
	s.fill(1)
	if len(s.buf) == 0 {
		return item{}, false
	}
	return s.buf[0], true
}

func (s *stream) pop() item {
	it := s.buf[0]
	s.buf = s.buf[1:]
	s.n++
	s.hash.Write(it.h[:])
	return it
}

// find returns the index (1..k) of the first buffered item after the head with digest h, or -1.
func (s *stream) find(h [16]byte, k int) int {
	s.fill(k + 1)
	for i := 1; i < len(s.buf) && i <= k; i++ {
		if s.buf[i].h == h {
			return i
		}
	}
	return -1
}

// comparePartition walks pv's source and target ranges side by side.
func (o *Ops) comparePartition(ctx context.Context, pv *PartitionVerify, vo VerifyOptions) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	read := func(side engine.Side, topic string, from, to int64) (*stream, <-chan error) {
		ch := make(chan item, 256)
		errc := make(chan error, 1)
		go func() {
			defer close(ch)
			hs := fnv.New128a()
			// Exactly-once copies read the source read_committed and commit the target in
			// transactions: compare what read_committed readers see on both sides.
			incomplete, err := o.scanIsolated(ctx, side, topic, map[int32]partRange{pv.Partition: {from, to}}, o.opts.ExactlyOnce, func(r *kgo.Record) error {
				select {
				case ch <- item{r.Offset, digest(hs, r)}:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
			if err == nil && len(incomplete) > 0 {
				err = errIncomplete
			}
			errc <- err
		}()
		return &stream{ch: ch, hash: fnv.New64a()}, errc
	}
	src, srcErr := read(engine.Source, pv.Topic, pv.SourceFrom, pv.SourceTo)
	tgt, tgtErr := read(engine.Target, pv.Remote, pv.TargetFrom, pv.TargetTo)
	walk(src, tgt, pv, vo)
	pv.SourceRecords, pv.TargetRecords = src.n, tgt.n
	pv.SourceHash = hex.EncodeToString(src.hash.Sum(nil))
	pv.TargetHash = hex.EncodeToString(tgt.hash.Sum(nil))
	for _, c := range []<-chan error{srcErr, tgtErr} {
		if err := <-c; err == errIncomplete {
			pv.Note = "a range's tail could not be read (compacted or deleted records): counts cover what was read"
		} else if err != nil {
			return fmt.Errorf("verifying %s-%d: %w", pv.Topic, pv.Partition, err)
		}
	}
	return nil
}

var errIncomplete = fmt.Errorf("range not fully readable")

// walk compares the two digest streams in order and counts and lists the differences in pv.
func walk(src, tgt *stream, pv *PartitionVerify, vo VerifyOptions) {
	list := func(kind string, s, t int64) {
		if len(pv.Differences) < vo.MaxListed {
			pv.Differences = append(pv.Differences, Difference{Kind: kind, SourceOffset: s, TargetOffset: t})
		}
	}
	for {
		s, sok := src.peek()
		t, tok := tgt.peek()
		switch {
		case !sok && !tok:
		case !sok:
			tgt.pop()
			pv.Extra++
			list(Extra, -1, t.off)
			continue
		case !tok:
			src.pop()
			pv.Missing++
			list(Missing, s.off, -1)
			continue
		case s.h == t.h:
			src.pop()
			tgt.pop()
			pv.Matched++
			continue
		default:
			i := src.find(t.h, vo.Lookahead)
			j := tgt.find(s.h, vo.Lookahead)
			switch {
			case i > 0 && (j < 0 || i <= j):
				for range i {
					pv.Missing++
					list(Missing, src.pop().off, -1)
				}
			case j > 0:
				for range j {
					pv.Extra++
					list(Extra, -1, tgt.pop().off)
				}
			default:
				pv.Differing++
				list(Differing, src.pop().off, tgt.pop().off)
			}
			continue
		}
		break
	}
}
