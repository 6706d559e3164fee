package rawcopy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Forward is a measurement, not a copier: it copies o.Topics batch by batch, without decoding
// a record. It fetches record batches from the source leaders with raw Fetch requests and
// produces each batch as it came (same compression, same records, bytes for bytes) with a new
// header: no offsets, no partition leader epoch, no producer (not idempotent, acks=all), not
// transactional, its CRC recomputed. One batch per partition in flight, so each partition's
// batches stay in order. It stops at the first error: there are no retries.
//
// It shows what a copy costs when records are not turned into client records and back: the
// lower bound of CPU per GB for any copy that keeps MM2's record bytes but rewrites batches.
// It assumes what the benchmarks' seeded topics are: magic v2 batches from offset 0, with
// consecutive offsets (not compacted) and no control batches in the way of its counts.
func Forward(ctx context.Context, o Options) (int64, error) {
	src, err := kgo.NewClient(kgo.SeedBrokers(o.Source))
	if err != nil {
		return 0, err
	}
	defer src.Close()
	dst, err := kgo.NewClient(kgo.SeedBrokers(o.Target))
	if err != nil {
		return 0, err
	}
	defer dst.Close()
	sadm, dadm := kadm.NewClient(src), kadm.NewClient(dst)
	smeta, err := sadm.Metadata(ctx, o.Topics...)
	if err != nil {
		return 0, fmt.Errorf("source metadata: %w", err)
	}
	remotes := make([]string, len(o.Topics))
	for i, t := range o.Topics {
		remotes[i] = o.Prefix + t
	}
	dmeta, err := dadm.Metadata(ctx, remotes...)
	if err != nil {
		return 0, fmt.Errorf("target metadata: %w", err)
	}
	ends, err := sadm.ListEndOffsets(ctx, o.Topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("source end offsets: %w", err)
	}
	starts, err := sadm.ListStartOffsets(ctx, o.Topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("source start offsets: %w", err)
	}

	// One forwarder per source partition with records: its own fetch loop and its own
	// produce calls, one batch in flight.
	var (
		wg    sync.WaitGroup
		acked atomic.Int64
		errMu sync.Mutex
		errs  error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := func(err error) {
		errMu.Lock()
		errs = errors.Join(errs, err)
		errMu.Unlock()
		cancel()
	}
	for _, t := range o.Topics {
		sd, ok := smeta.Topics[t]
		dd, ok2 := dmeta.Topics[o.Prefix+t]
		if !ok || !ok2 || sd.Err != nil || dd.Err != nil {
			return 0, fmt.Errorf("topic %s or %s%s missing", t, o.Prefix, t)
		}
		for p, spd := range sd.Partitions {
			end, _ := ends.Lookup(t, p)
			start, _ := starts.Lookup(t, p)
			if end.Offset <= start.Offset {
				continue
			}
			dpd, ok := dd.Partitions[p]
			if !ok {
				return 0, fmt.Errorf("target topic %s%s has no partition %d", o.Prefix, t, p)
			}
			f := partForward{
				src: src.Broker(int(spd.Leader)), dst: dst.Broker(int(dpd.Leader)),
				topic: t, topicID: sd.ID, remote: o.Prefix + t, remoteID: dd.ID, partition: p,
				next: start.Offset, end: end.Offset,
			}
			wg.Go(func() {
				n, err := f.run(ctx)
				acked.Add(n)
				if err != nil {
					fail(fmt.Errorf("%s[%d]: %w", t, p, err))
				}
			})
		}
	}
	wg.Wait()
	return acked.Load(), errs
}

// partForward forwards one partition's batches.
type partForward struct {
	src, dst          *kgo.Broker
	topic, remote     string
	topicID, remoteID [16]byte
	partition         int32
	next, end         int64
}

// Offsets in a magic v2 record batch header.
const (
	hdrLength      = 8  // int32 batchLength, counted from hdrLeaderEpoch
	hdrLeaderEpoch = 12 // int32
	hdrMagic       = 16 // int8
	hdrCRC         = 17 // uint32, CRC-32C of everything from hdrAttributes on
	hdrAttributes  = 21 // int16
	hdrLastDelta   = 23 // int32 lastOffsetDelta
	hdrProducerID  = 43 // int64
	hdrEpoch       = 51 // int16
	hdrSequence    = 53 // int32
	hdrCount       = 57 // int32
	hdrSize        = 61

	attrTransactional = 0x10
	attrControl       = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (f *partForward) run(ctx context.Context) (int64, error) {
	var copied int64
	for f.next < f.end {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 250
		req.MinBytes = 1
		req.MaxBytes = 50 << 20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = f.topic, f.topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = f.partition, f.next, 1<<20
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, f.src)
		if err != nil {
			return copied, fmt.Errorf("fetch at %d: %w", f.next, err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return copied, fmt.Errorf("fetch at %d: %w", f.next, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return copied, fmt.Errorf("fetch at %d: answer for %d topics", f.next, len(resp.Topics))
		}
		rpart := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(rpart.ErrorCode); err != nil {
			return copied, fmt.Errorf("fetch at %d: %w", f.next, err)
		}
		b := rpart.RecordBatches
		for len(b) >= hdrSize && f.next < f.end {
			size := hdrLeaderEpoch + int(int32(binary.BigEndian.Uint32(b[hdrLength:])))
			if size > len(b) {
				break // the fetch cut the last batch
			}
			batch := b[:size]
			b = b[size:]
			if batch[hdrMagic] != 2 {
				return copied, fmt.Errorf("batch at %d: magic %d", int64(binary.BigEndian.Uint64(batch)), batch[hdrMagic])
			}
			base := int64(binary.BigEndian.Uint64(batch))
			last := base + int64(int32(binary.BigEndian.Uint32(batch[hdrLastDelta:])))
			if last < f.next {
				continue
			}
			if base < f.next {
				return copied, fmt.Errorf("batch %d-%d starts before %d: a mid-batch start is not forwarded", base, last, f.next)
			}
			f.next = last + 1
			attrs := binary.BigEndian.Uint16(batch[hdrAttributes:])
			if attrs&attrControl != 0 {
				continue
			}
			binary.BigEndian.PutUint64(batch, 0)
			binary.BigEndian.PutUint32(batch[hdrLeaderEpoch:], 0xffffffff)
			binary.BigEndian.PutUint16(batch[hdrAttributes:], attrs&^attrTransactional)
			binary.BigEndian.PutUint64(batch[hdrProducerID:], 0xffffffffffffffff)
			binary.BigEndian.PutUint16(batch[hdrEpoch:], 0xffff)
			binary.BigEndian.PutUint32(batch[hdrSequence:], 0xffffffff)
			binary.BigEndian.PutUint32(batch[hdrCRC:], crc32.Checksum(batch[hdrAttributes:], castagnoli))
			if err := f.produce(ctx, batch); err != nil {
				return copied, err
			}
			copied += int64(int32(binary.BigEndian.Uint32(batch[hdrCount:])))
		}
	}
	return copied, nil
}

// produce writes one batch to the remote partition and waits for the target's answer.
func (f *partForward) produce(ctx context.Context, batch []byte) error {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = f.remote, f.remoteID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = f.partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, f.dst)
	if err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("produce: %w", err)
			}
		}
	}
	return nil
}
