// Package checkpoint runs one round of MirrorMaker 2's checkpoint job
// (MirrorCheckpointConnector + MirrorCheckpointTask) for one flow
// source->target:
//
//  1. read the offset-syncs topic (partition 0) to its end into an
//     offsetsync.Store, exactly as MM2's OffsetSyncStore does at task start;
//  2. load the checkpoints already in <source>.checkpoints.internal on the
//     target (MM2's CheckpointStore: the last record per group and partition
//     wins; if loading fails the store starts empty and the offset-sync store
//     keeps only the latest sync per partition, as in MM2 3.8+);
//  3. list the source's consumer groups accepted by the group filter, fetch
//     their committed offsets for topics accepted by the topic filter,
//     translate them and write a Checkpoint record for every partition whose
//     checkpoint is "more recent" than the stored one. Groups that already have
//     a checkpoint are fetched even when the listing leaves them out (a broker
//     that has just restarted lists no groups, without an error, until it leads
//     its __consumer_offsets partitions again);
//  4. with sync.group.offsets.enabled, commit the translated offsets to the
//     same groups on the target when they have no active members there,
//     never moving a committed offset backwards.
//
// A Job keeps its stores between rounds (serve mode), like MM2's long-running
// task: later rounds read only the offset syncs and checkpoints written since,
// and read a topic again from the start when it was truncated or recreated.
//
// Translation is MM2's (offsetsync.Store) unless Options.PreciseTranslation
// is set (the checkpoint function's default, MM2_CHECKPOINT_TRANSLATION=precise):
// then the closest recent sync is used when MM2's 64 slots no longer hold it,
// which re-reads fewer records after a failover and never skips one.
//
// The record formats are MM2's (package mm2), so MM2's MirrorClient,
// RemoteClusterUtils.translateOffsets and a real MirrorCheckpointTask read
// what a round writes, and a round reads what real MM2 wrote.
package checkpoint
