package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/dispatcher"
)

// cleanRecords are n records the genuine dispatcher can send (no control bytes in header values,
// no null header values) that still cover null, empty and binary keys (key type byte-array), null,
// empty and binary values, duplicate, empty and non-ASCII header values, old timestamps. tag makes
// every value unique.
func cleanRecords(topic string, partitions int32, n int, tag string) []*kgo.Record {
	base := time.Date(2021, 3, 4, 5, 6, 7, 8_000_000, time.UTC)
	recs := make([]*kgo.Record, 0, n)
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Timestamp: base.Add(time.Duration(i) * time.Millisecond),
			Key: []byte(fmt.Sprintf("key-%d", i)), Value: []byte(fmt.Sprintf("%s-%d-\x00\xff", tag, i)),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(fmt.Sprint("v-", i))}, {Key: "h", Value: []byte("dup")},
				{Key: "Trace_ID", Value: []byte("héllo wörld")}, {Key: "empty", Value: []byte{}}}}
		switch i % 6 {
		case 1:
			r.Key = nil
		case 2:
			r.Key = []byte{0, byte(i), 0xff, '\n'}
		case 3:
			r.Key, r.Headers = []byte{}, nil
		case 4:
			r.Value = nil // a tombstone: no request body
		case 5:
			r.Value = []byte{}
		}
		recs = append(recs, r)
	}
	return recs
}

// hardRecords are records the genuine dispatcher cannot send as an HTTP request: a header value
// with CR/LF, one with NUL and other binary bytes. (A null header value is worse; see
// nullHeaderRecord.)
func hardRecords(topic string) []*kgo.Record {
	return []*kgo.Record{
		{Topic: topic, Partition: 0, Key: []byte("crlf"), Value: []byte("hard-crlf"), Headers: []kgo.RecordHeader{{Key: "line", Value: []byte("a\r\nb")}}},
		{Topic: topic, Partition: 1, Key: []byte("bin"), Value: []byte("hard-bin"), Headers: []kgo.RecordHeader{{Key: "bin", Value: []byte{0, 1, 2, 0x7f, 0xff}}}},
	}
}

// nullHeaderRecord has a header with a null value: the dispatcher's record interceptor fails on
// it, and every plain record of the same poll is then logged as invalid and never sent.
func nullHeaderRecord(topic string, p int32) *kgo.Record {
	return &kgo.Record{Topic: topic, Partition: p, Key: []byte("nullhdr"), Value: []byte("hard-nullhdr"), Headers: []kgo.RecordHeader{{Key: "n", Value: nil}}}
}

// tailRecords is one plain record per partition: the live traffic after the hard records, whose
// events wake the function for what was skipped.
func tailRecords(topic string, partitions int32, tag string) []*kgo.Record {
	var recs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%s-tail-%d", tag, p))})
	}
	return recs
}

var dispatcherLogTime = regexp.MustCompile(`^(\d\d):(\d\d):(\d\d)\.(\d\d\d) `)

// sendFailures counts, in a dispatcher log, the attempts that could not be sent
// (WebClientCloudEventSender, to the sink and to the dead-letter sink), the events given up on
// the sink and on the dead-letter sink (RecordDispatcherImpl), and returns the time from the
// first attempt to the last give-up.
func sendFailures(log string) (attempts, givenUp, deadLetterGivenUp int, span time.Duration) {
	var first, last time.Duration
	for _, l := range strings.Split(log, "\n") {
		at := time.Duration(-1)
		if m := dispatcherLogTime.FindStringSubmatch(l); m != nil {
			var h, mi, s, ms int
			fmt.Sscan(m[1], &h)
			fmt.Sscan(m[2], &mi)
			fmt.Sscan(m[3], &s)
			fmt.Sscan(m[4], &ms)
			at = time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute + time.Duration(s)*time.Second + time.Duration(ms)*time.Millisecond
		}
		switch {
		case strings.Contains(l, "WebClientCloudEventSender - failed to send event to subscriber"):
			attempts++
			if first == 0 && at >= 0 {
				first = at
			}
		case strings.Contains(l, "RecordDispatcherImpl - Failed to send event to subscriber"):
			givenUp++
			if at >= 0 {
				last = at
			}
		case strings.Contains(l, "RecordDispatcherImpl - Failed to send event to dead letter sink"):
			deadLetterGivenUp++
			if at >= 0 {
				last = at
			}
		}
		if os.Getenv("MM2GO_TEST_VERBOSE") != "" && strings.Contains(strings.ToLower(l), "failed to send") {
			fmt.Fprintln(os.Stderr, l)
		}
	}
	if last > first {
		span = last - first
	}
	return attempts, givenUp, deadLetterGivenUp, span
}

// TestServeGenuineDispatcherFetch: `mirror serve` (fetch mode, a process) driven by the genuine
// Knative KafkaSource dispatcher with the delivery settings of knative/kafkasource.yaml, ordered
// and unordered at once. Records the dispatcher cannot send (CR/LF and binary bytes in header
// values, a null header value that spoils its whole poll) cost the partition the shipped retry
// budget and then nothing: the next events copy them, and the target has every record byte for
// byte. A fresh process answers a full redelivery without writing anything; a PingSource tick
// answers a burst summary, a malformed record event a 400, and SIGTERM exits 0.
func TestServeGenuineDispatcherFetch(t *testing.T) {
	c := testkit.Require(t)
	const parts = 3
	topics := []string{testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "gfo"), parts, nil),
		testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "gfu"), parts, nil)}
	for _, tp := range topics {
		testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, "source."+tp)
	}
	fn := startServe(t, c, c.Target.Bootstrap, strings.Join(topics, ","))
	dls := dispatcher.NewSink(t, nil)
	var ds []*dispatcher.Dispatcher
	for i, tp := range topics {
		cfg := shippedDelivery(t, c.Source.Bootstrap, []string{tp}, fn.URL)
		cfg.Unordered, cfg.DeadLetter = i == 1, dls.URL
		ds = append(ds, dispatcher.New(t, cfg))
	}
	dispatcher.StartAll(t, ds...)
	budget := retryWaits(ds[0].Config())

	want := map[string][]*kgo.Record{}
	produce := func(recs ...*kgo.Record) {
		testkit.Produce(t, c.Source.Bootstrap, recs...)
		for _, r := range recs {
			want[r.Topic] = append(want[r.Topic], r)
		}
	}
	settle := func() { // every event handled, sent or given up
		for i, tp := range topics {
			ds[i].WaitCommitted(tp, endOffsets(t, c.Source.Bootstrap, tp), 2*time.Minute)
		}
	}
	start := time.Now()
	for _, tp := range topics {
		produce(cleanRecords(tp, parts, 60, "a")...)
		produce(hardRecords(tp)...)
		produce(cleanRecords(tp, parts, 30, "b")...)
	}
	settle()
	for _, tp := range topics {
		produce(nullHeaderRecord(tp, 2))
		produce(cleanRecords(tp, parts, 9, "c")...)
	}
	settle()
	for _, tp := range topics {
		produce(tailRecords(tp, parts, "d")...)
	}
	for _, tp := range topics {
		waitTargetCount(t, c.Target.Bootstrap, "source."+tp, int64(len(want[tp])), 2*time.Minute)
	}
	t.Logf("%d records per topic on the target %s after the first produce", len(want[topics[0]]), time.Since(start).Round(time.Millisecond))
	for _, tp := range topics {
		testkit.AssertSameRecords(t, want[tp], testkit.ReadAll(t, c.Target.Bootstrap, "source."+tp))
	}
	retry := ds[0].Config().Retry
	for i, d := range ds {
		attempts, givenUp, dlGivenUp, span := sendFailures(d.Log())
		t.Logf("dispatcher %d (unordered %v): %d unsendable attempts, %d events given up on the sink, %d on the dead-letter sink, first attempt to last give-up %s (retry waits %s per destination)",
			i, i == 1, attempts, givenUp, dlGivenUp, span.Round(time.Millisecond), budget)
		// Each hard record: 1 + retry attempts to the sink, given up, then as many to the
		// dead-letter sink (same headers, so just as unsendable), given up: the partition moved
		// on after twice the shipped budget (its later records are on the target, checked above).
		if attempts != 2*2*(retry+1) || givenUp != 2 || dlGivenUp != 2 {
			t.Errorf("dispatcher %d: %d failed attempts, %d+%d give-ups for 2 unsendable records, want %d and 2+2", i, attempts, givenUp, dlGivenUp, 2*2*(retry+1))
		}
		if !strings.Contains(d.Log(), "Invalid record received") {
			t.Errorf("dispatcher %d: no 'Invalid record received' for the poll with a null header value", i)
		}
	}
	if n := len(dls.Requests()); n != 0 {
		t.Errorf("%d dead-lettered events; the unsendable ones cannot be sent there either, the others were answered 200", n)
	}

	// A fresh process (nothing in memory) and a new KafkaSource redelivering everything,
	// unordered: nothing is written twice.
	before := map[string]string{}
	for _, tp := range topics {
		before[tp] = fmt.Sprint(endOffsets(t, c.Target.Bootstrap, "source."+tp))
	}
	fn.stop()
	fn.start()
	cfg := shippedDelivery(t, c.Source.Bootstrap, topics, fn.URL)
	cfg.Unordered = true
	again := dispatcher.Start(t, cfg)
	for _, tp := range topics {
		again.WaitCommitted(tp, endOffsets(t, c.Source.Bootstrap, tp), 2*time.Minute)
		if after := fmt.Sprint(endOffsets(t, c.Target.Bootstrap, "source."+tp)); after != before[tp] {
			t.Errorf("redelivery wrote to %s: end offsets %s, were %s", "source."+tp, after, before[tp])
		}
	}
	again.Stop()

	post := func(hdr map[string]string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, fn.URL, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := post(map[string]string{"ce-specversion": "1.0", "ce-id": "tick-1", "ce-source": "/apis/v1/namespaces/mirror/pingsources/tick",
		"ce-type": "dev.knative.sources.ping"})
	var sum map[string]any
	if code != 200 || json.Unmarshal([]byte(body), &sum) != nil || sum["reason"] == nil {
		t.Errorf("PingSource tick: %d %s", code, body)
	}
	code, body = post(map[string]string{"ce-specversion": "1.0", "ce-id": "partition:0/offset:x", "ce-source": "/apis/v1/namespaces/mirror/kafkasources/s#" + topics[0],
		"ce-type": "dev.knative.kafka.event", "ce-knativekafkaoffset": "x", "ce-knativekafkapartition": "0"})
	if code != 400 || !strings.Contains(body, "knativekafkaoffset") {
		t.Errorf("malformed record event: %d %s", code, body)
	}
	fn.stop() // exit 0 on SIGTERM, checked by stop
}
