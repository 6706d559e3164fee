package dispatcher_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/dispatcher"
)

type rawSink struct {
	mu   sync.Mutex
	reqs []string
}

func startRaw(t *testing.T) (*rawSink, string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &rawSink{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					var head strings.Builder
					cl := -1
					chunked := false
					for {
						line, err := br.ReadString('\n')
						if err != nil {
							return
						}
						head.WriteString(line)
						if line == "\r\n" {
							break
						}
						k, v, _ := strings.Cut(strings.TrimRight(line, "\r\n"), ":")
						if strings.EqualFold(k, "content-length") {
							cl, _ = strconv.Atoi(strings.TrimSpace(v))
						}
						if strings.EqualFold(k, "transfer-encoding") {
							chunked = true
						}
					}
					var body []byte
					if cl >= 0 {
						body = make([]byte, cl)
						io.ReadFull(br, body)
					} else if chunked {
						return // the dispatcher sends Content-Length; a chunked body is not read
					}
					s.mu.Lock()
					s.reqs = append(s.reqs, fmt.Sprintf("%q\nBODY %q", head.String(), body))
					s.mu.Unlock()
					c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
				}
			}()
		}
	}()
	return s, "http://" + ln.Addr().String() + "/"
}

// TestCaptureDispatcherRequests prints the raw HTTP requests (as bytes on the wire) that the
// genuine dispatcher sends for a set of awkward records, and its send failures: the source of
// the captures in shared/mirrorevents/wire_test.go and of docs/events.md. A measuring tool, not
// a check: it runs only with MM2GO_CAPTURE_DISPATCHER=<key type> (String, Integer, Double,
// ByteArray); MM2GO_CAPTURE_CEOVERRIDES=1 adds a ceOverrides extension.
func TestCaptureDispatcherRequests(t *testing.T) {
	kt := os.Getenv("MM2GO_CAPTURE_DISPATCHER")
	if kt == "" {
		t.Skip("a measuring tool: set MM2GO_CAPTURE_DISPATCHER=<key type> to run it")
	}
	c := testkit.Require(t)
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "cap"), 1, nil)
	s, url := startRaw(t)
	d := dispatcher.Start(t, dispatcher.Config{Bootstrap: c.Source.Bootstrap, Topics: []string{topic}, Sink: url, KeyType: kt, CEOverrides: ceo(), Retry: 1, BackoffDelay: 100 * time.Millisecond})
	h := func(k string, v []byte) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: v} }
	recs := []*kgo.Record{
		{Key: []byte{0, 1, 0xff}, Value: []byte("v0"), Headers: []kgo.RecordHeader{h("euro", []byte("€ x")), h("", []byte("noname")), h("--", []byte("sym")), h("c1", []byte("\u0085")), h("q", []byte("?"))}},
		{Key: []byte{0, 0, 0, 5}, Value: []byte("v1")},
		{Key: []byte{0xff, 0xff, 0xff, 0xfb}, Value: []byte("v2")},
		{Key: []byte{0x3f, 0xf8, 0, 0, 0, 0, 0, 0}, Value: []byte("v3")},
		{Key: []byte{0x3f, 0xc0, 0, 0}, Value: []byte("v4")},
		{Key: []byte{0x41, 0x42}, Value: []byte("v5")},
		{Key: []byte("k"), Value: []byte("v6"), Headers: []kgo.RecordHeader{h("lat", []byte{0xe9}), h("u", []byte("é"))}},
		{Key: []byte{0x4b, 0x3e, 0xbc, 0x20}, Value: []byte("v7")},
		{Key: []byte{0x7f, 0xf0, 0, 0, 0, 0, 0, 0}, Value: []byte("v8")},
		{Key: []byte{0x41, 0x6f, 0xff, 0xff, 0xe0, 0, 0, 0}, Value: []byte("v9")},
	}
	for _, r := range recs {
		r.Topic = topic
	}
	for _, r := range recs {
		testkit.Produce(t, c.Source.Bootstrap, r)
		time.Sleep(1500 * time.Millisecond)
	}
	d.WaitCommitted(topic, map[int32]int64{0: int64(len(recs))}, 3*time.Minute)
	s.mu.Lock()
	for _, r := range s.reqs {
		t.Log(r)
	}
	s.mu.Unlock()
	t.Log(grepLines(d.Log(), "WARN", "ERROR", "Exception"))
}

func grepLines(s string, w ...string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		for _, x := range w {
			if strings.Contains(l, x) {
				b.WriteString(l + "\n")
				break
			}
		}
	}
	return b.String()
}

func ceo() map[string]string {
	if os.Getenv("MM2GO_CAPTURE_CEOVERRIDES") != "" {
		return map[string]string{"mm2gotopic": "x"}
	}
	return nil
}
