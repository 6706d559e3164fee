package engine

import (
	"context"

	"github.com/mm2go/mm2go/shared/metrics"
)

// Metrics hooks (Options.Metrics, a nil-safe *metrics.Recorder). They run once per fetched
// batch and partition, per position flush, or per committed transaction; never per record,
// except for one offset comparison in the producer's promise to find the sampled record.

// reportCopyMetrics adds the records and bytes acknowledged (exactly-once: committed) since the
// last report and sets the lag of every partition (a commit cycle's, either committer).
func reportCopyMetrics(ctx context.Context, m *metrics.Recorder, states []*partLedger) {
	if m == nil {
		return
	}
	for _, st := range states {
		st.mu.Lock()
		dr, db := st.records-st.repRecords, st.bytes-st.repBytes
		st.repRecords, st.repBytes = st.records, st.bytes
		lag := st.w.end - max(st.next, st.lastAcked+1)
		st.mu.Unlock()
		m.Copied(ctx, st.w.tp.Topic, st.w.tp.Partition, dr, db)
		m.Lag(ctx, st.w.tp.Topic, st.w.tp.Partition, lag)
	}
}
