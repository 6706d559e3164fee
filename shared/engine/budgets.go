package engine

// The in-flight budget (bytes read from the source, not yet acknowledged by the target) when
// Options.MaxBufferedBytes is 0. A burst over few partitions needs room for a full batch
// (cluster.DefaultMaxRequestSize, 1 MiB) per partition: with 2 MiB over 8 partitions every
// batch waited out the producer's linger, and two 1 MB records at a time were in flight (1M
// x 512 B: 2.6-2.9 s at 2 MiB, 1.7-2.1 s at 8 MiB; 1,000 x 1 MB: 4.6 s, 2.1 s). A wide burst
// gains no rate from more: its batches stay small whatever the budget, and the collector pays
// for the larger live heap (100 partitions: 2.6-2.9 CPU s/GB at 2 MiB, 3.6 at 8 MiB; 1,000:
// 8.1-9.0 against 12-13). docs/performance.md has the runs.
const (
	narrowInflightBytes = 8 << 20
	wideInflightBytes   = 2 << 20
	narrowPartitions    = 16
)

// inflightBudget returns the in-flight byte bound of a burst over partitions: the configured
// MaxBufferedBytes, else narrowInflightBytes up to narrowPartitions partitions, then
// narrowInflightBytes × narrowPartitions / partitions, never below wideInflightBytes.
//
// An exactly-once burst gets narrowInflightBytes however wide it is: it holds every record of
// an open transaction until the commit (up to positionFlushBytes of them between two cycles,
// acknowledged or not), so a larger bound on the unacknowledged ones adds nothing to its heap,
// while at wideInflightBytes its 64 transactional producers waited for acknowledgements before
// their partitions' ends could commit (1,000 partitions x 200 records, 5 interleaved pairs on
// idle brokers: median 7.69 s at 2 MiB, 6.40 s at 8 MiB, every pair faster).
func (o Options) inflightBudget(partitions int) int64 {
	if o.MaxBufferedBytes > 0 {
		return int64(o.MaxBufferedBytes)
	}
	if partitions <= narrowPartitions || o.ExactlyOnce {
		return narrowInflightBytes
	}
	return max(narrowInflightBytes*narrowPartitions/int64(partitions), wideInflightBytes)
}

// startInflightBytes bounds the bytes in flight of a narrow burst (up to narrowPartitions
// partitions) until the target acknowledged its first record. Let loose at once, a burst over
// 8 partitions sends a first produce request of up to 8 MiB (a full batch per partition) to a
// topic it has just created. In test/perf runs on 1M x 512 B the first acknowledgement came
// after 127-281 ms (median 150) without this bound and 70-194 ms (median 84) with it; the full
// bench, noisier, did not show the gain. A wide burst starts at its budget: its first 256 KiB
// are the records of the first few partitions fetched, and on new remote topics (which a wide
// burst does not wait to be served, see awaitServing) those partitions may be the last ones
// the broker serves. Held to 256 KiB, 1,000 new partitions waited 475 ms after their topics
// were ready for three partitions of one topic to be served, the other 997 idle behind them
// (test/perf, franz-go debug log).
const startInflightBytes = 256 << 10

// sharedInflightBudget is the bound of all concurrent calls on the engine's long-lived
// producers together (CopyPartition, mirror serve): the wide budget, as those calls usually
// cover many partitions at once.
func (o Options) sharedInflightBudget() int64 {
	if o.MaxBufferedBytes > 0 {
		return int64(o.MaxBufferedBytes)
	}
	return wideInflightBytes
}

// producerBufferedBytes bounds a record producer's buffer: twice the largest in-flight budget
// its copies use plus room for one batch per partition being assembled. The copier's own
// budget binds first.
func (o Options) producerBufferedBytes() int {
	return int(2*max(int64(o.MaxBufferedBytes), narrowInflightBytes)) + 16<<20
}

// maxBufferedRecords caps records buffered in a producer; the byte bound (the in-flight
// budget) normally binds first. franz-go also caps its queue of promises waiting to be called at
// this number (at least 8192); v1.22.3 grows that queue as needed, allocating none of it up front.
const maxBufferedRecords = 1 << 17

// The fetch budget (fetch.max.bytes) when Options.FetchMaxBytes is 0: fetchBytesPerPartition
// per partition consumed, between minAutoFetchBytes and maxAutoFetchBytes. A broker answers a
// fetch with at most partitionFetchBudget of each partition, and every fetch request and
// response lists every partition consumed, so a wide flow at 512 KiB paid that per-partition
// cost for every two partitions' data (1,000 partitions: 8.2-9.0 CPU s/GB at 512 KiB, 5.3 at
// 2 MiB, 4.7 at 4 MiB; 8 MiB ran into the memory limit at 11-12). A narrow flow keeps the
// small fetch: its in-flight budget is the larger one.
const (
	minAutoFetchBytes      = 512 << 10
	maxAutoFetchBytes      = 4 << 20
	fetchBytesPerPartition = 4 << 10
	minPartitionFetchBytes = 256 << 10
)

// partitionFetchBudget returns the max.partition.fetch.bytes that goes with fetch.max.bytes b:
// a sixteenth of it, at least minPartitionFetchBytes (or b if smaller) and at most Kafka's 1 MiB
// default, so a large configured fetch is not held to a few partitions' worth.
func partitionFetchBudget(b int32) int32 {
	return min(max(b/16, minPartitionFetchBytes), b, 1<<20)
}

// fetchBudget returns the fetch.max.bytes of a consumer over partitions.
func (o Options) fetchBudget(partitions int) int32 {
	if o.FetchMaxBytes > 0 {
		return o.FetchMaxBytes
	}
	return int32(min(max(partitions*fetchBytesPerPartition, minAutoFetchBytes), maxAutoFetchBytes))
}

// throttledInflightBytes bounds the bytes in flight of a copy while the target throttles its
// records' producer (a produce quota, see throttleWatch): 8 MiB in flight is 4 s of a 2 MiB/s
// quota, and a burst group member that joins waits until the holder's records in flight are
// written before it gets its share (8 partitions, 2 members joining 4 s apart under a 2 MiB/s
// quota per client id: the joiner waited 4.7 s with 8 MiB, 1.8 s with 1 MiB, the copy as fast).
// 1 MiB keeps a quota of that size saturated.
const throttledInflightBytes = 1 << 20
