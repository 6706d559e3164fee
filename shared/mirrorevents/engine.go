package mirrorevents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/engine"
	"github.com/mm2go/mm2go/shared/metrics"
)

// EngineCopier adapts a shared/engine Engine to Copier. Every write, fetch mode's copies,
// payload mode's records and bursts alike, is the engine's (CopyThrough, WriteRecordAt, Burst):
// one write path for records, positions and offset syncs.
type EngineCopier struct {
	e     *engine.Engine
	dial  engine.DialFunc
	log   *slog.Logger
	burst engine.BurstOptions
	// metrics, if set, counts bursts (the engine counts its own copies).
	metrics *metrics.Recorder

	mu       sync.Mutex
	src, tgt *kgo.Client // readiness checks only
}

// NewEngineCopier returns a Copier over e. dial must be the engine's dial function; bo bounds
// bursts.
func NewEngineCopier(e *engine.Engine, dial engine.DialFunc, bo engine.BurstOptions, logger *slog.Logger) *EngineCopier {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &EngineCopier{e: e, dial: dial, log: logger, burst: bo}
}

// Close releases the copier's own clients (not the engine).
func (c *EngineCopier) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range []*kgo.Client{c.src, c.tgt} {
		if cl != nil {
			cl.Close()
		}
	}
	c.src, c.tgt = nil, nil
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
		if c.tgt, err = c.dial(ctx, engine.Target); err != nil {
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

// Position returns the partition's next offset to copy (engine.Next).
func (c *EngineCopier) Position(ctx context.Context, topic string, partition int32) (int64, bool, error) {
	return c.e.Next(ctx, topic, partition)
}

// CopyThrough copies the partition through at least offset (engine.CopyThrough); an offset at
// or beyond the partition's end is no record of it (a forged event, or a recreated topic) and
// is permanent.
func (c *EngineCopier) CopyThrough(ctx context.Context, topic string, partition int32, offset int64) (int64, error) {
	next, err := c.e.CopyThrough(ctx, topic, partition, offset)
	if errors.Is(err, engine.ErrNoSuchRecord) {
		return 0, Permanent(err)
	}
	return next, err
}

// Topics returns the partition count of every source topic (a metadata request for all
// topics); topics the metadata answers with an error are left out.
func (c *EngineCopier) Topics(ctx context.Context) (map[string]int32, error) {
	src, _, err := c.clients(ctx)
	if err != nil {
		return nil, err
	}
	md, err := kadm.NewClient(src).Metadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("source metadata: %w", err)
	}
	counts := make(map[string]int32, len(md.Topics))
	for t, td := range md.Topics {
		if td.Err == nil {
			counts[t] = int32(len(td.Partitions))
		}
	}
	return counts, nil
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

// WriteAt writes one payload record with its offset sync and position (engine.WriteRecordAt);
// an offset at or beyond the source partition's end is no record of it and is permanent.
func (c *EngineCopier) WriteAt(ctx context.Context, topic string, partition int32, rec *kgo.Record) error {
	err := c.e.WriteRecordAt(ctx, topic, partition, rec)
	if errors.Is(err, engine.ErrNoSuchRecord) {
		return Permanent(err)
	}
	return err
}
