package engine

import (
	"fmt"
	"time"
)

// progress is the copy's Progress now: records and bytes copied, and the records left before
// its partitions' end offsets.
func (c *copier) progress(start time.Time) Progress {
	var lag int64
	c.mu.Lock()
	states := c.states
	c.mu.Unlock()
	for _, st := range states {
		st.mu.Lock()
		lag += st.w.end - max(st.next, st.lastAcked+1)
		st.mu.Unlock()
	}
	return Progress{Records: c.records.Load(), Bytes: c.bytes.Load(), Lag: lag, Elapsed: time.Since(start)}
}

// summary is the outcome of a copy that ended with reason: per partition its records, bytes,
// lag, next offset and why it was given up, if it was (stalled, or owned by another member or
// instance now, whose partitions count no lag here), completed by finishSummary with the
// copy's totals.
func (c *copier) summary(start time.Time, reason string) (Summary, error) {
	parts := make([]partResult, 0, len(c.states))
	c.mu.Lock()
	held, stalled := c.held, c.stalled
	c.mu.Unlock()
	unconfirmed := c.unconfirmed.Load()
	for _, st := range c.states {
		st.mu.Lock()
		unconfirmed += int64(len(st.inflight) - st.head) // produced, never acknowledged
		next := st.next
		if p := st.position(); p >= 0 {
			next = max(next, p+1)
		}
		lag := max(0, st.w.end-next)
		gaveUp := st.gaveUp
		if gaveUp == "" && stalled && lag > 0 && reason == ReasonDone {
			gaveUp = fmt.Sprintf("stalled: the source yielded no record from offset %d to its end offset %d", next, st.w.end)
		}
		if st.ownedElsewhere {
			lag = 0
			gaveUp += "; another instance owns it now"
		}
		if c.bo.Group != "" && held[st.w.tp] != st {
			lag = 0 // revoked before this member left: the group handed it to another
			if gaveUp != "" {
				gaveUp += "; another member of the burst group owns it now"
			}
		}
		parts = append(parts, partResult{tp: st.w.tp, remote: st.w.remote, records: st.records, bytes: st.bytes, lag: lag, next: next, gaveUp: gaveUp})
		st.mu.Unlock()
	}
	err := c.error()
	s := c.e.finishSummary(start, parts, reason, err)
	s.ForwardedRecords = c.forwarded.Load()
	s.ResentBatches = c.resent.Load()
	s.Unconfirmed = unconfirmed
	s.SyncsUnconfirmed = c.syncs.unconfirmedFinals()
	if ns := c.firstAckNS.Load(); ns > 0 {
		s.FirstRecordMS = time.Duration(ns - start.UnixNano()).Milliseconds()
	}
	return s, err
}

// failed is the outcome of a run that err ended before it had partitions to report: a
// Summary without topics, reason ReasonFailed, and err.
func (e *core) failed(start time.Time, err error) (Summary, error) {
	d := time.Since(start)
	return Summary{Topics: map[string]*TopicSummary{}, Duration: d, DurationMS: d.Milliseconds(), FirstRecordMS: -1, TopicsReadyMS: -1,
		Reason: ReasonFailed, Error: err.Error(), ExactlyOnce: e.opts.ExactlyOnce}, err
}

// finishSummary builds a Summary from per-partition results.
func (e *core) finishSummary(start time.Time, parts []partResult, reason string, err error) Summary {
	d := time.Since(start)
	s := Summary{Topics: map[string]*TopicSummary{}, Duration: d, DurationMS: d.Milliseconds(), FirstRecordMS: -1, TopicsReadyMS: -1,
		Reason: reason, ExactlyOnce: e.opts.ExactlyOnce, Partitions: len(parts), parts: parts, Gaps: e.planner.takeGaps(parts)}
	for _, p := range parts {
		ts := s.Topics[p.tp.Topic]
		if ts == nil {
			ts = &TopicSummary{Remote: p.remote}
			s.Topics[p.tp.Topic] = ts
		}
		if p.gaveUp != "" {
			if s.GivenUp == nil {
				s.GivenUp = map[string]string{}
			}
			s.GivenUp[p.tp.String()] = p.gaveUp
		}
		ts.Records += p.records
		ts.Bytes += p.bytes
		ts.Lag += p.lag
		s.Records += p.records
		s.Bytes += p.bytes
		s.Lag += p.lag
	}
	if err != nil {
		s.Error = err.Error()
		s.Reason = ReasonFailed
	}
	return s
}
