package mirrorevents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/engine"
	"github.com/mm2go/mm2go/shared/metrics"
	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/shared/offsetsync"
)

// EngineCopier adapts a shared/engine Engine to Copier. Fetch-mode copies and bursts are the
// engine's (CopyPartition, Burst); payload-mode writes use the same formats the engine uses
// (remote topic per the policy, Connect position records in the offsets topic, MM2 offset
// syncs via offsetsync.Writer).
type EngineCopier struct {
	e     *engine.Engine
	dial  engine.DialFunc
	log   *slog.Logger
	burst engine.BurstOptions
	// metrics, if set, counts bursts and payload writes (the engine counts its own copies).
	metrics *metrics.Recorder

	mu       sync.Mutex
	src      *kgo.Client // source metadata/end offsets
	tgt      *kgo.Client // target producer (payload records, positions) and metadata
	syncCl   *kgo.Client // offset-syncs producer (source or target side)
	syncs    *offsetsync.Writer
	promoted time.Time
	prepared map[string]bool // remote topics prepared in this process
	nparts   int32           // partitions of the offsets topic once seen (never changes: keys are hashed on it)
}

// NewEngineCopier returns a Copier over e. dial must be the engine's dial function; bo bounds
// bursts.
func NewEngineCopier(e *engine.Engine, dial engine.DialFunc, bo engine.BurstOptions, logger *slog.Logger) *EngineCopier {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &EngineCopier{e: e, dial: dial, log: logger, burst: bo,
		syncs: offsetsync.NewWriter(e.Options().OffsetLagMax), prepared: map[string]bool{}}
}

// Close releases the copier's own clients (not the engine).
func (c *EngineCopier) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range []*kgo.Client{c.src, c.tgt, c.syncCl} {
		if cl != nil {
			cl.Close()
		}
	}
	c.src, c.tgt, c.syncCl = nil, nil, nil
}

func (c *EngineCopier) clients(ctx context.Context) (src, tgt *kgo.Client, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.src == nil {
		if c.src, err = c.dial(ctx, engine.Source); err != nil {
			return nil, nil, fmt.Errorf("connecting to source cluster: %w", err)
		}
	}
	if c.tgt == nil {
		if c.tgt, err = c.dial(ctx, engine.Target, kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerLinger(0), kgo.RequiredAcks(kgo.AllISRAcks())); err != nil {
			return nil, nil, fmt.Errorf("connecting to target cluster: %w", err)
		}
	}
	return c.src, c.tgt, nil
}

// Selected reports whether the engine replicates topic t.
func (c *EngineCopier) Selected(t string) bool { return c.e.Selected(t) }

// Ready checks that both clusters answer a metadata request.
func (c *EngineCopier) Ready(ctx context.Context) error {
	src, tgt, err := c.clients(ctx)
	if err != nil {
		return err
	}
	if err := src.Ping(ctx); err != nil {
		return fmt.Errorf("source cluster unreachable: %w", err)
	}
	if err := tgt.Ping(ctx); err != nil {
		return fmt.Errorf("target cluster unreachable: %w", err)
	}
	return nil
}

// offsetsPartitions returns the partition count of the offsets topic, 0 if it does not exist.
func (c *EngineCopier) offsetsPartitions(ctx context.Context, tgt *kgo.Client) (int32, error) {
	c.mu.Lock()
	n := c.nparts
	c.mu.Unlock()
	if n > 0 {
		return n, nil
	}
	topic := c.e.OffsetsTopic()
	td, err := kadm.NewClient(tgt).ListTopics(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("describing offsets topic %q on target: %w", topic, err)
	}
	d, ok := td[topic]
	if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return 0, nil
	}
	if d.Err != nil {
		return 0, fmt.Errorf("describing offsets topic %q on target: %w", topic, d.Err)
	}
	n = int32(len(d.Partitions))
	c.mu.Lock()
	c.nparts = n
	c.mu.Unlock()
	return n, nil
}

// Position reads the stored position of a partition.
func (c *EngineCopier) Position(ctx context.Context, topic string, partition int32) (int64, bool, error) {
	if c.e.NoPositionsYet() {
		return 0, false, nil
	}
	_, tgt, err := c.clients(ctx)
	if err != nil {
		return 0, false, err
	}
	n, err := c.offsetsPartitions(ctx, tgt)
	if err != nil || n == 0 {
		return 0, false, err
	}
	tp := engine.TP{Topic: topic, Partition: partition}
	pos, err := c.e.ReadPositions(ctx, []engine.TP{tp}, n)
	if err != nil {
		return 0, false, fmt.Errorf("reading position of %s: %w", tp, err)
	}
	last, ok := pos[tp]
	if !ok {
		return 0, false, nil
	}
	// A position beyond the source partition's end belongs to an earlier incarnation of the
	// topic (deleted and recreated, or truncated): it says nothing about these offsets. The
	// engine starts such a partition over; treating the position as absent makes the caller
	// ask it to copy.
	end, err := c.sourceEnd(ctx, topic, partition)
	if err != nil {
		return 0, false, err
	}
	if last+1 > end {
		c.log.Warn("stored position is beyond the source partition's end (topic recreated?); ignoring it",
			"topic", topic, "partition", partition, "position", last, "end", end)
		return 0, false, nil
	}
	return last + 1, true, nil
}

// sourceEnd returns the end offset of a source partition as the engine's copy sees it (the
// last stable offset with exactly-once, the high watermark otherwise).
func (c *EngineCopier) sourceEnd(ctx context.Context, topic string, partition int32) (int64, error) {
	src, _, err := c.clients(ctx)
	if err != nil {
		return 0, err
	}
	adm := kadm.NewClient(src)
	var lo kadm.ListedOffsets
	if c.e.Options().ExactlyOnce {
		lo, err = adm.ListCommittedOffsets(ctx, topic)
	} else {
		lo, err = adm.ListEndOffsets(ctx, topic)
	}
	if err != nil {
		return 0, fmt.Errorf("listing end offsets of source topic %q: %w", topic, err)
	}
	o, ok := lo.Lookup(topic, partition)
	if !ok {
		if len(lo[topic]) > 0 {
			return 0, Permanent(fmt.Errorf("source topic %q has no partition %d", topic, partition))
		}
		return 0, fmt.Errorf("source topic %q: no end offsets (does it exist?)", topic)
	}
	if o.Err != nil {
		if errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
			return 0, fmt.Errorf("source topic %q partition %d: %w", topic, partition, o.Err)
		}
		return 0, fmt.Errorf("end offset of source %s[%d]: %w", topic, partition, o.Err)
	}
	return o.Offset, nil
}

// CopyThrough copies the partition through its end as seen now, which must lie beyond offset: a
// record KafkaSource delivered has an offset below the end it read, so an offset at or beyond
// the end is not a record of this partition (a forged event, or a recreated topic) and is
// permanent.
func (c *EngineCopier) CopyThrough(ctx context.Context, topic string, partition int32, offset int64) (int64, error) {
	end, err := c.sourceEnd(ctx, topic, partition)
	if err != nil {
		return 0, err
	}
	if offset >= end {
		return 0, Permanent(fmt.Errorf("offset %d is at or beyond the end (%d) of source partition %s[%d]: no such record (topic recreated?)", offset, end, topic, partition))
	}
	sum, err := c.e.CopyPartition(ctx, topic, partition, end-1)
	if err != nil {
		return 0, fmt.Errorf("copying %s[%d] through %d: %w", topic, partition, end-1, err)
	}
	if sum.Lag > 0 || sum.Reason != engine.ReasonDone {
		// Not done (stopped early): what it stored is only known from the position.
		return 0, fmt.Errorf("copy of %s[%d] stopped (%s) with %d records left before offset %d", topic, partition, sum.Reason, sum.Lag, end)
	}
	return end, nil
}

// Burst runs one engine burst.
func (c *EngineCopier) Burst(ctx context.Context) (any, error) {
	sum, err := c.e.Burst(ctx, c.burst)
	c.metrics.Burst(ctx, sum.Reason, sum.Duration)
	if err != nil {
		c.metrics.Error(ctx, metrics.ErrorKind(err))
		return sum, err
	}
	return sum, nil
}

// WriteAt writes one payload record, then its offset sync, then the position rec.Offset, each
// acknowledged (acks=all) before the next, as the engine's copy does.
func (c *EngineCopier) WriteAt(ctx context.Context, topic string, partition int32, rec *kgo.Record) error {
	src, tgt, err := c.clients(ctx)
	if err != nil {
		return err
	}
	opts := c.e.Options()
	remote := opts.Policy.FormatRemoteTopic(opts.SourceAlias, topic)
	if err := c.prepare(ctx, src, topic, remote); err != nil {
		return err
	}
	nparts, err := c.offsetsPartitions(ctx, tgt)
	if err != nil {
		return err
	}
	if nparts == 0 {
		return fmt.Errorf("offsets topic %q does not exist on the target", c.e.OffsetsTopic())
	}
	upstream := rec.Offset
	out := &kgo.Record{Topic: remote, Partition: partition, Key: rec.Key, Value: rec.Value, Headers: rec.Headers, Timestamp: rec.Timestamp}
	res := tgt.ProduceSync(ctx, out)
	if err := res.FirstErr(); err != nil {
		return fmt.Errorf("writing %s[%d]@%d to %s on target: %w", topic, partition, upstream, remote, err)
	}
	if err := c.sync(ctx, topic, partition, upstream, out.Offset); err != nil {
		return err
	}
	c.metrics.Copied(ctx, topic, partition, 1, int64(len(out.Key)+len(out.Value)))
	key := mm2.SourceOffsetKey(opts.SourceAlias, topic, partition)
	pos := &kgo.Record{Topic: c.e.OffsetsTopic(), Partition: mm2.KeyPartition(key, nparts), Key: key, Value: mm2.OffsetValue(upstream)}
	if err := tgt.ProduceSync(ctx, pos).FirstErr(); err != nil {
		return fmt.Errorf("writing position %d of %s[%d] to %q: %w", upstream, topic, partition, c.e.OffsetsTopic(), err)
	}
	return nil
}

// prepare creates the remote topic once per process (the engine's PrepareTargets).
func (c *EngineCopier) prepare(ctx context.Context, src *kgo.Client, topic, remote string) error {
	c.mu.Lock()
	done := c.prepared[topic]
	c.mu.Unlock()
	if done {
		return nil
	}
	td, err := kadm.NewClient(src).ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("describing source topic %q: %w", topic, err)
	}
	d, ok := td[topic]
	if !ok || d.Err != nil {
		return fmt.Errorf("describing source topic %q: %v", topic, d.Err)
	}
	if err := c.e.PrepareTargets(ctx, []engine.Topic{{Source: topic, Remote: remote, Partitions: int32(len(d.Partitions))}}); err != nil {
		return err
	}
	c.mu.Lock()
	c.prepared[topic] = true
	c.mu.Unlock()
	return nil
}

// sync applies MM2's OffsetSyncWriter rules to one written record and writes the due syncs.
// Delayed syncs are promoted at most once a second (MM2 promotes them on each offset commit).
func (c *EngineCopier) sync(ctx context.Context, topic string, partition int32, upstream, downstream int64) error {
	c.mu.Lock()
	if c.syncCl == nil {
		_, side := c.e.OffsetSyncsTopic()
		cl, err := c.dial(ctx, side, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
		if err != nil {
			c.mu.Unlock()
			return fmt.Errorf("connecting offset-syncs producer: %w", err)
		}
		c.syncCl = cl
	}
	cl := c.syncCl
	c.syncs.Record(topic, partition, upstream, downstream)
	if time.Since(c.promoted) >= time.Second {
		c.syncs.PromoteDelayed()
		c.promoted = time.Now()
	}
	due := c.syncs.TakePending()
	c.mu.Unlock()
	if len(due) == 0 {
		return nil
	}
	name, _ := c.e.OffsetSyncsTopic()
	recs := make([]*kgo.Record, 0, len(due))
	for _, sy := range due {
		k, v, err := sy.Encode()
		if err != nil {
			return fmt.Errorf("encoding offset sync %v: %w", sy, err)
		}
		recs = append(recs, &kgo.Record{Topic: name, Partition: 0, Key: k, Value: v})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("writing offset syncs to %q: %w", name, err)
	}
	return nil
}
