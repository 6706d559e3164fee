package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
)

// ClientFunc builds a franz-go client for one cluster with extra options
// (cluster.Dialer makes one from a cluster's settings).
type ClientFunc = cluster.ClientFunc

// Fetch sizes of the reader. Offset syncs are about 50 bytes each on the wire, so
// one fetch of fetchPartitionBytes carries several hundred thousand of them.
const (
	fetchMaxBytes       = 64 << 20
	fetchPartitionBytes = 32 << 20
	// idleEnd ends a read that saw nothing for this long although its end
	// offset was not reached: only possible when the last offsets of the
	// partition are gone (the caller logs it).
	idleEnd = 10 * time.Second
)

// errTopicMissing reports that the topic to read does not exist.
var errTopicMissing = errors.New("topic does not exist")

// errPositionGone reports that a read could not continue where the previous
// one stopped: the offset is before the log start (records deleted) or past
// the end (topic recreated). The caller reads again from the start.
var errPositionGone = errors.New("previous position no longer in the log")

// readResult describes one read of a partition.
type readResult struct {
	Start, End int64 // log start and end offsets when the read began
	From       int64 // first offset asked for
	Next       int64 // offset after the last one read: where the next read continues
	Records    int64 // data records handed to the callback
	Incomplete bool  // the read ended idle before reaching End
	// TopicID is the topic's id (zero if the broker has none), so that a
	// later read can tell the topic was recreated.
	TopicID kadm.TopicID
}

// readPartition reads partition of topic from offset from (from < 0: from
// the log start) to the end offset it has when the read begins, in offset
// order, and calls fn for every data record. Records are pooled: fn must not
// keep r or any slice of it. Control records (transaction markers) are
// skipped but still count towards the end. A missing topic is
// errTopicMissing; a from outside the log, or a topic whose id is not
// wantID (when both are known), is errPositionGone.
func readPartition(ctx context.Context, newClient ClientFunc, topic string, partition int32, from int64, wantID kadm.TopicID, fn func(r *kgo.Record) error) (res readResult, err error) {
	pool := &recordPool{}
	cl, err := newClient(ctx,
		kgo.FetchMaxBytes(fetchMaxBytes),
		kgo.FetchMaxPartitionBytes(fetchPartitionBytes),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.KeepControlRecords(),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.WithPools(pool),
	)
	if err != nil {
		return res, err
	}
	defer cl.Close()

	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return res, fmt.Errorf("describing %s: %w", topic, err)
	}
	if d, ok := md.Topics[topic]; !ok || cluster.TopicMissing(d.Err) {
		return res, errTopicMissing
	} else if d.Err != nil {
		return res, fmt.Errorf("describing %s: %w", topic, d.Err)
	} else {
		res.TopicID = d.ID
	}
	var zero kadm.TopicID
	if from >= 0 && wantID != zero && res.TopicID != zero && wantID != res.TopicID {
		return res, fmt.Errorf("%s was recreated (id %s, was %s): %w", topic, res.TopicID, wantID, errPositionGone)
	}
	starts, ends, err := cluster.ListOffsets(ctx, adm, false, topic)
	if cluster.TopicMissing(err) {
		return res, errTopicMissing
	}
	if err != nil {
		return res, err
	}
	end, ok := ends.Lookup(topic, partition)
	if !ok {
		return res, fmt.Errorf("topic %s has no partition %d", topic, partition)
	}
	start, _ := starts.Lookup(topic, partition)
	res.Start, res.End = start.Offset, end.Offset
	if from < 0 {
		from = res.Start
	}
	if from < res.Start || from > res.End {
		return res, fmt.Errorf("%s[%d] at offset %d (log %d-%d): %w", topic, partition, from, res.Start, res.End, errPositionGone)
	}
	res.From, res.Next = from, from
	if res.End <= from {
		return res, nil
	}

	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(from)}})
	next := from
	defer func() { res.Next = next }()
	for next < res.End {
		pctx, cancel := context.WithTimeout(ctx, idleEnd)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("reading %s[%d] at offset %d of %d: %w", topic, partition, next, res.End, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if ferr == nil && !errors.Is(err, context.DeadlineExceeded) {
				ferr = err
			}
		})
		if ferr != nil {
			return res, fmt.Errorf("reading %s[%d] at offset %d: %w", topic, partition, next, ferr)
		}
		if fs.NumRecords() == 0 {
			res.Incomplete = true
			return res, nil
		}
		var cbErr error
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= next {
				next = r.Offset + 1
			}
			if cbErr == nil && r.Offset < res.End && !r.Attrs.IsControl() {
				res.Records++
				cbErr = fn(r)
			}
			r.Recycle()
		})
		if cbErr != nil {
			return res, cbErr
		}
	}
	return res, nil
}

// recordPool lends the client the record and decompression buffers of a
// fetch, so that reading a large topic allocates per fetch, not per record.
// It implements kgo.PoolRecords and kgo.PoolDecompressBytes.
type recordPool struct {
	mu    sync.Mutex
	recs  [][]kgo.Record
	bytes [][]byte
}

// poolKeep bounds how many buffers of each kind the pool holds.
const poolKeep = 8

// GetRecords implements kgo.PoolRecords.
func (p *recordPool) GetRecords(n int) []kgo.Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, s := range p.recs {
		if cap(s) >= n {
			p.recs = append(p.recs[:i], p.recs[i+1:]...)
			return s[:0]
		}
	}
	return make([]kgo.Record, 0, n)
}

// PutRecords implements kgo.PoolRecords.
func (p *recordPool) PutRecords(s []kgo.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.recs) < poolKeep {
		p.recs = append(p.recs, s)
	}
}

// GetDecompressBytes implements kgo.PoolDecompressBytes.
func (p *recordPool) GetDecompressBytes(compressed []byte, _ kgo.CompressionCodecType) []byte {
	want := 4 * len(compressed)
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, b := range p.bytes {
		if cap(b) >= want {
			p.bytes = append(p.bytes[:i], p.bytes[i+1:]...)
			return b[:0]
		}
	}
	return make([]byte, 0, want)
}

// PutDecompressBytes implements kgo.PoolDecompressBytes.
func (p *recordPool) PutDecompressBytes(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.bytes) < poolKeep {
		p.bytes = append(p.bytes, b)
	}
}
