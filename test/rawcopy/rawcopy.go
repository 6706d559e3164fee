// Package rawcopy is the bare franz-go copy the benchmarks measure mm2go against: every record
// of the source topics, from their start to the end offsets seen when it starts, produced to
// the same partition of prefix+topic on the target with the producer settings mm2go's copy uses
// by default (idempotent, acks=all, 5 ms linger, batches up to cluster.DefaultMaxRequestSize,
// the same buffer bounds, no compression unless asked) and franz-go's default fetch sizes. No
// positions, no offset syncs, no topic creation: the fastest a franz-go copy can be here.
// test/bench and test/perf run it as a child process, so that the OS measures its CPU and
// memory like every other contender's.
package rawcopy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// maxBufferedBytes and maxBufferedRecords are the producer buffer bounds of mm2go's
// at-least-once record producer with its default 2 MiB in flight (shared/engine reuse.go:
// 2 × MaxBufferedBytes + 16 MiB, 1<<17 records).
const (
	maxBufferedBytes   = 2*(2<<20) + 16<<20
	maxBufferedRecords = 1 << 17
	linger             = 5 * time.Millisecond // the target's producer.linger.ms default
)

// Options are one raw copy's clusters, topics and target producer settings.
type Options struct {
	Source, Target string   // bootstrap servers
	Topics         []string // source topics
	Prefix         string   // of the target topics, which must exist
	Compression    string   // target producer compression: lz4, zstd, or "" / none
	MaxRequestSize int      // target producer batch bound in bytes (0: franz-go's)
}

// Copy copies o.Topics and returns how many records the target acknowledged.
func Copy(ctx context.Context, o Options) (int64, error) {
	source, target, topics, prefix, compression, maxBatch := o.Source, o.Target, o.Topics, o.Prefix, o.Compression, o.MaxRequestSize
	adminCl, err := kgo.NewClient(kgo.SeedBrokers(source))
	if err != nil {
		return 0, err
	}
	adm := kadm.NewClient(adminCl)
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		adminCl.Close()
		return 0, fmt.Errorf("listing the source's start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	adminCl.Close()
	if err != nil {
		return 0, fmt.Errorf("listing the source's end offsets: %w", err)
	}
	offs := map[string]map[int32]kgo.Offset{}
	end := map[string]map[int32]int64{}
	left := 0
	ends.Each(func(o kadm.ListedOffset) {
		st, _ := starts.Lookup(o.Topic, o.Partition)
		if o.Offset <= st.Offset {
			return
		}
		if offs[o.Topic] == nil {
			offs[o.Topic], end[o.Topic] = map[int32]kgo.Offset{}, map[int32]int64{}
		}
		offs[o.Topic][o.Partition] = kgo.NewOffset().At(st.Offset)
		end[o.Topic][o.Partition] = o.Offset
		left++
	})
	if left == 0 {
		return 0, nil
	}
	codec := kgo.NoCompression()
	switch compression {
	case "lz4":
		codec = kgo.Lz4Compression()
	case "zstd":
		codec = kgo.ZstdCompression()
	case "", "none":
	default:
		return 0, fmt.Errorf("compression %q: want lz4, zstd or none", compression)
	}
	popts := []kgo.Opt{
		kgo.SeedBrokers(target),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(linger),
		kgo.MaxBufferedBytes(maxBufferedBytes),
		kgo.MaxBufferedRecords(maxBufferedRecords),
		kgo.RecordDeliveryTimeout(0),
		kgo.ProducerBatchCompression(codec),
	}
	if maxBatch > 0 {
		popts = append(popts, kgo.ProducerBatchMaxBytes(int32(maxBatch)))
	}
	prod, err := kgo.NewClient(popts...)
	if err != nil {
		return 0, err
	}
	defer prod.Close()
	cons, err := kgo.NewClient(kgo.SeedBrokers(source), kgo.ConsumePartitions(offs), kgo.FetchMaxWait(250*time.Millisecond))
	if err != nil {
		return 0, err
	}
	defer cons.Close()

	var acked atomic.Int64
	var errMu sync.Mutex
	var prodErr error
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			errMu.Lock()
			prodErr = errors.Join(prodErr, err)
			errMu.Unlock()
			return
		}
		acked.Add(1)
	}
	for left > 0 {
		fetches := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return acked.Load(), err
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("fetching %s[%d]: %w", t, p, err))
		})
		if ferr != nil {
			return acked.Load(), ferr
		}
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			last := end[p.Topic][p.Partition]
			for _, r := range p.Records {
				// The producer owns r once given it (it sets r.Offset on the target): the
				// source offset is read first.
				offset := r.Offset
				if offset >= last {
					break
				}
				r.Topic = prefix + r.Topic
				if r.Timestamp.UnixMilli() < 0 {
					r.Timestamp = time.Time{}
				}
				r.Attrs = kgo.RecordAttrs{}
				r.ProducerID, r.ProducerEpoch = 0, 0
				prod.Produce(ctx, r, done)
				if offset == last-1 {
					left--
				}
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		return acked.Load(), err
	}
	errMu.Lock()
	defer errMu.Unlock()
	return acked.Load(), prodErr
}
