package mm2

// Position is one Connect position record of MM2's connectors, without its topic (the Connect
// offsets topic of the flow, or MM2's heartbeat/checkpoint connectors' own offsets topic): the
// key, the value and the offsets-topic partition the Java producer's default partitioner would
// pick for the key. Every mm2go writer of position records builds them here.
type Position struct {
	Partition  int32
	Key, Value []byte
}

// SourcePosition is MirrorSourceConnector's position of a source partition: last is the
// upstream offset of the last replicated record (not +1). offsetsPartitions must be positive.
func SourcePosition(sourceAlias, topic string, partition int32, last int64, offsetsPartitions int32) Position {
	return position(SourceOffsetKey(sourceAlias, topic, partition), last, offsetsPartitions)
}

// CheckpointPosition is MirrorCheckpointConnector's position for a checkpointed
// group/remote-topic/partition (value always {"offset":0}).
func CheckpointPosition(remoteTopic string, partition int32, group string, offsetsPartitions int32) Position {
	return position(CheckpointOffsetKey(remoteTopic, partition, group), 0, offsetsPartitions)
}

// HeartbeatPosition is MirrorHeartbeatConnector's position of a flow (value always
// {"offset":0}).
func HeartbeatPosition(sourceAlias, targetAlias string, offsetsPartitions int32) Position {
	return position(HeartbeatOffsetKey(sourceAlias, targetAlias), 0, offsetsPartitions)
}

// PositionRecord is the position record of any of the three connectors for key k (see
// OffsetKey.Encode) storing offset.
func PositionRecord(k OffsetKey, offset int64, offsetsPartitions int32) (Position, error) {
	key, err := k.Encode()
	if err != nil {
		return Position{}, err
	}
	return position(key, offset, offsetsPartitions), nil
}

func position(key []byte, offset int64, offsetsPartitions int32) Position {
	return Position{Partition: KeyPartition(key, offsetsPartitions), Key: key, Value: OffsetValue(offset)}
}
