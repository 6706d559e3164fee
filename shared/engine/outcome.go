package engine

import "time"

// Exit reasons of a burst (Summary.Reason).
const (
	ReasonDone        = "done"         // every selected partition reached the end seen at start
	ReasonMaxRecords  = "max-records"  // BurstOptions.MaxRecords copied
	ReasonMaxDuration = "max-duration" // BurstOptions.MaxDuration elapsed
	ReasonStopped     = "stopped"      // the context was canceled (signal)
	ReasonFailed      = "failed"       // an error ended the burst
)

// Progress is a running total of a burst.
type Progress struct {
	Records, Bytes int64
	Lag            int64 // records left to copy (of the end offsets seen at start)
	Elapsed        time.Duration
}

// TopicSummary is the outcome of a burst for one source topic.
type TopicSummary struct {
	Remote  string `json:"remote"`
	Records int64  `json:"records"`
	Bytes   int64  `json:"bytes"`
	Lag     int64  `json:"lag"`
}

// Summary is the outcome of a burst.
type Summary struct {
	Records int64 `json:"records"`
	// Bytes counts the keys, values and header keys and values of the records copied; of a
	// batch forwarded compressed (forwarded_records), which is not decompressed, the
	// compressed size of its records.
	Bytes      int64                    `json:"bytes"`
	Partitions int                      `json:"partitions"`
	Lag        int64                    `json:"lag"`
	Topics     map[string]*TopicSummary `json:"topics"`
	Duration   time.Duration            `json:"-"`
	DurationMS int64                    `json:"duration_ms"`
	// FirstRecordMS is the time from the burst's start to the first acknowledged record, -1 if
	// none was copied.
	FirstRecordMS int64 `json:"first_record_ms"`
	// TopicsReadyMS is the time from the burst's start until its remote topics were ready
	// (created, grown or found as they should be, and, for new ones, served), -1 if the burst
	// did not prepare them. It is the part of first_record_ms the target broker spends on new
	// topics.
	TopicsReadyMS int64  `json:"topics_ready_ms"`
	Reason        string `json:"reason"`
	Error         string `json:"error,omitempty"`
	ExactlyOnce   bool   `json:"exactly_once"`
	// ForwardedRecords counts those of the records copied that went in whole batches, as the
	// source stored them (MM2_FORWARD_BATCHES); the others were copied record by record.
	//
	// Options.DecodeRecords turns forwarding off.
	ForwardedRecords int64 `json:"forwarded_records"`
	// ResentBatches counts the forwarded batches the target refused and that were sent again
	// (a leader moving, say). Batches to new topics wait until their partitions are served
	// instead, so a healthy target refuses none.
	ResentBatches int64 `json:"resent_batches,omitempty"`
	// Unconfirmed counts the records sent to the target that it had not acknowledged when the
	// burst ended (a failure, a stop, a budget with the target not answering): the target may
	// hold them, and the next burst copies them again from the stored position. With records,
	// it bounds the duplicates a failed or stopped burst can leave (at-least-once).
	Unconfirmed int64 `json:"unconfirmed,omitempty"`
	// Gaps are the source records lost to the flow that this burst found and copied around
	// (deleted before they were mirrored, or a recreated topic); each as below.
	Gaps []Gap `json:"gaps,omitempty"`
	// GivenUp names the partitions ("topic-partition") the copy gave up before their end, each
	// with why: an exactly-once partition another instance took over ("fenced: ..."), or whose
	// commit could not be settled ("not settled: ..."), or a partition whose source yielded no
	// record before its end offset ("stalled: ..."). Their records left count in `lag`, unless
	// another member of the burst group, or the instance that took an exactly-once partition
	// over, owns the partition now (said after the why); a `mirror run` whose burst is `done`
	// with `lag` exits 3.
	GivenUp map[string]string `json:"given_up,omitempty"`
	// SyncsUnconfirmed names the partitions ("topic-partition") whose final offset sync the
	// offset-syncs topic had not acknowledged within the bounded wait at the burst's end (a
	// throttled or unanswering syncs cluster). The copy and its positions are complete; until a
	// later burst writes a sync for them, checkpoints translate their group offsets through an
	// earlier one.
	SyncsUnconfirmed []string `json:"offset_syncs_unconfirmed,omitempty"`

	parts []partResult // per partition, for the calls sharing a copy
}

// MoreToDo reports whether records were left to copy.
func (s Summary) MoreToDo() bool { return s.Lag > 0 }

// partResult is the outcome for one partition.
type partResult struct {
	tp             TP
	remote         string
	records, bytes int64
	lag            int64
	next           int64 // next source offset to copy as stored; -1 unknown
	gaveUp         string
}
