// Package offsetsync holds the two halves of MirrorMaker 2's offset translation, ported rule
// for rule from apache/kafka's connect/mirror module:
//
//   - Writer decides which replicated records produce an offset sync, like MM2's
//     OffsetSyncWriter (3.9+; the same logic lived in MirrorSourceTask since 3.4.1/3.7):
//     offset.lag.max, upstream gaps, downstream truncation, and "delayed" syncs that are only
//     sent at the next offset commit.
//   - Store keeps, per source partition, the 64-slot array of past syncs of MM2's
//     OffsetSyncStore (KAFKA-14666, with the KAFKA-15202 and KAFKA-15905 follow-ups) and
//     translates a consumer group's upstream offset to a downstream offset the way
//     MirrorCheckpointTask does.
//
// Both are pure in-memory structures: callers produce and consume the offset-syncs topic
// themselves (encoding with package mm2). See section 2.1 and 4 of mm2-internals.md.
package offsetsync
