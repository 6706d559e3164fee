package mm2

import (
	"bytes"
	"testing"
)

func TestPositionRecords(t *testing.T) {
	cases := []struct {
		name string
		got  Position
		key  OffsetKey
		off  int64
	}{
		{"source", SourcePosition("primary", "orders", 3, 41, 25), OffsetKey{Connector: SourceConnector, Cluster: "primary", Topic: "orders", Partition: 3}, 41},
		{"checkpoint", CheckpointPosition("primary.orders", 2, "app", 25), OffsetKey{Connector: CheckpointConnector, Topic: "primary.orders", Partition: 2, Group: "app"}, 0},
		{"heartbeat", HeartbeatPosition("primary", "backup", 25), OffsetKey{Connector: HeartbeatConnector, SourceAlias: "primary", TargetAlias: "backup"}, 0},
	}
	for _, c := range cases {
		want, err := PositionRecord(c.key, c.off, 25)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(c.got.Key, want.Key) || !bytes.Equal(c.got.Value, want.Value) || c.got.Partition != want.Partition {
			t.Errorf("%s: %+v, want %+v", c.name, c.got, want)
		}
		if p := KeyPartition(c.got.Key, 25); p != c.got.Partition {
			t.Errorf("%s: partition %d, the key hashes to %d", c.name, c.got.Partition, p)
		}
		if off, err := DecodeOffsetValue(c.got.Value); err != nil || off != c.off {
			t.Errorf("%s: value %q decodes to %d, %v", c.name, c.got.Value, off, err)
		}
	}
	// The key MM2 4.x writes for MirrorSourceConnector, byte for byte.
	if got := string(SourcePosition("primary", "orders", 3, 41, 25).Key); got != `["MirrorSourceConnector",{"cluster":"primary","partition":3,"topic":"orders"}]` {
		t.Errorf("source key %s", got)
	}
	if _, err := PositionRecord(OffsetKey{Connector: "Other"}, 0, 25); err == nil {
		t.Error("unknown connector accepted")
	}
}
