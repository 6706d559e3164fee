package mm2

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// unhex decodes a hex dump with optional spaces and "|" separators, as written in
// mm2-internals.md section 6.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	s = strings.NewReplacer(" ", "", "|", "", "\n", "").Replace(s)
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// The byte examples of mm2-internals.md section 6, printed by the real Kafka classes.
const (
	goldenOffsetSyncKey   = "00 06 | 6f 72 64 65 72 73 | 00 00 00 03"
	goldenOffsetSyncValue = "00 00 00 00 00 00 03 e8 | 00 00 00 00 00 00 03 de"

	goldenCheckpointKey       = "00 02 67 31 | 00 08 41 2e 6f 72 64 65 72 73 | 00 00 00 03"
	goldenCheckpointValue     = "00 00 | 00 00 00 00 00 00 03 ed | 00 00 00 00 00 00 03 df | 00 00"
	goldenCheckpointValueMeta = "00 00 | 00 00 00 00 00 00 03 ed | 00 00 00 00 00 00 03 df | 00 04 6d 65 74 61"

	goldenHeartbeatKey   = "00 01 41 | 00 01 42"
	goldenHeartbeatValue = "00 00 | 00 00 01 8b cf e5 68 00"
)

var (
	goldenOffsetSync = OffsetSync{Topic: "orders", Partition: 3, UpstreamOffset: 1000, DownstreamOffset: 990}
	goldenCheckpoint = Checkpoint{Group: "g1", Topic: "A.orders", Partition: 3, UpstreamOffset: 1005, DownstreamOffset: 991}
	goldenHeartbeat  = Heartbeat{SourceAlias: "A", TargetAlias: "B", Timestamp: 1700000000000}
)

func TestGoldenOffsetSync(t *testing.T) {
	key, value, err := goldenOffsetSync.Encode()
	if err != nil {
		t.Fatal(err)
	}
	wantKey, wantValue := unhex(t, goldenOffsetSyncKey), unhex(t, goldenOffsetSyncValue)
	if !bytes.Equal(key, wantKey) || len(key) != 12 {
		t.Errorf("key = % x, want % x", key, wantKey)
	}
	if !bytes.Equal(value, wantValue) || len(value) != 16 {
		t.Errorf("value = % x, want % x", value, wantValue)
	}
	got, err := DecodeOffsetSync(wantKey, wantValue)
	if err != nil {
		t.Fatal(err)
	}
	if got != goldenOffsetSync {
		t.Errorf("decoded %+v, want %+v", got, goldenOffsetSync)
	}
	if s, want := got.String(), "OffsetSync{topicPartition=orders-3, upstreamOffset=1000, downstreamOffset=990}"; s != want {
		t.Errorf("String() = %q, want %q", s, want)
	}
}

func TestGoldenCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		metadata string
		value    string
		size     int
	}{
		{"empty metadata", "", goldenCheckpointValue, 20},
		{"metadata meta", "meta", goldenCheckpointValueMeta, 24},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := goldenCheckpoint
			cp.Metadata = tc.metadata
			key, value, err := cp.Encode()
			if err != nil {
				t.Fatal(err)
			}
			wantKey, wantValue := unhex(t, goldenCheckpointKey), unhex(t, tc.value)
			if !bytes.Equal(key, wantKey) || len(key) != 18 {
				t.Errorf("key = % x, want % x", key, wantKey)
			}
			if !bytes.Equal(value, wantValue) || len(value) != tc.size {
				t.Errorf("value = % x, want % x", value, wantValue)
			}
			got, err := DecodeCheckpoint(wantKey, wantValue)
			if err != nil {
				t.Fatal(err)
			}
			if got != cp {
				t.Errorf("decoded %+v, want %+v", got, cp)
			}
		})
	}
	if s, want := goldenCheckpoint.String(), "Checkpoint{consumerGroupId=g1, topicPartition=A.orders-3, upstreamOffset=1005, downstreamOffset=991, metadata=}"; s != want {
		t.Errorf("String() = %q, want %q", s, want)
	}
}

func TestGoldenHeartbeat(t *testing.T) {
	key, value, err := goldenHeartbeat.Encode()
	if err != nil {
		t.Fatal(err)
	}
	wantKey, wantValue := unhex(t, goldenHeartbeatKey), unhex(t, goldenHeartbeatValue)
	if !bytes.Equal(key, wantKey) || len(key) != 6 {
		t.Errorf("key = % x, want % x", key, wantKey)
	}
	if !bytes.Equal(value, wantValue) || len(value) != 10 {
		t.Errorf("value = % x, want % x", value, wantValue)
	}
	got, err := DecodeHeartbeat(wantKey, wantValue)
	if err != nil {
		t.Fatal(err)
	}
	if got != goldenHeartbeat {
		t.Errorf("decoded %+v, want %+v", got, goldenHeartbeat)
	}
	if s, want := got.String(), "Heartbeat{sourceClusterAlias=A, targetClusterAlias=B, timestamp=1700000000000}"; s != want {
		t.Errorf("String() = %q, want %q", s, want)
	}
}

// The Connect offsets examples of mm2-internals.md section 6, with the partitions Kafka's
// murmur2 picks for the default 25-partition offsets topic.
var goldenConnect = []struct {
	name      string
	key       func() []byte
	decoded   OffsetKey
	json      string
	partition int32
	value     int64
	valueJSON string
}{
	{
		name:      "source",
		key:       func() []byte { return SourceOffsetKey("A", "orders", 3) },
		decoded:   OffsetKey{Connector: SourceConnector, Cluster: "A", Topic: "orders", Partition: 3},
		json:      `["MirrorSourceConnector",{"cluster":"A","partition":3,"topic":"orders"}]`,
		partition: 4,
		value:     1000,
		valueJSON: `{"offset":1000}`,
	},
	{
		name:      "checkpoint",
		key:       func() []byte { return CheckpointOffsetKey("A.orders", 3, "g1") },
		decoded:   OffsetKey{Connector: CheckpointConnector, Topic: "A.orders", Group: "g1", Partition: 3},
		json:      `["MirrorCheckpointConnector",{"partition":3,"topic":"A.orders","group":"g1"}]`,
		partition: 12,
		value:     0,
		valueJSON: `{"offset":0}`,
	},
	{
		name:      "heartbeat",
		key:       func() []byte { return HeartbeatOffsetKey("A", "B") },
		decoded:   OffsetKey{Connector: HeartbeatConnector, SourceAlias: "A", TargetAlias: "B"},
		json:      `["MirrorHeartbeatConnector",{"sourceClusterAlias":"A","targetClusterAlias":"B"}]`,
		partition: 0,
		value:     0,
		valueJSON: `{"offset":0}`,
	},
}

func TestGoldenConnectOffsets(t *testing.T) {
	for _, tc := range goldenConnect {
		t.Run(tc.name, func(t *testing.T) {
			key := tc.key()
			if string(key) != tc.json {
				t.Errorf("key = %s, want %s", key, tc.json)
			}
			if p := KeyPartition(key, 25); p != tc.partition {
				t.Errorf("KeyPartition(key, 25) = %d, want %d", p, tc.partition)
			}
			enc, err := tc.decoded.Encode()
			if err != nil || string(enc) != tc.json {
				t.Errorf("OffsetKey.Encode() = %s, %v; want %s", enc, err, tc.json)
			}
			got, err := DecodeOffsetKey([]byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.decoded {
				t.Errorf("DecodeOffsetKey = %+v, want %+v", got, tc.decoded)
			}
			if v := OffsetValue(tc.value); string(v) != tc.valueJSON {
				t.Errorf("OffsetValue(%d) = %s, want %s", tc.value, v, tc.valueJSON)
			}
			off, err := DecodeOffsetValue([]byte(tc.valueJSON))
			if err != nil || off != tc.value {
				t.Errorf("DecodeOffsetValue(%s) = %d, %v; want %d", tc.valueJSON, off, err, tc.value)
			}
		})
	}
}

func TestDecodeOffsetValueTombstone(t *testing.T) {
	for _, in := range [][]byte{nil, []byte("null"), []byte(" null ")} {
		_, err := DecodeOffsetValue(in)
		if !errors.Is(err, ErrTombstone) {
			t.Errorf("DecodeOffsetValue(%q) error = %v, want ErrTombstone", in, err)
		}
	}
	for _, in := range [][]byte{{}, []byte(`{}`), []byte(`{"offset":"1"}`), []byte(`{"offset":1.5}`), []byte(`[1]`)} {
		_, err := DecodeOffsetValue(in)
		if err == nil || errors.Is(err, ErrTombstone) {
			t.Errorf("DecodeOffsetValue(%q) error = %v, want a non-tombstone error", in, err)
		}
	}
}
