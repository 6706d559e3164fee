package engine

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"
)

// sink is where a copy writes to the target: one interface, three implementations. The record
// sink (recordSink: franz-go's idempotent producer; bursts, serve's copies, payload mode), the
// batch sink (batchSink: the forwarder's produce lanes, whole source batches) and the
// exactly-once committer (eosCommitter, eos.go: records and their position in one transaction
// per partition). A copy hands a sink one partition's work at a time (a fetched run of records
// or a batch), never one call per record; the sink's acknowledgements (exactly-once: commits)
// move that partition's ledger (partLedger) and feed the offset-sync rules, and every sink
// meets errors through classify and retries through backoff. Positions are stored by the
// committer (record and batch sinks) or inside the transaction (eosCommitter).
type sink interface {
	// write hands in, one partition's work, to the target for st. It returns the records
	// handed over, and an error if it stopped before all were: errSinkStopped when ctx ended,
	// otherwise what the copy or the partition ends with.
	write(ctx context.Context, st *partLedger, in sinkInput) (int64, error)
	// flush waits until everything the sink was handed is answered, or ctx ends.
	flush(ctx context.Context) error
}

// sinkInput is one partition's work for a sink: records for the record sink and the
// exactly-once committer (ended: they reach the partition's end), a batch for the batch sink.
type sinkInput struct {
	recs  []*kgo.Record
	ended bool

	part *fwdPartition // batchSink: the partition and the batch
	item *fwdItem
}

// errSinkStopped: the sink's context ended while it waited (for room under the in-flight
// bound).
var errSinkStopped = errors.New("sink stopped")

// fetchGate decides which partitions a copy's source consumer fetches, where the copy's
// writer holds something per partition that must be bounded (exactly-once: eosCommitter, a
// transactional producer per partition being copied). admit returns where the consumer starts
// (of offs, the copy's start offsets); attach hands it the consumer, to which it adds
// partitions it admits later and on which it pauses or moves partitions; waiting says
// partitions are being admitted (an empty poll is then no stall).
type fetchGate interface {
	admit(ctx context.Context, offs map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error)
	attach(cons *kgo.Client)
	waiting() bool
}
