package mirrorevents

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/dispatcher"
)

// keyTypes maps the dispatcher's key types (a capture file each) to payload mode's.
var keyTypes = map[string]KeyType{
	dispatcher.KeyString: KeyString, dispatcher.KeyByteArray: KeyByteArray,
	dispatcher.KeyInteger: KeyInt, dispatcher.KeyDouble: KeyFloat,
}

// wireCases are requests of the genuine Knative KafkaSource dispatcher (dispatcher-loom,
// Vert.x WebClient 4.5.21) as the capture tool (test/testkit/dispatcher's
// TestCaptureDispatcherRequests) wrote them to testdata/dispatcher-<key type>.http, byte for
// byte: the one for record offset of dispatcher.CaptureRecords under that key type, and the
// record payload mode writes from it (its timestamp is the source record's).
var wireCases = []struct {
	name    string
	keyType string // the dispatcher's
	offset  int64
	want    *kgo.Record
}{
	{
		// Lost: the case of content-type's name and value, header name case and '_', order,
		// the first "d". Kept: the UTF-8 text "héllo" (sent as ISO-8859-1), "%41" as it is.
		name: "text headers, content-type, duplicates", keyType: dispatcher.KeyString, offset: 10,
		want: &kgo.Record{Key: []byte("k1"), Value: []byte("v10"), Headers: []kgo.RecordHeader{
			{Key: "content-type", Value: []byte("application/json")}, {Key: "d", Value: []byte("2")},
			{Key: "u", Value: []byte("héllo")}, {Key: "xtraceid", Value: []byte("abc 100%41")}}},
	},
	{
		name: "invalid UTF-8 and characters above U+00FF become '?'; empty names", keyType: dispatcher.KeyByteArray, offset: 0,
		want: &kgo.Record{Key: []byte{0, 1, 0xff}, Value: []byte("v0"), Headers: []kgo.RecordHeader{
			{Key: "", Value: []byte("sym")}, {Key: "c1", Value: []byte("\u0085")}, {Key: "euro", Value: []byte("? x")},
			{Key: "q", Value: []byte("?")}, {Key: "x", Value: []byte("a?b")}}},
	},
	{name: "null value: no body, no Content-Length; no key", keyType: dispatcher.KeyByteArray, offset: 11, want: &kgo.Record{}},
	{
		name: "empty value: Content-Length 0; an empty key is not sent", keyType: dispatcher.KeyByteArray, offset: 12,
		want: &kgo.Record{Value: []byte{}}, // lost: empty key becomes null
	},
	{name: "int key of 4 bytes", keyType: dispatcher.KeyInteger, offset: 2, want: &kgo.Record{Key: []byte{0xff, 0xff, 0xff, 0xfb}, Value: []byte("v2")}},
	{
		name: "float key of 4 bytes is written as a double", keyType: dispatcher.KeyDouble, offset: 4,
		want: &kgo.Record{Key: []byte{0x3f, 0xf8, 0, 0, 0, 0, 0, 0}, Value: []byte("v4")},
	},
	{
		// Lost: the invalid byte ('?'), and the trailing space (Go's HTTP server trims
		// whitespace around header values, as HTTP allows).
		name: "string key with an invalid UTF-8 byte", keyType: dispatcher.KeyString, offset: 7,
		want: &kgo.Record{Key: []byte("K>?"), Value: []byte("v7")},
	},
}

// capturedRequest is one request of a capture file with the topic and offset it names.
type capturedRequest struct {
	raw    []byte
	topic  string
	offset int64
}

// readCapture splits a capture file into its requests; it normalises nothing in the bytes,
// and takes each request's topic from its ce-source (the capture tool's topics are new each
// run) and its offset from ce-knativekafkaoffset.
func readCapture(t *testing.T, keyType string) []capturedRequest {
	t.Helper()
	b, err := os.ReadFile(dispatcher.CaptureFile(testkit.RepoRoot(t), keyType))
	if err != nil {
		t.Fatal(err)
	}
	var out []capturedRequest
	r := bytes.NewReader(b)
	br := bufio.NewReader(r)
	for pos := 0; ; {
		req, err := http.ReadRequest(br)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s capture, request %d: %v", keyType, len(out), err)
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			t.Fatal(err)
		}
		next := len(b) - r.Len() - br.Buffered() // where this request ends
		_, topic, _ := strings.Cut(req.Header.Get("ce-source"), "#")
		off, err := strconv.ParseInt(req.Header.Get("ce-knativekafkaoffset"), 10, 64)
		if err != nil || topic == "" {
			t.Fatalf("%s capture, request %d: ce-source %q, offset %q", keyType, len(out), req.Header.Get("ce-source"), req.Header.Get("ce-knativekafkaoffset"))
		}
		out = append(out, capturedRequest{raw: b[pos:next], topic: topic, offset: off})
		pos = next
	}
}

// TestPayloadFromGenuineDispatcherRequests: payload mode accepts every captured request of
// every key type and turns it into one record; the wireCases among them into the documented
// record (docs/events.md). A case whose request is not in the captures fails.
func TestPayloadFromGenuineDispatcherRequests(t *testing.T) {
	src := dispatcher.CaptureRecords()
	found := map[int]bool{}
	for _, kt := range dispatcher.CaptureKeyTypes {
		for _, cr := range readCapture(t, kt) {
			f := newFake()
			k := tp{cr.topic, 0}
			f.ends[k], f.next[k] = cr.offset+1, cr.offset
			_, hh := newTestHandler(t, f, Options{Mode: ModePayload, KeyType: keyTypes[kt]})
			req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(cr.raw)))
			if err != nil {
				t.Fatal(err)
			}
			req.RequestURI, req.RemoteAddr = "", "127.0.0.1:1"
			w := httptest.NewRecorder()
			hh.ServeHTTP(w, req)
			if w.Code != 200 || len(f.payloads[k]) != 1 {
				t.Errorf("%s capture, offset %d: %d %s, %d payload writes", kt, cr.offset, w.Code, w.Body.String(), len(f.payloads[k]))
				continue
			}
			for i, tc := range wireCases {
				if tc.keyType != kt || tc.offset != cr.offset {
					continue
				}
				found[i] = true
				want := *tc.want
				want.Timestamp = src[tc.offset].Timestamp
				if d := testkit.SameRecord(&want, f.payloads[k][0]); d != "" {
					t.Errorf("%s: %s\nsource record: %+v", tc.name, d, src[tc.offset])
				}
			}
		}
	}
	for i, tc := range wireCases {
		if !found[i] {
			t.Errorf("%s: no request for offset %d in the %s capture", tc.name, tc.offset, tc.keyType)
		}
	}
}
