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

	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/dispatcher"
)

type rawSink struct {
	mu   sync.Mutex
	reqs []string // quoted, for the log
	raw  []byte   // every request as received, one after the other
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
					s.raw = append(append(s.raw, head.String()...), body...)
					s.mu.Unlock()
					c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
				}
			}()
		}
	}()
	return s, "http://" + ln.Addr().String() + "/"
}

// TestCaptureDispatcherRequests writes the raw HTTP requests (the bytes on the wire) that the
// genuine dispatcher sends for dispatcher.CaptureRecords, record i at offset i, to
// dispatcher.CaptureFile (shared/mirrorevents/testdata/dispatcher-<key type>.http, which
// shared/mirrorevents/wire_test.go reads), and logs them quoted with its send failures: the
// source of those captures and of docs/events.md. A measuring tool, not a check: it runs only
// with MM2GO_CAPTURE_DISPATCHER=<key type> (String, Integer, Double, ByteArray) or all;
// MM2GO_CAPTURE_CEOVERRIDES=1 adds a ceOverrides extension (and writes no file).
func TestCaptureDispatcherRequests(t *testing.T) {
	kts := []string{os.Getenv("MM2GO_CAPTURE_DISPATCHER")}
	switch kts[0] {
	case "":
		t.Skip("a measuring tool: set MM2GO_CAPTURE_DISPATCHER=<key type> to run it")
	case "all":
		kts = dispatcher.CaptureKeyTypes
	}
	c := testkit.Require(t)
	for _, kt := range kts {
		t.Run(kt, func(t *testing.T) {
			topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "cap"), 1, nil)
			s, url := startRaw(t)
			d := dispatcher.Start(t, dispatcher.Config{Bootstrap: c.Source.Bootstrap, Topics: []string{topic}, Sink: url, KeyType: kt, CEOverrides: ceo(), Retry: 1, BackoffDelay: 100 * time.Millisecond})
			recs := dispatcher.CaptureRecords()
			for _, r := range recs {
				r.Topic = topic
			}
			testkit.Produce(t, c.Source.Bootstrap, recs...)
			d.WaitCommitted(topic, map[int32]int64{0: int64(len(recs))}, 3*time.Minute)
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, r := range s.reqs {
				t.Log(r)
			}
			t.Log(grepLines(d.Log(), "WARN", "ERROR", "Exception"))
			if ceo() == nil {
				f := dispatcher.CaptureFile(testkit.RepoRoot(t), kt)
				if err := os.WriteFile(f, s.raw, 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("%d requests written to %s", len(s.reqs), f)
			}
		})
	}
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
