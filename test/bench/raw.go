package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
)

// rawCopyCommand is the first argument that makes this program the raw copy (a child
// process of the bench, so the OS measures its CPU and memory like every other contender's).
const rawCopyCommand = "rawcopy"

// rawMaxBufferedBytes and rawMaxBufferedRecords are the producer buffer bounds of mm2go's
// at-least-once record producer with its default 2 MiB in flight (shared/engine reuse.go:
// 2 × MaxBufferedBytes + 16 MiB, 1<<17 records).
const (
	rawMaxBufferedBytes   = 2*(2<<20) + 16<<20
	rawMaxBufferedRecords = 1 << 17
	rawLinger             = 5 * time.Millisecond // the target's producer.linger.ms default
)

// rawCopyMain is the raw copy: it reads every record of the source topics (from their start
// to the end offsets seen when it starts) and produces each to the same partition of
// prefix+topic on the target, with the producer settings mm2go's copy uses by default
// (idempotent, acks=all, 5 ms linger, batches up to cluster.DefaultMaxRequestSize, the same
// buffer bounds, no compression unless asked),
// and franz-go's default fetch sizes. No positions, no offset syncs, no topic creation (the
// harness creates the target topics first): the fastest a franz-go copy can be here.
func rawCopyMain(args []string) int {
	fs := flag.NewFlagSet(rawCopyCommand, flag.ContinueOnError)
	source := fs.String("source", "", "source bootstrap servers")
	target := fs.String("target", "", "target bootstrap servers")
	topics := fs.String("topics", "", "comma-separated source topics")
	prefix := fs.String("prefix", "raw.", "prefix of the target topics")
	compression := fs.String("compression", "", "target producer compression: lz4, zstd or empty")
	maxBatch := fs.Int("max-request-size", cluster.DefaultMaxRequestSize, "target producer batch bound in bytes (default: mm2go's)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	n, err := rawCopy(ctx, *source, *target, strings.Split(*topics, ","), *prefix, *compression, *maxBatch)
	if err != nil {
		fmt.Fprintf(os.Stderr, "raw copy failed after %d records: %v\n", n, err)
		return 1
	}
	fmt.Printf("raw copy: %d records\n", n)
	return 0
}

func rawCopy(ctx context.Context, source, target string, topics []string, prefix, compression string, maxBatch int) (int64, error) {
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
		return 0, fmt.Errorf("-compression %q: want lz4, zstd or none", compression)
	}
	popts := []kgo.Opt{
		kgo.SeedBrokers(target),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(rawLinger),
		kgo.MaxBufferedBytes(rawMaxBufferedBytes),
		kgo.MaxBufferedRecords(rawMaxBufferedRecords),
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

// runRaw creates the raw copy's target topics (as many partitions as the source's) and runs
// the raw copy as a child process until every record is on the target.
func (h *harness) runRaw(ctx context.Context, w workload, topics []string) (contender, error) {
	const prefix = "raw."
	remote := make([]string, len(topics))
	for i, t := range topics {
		remote[i] = prefix + t
	}
	for i := 0; i < len(remote); i += 100 {
		resp, err := h.tgtAdm.CreateTopics(ctx, w.Partitions, 1, nil, remote[i:min(i+100, len(remote))]...)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return contender{}, fmt.Errorf("creating the raw copy's target topics: %w", err)
		}
	}
	if err := h.waitTopics(ctx, remote); err != nil {
		return contender{}, err
	}
	args := []string{rawCopyCommand, "-source", h.source, "-target", h.target, "-topics", strings.Join(topics, ","),
		"-prefix", prefix, "-compression", w.Compression}
	cmd := exec.CommandContext(ctx, h.self, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	c, err := h.watch(ctx, []*exec.Cmd{cmd}, remote, int64(w.totalRecords()), w.totalBytes(), func() {})
	c.Name = nameRaw
	if err != nil {
		err = fmt.Errorf("%w\n%s", err, out.String())
	}
	return c, err
}
