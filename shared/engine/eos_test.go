package engine

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mm2go/mm2go/shared/metrics"
	"github.com/mm2go/mm2go/test/testkit"
)

var readCommitted = kgo.FetchIsolationLevel(kgo.ReadCommitted())

// TestExactlyOnce copies a topic holding committed and aborted transactions in exactly-once
// mode: a read_committed reader of the target sees exactly the committed source records.
func TestExactlyOnce(t *testing.T) {
	c := testkit.Require(t)
	src := c.Source.Bootstrap
	topic := testkit.CreateTopic(t, src, testkit.Name(t, "eos"), 2, nil)
	testkit.Produce(t, src, testkit.SampleRecords(topic, 2, 30)...)
	produceTxn(t, src, testkit.SampleRecords(topic, 2, 10), true)
	produceTxn(t, src, testkit.SampleRecords(topic, 2, 10), false)
	testkit.Produce(t, src, testkit.SampleRecords(topic, 2, 6)...)

	f := newFlow(t, topic)
	f.opts.ExactlyOnce = true
	s := f.burst(BurstOptions{MaxRecords: 20})
	if s.Records != 20 || s.Reason != ReasonMaxRecords {
		t.Errorf("budget burst: %d records, reason %q; want 20, max-records", s.Records, s.Reason)
	}
	s = f.burst(BurstOptions{})
	if s.Records != 26 || s.Reason != ReasonDone || !s.ExactlyOnce {
		t.Errorf("second burst: %d records, reason %q, eos %v; want 26, done, true", s.Records, s.Reason, s.ExactlyOnce)
	}
	if s := f.burst(BurstOptions{}); s.Records != 0 {
		t.Errorf("third burst copied %d, want 0", s.Records)
	}
	want := sourceRecords(t, src, topic, readCommitted)
	if len(want) != 46 {
		t.Fatalf("source has %d committed records, want 46", len(want))
	}
	testkit.AssertSameRecords(t, want, testkit.ReadAll(t, c.Target.Bootstrap, f.remote(topic), readCommitted))
	// Positions are committed with the records; the last one points at the last data record.
	pos := f.positions()
	for p := int32(0); p < 2; p++ {
		if pos[TP{topic, p}] < 25 {
			t.Errorf("position of %s-%d = %d, want >= 25", topic, p, pos[TP{topic, p}])
		}
	}
}

// TestExactlyOnceOverlappingBursts runs two exactly-once bursts of the same flow at once: the
// first (A) is held at its first fetched batch, after it initialized its transactional ids,
// until the second (B) fetches, having fenced A's ids. B copies every record; A, released,
// meets the fence on at least one partition, reports no error (taken over is the design
// working) and commits nothing; a final burst finds nothing left; and a read_committed reader
// of the target sees exactly the records the test wrote, once each, in order.
func TestExactlyOnceOverlappingBursts(t *testing.T) {
	c := testkit.Require(t)
	src := c.Source.Bootstrap
	topic := testkit.CreateTopic(t, src, testkit.Name(t, "overlap"), 3, nil)
	const n = 30000
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i % 3), Key: []byte(fmt.Sprint(i)), Value: make([]byte, 200)}
	}
	testkit.Produce(t, src, recs...)
	f := newFlow(t, topic)
	f.opts.ExactlyOnce = true

	aFetching, bFetching := make(chan struct{}), make(chan struct{})
	var aOnce, bOnce sync.Once
	logA := &testkit.SyncBuffer{}
	shared := f.log
	f.log = io.MultiWriter(shared, logA)
	a := f.engineWithHooks(onFetchBatch(func() { aOnce.Do(func() { close(aFetching) }); <-bFetching }))
	f.log = shared
	b := f.engineWithHooks(onFetchBatch(func() { bOnce.Do(func() { close(bFetching) }) }))

	type result struct {
		s   Summary
		err error
	}
	aDone := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s, err := a.Burst(ctx, BurstOptions{})
		aDone <- result{s, err}
	}()
	// B starts once A fetches (so A's ids are initialized and B's fencing comes after).
	select {
	case <-aFetching:
	case r := <-aDone:
		t.Fatalf("burst A ended before fetching: %+v, %v", r.s, r.err)
	case <-time.After(time.Minute):
		t.Fatal("burst A fetched nothing within a minute")
	}
	sb, err := b.Burst(testkit.Context(t, 2*time.Minute), BurstOptions{})
	if err != nil || sb.Records != n || sb.Lag != 0 {
		t.Errorf("burst B: %d records, lag %d, reason %s, err %v; want %d, 0, no error", sb.Records, sb.Lag, sb.Reason, err, n)
	}
	var ra result
	select {
	case ra = <-aDone:
	case <-time.After(2 * time.Minute):
		t.Fatal("burst A did not end")
	}
	fenced := strings.Count(logA.String(), "partition taken over by another instance (fenced)")
	t.Logf("burst A: %d records, reason %s, err %v; fenced on %d partitions", ra.s.Records, ra.s.Reason, ra.err, fenced)
	if ra.err != nil {
		t.Errorf("burst A, fenced by B: %v, want no error", ra.err)
	}
	if fenced < 1 {
		t.Errorf("burst A logged no fenced partition; its log:\n%s", logA.String())
	}
	if s := f.burst(BurstOptions{}); s.Records != 0 || s.Lag != 0 {
		t.Errorf("final burst: %d records, lag %d; want 0, 0", s.Records, s.Lag)
	}
	testkit.AssertSameRecords(t, recs, testkit.ReadAll(t, c.Target.Bootstrap, f.remote(topic), readCommitted))
}

// onFetchBatch is a franz-go hook calling fn for every batch a client fetches, before its
// records are returned to the poller.
type onFetchBatch func()

func (h onFetchBatch) OnFetchBatchRead(kgo.BrokerMetadata, string, int32, kgo.FetchBatchMetrics) { h() }

// TestFakeExactlyOnceSharesTheLoop: an exactly-once burst runs the same fetch, stall and
// budget loop as a plain one. The source's ListOffsets says partition 1 of orders ends 5
// records past what it holds (a tail that yields nothing); both modes fetch the two partitions
// in one source consumer (a Fetch request naming both), copy the 20 records there are, give up
// on the stalled tail with the copier's stall watch (its log line), store positions 9 and end
// with the same summary: done, 20 records, lag 5. Before exactly-once moved onto the copier's
// loop it fetched each partition with a consumer of its own and gave up on its own rule,
// without the log line.
func TestFakeExactlyOnceSharesTheLoop(t *testing.T) {
	for _, eos := range []bool{false, true} {
		t.Run(fmt.Sprintf("exactly-once=%v", eos), func(t *testing.T) {
			f := newFakeFlow(t, map[string]int32{"orders": 2})
			f.produce("orders", 2, 10)
			var both atomic.Bool
			f.src.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
				f.src.KeepControl()
				for _, rt := range req.(*kmsg.FetchRequest).Topics { // orders is the source's one topic fetched
					if len(rt.Partitions) == 2 {
						both.Store(true)
					}
				}
				return nil, nil, false
			})
			f.src.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
				f.src.KeepControl()
				lreq := req.(*kmsg.ListOffsetsRequest)
				resp := lreq.ResponseKind().(*kmsg.ListOffsetsResponse)
				for _, rt := range lreq.Topics {
					st := kmsg.NewListOffsetsResponseTopic()
					st.Topic = rt.Topic
					for _, rp := range rt.Partitions {
						sp := kmsg.NewListOffsetsResponseTopicPartition()
						sp.Partition, sp.Timestamp, sp.LeaderEpoch = rp.Partition, -1, -1
						switch {
						case rt.Topic != "orders":
							sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
						case rp.Timestamp == -2: // earliest
							sp.Offset = 0
						default: // latest (the last stable offset under read_committed)
							sp.Offset = 10
							if rp.Partition == 1 {
								sp.Offset = 15
							}
						}
						st.Partitions = append(st.Partitions, sp)
					}
					resp.Topics = append(resp.Topics, st)
				}
				return resp, nil, true
			})
			f.opts.ExactlyOnce = eos
			f.opts.DecodeRecords = true // the plain burst copies record by record (copyLoop), not forwarding
			s, err := f.engine().Burst(context.Background(), BurstOptions{})
			if err != nil || s.Reason != ReasonDone || s.Records != 20 || s.Lag != 5 || s.ExactlyOnce != eos {
				t.Fatalf("burst: %+v, %v; want done, 20 records, lag 5, exactly-once %v", s, err, eos)
			}
			if !both.Load() {
				t.Errorf("no Fetch request named both partitions of orders: not one consumer over the burst's partitions")
			}
			if n := f.logs.count("source partitions stopped yielding records before their end offset; ending burst"); n != 1 {
				t.Errorf("the copier's stall watch ended the burst %d times, want 1; log:\n%s", n, strings.Join(f.logs.lines, "\n"))
			}
			for p := range int32(2) {
				if pos := f.positions()[TP{"orders", p}]; pos != 9 {
					t.Errorf("position of orders-%d = %d, want 9", p, pos)
				}
			}
		})
	}
}

// TestFakeCopyMetricsCountEveryRecord: a burst's metrics count every record it copied and end
// with lag 0, exactly-once too, whose records count once their transaction commits (the last
// one at the finish).
func TestFakeCopyMetricsCountEveryRecord(t *testing.T) {
	for _, eos := range []bool{false, true} {
		t.Run(fmt.Sprintf("exactly-once=%v", eos), func(t *testing.T) {
			f := newFakeFlow(t, map[string]int32{"orders": 2})
			f.produce("orders", 2, 30)
			ctx := context.Background()
			rec, err := metrics.New(ctx, metrics.Options{Function: "mirror", SourceAlias: "src", TargetAlias: "tgt", Prometheus: true})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = rec.Shutdown(ctx) }()
			f.opts.ExactlyOnce = eos
			f.opts.Metrics = rec
			if s := f.burstWith(f.engine()); s.Records != 60 {
				t.Fatalf("burst copied %d records, want 60", s.Records)
			}
			w := httptest.NewRecorder()
			rec.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			copied, lag := map[string]string{}, map[string]string{}
			for _, line := range strings.Split(w.Body.String(), "\n") {
				fields := strings.Fields(line)
				if len(fields) != 2 {
					continue
				}
				for _, p := range []string{"0", "1"} {
					part := `partition="` + p + `"`
					switch {
					case strings.HasPrefix(line, "mm2go_records_copied_total{") && strings.Contains(line, part):
						copied[p] = fields[1]
					case strings.HasPrefix(line, "mm2go_lag_records{") && strings.Contains(line, part):
						lag[p] = fields[1]
					}
				}
			}
			if fmt.Sprint(copied) != "map[0:30 1:30]" || fmt.Sprint(lag) != "map[0:0 1:0]" {
				t.Fatalf("records copied by partition %v, lag %v; want 30 each, lag 0 each\n%s", copied, lag, w.Body.String())
			}
		})
	}
}
