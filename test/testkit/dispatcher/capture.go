package dispatcher

import (
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// CaptureKeyTypes are the key types the capture tool (TestCaptureDispatcherRequests) is run
// with, one capture file each.
var CaptureKeyTypes = []string{KeyString, KeyByteArray, KeyInteger, KeyDouble}

// CaptureRecords returns the records the capture tool writes, in this order, into partition 0
// of a new topic: record i is at offset i. Their timestamps are fixed, so that what a capture
// shows can be compared with the record it came from.
func CaptureRecords() []*kgo.Record {
	h := func(k string, v []byte) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: v} }
	recs := []*kgo.Record{
		{Key: []byte{0, 1, 0xff}, Value: []byte("v0"), Headers: []kgo.RecordHeader{h("euro", []byte("€ x")), h("", []byte("noname")), h("--", []byte("sym")), h("c1", []byte("\u0085")), h("q", []byte("?")), h("x", []byte{'a', 0xff, 'b'})}},
		{Key: []byte{0, 0, 0, 5}, Value: []byte("v1")},
		{Key: []byte{0xff, 0xff, 0xff, 0xfb}, Value: []byte("v2")},
		{Key: []byte{0x3f, 0xf8, 0, 0, 0, 0, 0, 0}, Value: []byte("v3")},
		{Key: []byte{0x3f, 0xc0, 0, 0}, Value: []byte("v4")},
		{Key: []byte{0x41, 0x42}, Value: []byte("v5")},
		{Key: []byte("k"), Value: []byte("v6"), Headers: []kgo.RecordHeader{h("lat", []byte{0xe9}), h("u", []byte("é"))}},
		{Key: []byte{0x4b, 0x3e, 0xbc, 0x20}, Value: []byte("v7")},
		{Key: []byte{0x7f, 0xf0, 0, 0, 0, 0, 0, 0}, Value: []byte("v8")},
		{Key: []byte{0x41, 0x6f, 0xff, 0xff, 0xe0, 0, 0, 0}, Value: []byte("v9")},
		{Key: []byte("k1"), Value: []byte("v10"), Headers: []kgo.RecordHeader{h("Content-Type", []byte("Application/JSON")), h("X-Trace_Id", []byte("abc 100%41")),
			h("u", []byte("héllo")), h("d", []byte("1")), h("D", []byte("2"))}},
		{},                               // no key, null value
		{Key: []byte{}, Value: []byte{}}, // empty key and value
	}
	base := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	for i, r := range recs {
		r.Partition = 0
		r.Timestamp = base.Add(time.Duration(i)*time.Second + time.Duration(i)*time.Millisecond)
	}
	return recs
}

// CaptureFile returns the path, under the repository root, of the capture tool's raw output
// for keyType: the requests as received, byte for byte, one after the other.
func CaptureFile(root, keyType string) string {
	return filepath.Join(root, "shared", "mirrorevents", "testdata", "dispatcher-"+keyType+".http")
}
