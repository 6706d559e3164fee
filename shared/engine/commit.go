package engine

import "time"

// When positions are stored: the one place that decides it.
//
// Positions (and the due offset syncs) are written while copying at least every
// positionFlushInterval (Connect's offset.flush.interval.ms; its default of 60 s would make a
// crash re-copy a minute of work) and every positionFlushBytes acknowledged, so a SIGKILL
// re-copies at most a fraction of a second of work at any rate.
const (
	positionFlushInterval = 500 * time.Millisecond
	positionFlushBytes    = 8 << 20
)

// txnMaxBytes: an exactly-once cycle is also due as soon as one partition's open transaction
// holds this many bytes, so a SIGKILL costs a narrow flow
// at most about this much of a partition's work, as before, rather than up to
// positionFlushBytes of all of them. Without it, TestMirrorSIGKILL's exactly-once runs (2
// partitions, killed once 5 MB reached the target) were killed before their first commit:
// its final run copied 35,203 of the 40,000 records, against 19,868 with the old loop.
const txnMaxBytes = 2 << 20

// commitReason is why a copy stores its positions (a committer cycle, committer.commit). In an
// exactly-once copy a cycle ends the partitions' transactions, each with its position inside
// it (eosCommitter.cycle), and the offset syncs of their records follow the commit.
type commitReason int

const (
	// commitStart: the copy's start, for positions chosen by auto.offset.reset=latest.
	commitStart commitReason = iota
	// commitTick: while copying (the record path, the forwarder, exactly-once), when
	// commitPolicy.due says so; the pending offset syncs go with it.
	commitTick
	// commitRevoke: group mode, partitions revoked (after their records were acknowledged).
	commitRevoke
	// commitFinish: the copy's end, after every record was acknowledged (finish; payload
	// mode's single record too). The final offset syncs follow (syncEmitter.finish).
	commitFinish
	// commitSettle: a copy on serve's shared producers whose records were acknowledged only
	// after it ended.
	commitSettle
)

// Exactly-once copies follow the same policy: a transaction ends at every commitTick (500 ms or
// 8 MiB written, counting the bytes its open transactions hold, or one partition's transaction
// holding txnMaxBytes), at the start (a position alone), and at the finish. Event Hubs tiers without compaction get unchanged positions stored
// again (refreshPositions, decided when a copy is planned).

// commitPolicy decides when a copy's positions are due while it copies: the interval since the
// last commit or the bytes acknowledged (exactly-once: written into transactions) since. One
// per copier, used by its fetch loop only (the forwarder's loop and the record path's, one
// after the other), so a handover keeps its clock.
type commitPolicy struct {
	last  time.Time
	acked int64 // bytes acknowledged at the last commit
	full  bool  // exactly-once: a partition's open transaction reached txnMaxBytes
}

func newCommitPolicy() commitPolicy { return commitPolicy{last: time.Now()} }

// due reports whether positions are due now that acked bytes are acknowledged in all, and if
// so counts this moment as the last commit.
func (p *commitPolicy) due(acked int64) bool {
	if !p.full && time.Since(p.last) < positionFlushInterval && acked-p.acked < positionFlushBytes {
		return false
	}
	p.last, p.acked, p.full = time.Now(), acked, false
	return true
}

// transaction notes the bytes an exactly-once partition's open transaction holds: from
// txnMaxBytes on, a cycle is due.
func (p *commitPolicy) transaction(bytes int64) {
	if bytes >= txnMaxBytes {
		p.full = true
	}
}

// refreshPositions reports whether bursts store the unchanged positions of idle partitions
// again. An offsets topic without compaction (Event Hubs tiers that lack it) drops position
// records after its retention, so a partition idle for longer would lose its position and be
// copied again from its start. Exactly-once runs leave it: a transaction per idle partition
// per burst costs more than it saves.
func (o Options) refreshPositions() bool {
	p := o.TargetProfile
	return p.EventHubs && !p.CompactInternalTopics && !o.ExactlyOnce
}

// eosTransactionTimeout is the transaction timeout of an exactly-once copy's producers; it also
// bounds how long the stored positions are awaited behind open transactions (stableBackoff)
// and how long fencing initializes a transactional id.
const eosTransactionTimeout = time.Minute
