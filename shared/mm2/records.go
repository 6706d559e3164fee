package mm2

import "fmt"

// recordVersion is the only version of the Checkpoint and Heartbeat value schemas
// (Checkpoint.VERSION and Heartbeat.VERSION in MM2).
const recordVersion int16 = 0

// OffsetSync is one record of MM2's offset-syncs topic (Java class OffsetSync): the source
// record at UpstreamOffset of Topic/Partition was written to the target partition at
// DownstreamOffset.
//
// Topic is the upstream (source-cluster) topic name, not the renamed remote topic. MM2 always
// writes offset syncs to partition 0 of the offset-syncs topic.
type OffsetSync struct {
	Topic            string // source topic name
	Partition        int32  // partition number, the same on both clusters
	UpstreamOffset   int64  // offset of the record in the source partition
	DownstreamOffset int64  // offset the same record got in the target partition
}

// String formats s like MM2's OffsetSyncFormatter, e.g.
// "OffsetSync{topicPartition=orders-3, upstreamOffset=1000, downstreamOffset=990}".
func (s OffsetSync) String() string {
	return fmt.Sprintf("OffsetSync{topicPartition=%s-%d, upstreamOffset=%d, downstreamOffset=%d}",
		s.Topic, s.Partition, s.UpstreamOffset, s.DownstreamOffset)
}

// Encode returns the record key (topic STRING, partition INT32) and value
// (upstreamOffset INT64, offset INT64, no version header). It fails only if Topic is longer
// than 32767 bytes.
func (s OffsetSync) Encode() (key, value []byte, err error) {
	kw := schemaWriter{what: "offset sync key", b: make([]byte, 0, 2+len(s.Topic)+4)}
	kw.string("topic", s.Topic)
	kw.int32(s.Partition)
	if key, err = kw.result(); err != nil {
		return nil, nil, err
	}
	vw := schemaWriter{what: "offset sync value", b: make([]byte, 0, 16)}
	vw.int64(s.UpstreamOffset)
	vw.int64(s.DownstreamOffset)
	value, err = vw.result()
	return key, value, err
}

// DecodeOffsetSync parses an offset-syncs record. Trailing bytes after either struct are
// ignored, as MM2 does; truncated input or a negative string length is an error naming the
// field.
func DecodeOffsetSync(key, value []byte) (OffsetSync, error) {
	var s OffsetSync
	kr := schemaReader{what: "offset sync key", b: key}
	s.Topic = kr.string("topic")
	s.Partition = kr.int32("partition")
	if kr.err != nil {
		return OffsetSync{}, kr.err
	}
	vr := schemaReader{what: "offset sync value", b: value}
	s.UpstreamOffset = vr.int64("upstreamOffset")
	s.DownstreamOffset = vr.int64("offset")
	if vr.err != nil {
		return OffsetSync{}, vr.err
	}
	return s, nil
}

// Checkpoint is one record of MM2's checkpoints topic (Java class Checkpoint): consumer group
// Group had committed UpstreamOffset on the source cluster, which translates to
// DownstreamOffset on the target cluster.
//
// Topic is the target-side (renamed) topic name, e.g. "A.orders". Metadata is the source
// commit's metadata; Java never writes null there, and neither can this type ("" when none).
type Checkpoint struct {
	Group            string // consumer group id, the same on both clusters
	Topic            string // target (remote) topic name
	Partition        int32  // partition number
	UpstreamOffset   int64  // committed offset on the source cluster
	DownstreamOffset int64  // translated offset on the target cluster
	Metadata         string // the source commit's metadata string
}

// String formats c like MM2's CheckpointFormatter, e.g. "Checkpoint{consumerGroupId=g1,
// topicPartition=A.orders-3, upstreamOffset=1005, downstreamOffset=991, metadata=}".
func (c Checkpoint) String() string {
	return fmt.Sprintf("Checkpoint{consumerGroupId=%s, topicPartition=%s-%d, upstreamOffset=%d, downstreamOffset=%d, metadata=%s}",
		c.Group, c.Topic, c.Partition, c.UpstreamOffset, c.DownstreamOffset, c.Metadata)
}

// Encode returns the record key (group STRING, topic STRING, partition INT32) and value
// (version INT16 = 0, upstreamOffset INT64, offset INT64, metadata STRING). It fails only if a
// string is longer than 32767 bytes.
func (c Checkpoint) Encode() (key, value []byte, err error) {
	kw := schemaWriter{what: "checkpoint key", b: make([]byte, 0, 2+len(c.Group)+2+len(c.Topic)+4)}
	kw.string("group", c.Group)
	kw.string("topic", c.Topic)
	kw.int32(c.Partition)
	if key, err = kw.result(); err != nil {
		return nil, nil, err
	}
	vw := schemaWriter{what: "checkpoint value", b: make([]byte, 0, 2+16+2+len(c.Metadata))}
	vw.int16(recordVersion)
	vw.int64(c.UpstreamOffset)
	vw.int64(c.DownstreamOffset)
	vw.string("metadata", c.Metadata)
	if value, err = vw.result(); err != nil {
		return nil, nil, err
	}
	return key, value, nil
}

// DecodeCheckpoint parses a checkpoints record. Like MM2 it reads the version and then parses
// the value with the version 0 layout whatever the version says; trailing bytes are ignored.
// Truncated input or a negative string length is an error naming the field.
func DecodeCheckpoint(key, value []byte) (Checkpoint, error) {
	var c Checkpoint
	kr := schemaReader{what: "checkpoint key", b: key}
	c.Group = kr.string("group")
	c.Topic = kr.string("topic")
	c.Partition = kr.int32("partition")
	if kr.err != nil {
		return Checkpoint{}, kr.err
	}
	vr := schemaReader{what: "checkpoint value", b: value}
	_ = vr.int16("version")
	c.UpstreamOffset = vr.int64("upstreamOffset")
	c.DownstreamOffset = vr.int64("offset")
	c.Metadata = vr.string("metadata")
	if vr.err != nil {
		return Checkpoint{}, vr.err
	}
	return c, nil
}

// Heartbeat is one record of MM2's heartbeats topic (Java class Heartbeat), emitted by the
// heartbeat connector of flow SourceAlias->TargetAlias.
type Heartbeat struct {
	SourceAlias string // sourceClusterAlias
	TargetAlias string // targetClusterAlias
	Timestamp   int64  // epoch milliseconds when emitted
}

// String formats h like MM2's HeartbeatFormatter, e.g.
// "Heartbeat{sourceClusterAlias=A, targetClusterAlias=B, timestamp=1700000000000}".
func (h Heartbeat) String() string {
	return fmt.Sprintf("Heartbeat{sourceClusterAlias=%s, targetClusterAlias=%s, timestamp=%d}",
		h.SourceAlias, h.TargetAlias, h.Timestamp)
}

// Encode returns the record key (sourceClusterAlias STRING, targetClusterAlias STRING) and
// value (version INT16 = 0, timestamp INT64). It fails only if an alias is longer than 32767
// bytes.
func (h Heartbeat) Encode() (key, value []byte, err error) {
	kw := schemaWriter{what: "heartbeat key", b: make([]byte, 0, 4+len(h.SourceAlias)+len(h.TargetAlias))}
	kw.string("sourceClusterAlias", h.SourceAlias)
	kw.string("targetClusterAlias", h.TargetAlias)
	if key, err = kw.result(); err != nil {
		return nil, nil, err
	}
	vw := schemaWriter{what: "heartbeat value", b: make([]byte, 0, 10)}
	vw.int16(recordVersion)
	vw.int64(h.Timestamp)
	value, err = vw.result()
	return key, value, err
}

// DecodeHeartbeat parses a heartbeats record. Like MM2 it reads the version and then parses
// the value with the version 0 layout whatever the version says; trailing bytes are ignored.
// Truncated input or a negative string length is an error naming the field.
func DecodeHeartbeat(key, value []byte) (Heartbeat, error) {
	var h Heartbeat
	kr := schemaReader{what: "heartbeat key", b: key}
	h.SourceAlias = kr.string("sourceClusterAlias")
	h.TargetAlias = kr.string("targetClusterAlias")
	if kr.err != nil {
		return Heartbeat{}, kr.err
	}
	vr := schemaReader{what: "heartbeat value", b: value}
	_ = vr.int16("version")
	h.Timestamp = vr.int64("timestamp")
	if vr.err != nil {
		return Heartbeat{}, vr.err
	}
	return h, nil
}
