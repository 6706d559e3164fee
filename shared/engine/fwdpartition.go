package engine

import "github.com/mm2go/mm2go/shared/recordbatch"

// fwdPartition is one partition being forwarded. next is the fetch side's, seq and the
// handover reason the produce side's (read after both ended).
type fwdPartition struct {
	st                *partLedger
	topicID, remoteID [16]byte
	srcLeader         int32
	dstLeader         int32
	next              int64
	seq               int32
	handover          string
	served            bool // the produce side saw the remote partition served
	tries             int  // the produce side: tries of the newest batch written (batchSink)
	// fetchMax is what a fetch asks of the partition: the forwarder's, or the largest batch
	// seen if larger. A broker returns a batch larger than a partition's share whole only to
	// the first partition of an answer (KIP-74); the others get the part that fits.
	fetchMax int32
}

// remoteKey names p's remote partition.
func (p *fwdPartition) remoteKey() servedKey {
	return servedKey{p.st.w.remote, p.st.w.tp.Partition}
}

// fwdItem is a fetched batch on its way to the produce side: a data batch to produce, or a
// control batch (transaction marker) that only moves the position.
type fwdItem struct {
	batch       recordbatch.Batch
	base, last  int64
	control     bool
	joined      bool  // batch is the forwarder's memory (joinItems), reused once acknowledged
	payloadSize int64 // what the record path counts as the records' bytes
	held        int64 // what the item holds of the in-flight budget until it is acknowledged
}

// servedKey names a remote partition.
type servedKey struct {
	topic     string
	partition int32
}
