// Package ops holds mm2go's operator commands, which only read the clusters and MirrorMaker 2's
// internal topics, so they work the same on state written by mm2go and by real MM2:
//
//   - Status: per partition the copied position (mm2-offsets.<source>.internal), source end
//     offset, lag and the age of the newest offset sync; per consumer group the last checkpoint,
//     its age and the records a failover would re-read; the heartbeat latency.
//   - Verify: compares source and target partition by partition (record counts and a content
//     hash over key, value, headers and timestamp), aligned by offset syncs, streaming.
//   - Plan: a dry run of the mirror function: topics selected and excluded (and why), remote
//     names, topics and partitions to create or grow, configs to sync, internal topics to create.
//
// None of them writes to a cluster.
package ops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/engine"
	"github.com/mm2go/mm2go/shared/filter"
)

// Ops reads one flow's clusters. Create it with New or FromConfig; Close it when done.
type Ops struct {
	eng    *engine.Engine
	opts   engine.Options // with defaults
	dial   engine.DialFunc
	groups *filter.Filter
	log    *slog.Logger
	now    func() time.Time

	src, tgt       *kgo.Client
	srcAdm, tgtAdm *kadm.Client
}

// New returns an Ops for the flow described by opts (as for engine.New), selecting consumer
// groups with groups (nil: MM2's default group filter). It connects lazily.
func New(ctx context.Context, opts engine.Options, groups *filter.Filter, dial engine.DialFunc, logger *slog.Logger) (*Ops, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if groups == nil {
		g, err := filter.Groups(filter.DefaultGroups, filter.DefaultGroupsExclude)
		if err != nil {
			return nil, err
		}
		groups = g
	}
	eng, err := engine.New(ctx, opts, dial, logger)
	if err != nil {
		return nil, err
	}
	o := &Ops{eng: eng, opts: eng.Options(), dial: dial, groups: groups, log: logger, now: time.Now}
	if o.src, err = dial(ctx, engine.Source); err != nil {
		eng.Close()
		return nil, fmt.Errorf("connecting to source cluster: %w", err)
	}
	if o.tgt, err = dial(ctx, engine.Target); err != nil {
		eng.Close()
		o.src.Close()
		return nil, fmt.Errorf("connecting to target cluster: %w", err)
	}
	o.srcAdm, o.tgtAdm = kadm.NewClient(o.src), kadm.NewClient(o.tgt)
	return o, nil
}

// Close releases the clients.
func (o *Ops) Close() {
	o.eng.Close()
	o.src.Close()
	o.tgt.Close()
}

func (o *Ops) client(side engine.Side) (*kgo.Client, *kadm.Client) {
	if side == engine.Source {
		return o.src, o.srcAdm
	}
	return o.tgt, o.tgtAdm
}

// partRange is a range [From, To) of offsets of one partition.
type partRange struct{ From, To int64 }

// flowOffsets are the start and end offsets of a replicated topic's partitions on both
// sides; the target's maps are nil while the remote topic does not exist.
type flowOffsets struct {
	srcStarts, srcEnds, tgtStarts, tgtEnds map[int32]int64
}

// bothOffsets lists the offsets of t on the source and of its remote topic on the target.
func (o *Ops) bothOffsets(ctx context.Context, t engine.Topic) (f flowOffsets, err error) {
	if f.srcStarts, f.srcEnds, err = o.offsets(ctx, engine.Source, t.Source); err != nil {
		return f, err
	}
	f.tgtStarts, f.tgtEnds, err = o.offsets(ctx, engine.Target, t.Remote)
	return f, err
}

// offsets returns start and end offsets of every partition of topic on side; a missing topic
// gives nil maps and no error.
func (o *Ops) offsets(ctx context.Context, side engine.Side, topic string) (starts, ends map[int32]int64, err error) {
	_, adm := o.client(side)
	s, e, err := cluster.ListOffsets(ctx, adm, false, topic)
	if cluster.TopicMissing(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", side, err)
	}
	starts, ends = map[int32]int64{}, map[int32]int64{}
	s.Each(func(l kadm.ListedOffset) { starts[l.Partition] = l.Offset })
	e.Each(func(l kadm.ListedOffset) { ends[l.Partition] = l.Offset })
	return starts, ends, nil
}

// scan reads the given ranges of topic on side in offset order per partition and calls fn for
// every data record (control records are skipped). Records are not kept: memory is bounded by
// the fetch buffers. It returns when every range was read, or when a range's tail turns out to
// be unreadable (compacted away: nothing arrives for idle), which it reports in the result.
func (o *Ops) scan(ctx context.Context, side engine.Side, topic string, ranges map[int32]partRange, fn func(r *kgo.Record) error) (incomplete []int32, err error) {
	return o.scanIsolated(ctx, side, topic, ranges, false, fn)
}

// scanIsolated is scan reading read_committed when committed is set (records of aborted
// transactions are then skipped like markers; the read cannot pass an open transaction).
func (o *Ops) scanIsolated(ctx context.Context, side engine.Side, topic string, ranges map[int32]partRange, committed bool, fn func(r *kgo.Record) error) (incomplete []int32, err error) {
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	from := map[int32]kgo.Offset{}
	for p, r := range ranges {
		if r.To > r.From {
			from[p] = kgo.NewOffset().At(r.From)
		}
	}
	if len(from) == 0 {
		return nil, nil
	}
	cl, err := o.dial(ctx, side,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(iso),
		kgo.KeepControlRecords(),
		kgo.FetchMaxBytes(16<<20),
		kgo.FetchMaxPartitionBytes(4<<20),
		kgo.FetchMaxWait(250*time.Millisecond),
	)
	if err != nil {
		return nil, fmt.Errorf("reading %q on %s: %w", topic, side, err)
	}
	defer cl.Close()
	remaining := len(from)
	done := map[int32]bool{}
	empty := 0
	for remaining > 0 {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reading %q on %s: %w", topic, side, err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("reading %q partition %d on %s: %w", t, p, side, err)
			}
		})
		if ferr != nil {
			return nil, ferr
		}
		if fs.NumRecords() == 0 {
			if empty++; empty >= 3 {
				break
			}
			continue
		}
		empty = 0
		var cbErr error
		fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
			r := ranges[ftp.Partition]
			if done[ftp.Partition] || cbErr != nil || len(ftp.Records) == 0 {
				return
			}
			for _, rec := range ftp.Records {
				if rec.Offset >= r.To {
					break
				}
				if !rec.Attrs.IsControl() {
					if cbErr = fn(rec); cbErr != nil {
						return
					}
				}
				if rec.Offset >= r.To-1 {
					break
				}
			}
			if last := ftp.Records[len(ftp.Records)-1].Offset; last >= r.To-1 {
				done[ftp.Partition] = true
				remaining--
				cl.PauseFetchPartitions(map[string][]int32{topic: {ftp.Partition}})
			}
		})
		if cbErr != nil {
			return nil, cbErr
		}
	}
	for p := range from {
		if !done[p] {
			incomplete = append(incomplete, p)
		}
	}
	return incomplete, nil
}

// readAll reads every partition of topic on side from its start to its current end; a missing
// topic reads nothing.
func (o *Ops) readAll(ctx context.Context, side engine.Side, topic string, fn func(r *kgo.Record) error) error {
	starts, ends, err := o.offsets(ctx, side, topic)
	if err != nil || starts == nil {
		return err
	}
	ranges := map[int32]partRange{}
	for p, s := range starts {
		ranges[p] = partRange{s, ends[p]}
	}
	_, err = o.scan(ctx, side, topic, ranges, fn)
	return err
}

// partitionCount returns the partition count of topic on side, 0 if it does not exist.
func (o *Ops) partitionCount(ctx context.Context, side engine.Side, topic string) (int32, error) {
	_, adm := o.client(side)
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("describing %q on %s: %w", topic, side, err)
	}
	d, ok := md.Topics[topic]
	if !ok || cluster.TopicMissing(d.Err) {
		return 0, nil
	}
	if d.Err != nil {
		return 0, fmt.Errorf("describing %q on %s: %w", topic, side, d.Err)
	}
	return int32(len(d.Partitions)), nil
}
