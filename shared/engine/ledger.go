package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// partLedger is one partition's ledger in an at-least-once copy: what was handed to the sink
// and is in flight (in produce order), what the target acknowledged, and so the position that
// may be stored. Every sink's acknowledgements move it (the record path per record through
// confirm, the forwarder per batch through confirmBatch); the committer reads it (commitPos).
//
// Ownership: w, ctx and ack are set before the ledger is shared and never change (w is the
// plan; where a copy goes on after forwarding is next). done is the fetch loop's (group
// callbacks change it under copier.mu while the loop waits in a poll). Everything under mu is
// shared by the fetch loop (push, seen), the sink's acknowledgements (confirm, confirmBatch)
// and the committer (commitPos), and read by summaries.
type partLedger struct {
	w   *work
	ctx context.Context // the burst's write context (produce, metrics)
	// ack is the producer promise of this partition's records: bound to this ledger once, so
	// an acknowledgement can only ever reach the ledger that tracked its record.
	ack func(*kgo.Record, error)
	// sync is the partition's handle in the offset-sync rules (see syncEmitter.recordAt).
	sync *syncPartition

	mu        sync.Mutex
	inflight  []inflightRec // FIFO of records produced, not yet acknowledged
	head      int
	lastAcked int64 // upstream offset of the newest acknowledged record, -1 none
	lastSeen  int64 // newest upstream offset fetched (data or control record), -1 none
	failed    error
	records   int64
	bytes     int64
	written   int64 // position last handed to the committer's write, -1 none
	// Metrics: upstream offset whose acknowledgement is the latency sample (-1 none), and the
	// records and bytes already reported.
	sampleUp             int64
	repRecords, repBytes int64

	// next is the first offset this copy still has to copy: w.start, moved by the
	// forwarder's handover (the record path starts there).
	next int64

	done bool // fetch side only: reached the end

	// abandoned (under mu) says the partition was revoked from a burst group member that left
	// what it had not sent to the group (copier.revoke): the producer fails those records with
	// kgo.ErrAborting, and they are dropped, not a failure. dropped says one was: the position
	// then stays at the last record acknowledged, whatever was fetched after it.
	abandoned, dropped bool

	// gaveUp says why the copy gave the partition up before its end ("" it did not), under mu:
	// an exactly-once partition another instance took over, or whose commit could not be
	// settled. Summary.GivenUp reports it.
	gaveUp string
	// ownedElsewhere: given up to another instance that fenced this copy's transactional id
	// (exactly-once), under mu. That instance copies the partition now: what is left of it is
	// not this copy's lag, as a partition another member of a burst group took is not.
	ownedElsewhere bool
}

// inflightRec is a record handed to the producer: the record itself (to check that the
// acknowledgement is for it) and its upstream offset (the record's Offset field is the target's
// once acknowledged).
type inflightRec struct {
	rec *kgo.Record
	up  int64
}

// position returns the position that may be stored now: every record up to it was
// acknowledged (control records need no copy). Called with mu held.
func (st *partLedger) position() int64 {
	if st.failed == nil && !st.dropped && st.head == len(st.inflight) {
		return max(st.lastAcked, st.lastSeen)
	}
	return st.lastAcked
}

// push records r, fetched at its upstream offset, as handed to the record sink.
func (st *partLedger) push(r *kgo.Record) {
	st.mu.Lock()
	st.inflight = append(st.inflight, inflightRec{rec: r, up: r.Offset})
	st.lastSeen = r.Offset
	st.mu.Unlock()
}

// seen records that the fetch reached last (a control record, a transaction marker: nothing
// to write).
func (st *partLedger) seen(last int64) {
	st.mu.Lock()
	st.lastSeen = last
	st.mu.Unlock()
}

// confirm records the record sink's answer for r (size bytes; err its failure, if any) and
// returns r's upstream offset, the partition's failure (err or an earlier one), and whether
// r is the latency sample. A record of an abandoned partition that the producer aborted is
// dropped: no failure, no acknowledgement (dropped true). The sink answers a partition's records in produce order, so r must
// be the oldest in flight: otherwise (a record acknowledged twice, or one this ledger never
// tracked) bad says so and the partition fails, so that its position can never move past a
// record whose fate is unknown.
func (st *partLedger) confirm(r *kgo.Record, size int64, err error) (up int64, failed error, sample, dropped bool, bad error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.head == len(st.inflight) || st.inflight[st.head].rec != r {
		bad = fmt.Errorf("internal error: the target producer acknowledged a record of %s that is not the oldest one in flight; no position past %d is stored for it", st.w.tp, st.lastAcked)
		if st.failed == nil {
			st.failed = bad
		}
		return 0, nil, false, false, bad
	}
	up = st.inflight[st.head].up
	st.inflight[st.head] = inflightRec{}
	st.head++
	// The FIFO's memory follows the records in flight, not the largest fetch a partition ever
	// had: emptied, a large one is let go. 1,000 partitions that each had a fetch of some 500
	// records tracked at once kept 13 MB of spent entries otherwise, half the live heap, which
	// the collector scanned on every cycle.
	if st.head == len(st.inflight) {
		st.head = 0
		if cap(st.inflight) > 256 {
			st.inflight = nil
		} else {
			st.inflight = st.inflight[:0] // every entry is cleared already
		}
	} else if st.head >= 256 && st.head*2 >= len(st.inflight) {
		n := copy(st.inflight, st.inflight[st.head:])
		clear(st.inflight[n:])
		st.inflight = st.inflight[:n]
		st.head = 0
	}
	switch {
	case err != nil && st.abandoned && errors.Is(err, kgo.ErrAborting), st.dropped:
		// After a dropped record, one of the partition's later records cannot be counted as
		// written either (franz-go answers in order, so none is): the next holder copies it.
		st.dropped = true
		return up, st.failed, false, true, nil
	case err != nil:
		if st.failed == nil {
			st.failed = err
		}
	case st.failed == nil && !st.dropped:
		st.lastAcked = up
		st.records++
		st.bytes += size
	}
	sample = up == st.sampleUp
	if sample {
		st.sampleUp = -1
	}
	return up, st.failed, sample, false, nil
}

// confirmBatch records that the batch sink wrote a batch of n records (bytes of payload)
// whose last upstream offset is last. The forwarder has one batch in flight per partition,
// so its acknowledgements come in order by construction.
func (st *partLedger) confirmBatch(last int64, n int32, bytes int64) {
	st.mu.Lock()
	st.lastAcked = last
	st.records += int64(n)
	st.bytes += bytes
	st.mu.Unlock()
}

// handOver moves next past what the forwarder had acknowledged (the record path starts
// there) and returns it, and whether the partition reached its end.
func (st *partLedger) handOver() (next int64, finished bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if pos := st.position(); pos >= 0 {
		st.next = max(st.next, pos+1)
	}
	return st.next, st.next >= st.w.end
}

// commitPos is the committer's snapshot of this ledger: the position to store if it moved
// past the last one handed to a write (the plan's initial position when nothing was
// acknowledged yet), which then counts as written; prev is the one written before.
func (st *partLedger) commitPos() (prev, pos int64, ok bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	prev, pos = st.written, st.position()
	if pos < 0 {
		pos = st.w.initPos
	}
	if pos < 0 || pos <= st.written {
		return prev, pos, false
	}
	st.written = pos
	return prev, pos, true
}

// uncommit cancels the write of pos (commitPos's), whose position record failed: the ledger
// counts prev as written again, unless a later write moved past it meanwhile.
func (st *partLedger) uncommit(prev, pos int64) {
	st.mu.Lock()
	if st.written == pos {
		st.written = prev
	}
	st.mu.Unlock()
}
