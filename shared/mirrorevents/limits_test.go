package mirrorevents

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"

	"github.com/mm2go/mm2go/shared/serve"
)

// filler reads as an endless run of 'v' without allocating.
type filler struct{}

func (filler) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'v'
	}
	return len(p), nil
}

// heapPeak samples the live heap until stop is closed and returns the largest value seen.
func heapPeak(stop <-chan struct{}) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak uint64
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-stop:
				out <- peak
				return
			default:
				runtime.Gosched()
			}
		}
	}()
	return out
}

// TestFetchModeBodiesNotHeld (F3): eight parallel 32 MiB record events, binary mode as
// KafkaSource sends them, to a fetch-mode server over a real connection are answered 200 (the
// record is read from the source) while the live heap stays under 64 MiB: fetch mode drops the
// body as it arrives. A structured-mode event beyond the small limit is 413, and payload mode's
// limit follows the largest record the target accepts.
func TestFetchModeBodiesNotHeld(t *testing.T) {
	f := newFake()
	f.ends[tp{"orders", 0}] = 10
	h, err := New(f, Options{}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	srv := httptest.NewServer(serve.NewHTTPHandler(h.ServeConfig(serve.Config{}), quiet(), h))
	t.Cleanup(srv.Close)

	const size = 32 << 20
	runtime.GC()
	stop := make(chan struct{})
	peak := heapPeak(stop)
	var wg sync.WaitGroup
	codes := make([]int, 8)
	for i := range codes {
		wg.Go(func() {
			e := kafkaEvent("orders", 0, int64(i))
			req, _ := http.NewRequest(http.MethodPost, srv.URL, io.LimitReader(filler{}, size))
			req.ContentLength = size
			for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": e.ID(), "ce-source": e.Source(), "ce-type": e.Type(),
				"ce-subject": e.Subject(), "ce-knativekafkapartition": "0", "ce-knativekafkaoffset": fmt.Sprint(i), "content-type": "text/plain"} {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	wg.Wait()
	close(stop)
	p := <-peak
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("post %d: answer %d, want 200", i, c)
		}
	}
	t.Logf("live heap peak over 8 parallel 32 MiB posts: %.1f MiB", float64(p)/(1<<20))
	if p >= 64<<20 {
		t.Errorf("live heap peaked at %.1f MiB, want under 64 MiB", float64(p)/(1<<20))
	}

	// Structured mode carries the attributes in the body: only a few KiB are read.
	big := `{"specversion":"1.0","id":"partition:0/offset:1","source":"/apis/v1/namespaces/ns/kafkasources/src#orders","type":"dev.knative.kafka.event","data":"` +
		strings.Repeat("x", 64<<10) + `"}`
	resp, err := http.Post(srv.URL, "application/cloudevents+json", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), fmt.Sprintf("%d-byte limit", serve.DefaultMaxBodyBytes)) {
		t.Errorf("64 KiB structured event: answer %d %q, want 413 naming the limit", resp.StatusCode, b)
	}

	// Payload mode: the largest record the target accepts, as base64 with room for attributes.
	ph, err := New(newFake(), Options{Mode: ModePayload, MaxRecordBytes: 1 << 20}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ph.Close)
	if c := ph.ServeConfig(serve.Config{}); c.DiscardBinaryData || c.MaxBodyBytes < 1<<20+1<<20/3 || c.MaxBodyBytes > 2<<20 {
		t.Errorf("payload mode body limit %d (discard %v), want the 1 MiB record as base64 plus a few KiB, kept", c.MaxBodyBytes, c.DiscardBinaryData)
	}
}
