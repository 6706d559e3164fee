package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
)

// positionStore is the position store: the Connect offsets topic on the target (created like a
// Connect worker creates it, read backwards in growing windows, written as MM2 position
// records) and what this process knows to be durable there (known). Bursts, serve's copies and
// planning use it; it never reads or writes anything else.
//
// Ownership: the fields above mu are set by newPositionStore and read-only afterwards. known
// has its own lock (durable.mu, a leaf). mu guards the fields below it: the offsets topic as
// last checked by a reused (serve) copy, and the topic a first start's warm-up is creating.
// They are written by reusedTopic and setCreating and read by reusedTopic and creating. mu is
// never held across network I/O: reusedTopic checks the topic with mu released.
type positionStore struct {
	topic       string // offset.storage.topic
	sourceAlias string
	partitions  int32              // of a created topic (offset.storage.partitions)
	replication int16              // of a created topic (offset.storage.replication.factor)
	configs     map[string]*string // of a created topic: compacted unless the target cannot
	exactlyOnce bool               // reads wait until open transactions are decided
	tgt         *kgo.Client
	tgtAdm      *kadm.Client
	dial        DialFunc // readers of the topic (read_committed consumers)
	log         *slog.Logger

	// known is what this process made durable on the target, per source partition.
	known durable

	mu       sync.Mutex
	parts    int32         // the topic's partitions as last checked by reusedTopic (0: never)
	checked  time.Time     // when reusedTopic last checked it
	creating *pendingTopic // the topic while a first start's warm-up creates it, else nil
}

// newPositionStore returns the position store of a flow whose options have their defaults.
func newPositionStore(opts Options, tgt *kgo.Client, tgtAdm *kadm.Client, dial DialFunc, configs map[string]*string, logger *slog.Logger) *positionStore {
	return &positionStore{
		topic: opts.OffsetStorageTopic, sourceAlias: opts.SourceAlias,
		partitions: opts.OffsetStoragePartitions, replication: opts.OffsetStorageReplicationFactor,
		configs: configs, exactlyOnce: opts.ExactlyOnce,
		tgt: tgt, tgtAdm: tgtAdm, dial: dial, log: logger,
	}
}

// reusedTopic is ensure, checked at most once per reuseTTL (for serve's long-lived copies).
func (ps *positionStore) reusedTopic(ctx context.Context) (int32, bool, error) {
	ps.mu.Lock()
	if ps.parts > 0 && time.Since(ps.checked) < reuseTTL {
		defer ps.mu.Unlock()
		return ps.parts, false, nil
	}
	ps.mu.Unlock()
	parts, fresh, err := ps.ensure(ctx)
	if err == nil {
		ps.mu.Lock()
		ps.parts, ps.checked = parts, time.Now()
		ps.mu.Unlock()
	}
	return parts, fresh, err
}

// setCreating records the offsets topic a first start's warm-up is creating in the background.
func (ps *positionStore) setCreating(p *pendingTopic) {
	ps.mu.Lock()
	ps.creating = p
	ps.mu.Unlock()
}

// creatingTopic returns the offsets topic while a first start's warm-up creates it (no
// position is stored anywhere before it is ready), nil otherwise.
func (ps *positionStore) creatingTopic() *pendingTopic {
	ps.mu.Lock()
	p := ps.creating
	ps.mu.Unlock()
	if p == nil {
		return nil
	}
	if _, done := p.ready(); done || p.failed() != nil {
		return nil
	}
	return p
}

// reuseTTL is how long CopyPartition trusts what it checked on an earlier call (the offsets
// and offset-syncs topics exist, a remote topic has the source's partitions and configs) before
// checking again.
const reuseTTL = 30 * time.Second

// ensure creates the offsets topic like a Connect worker would (compacted,
// OffsetStoragePartitions, OffsetStorageReplicationFactor) and returns its partition count.
func (ps *positionStore) ensure(ctx context.Context) (int32, bool, error) {
	n, created, err := cluster.EnsureTopic(ctx, ps.tgt, ps.topic, ps.partitions, ps.replication, ps.configs)
	if err != nil {
		return 0, false, fmt.Errorf("preparing offsets topic on target (offset.storage.partitions=%d, offset.storage.replication.factor=%d): %w",
			ps.partitions, ps.replication, err)
	}
	return n, created, nil
}
