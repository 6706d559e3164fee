package mm2

import (
	"bytes"
	"strings"
	"testing"
)

func TestMurmur2Vectors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int32
	}{
		// Kafka's UtilsTest.testMurmur2.
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
		// Values other ports check against Kafka's Utils.murmur2 (lengths 1 to 5, so every
		// tail length).
		{"1", -1993445489},
		{"12", 126087238},
		{"123", -267702483},
		{"1234", -1614185708},
		{"12345", -1188365604},
	} {
		if got := Murmur2([]byte(tc.in)); got != tc.want {
			t.Errorf("Murmur2(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestKeyPartition(t *testing.T) {
	for _, n := range []int32{1, 2, 3, 25, 1000} {
		for _, k := range []string{"", "a", "21", "foobar", "\xff\xfe"} {
			p := KeyPartition([]byte(k), n)
			if p < 0 || p >= n {
				t.Errorf("KeyPartition(%q, %d) = %d, out of range", k, n, p)
			}
		}
	}
	// murmur2("21") is negative: the sign bit is masked, not negated.
	if got, want := KeyPartition([]byte("21"), 1000), int32((-973932308&0x7fffffff)%1000); got != want {
		t.Errorf("KeyPartition(21, 1000) = %d, want %d", got, want)
	}
}

// TestJacksonEscaping: strings in Connect offsets keys are written as MM2's JsonConverter
// writes them; the expected values are what the genuine classes wrote
// (TestJSONStringMatchesJsonConverter compares many more with them).
func TestJacksonEscaping(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", `"plain"`},
		{`q"b\s/`, `"q\"b\\s/"`},
		{"\b\t\n\f\r", `"\b\t\n\f\r"`},
		{"\x00\x01\x1f\x0b", `"\u0000\u0001\u001F\u000B"`},
		{"\x7f", "\"\x7f\""},
		{"<a>&b", `"<a>&b"`},
		{"é€\u2028\u2029\uFFFD", "\"é€\u2028\u2029\uFFFD\""},
		// Above U+FFFF: the UTF-16 surrogate pair, escaped (Jackson 2.19's UTF-8 generator).
		{"😀x\U0010FFFF", `"\uD83D\uDE00x\uDBFF\uDFFF"`},
		// Not UTF-8: one U+FFFD per maximal subpart, as Java decodes the bytes.
		{"a\xffb", "\"a\uFFFDb\""},
		{"\xe2\x82", "\"\uFFFD\""},
		{"\xf0\x9f\x98x", "\"\uFFFDx\""},
		{"\xe2\x82\xe2\x82\xac", "\"\uFFFD€\""},
		{"\xc0\x80", "\"\uFFFD\uFFFD\""},
		{"\xe0\x80\x80", "\"\uFFFD\uFFFD\uFFFD\""},
		{"\xf4\x90\x80\x80", "\"\uFFFD\uFFFD\uFFFD\uFFFD\""},
		{"\xed\xa0\x80", "\"\uFFFD\""},
		{"", `""`},
	} {
		if got := string(appendJSONString(nil, tc.in)); got != tc.want {
			t.Errorf("appendJSONString(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	key := CheckpointOffsetKey("A.t\"x", -1, "g\n<1>")
	want := `["MirrorCheckpointConnector",{"partition":-1,"topic":"A.t\"x","group":"g\n<1>"}]`
	if string(key) != want {
		t.Errorf("CheckpointOffsetKey = %s, want %s", key, want)
	}
	got, err := DecodeOffsetKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if got.Topic != "A.t\"x" || got.Group != "g\n<1>" || got.Partition != -1 {
		t.Errorf("round trip = %+v", got)
	}
	if got, err := DecodeOffsetKey(CheckpointOffsetKey("t", 0, "😀<")); err != nil || got.Group != "😀<" {
		t.Errorf("round trip of a surrogate pair: %+v, %v", got, err)
	}
}

func TestDecodeOffsetKeyOrderInsensitive(t *testing.T) {
	got, err := DecodeOffsetKey([]byte(` [ "MirrorSourceConnector" , { "topic" : "orders", "partition": 3, "cluster": "A", "extra": [1] } ] `))
	if err != nil {
		t.Fatal(err)
	}
	if want := (OffsetKey{Connector: SourceConnector, Cluster: "A", Topic: "orders", Partition: 3}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	// A connector that is not one of MM2's: known fields are filled, none required.
	got, err = DecodeOffsetKey([]byte(`["my-connector",{"topic":"t"}]`))
	if err != nil || got != (OffsetKey{Connector: "my-connector", Topic: "t"}) {
		t.Errorf("got %+v, %v", got, err)
	}
	if _, err := got.Encode(); err == nil {
		t.Error("Encode of an unknown connector succeeded")
	}
}

func TestDecodeOffsetKeyErrors(t *testing.T) {
	for _, tc := range []struct {
		in, wantErr string
	}{
		{``, "not a JSON array"},
		{`{}`, "not a JSON array"},
		{`["MirrorSourceConnector"]`, "array has 1 elements"},
		{`["a",{},3]`, "array has 3 elements"},
		{`[1,{}]`, "connector name: not a JSON string"},
		{`[null,{}]`, "connector name: is null"},
		{`["MirrorSourceConnector",null]`, "partition map is null"},
		{`["MirrorSourceConnector",[]]`, "partition map is not a JSON object"},
		{`["MirrorSourceConnector",{"cluster":"A","partition":3}]`, "field topic missing"},
		{`["MirrorCheckpointConnector",{"partition":3,"topic":"t"}]`, "field group missing"},
		{`["MirrorHeartbeatConnector",{"sourceClusterAlias":"A"}]`, "field targetClusterAlias missing"},
		{`["MirrorSourceConnector",{"cluster":"A","partition":"3","topic":"t"}]`, "field partition: not a JSON number"},
		{`["MirrorSourceConnector",{"cluster":"A","partition":3.0,"topic":"t"}]`, "field partition: \"3.0\" is not an integer"},
		{`["MirrorSourceConnector",{"cluster":"A","partition":2147483648,"topic":"t"}]`, "is not an integer of 32 bits"},
		{`["MirrorSourceConnector",{"cluster":"A","partition":null,"topic":"t"}]`, "field partition: is null"},
		{`["MirrorSourceConnector",{"cluster":null,"partition":1,"topic":"t"}]`, "field cluster: is null"},
		{`["MirrorSourceConnector",{"cluster":1,"partition":1,"topic":"t"}]`, "field cluster: not a JSON string"},
	} {
		_, err := DecodeOffsetKey([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("DecodeOffsetKey(%s) error = %v, want it to contain %q", tc.in, err, tc.wantErr)
		}
	}
	if _, err := DecodeOffsetKey(nil); err == nil {
		t.Error("DecodeOffsetKey(nil) succeeded")
	}
}

func TestOffsetValueExtremes(t *testing.T) {
	for _, v := range []int64{0, -1, 1<<63 - 1, -1 << 63} {
		got, err := DecodeOffsetValue(OffsetValue(v))
		if err != nil || got != v {
			t.Errorf("round trip %d = %d, %v", v, got, err)
		}
	}
	if _, err := DecodeOffsetValue([]byte(`{"offset":9223372036854775808}`)); err == nil {
		t.Error("offset beyond int64 accepted")
	}
}

func TestDecodeErrors(t *testing.T) {
	cpKey, cpValue, _ := goldenCheckpoint.Encode()
	osKey, osValue, _ := goldenOffsetSync.Encode()
	hbKey, hbValue, _ := goldenHeartbeat.Encode()
	decodeCP := func(k, v []byte) error { _, err := DecodeCheckpoint(k, v); return err }
	decodeOS := func(k, v []byte) error { _, err := DecodeOffsetSync(k, v); return err }
	decodeHB := func(k, v []byte) error { _, err := DecodeHeartbeat(k, v); return err }
	for _, tc := range []struct {
		name    string
		decode  func(k, v []byte) error
		key     []byte
		value   []byte
		wantErr string
	}{
		{"checkpoint metadata body", decodeCP, cpKey, append(bytes.Clone(cpValue[:18]), 0, 4, 'm', 'e'),
			"decoding checkpoint value: field metadata: need 4 bytes, have 2"},
		{"checkpoint metadata length", decodeCP, cpKey, cpValue[:19],
			"decoding checkpoint value: field metadata: need 2 bytes, have 1"},
		{"checkpoint version", decodeCP, cpKey, nil,
			"decoding checkpoint value: field version: need 2 bytes, have 0"},
		{"checkpoint offset", decodeCP, cpKey, cpValue[:12],
			"decoding checkpoint value: field offset: need 8 bytes, have 2"},
		{"checkpoint group negative", decodeCP, []byte{0xff, 0xfe, 'x'}, cpValue,
			"decoding checkpoint key: field group: negative string length -2"},
		{"checkpoint partition", decodeCP, cpKey[:15], cpValue,
			"decoding checkpoint key: field partition: need 4 bytes, have 1"},
		{"checkpoint topic", decodeCP, cpKey[:8], cpValue,
			"decoding checkpoint key: field topic: need 8 bytes, have 2"},
		{"offset sync key empty", decodeOS, nil, osValue,
			"decoding offset sync key: field topic: need 2 bytes, have 0"},
		{"offset sync partition", decodeOS, osKey[:8], osValue,
			"decoding offset sync key: field partition: need 4 bytes, have 0"},
		{"offset sync upstream", decodeOS, osKey, osValue[:7],
			"decoding offset sync value: field upstreamOffset: need 8 bytes, have 7"},
		{"offset sync downstream", decodeOS, osKey, osValue[:15],
			"decoding offset sync value: field offset: need 8 bytes, have 7"},
		{"heartbeat target", decodeHB, hbKey[:4], hbValue,
			"decoding heartbeat key: field targetClusterAlias: need 2 bytes, have 1"},
		{"heartbeat negative", decodeHB, []byte{0x80, 0x00}, hbValue,
			"decoding heartbeat key: field sourceClusterAlias: negative string length -32768"},
		{"heartbeat timestamp", decodeHB, hbKey, hbValue[:9],
			"decoding heartbeat value: field timestamp: need 8 bytes, have 7"},
	} {
		err := tc.decode(tc.key, tc.value)
		if err == nil || err.Error() != tc.wantErr {
			t.Errorf("%s: error = %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestDecodeIgnoresTrailingBytesAndVersion(t *testing.T) {
	osKey, osValue, _ := goldenOffsetSync.Encode()
	s, err := DecodeOffsetSync(append(osKey, 9, 9), append(osValue, 1, 2, 3, 4))
	if err != nil || s != goldenOffsetSync {
		t.Errorf("offset sync with trailing bytes = %+v, %v", s, err)
	}
	cpKey, cpValue, _ := goldenCheckpoint.Encode()
	v1 := append([]byte{0, 1}, cpValue[2:]...)
	c, err := DecodeCheckpoint(append(cpKey, 0), append(v1, 0xca, 0xfe))
	if err != nil || c != goldenCheckpoint {
		t.Errorf("version 1 checkpoint with trailing bytes = %+v, %v", c, err)
	}
	hbKey, hbValue, _ := goldenHeartbeat.Encode()
	h, err := DecodeHeartbeat(hbKey, append([]byte{0xff, 0xff}, hbValue[2:]...))
	if err != nil || h != goldenHeartbeat {
		t.Errorf("version -1 heartbeat = %+v, %v", h, err)
	}
}

func TestEncodeLongStrings(t *testing.T) {
	max := strings.Repeat("x", 32767)
	tooLong := max + "y"
	if _, _, err := (OffsetSync{Topic: max}).Encode(); err != nil {
		t.Errorf("32767-byte topic: %v", err)
	}
	for name, f := range map[string]func() error{
		"offset sync topic":    func() error { _, _, err := (OffsetSync{Topic: tooLong}).Encode(); return err },
		"checkpoint group":     func() error { _, _, err := (Checkpoint{Group: tooLong}).Encode(); return err },
		"checkpoint topic":     func() error { _, _, err := (Checkpoint{Topic: tooLong}).Encode(); return err },
		"checkpoint metadata":  func() error { _, _, err := (Checkpoint{Metadata: tooLong}).Encode(); return err },
		"heartbeat source":     func() error { _, _, err := (Heartbeat{SourceAlias: tooLong}).Encode(); return err },
		"heartbeat target":     func() error { _, _, err := (Heartbeat{TargetAlias: tooLong}).Encode(); return err },
		"heartbeat multi-byte": func() error { _, _, err := (Heartbeat{TargetAlias: strings.Repeat("é", 16384)}).Encode(); return err },
	} {
		err := f()
		if err == nil || !strings.Contains(err.Error(), "32768 bytes, longer than the maximum of 32767") {
			t.Errorf("%s: error = %v", name, err)
		}
	}
	// A long string round trips at the limit.
	c := Checkpoint{Group: max, Topic: max, Metadata: max, Partition: -5, UpstreamOffset: -1, DownstreamOffset: 1 << 62}
	k, v, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCheckpoint(k, v)
	if err != nil || got != c {
		t.Errorf("round trip failed: %v", err)
	}
}
