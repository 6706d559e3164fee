// Package mm2 holds the byte formats that Apache Kafka MirrorMaker 2 (MM2) writes to its
// internal topics, so that mm2go and stock MM2 can read each other's records.
//
// It mirrors these Java classes (apache/kafka, unchanged since 2.4.0 unless noted):
//
//   - org.apache.kafka.connect.mirror.OffsetSync: records of mm2-offset-syncs.<alias>.internal
//     (Kafka Schema binary, no version header);
//   - org.apache.kafka.connect.mirror.Checkpoint: records of <source>.checkpoints.internal
//     (Kafka Schema binary, value prefixed by an INT16 version, always 0);
//   - org.apache.kafka.connect.mirror.Heartbeat: records of the heartbeats topic
//     (Kafka Schema binary, value prefixed by an INT16 version, always 0);
//   - the Connect worker's offset records (OffsetStorageWriter with a schemaless JsonConverter,
//     i.e. Jackson output) that MirrorSourceConnector, MirrorCheckpointConnector and
//     MirrorHeartbeatConnector store in mm2-offsets.<source>.internal;
//   - org.apache.kafka.common.utils.Utils.murmur2 and the Java producer's default partition
//     choice for keyed records.
//
// The binary encoding is the one of org.apache.kafka.common.protocol.types.Schema: fields
// concatenated in schema order, big-endian integers, STRING = INT16 byte length followed by
// the UTF-8 bytes. Decoders behave like Schema.read: they ignore trailing bytes, accept any
// version number in versioned values (and parse them with the version 0 layout, as MM2 does),
// and reject truncated input with an error naming the field.
//
// Strings are carried as Go strings without UTF-8 validation in the binary formats; Java would
// decode invalid UTF-8 as U+FFFD. See the "Byte-level examples" section of mm2-internals.md for
// worked examples, all of which are golden tests of this package.
package mm2
