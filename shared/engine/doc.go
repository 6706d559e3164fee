// Package engine is mm2go's replication engine: the work MirrorMaker 2's MirrorSourceConnector
// and MirrorSourceTask do, as short bursts that start from and leave behind MM2's own state.
//
// One Engine serves one flow source->target. A burst (Engine.Burst) or a single-partition copy
// (Engine.CopyPartition):
//
//   - selects source topics like MirrorSourceConnector (topic filter, plus "heartbeats" topics
//     when heartbeats replication is on, minus internal topics and replication cycles), creates
//     the remote topics on the target with the same partition count and the source's
//     non-default topic configs, grows them when the source grew, and optionally syncs changed
//     configs (incrementalAlterConfigs);
//   - reads each source partition's position from MM2's Connect offsets topic
//     (mm2-offsets.<source>.internal on the target: key ["MirrorSourceConnector",{...}], value
//     {"offset":<last copied upstream offset>}) reading backwards from the end of only the
//     offsets-topic partitions that hold the wanted keys, and resumes at position+1;
//   - copies records byte for byte (key, value, headers, timestamp; nil and empty kept apart)
//     into the same partition number of the remote topic;
//   - writes positions back (one record per partition per flush, in the partition a Connect
//     worker's producer would choose) and offset syncs (MM2's OffsetSyncWriter rules) to the
//     offset-syncs topic, both only after the records they describe were acknowledged.
//
// So MM2 can take over from mm2go, and mm2go from MM2, without re-copying or losing records.
//
// # Delivery guarantees
//
// At-least-once always: a position is written only after every record up to it was
// acknowledged by the target (acks=all), so a crash re-copies at most the records copied since
// the last position flush, never skips one.
//
// Exactly-once (Options.ExactlyOnce) holds for readers of the remote topics that use
// isolation.level=read_committed, per source partition: the source is read read_committed, each
// source partition has its own transactional producer (transactional id
// "mm2go-<source>-<target>-<topic>-<partition>"), and the records copied since a partition's
// last commit plus its position record commit in one transaction (a commit cycle every 500 ms
// or 8 MiB written, and at the end: the at-least-once copy's loop and commit policy, with a
// transactional sink). The position is read only after
// every partition's transactional id was initialized by this burst, which fences (aborts the
// open transaction of) any older instance still copying it, and after the offsets partition's
// last stable offset reached its high watermark (no undecided position hides behind an open
// transaction). So two overlapping or successive runs never commit the same record twice,
// even after a SIGKILL mid-transaction.
// It does not hold for read_uncommitted readers of the target (they may see aborted copies),
// across partitions (there is no ordering or atomicity between partitions), for offset syncs
// (written afterwards by a separate non-transactional producer, as MM2 does; a crash may lose
// the newest syncs, which only makes checkpoints coarser), or if a non-transactional writer
// (MM2 in at-least-once mode, another tool) writes the same remote partition.
package engine
