package engine

import "time"

// BurstOptions bound one burst. Zero values mean "no limit".
type BurstOptions struct {
	// MaxDuration stops fetching after this long; positions are then committed.
	MaxDuration time.Duration
	// MaxRecords stops after copying this many records.
	MaxRecords int64
	// Group, if set, is a source consumer group used only to split partitions between several
	// concurrent bursts (never to store offsets): each burst copies the partitions the group
	// assigns it; a revoked partition's in-flight records are finished and its position
	// stored before the group moves on. Empty: this burst takes every partition at once,
	// without joining anything. Ignored in exactly-once mode.
	Group string
	// Progress, if set, is called about once a second with the running totals.
	Progress func(Progress)
	// Grace bounds finishing in-flight writes and committing positions after fetching
	// stopped; 0 means 10s.
	Grace time.Duration

	// fetched, if set, is called once the copy loop has ended and, outside a burst group, the
	// source consumer is closed (shared copies free their loop then). A group member keeps its
	// consumer until it leaves, and may copy again before that (copier.reopen).
	fetched func()
	// settled, if set, is called once no record of the copy is in flight any more and the
	// positions of those acknowledged are stored: at its end, or later if the target left
	// records unacknowledged past the grace period (shared producers retry them; a copy of the
	// same partitions started before they settle would write them a second time).
	settled func()
	// leaving, if set, is called when a burst group member has decided that it is done and is
	// about to leave the group.
	leaving func()
}
