package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/mm2"
)

// firstWindow is how many records at the end of an offsets-topic partition the first backwards
// read covers; each further read covers windowGrowth times more.
const (
	firstWindow  = 64
	windowGrowth = 4
)

// record returns the Connect offsets record storing last as the position of tp.
func (ps *positionStore) record(tp TP, last int64, offsetsPartitions int32) *kgo.Record {
	p := mm2.SourcePosition(ps.sourceAlias, tp.Topic, tp.Partition, last, offsetsPartitions)
	return &kgo.Record{Topic: ps.topic, Partition: p.Partition, Key: p.Key, Value: p.Value}
}

// read returns the stored position (last copied upstream offset) of each tp that has
// one. It reads only the offsets-topic partitions holding the wanted keys, backwards from
// their ends in growing windows, so its cost depends on how many partitions are wanted, not
// on how long the topic's history is. Records of other connectors are skipped; a tombstone
// means "no position". It reads read_committed, so positions of aborted transactions are
// never seen.
func (ps *positionStore) read(ctx context.Context, tps []TP, offsetsPartitions int32) (map[TP]int64, error) {
	topic := ps.topic
	type part struct {
		want     map[string]TP // key bytes -> tp, still unresolved
		lo, hi   int64         // readable range still unread: [lo, hi)
		window   int64
		from     int64
		newest   map[string]*kgo.Record // newest record per wanted key in the current window
		finished bool
		seenTo   int64 // highest offset seen in the current window
	}
	parts := map[int32]*part{}
	for _, tp := range tps {
		key := mm2.SourceOffsetKey(ps.sourceAlias, tp.Topic, tp.Partition)
		p := mm2.KeyPartition(key, offsetsPartitions)
		if parts[p] == nil {
			parts[p] = &part{want: map[string]TP{}, window: firstWindow}
		}
		parts[p].want[string(key)] = tp
	}
	out := make(map[TP]int64, len(tps))
	if len(parts) == 0 {
		return out, nil
	}
	starts, ends, err := listOffsets(ctx, ps.tgtAdm, true, topic)
	if err != nil {
		return nil, fmt.Errorf("offsets topic %q: %w", topic, err)
	}
	if ps.exactlyOnce {
		// A read_committed read stops at the last stable offset: an open transaction of
		// another partition's copier (or of a crashed one, until its timeout) would hide
		// newer committed positions. Wait until everything written so far is decided.
		wanted := make([]int32, 0, len(parts))
		for p := range parts {
			wanted = append(wanted, p)
		}
		if ends, err = ps.waitStable(ctx, topic, wanted); err != nil {
			return nil, err
		}
	}
	for p, st := range parts {
		s, _ := starts.Lookup(topic, p)
		en, _ := ends.Lookup(topic, p)
		st.lo, st.hi = s.Offset, en.Offset
		if st.hi <= st.lo {
			st.finished = true
		}
	}
	for {
		round := map[int32]kgo.Offset{}
		for p, st := range parts {
			if st.finished {
				continue
			}
			st.from = max(st.lo, st.hi-st.window)
			st.newest = map[string]*kgo.Record{}
			st.seenTo = st.from - 1
			round[p] = kgo.NewOffset().At(st.from)
		}
		if len(round) == 0 {
			return out, nil
		}
		if err := ps.readWindow(ctx, topic, round, func(p int32, r *kgo.Record) bool {
			st := parts[p]
			if r.Offset >= st.hi {
				st.seenTo = st.hi - 1
				return true
			}
			st.seenTo = r.Offset
			if _, ok := st.want[string(r.Key)]; ok && !r.Attrs.IsControl() {
				st.newest[string(r.Key)] = r
			}
			return r.Offset >= st.hi-1
		}); err != nil {
			return nil, err
		}
		for _, st := range parts {
			if st.finished {
				continue
			}
			for k, r := range st.newest {
				tp := st.want[k]
				delete(st.want, k)
				off, err := mm2.DecodeOffsetValue(r.Value)
				switch {
				case errors.Is(err, mm2.ErrTombstone):
				case err != nil:
					ps.log.Warn("ignoring undecodable position", "topic", topic, "partition", r.Partition, "offset", r.Offset, "source_partition", tp.String(), "err", err)
				default:
					out[tp] = off
				}
			}
			st.hi = st.from
			st.window *= windowGrowth
			if len(st.want) == 0 || st.hi <= st.lo {
				st.finished = true
			}
		}
	}
}

// waitStable waits until the last stable offset of the given partitions of topic reaches
// their high watermark as of the call, and returns those offsets. It asks again under
// stableBackoff: an open transaction is decided by its copier (or aborted by the coordinator
// after the transaction timeout), which no local condition can signal.
func (ps *positionStore) waitStable(ctx context.Context, topic string, parts []int32) (kadm.ListedOffsets, error) {
	_, hwm, err := listOffsets(ctx, ps.tgtAdm, false, topic)
	if err != nil {
		return nil, fmt.Errorf("offsets topic %q: %w", topic, err)
	}
	r := stableBackoff.start()
	for {
		_, lso, err := listOffsets(ctx, ps.tgtAdm, true, topic)
		if err != nil {
			return nil, fmt.Errorf("offsets topic %q: %w", topic, err)
		}
		stable := true
		for _, p := range parts {
			h, _ := hwm.Lookup(topic, p)
			l, _ := lso.Lookup(topic, p)
			if l.Offset < h.Offset {
				stable = false
			}
		}
		if stable {
			return lso, nil
		}
		d, ok := r.next()
		if !ok {
			return nil, fmt.Errorf("offsets topic %q: an open transaction kept positions undecided for %s", topic, r.elapsed().Round(time.Second))
		}
		if !sleep(ctx, d) {
			return nil, fmt.Errorf("offsets topic %q: waiting for open transactions to be decided: %w", topic, ctx.Err())
		}
	}
}

// readWindow consumes the given partitions of topic (read_committed, control records kept so
// the read can tell it reached a transaction marker) from the given offsets, calling fn for
// each record until fn returns true for every partition. The caller's ends are what ListOffsets
// measured, and the record at end-1 (data or a transaction marker) or one past it always comes,
// so the read goes on until it has: an empty poll is a slow broker, never "nothing more" (that
// returned older positions, or none). It stops with an error when ctx ends or when no record
// of a partition still read arrives for readStallMax.
func (ps *positionStore) readWindow(ctx context.Context, topic string, from map[int32]kgo.Offset, fn func(p int32, r *kgo.Record) (done bool)) error {
	cl, err := ps.dial(ctx, Target,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		return fmt.Errorf("reading %q: %w", topic, err)
	}
	defer cl.Close()
	remaining := len(from)
	done := map[int32]bool{}
	last := time.Now()
	for remaining > 0 {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("reading %q: %w", topic, err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("reading %q partition %d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		if fs.NumRecords() == 0 {
			if time.Since(last) >= readStallMax {
				return fmt.Errorf("reading %q: no record for %s with %d partitions not read to the end measured", topic, readStallMax, remaining)
			}
			continue
		}
		last = time.Now()
		fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
			if done[ftp.Partition] {
				return
			}
			for _, r := range ftp.Records {
				if fn(ftp.Partition, r) {
					done[ftp.Partition] = true
					remaining--
					cl.PauseFetchPartitions(map[string][]int32{topic: {ftp.Partition}})
					return
				}
			}
		})
	}
	return nil
}

// readStallMax bounds how long a read of positions waits for the next record of a partition it
// has not read to its end: a broker that answers no fetch for that long fails the read (the
// copy asking for it fails or retries; it never goes on from an older position).
const readStallMax = time.Minute

// listOffsets returns start and end offsets of the given topics' partitions. With committed
// it uses the last stable offset as the end (what a read_committed consumer can reach).
// Transient errors (a topic just created, a leader moving) are retried for a few seconds.
func listOffsets(ctx context.Context, adm *kadm.Client, committed bool, topics ...string) (starts, ends kadm.ListedOffsets, err error) {
	err = servingBackoff.retry(ctx, func() error {
		starts, ends, err = cluster.ListOffsets(ctx, adm, committed, topics...)
		return err
	}, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	return starts, ends, nil
}
