package engine

import (
	"bytes"
	"context"
	"errors"
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
// meets the fence on at least one partition, reports no error and no lag (taken over is the
// design working: B owns the partitions now) and commits nothing; a final burst finds nothing left; and a read_committed reader
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
	if ra.err != nil || ra.s.Lag != 0 {
		t.Errorf("burst A, fenced by B: lag %d, err %v; want lag 0 (B owns A's partitions now), no error", ra.s.Lag, ra.err)
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
// with the same summary: done, 20 records, lag 5, orders-1 given up as stalled (`mirror run`
// exits 3 on it). Before exactly-once moved onto the copier's loop it fetched each partition
// with a consumer of its own and gave up on its own rule, without the log line.
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
				return listOffsetsAnswer(req.(*kmsg.ListOffsetsRequest), func(topic string, rp kmsg.ListOffsetsRequestTopicPartition, sp *kmsg.ListOffsetsResponseTopicPartition) {
					switch {
					case topic != "orders":
						sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					case rp.Timestamp == -2: // earliest
						sp.Offset = 0
					default: // latest (the last stable offset under read_committed)
						sp.Offset = 10
						if rp.Partition == 1 {
							sp.Offset = 15
						}
					}
				}), nil, true
			})
			f.opts.ExactlyOnce = eos
			f.opts.DecodeRecords = true // the plain burst copies record by record (copyLoop), not forwarding
			s, err := f.engine().Burst(context.Background(), BurstOptions{})
			if err != nil || s.Reason != ReasonDone || s.Records != 20 || s.Lag != 5 || s.ExactlyOnce != eos {
				t.Fatalf("burst: %+v, %v; want done, 20 records, lag 5, exactly-once %v", s, err, eos)
			}
			if why := s.GivenUp["orders-1"]; len(s.GivenUp) != 1 || !strings.HasPrefix(why, "stalled: the source yielded no record from offset 10 to its end offset 15") {
				t.Errorf("partitions given up: %v; want orders-1 alone, stalled from offset 10 to 15", s.GivenUp)
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

// TestFakeExactlyOnceSettleSeeksPastOtherCommit: the commit of an exactly-once burst's first
// transaction (records up to some offset pos below 25) has an unknown outcome (its EndTxn is
// answered COORDINATOR_LOAD_IN_PROGRESS more often than the client retries), and while it
// is answered another instance with the same transactional id fences it and commits the
// partition's records 0-25 with position 25. Settling finds position 25 stored: the burst
// must go on from offset 26, not from pos+1, so a read_committed reader sees each of the 30
// records once and the position ends at 29.
func TestFakeExactlyOnceSettleSeeksPastOtherCommit(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 1})
	src := f.client(Source, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := range 30 {
		// 200 KB each: a transaction reaches txnMaxBytes (2 MiB) after about ten records.
		recs = append(recs, &kgo.Record{Topic: "orders", Key: fmt.Appendf(nil, "k%d", i), Value: bytes.Repeat([]byte{byte(i)}, 200_000)})
	}
	if err := src.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	const other = 25 // what the other instance commits
	f.extra = []kgo.Opt{kgo.RequestRetries(1)}
	var (
		mu       sync.Mutex
		answered int
		epoch    int16 // the burst's producer epoch in its first commit
		otherErr error
	)
	f.opts.ExactlyOnce = true
	e := f.engine()
	f.tgt.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.tgt.KeepControl()
		end := req.(*kmsg.EndTxnRequest)
		mu.Lock()
		n := answered
		switch {
		case !end.Commit || n >= 2 || (n == 1 && end.ProducerEpoch != epoch):
			mu.Unlock()
			return nil, nil, false // not the burst's first commit (nor the client's retry of it)
		case n == 0:
			epoch = end.ProducerEpoch
		}
		answered++
		mu.Unlock()
		if n == 0 {
			f.tgt.SleepControl(func() {
				err := f.commitAsOtherInstance(e, end.TransactionalID, TP{"orders", 0}, "src.orders", recs[:other+1])
				mu.Lock()
				otherErr = err
				mu.Unlock()
			})
		}
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp, nil, true
	})
	s, err := e.Burst(context.Background(), BurstOptions{})
	mu.Lock()
	if answered != 2 || otherErr != nil {
		t.Fatalf("%d commits answered with an unknown outcome, the other instance's commit: %v", answered, otherErr)
	}
	mu.Unlock()
	if err != nil || s.Reason != ReasonDone || s.Lag != 0 {
		t.Fatalf("burst: %+v, %v; want done, lag 0\n%s", s, err, strings.Join(f.logs.lines, "\n"))
	}
	f.assertCommittedOnce(recs, "src.orders")
	if pos := f.positions()[TP{"orders", 0}]; pos != 29 {
		t.Errorf("position of orders-0 = %d, want 29", pos)
	}
}

// commitAsOtherInstance is another instance of the flow taking tp over: a producer with the
// transactional id id initializes (fencing the burst's), writes recs to remote and position
// recs' last offset in one transaction, and commits.
func (f *fakeFlow) commitAsOtherInstance(e *Engine, id string, tp TP, remote string, recs []*kgo.Record) error {
	ctx := context.Background()
	parts, _, err := e.positions.ensure(ctx)
	if err != nil {
		return err
	}
	cl, err := f.dial(ctx, Target, kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	out := make([]*kgo.Record, 0, len(recs)+1)
	for _, r := range recs {
		out = append(out, &kgo.Record{Topic: remote, Partition: tp.Partition, Key: r.Key, Value: r.Value})
	}
	out = append(out, e.positions.record(tp, int64(len(recs)-1), parts))
	if err := cl.ProduceSync(ctx, out...).FirstErr(); err != nil {
		return err
	}
	return cl.EndTransaction(ctx, kgo.TryCommit)
}

// TestFakeExactlyOnceEpochErrorWithoutTakeover: the first commit of an exactly-once burst is
// answered INVALID_TXN_STATE, or INVALID_PRODUCER_EPOCH, with no other producer of the
// transactional id anywhere (a bug of ours, or Kafka 4's transactions V2 refusing a stale
// epoch of our own). That is no takeover: the partition must not be given up as fenced, its
// transaction is settled and written again, and the burst copies every record once.
func TestFakeExactlyOnceEpochErrorWithoutTakeover(t *testing.T) {
	for _, code := range []*kerr.Error{kerr.InvalidTxnState, kerr.InvalidProducerEpoch} {
		t.Run(code.Message, func(t *testing.T) {
			f := newFakeFlow(t, map[string]int32{"orders": 2})
			recs := f.produce("orders", 2, 30)
			var answered atomic.Bool
			f.tgt.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
				f.tgt.KeepControl()
				if !req.(*kmsg.EndTxnRequest).Commit || answered.Swap(true) {
					return nil, nil, false
				}
				resp := req.ResponseKind().(*kmsg.EndTxnResponse)
				resp.ErrorCode = code.Code
				return resp, nil, true
			})
			f.opts.ExactlyOnce = true
			s, err := f.engine().Burst(context.Background(), BurstOptions{})
			if !answered.Load() {
				t.Fatal("no commit answered with the error")
			}
			if err != nil || s.Reason != ReasonDone || s.Lag != 0 || s.Records != 60 {
				t.Fatalf("burst: %+v, %v; want 60 records, lag 0, done\n%s", s, err, strings.Join(f.logs.lines, "\n"))
			}
			if n := f.logs.count("partition taken over by another instance (fenced)"); n != 0 {
				t.Fatalf("%d partitions given up as fenced with no other producer", n)
			}
			f.assertCommittedOnce(recs, "src.orders")
		})
	}
}

// liveTxnProducers counts the transactional producers (clients with a transactional id)
// open at once, and the most open at once.
type liveTxnProducers struct{ live, peak, total atomic.Int32 }

func isTxnProducer(cl *kgo.Client) bool {
	id, _ := cl.OptValue(kgo.TransactionalID).(string)
	return id != ""
}

func (l *liveTxnProducers) OnNewClient(cl *kgo.Client) {
	if !isTxnProducer(cl) {
		return
	}
	l.total.Add(1)
	n := l.live.Add(1)
	for p := l.peak.Load(); n > p && !l.peak.CompareAndSwap(p, n); p = l.peak.Load() {
	}
}

func (l *liveTxnProducers) OnClientClosed(cl *kgo.Client) {
	if isTxnProducer(cl) {
		l.live.Add(-1)
	}
}

// TestFakeExactlyOnceBoundsProducers: an exactly-once burst over 120 partitions (5 records
// each) holds at most eosProducers transactional producers open at once (each a client of its
// own), one per partition being copied, and still copies every record once, read_committed,
// with every position at the partition's last record. Every producer is closed at the end.
func TestFakeExactlyOnceBoundsProducers(t *testing.T) {
	const parts = 120
	f := newFakeFlow(t, map[string]int32{"orders": parts})
	recs := f.produce("orders", parts, 5)
	live := &liveTxnProducers{}
	f.tgtExtra = []kgo.Opt{kgo.WithHooks(live)}
	f.opts.ExactlyOnce = true
	s, err := f.engine().Burst(context.Background(), BurstOptions{})
	if err != nil || s.Reason != ReasonDone || s.Lag != 0 || s.Records != int64(len(recs)) {
		t.Fatalf("burst: %+v, %v; want %d records, lag 0, done", s, err, len(recs))
	}
	if peak, total := live.peak.Load(), live.total.Load(); peak > eosProducers || total < parts {
		t.Fatalf("%d transactional producers open at once (of %d opened), want at most %d, and one at least per partition (%d)", peak, total, eosProducers, parts)
	}
	if n := live.live.Load(); n != 0 {
		t.Fatalf("%d transactional producers left open after the burst", n)
	}
	f.assertCommittedOnce(recs, "src.orders")
	pos := f.positions()
	for p := range int32(parts) {
		if pos[TP{"orders", p}] != 4 {
			t.Errorf("position of orders-%d = %d, want 4", p, pos[TP{"orders", p}])
		}
	}
}

// TestFakeExactlyOnceStopWhileSettlingWaitsGrace: a stop request that arrives while an
// exactly-once commit is being settled, with the settling's read of the stored position
// waiting for an open transaction on the offsets topic to be decided (waitStable, which waits
// up to the transaction timeout and 15 s more), ends the burst after the copy's grace: it
// fails with the commit unsettled (the next run settles it), not after waitStable gave up.
func TestFakeExactlyOnceStopWhileSettlingWaitsGrace(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 1})
	f.produce("orders", 1, 10)
	f.extra = []kgo.Opt{kgo.RequestRetries(1)}
	f.opts.ExactlyOnce = true
	e := f.engine()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	holder := f.client(Target, kgo.TransactionalID("holder"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(10*time.Minute))
	var (
		mu       sync.Mutex
		answered int
		holdErr  error
		stopped  atomic.Bool
	)
	f.tgt.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.tgt.KeepControl()
		end := req.(*kmsg.EndTxnRequest)
		mu.Lock()
		if !end.Commit || end.TransactionalID == "holder" || answered >= 2 {
			mu.Unlock()
			return nil, nil, false
		}
		answered++
		n := answered
		mu.Unlock() // not held while sleeping: the wakeup takes it
		if n == 1 {
			// An open transaction on the offsets topic's partition of orders-0's position.
			f.tgt.SleepControl(func() {
				parts, _, err := e.positions.ensure(context.Background())
				if err == nil {
					err = holder.BeginTransaction()
				}
				if err == nil {
					err = holder.ProduceSync(context.Background(), e.positions.record(TP{"orders", 0}, 3, parts)).FirstErr()
				}
				mu.Lock()
				holdErr = err
				mu.Unlock()
			})
		}
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp, nil, true
	})
	f.tgt.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.tgt.KeepControl()
		mu.Lock()
		settling := answered >= 2
		mu.Unlock()
		if settling && req.(*kmsg.ListOffsetsRequest).IsolationLevel == 1 && !stopped.Swap(true) {
			cancel() // the stop request, while the settling waits for the offsets topic
		}
		return nil, nil, false
	})
	s, err := e.Burst(ctx, BurstOptions{Grace: 200 * time.Millisecond})
	mu.Lock()
	if answered != 2 || holdErr != nil || !stopped.Load() {
		t.Fatalf("%d commits unsettled, open transaction: %v, stop requested while settling: %v", answered, holdErr, stopped.Load())
	}
	mu.Unlock()
	var u *unsettledCommit
	if !errors.As(err, &u) || strings.Contains(err.Error(), "undecided") {
		t.Fatalf("burst: %v (summary %+v); want the commit unsettled by the stop, not waitStable's giving up", err, s)
	}
}

// assertCommittedOnce checks that a read_committed reader of remote on the target sees each of
// recs (by key) exactly once.
func (f *fakeFlow) assertCommittedOnce(recs []*kgo.Record, remote string) {
	f.t.Helper()
	seen := map[string]int{}
	for _, r := range f.readAllOpts(Target, remote, kgo.FetchIsolationLevel(kgo.ReadCommitted())) {
		seen[string(r.Key)]++
	}
	for _, r := range recs {
		if n := seen[string(r.Key)]; n != 1 {
			f.t.Errorf("record %s committed %d times on the target, want once", r.Key, n)
		}
	}
}

// TestFakeExactlyOnceTakenOverIsOwnedElsewhere: while an exactly-once burst commits its first
// transaction of orders-0, another instance of the flow takes the partition over (its
// producer with the same transactional id fences the burst's) and commits all of the
// partition's records with their position. The burst gives orders-0 up to it and copies
// orders-1: it is done with nothing left to it (lag 0, as a burst group member whose partition
// another member took: a `mirror run` exits 0), the summary names orders-0 as owned by
// another instance now, and the target holds every record once.
func TestFakeExactlyOnceTakenOverIsOwnedElsewhere(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 2})
	recs := f.produce("orders", 2, 30)
	f.opts.ExactlyOnce = true
	e := f.engine()
	id := e.TransactionalID(TP{"orders", 0})
	var (
		took     atomic.Bool
		otherErr atomic.Value
	)
	f.tgt.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.tgt.KeepControl()
		if end := req.(*kmsg.EndTxnRequest); !end.Commit || end.TransactionalID != id || took.Swap(true) {
			return nil, nil, false
		}
		f.tgt.SleepControl(func() {
			if err := f.commitAsOtherInstance(e, id, TP{"orders", 0}, "src.orders", inPartition(recs, 0)); err != nil {
				otherErr.Store(err)
			}
		})
		return nil, nil, false // answered as the broker does: this producer is fenced now
	})
	s, err := e.Burst(context.Background(), BurstOptions{})
	if !took.Load() || otherErr.Load() != nil {
		t.Fatalf("the other instance took orders-0 over: %v, its commit: %v", took.Load(), otherErr.Load())
	}
	if err != nil || s.Reason != ReasonDone || s.Lag != 0 || s.MoreToDo() {
		t.Errorf("burst: reason %s, lag %d, records %d, err %v; want done with lag 0 (orders-0 is the other instance's now)", s.Reason, s.Lag, s.Records, err)
	}
	if why := s.GivenUp["orders-0"]; len(s.GivenUp) != 1 || !strings.HasPrefix(why, "fenced: another instance took it over") || !strings.HasSuffix(why, "; another instance owns it now") {
		t.Errorf("partitions given up: %v; want orders-0 alone, fenced, owned by another instance now", s.GivenUp)
	}
	f.assertCommittedOnce(recs, "src.orders")
}

// TestFakeExactlyOnceNewIDsNotFenced: a flow's first exactly-once burst over 3 partitions finds
// none of their transactional ids known to the coordinator, so nothing is there to fence: it
// initializes 3 producer ids (its producers'), not 6. A second burst of the same flow, whose
// ids are known now, fences each first (6). The target holds the 45 records once.
func TestFakeExactlyOnceNewIDsNotFenced(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 3})
	f.produce("orders", 3, 10)
	f.opts.ExactlyOnce = true
	inits := countRequests(f.tgt, kmsg.InitProducerID)
	if s, err := f.engine().Burst(context.Background(), BurstOptions{}); err != nil || s.Records != 30 || s.Lag != 0 {
		t.Fatalf("first burst: %+v, %v; want 30 records, lag 0", s, err)
	}
	if n := loaded(inits); n != 3 {
		t.Errorf("first burst: %d InitProducerId requests, want 3 (one per producer, no fencing of new ids)", n)
	}
	f.produce("orders", 3, 5) // keys k<p>-0 to k<p>-4 again, at offsets 10-14
	if s, err := f.engine().Burst(context.Background(), BurstOptions{}); err != nil || s.Records != 15 || s.Lag != 0 {
		t.Fatalf("second burst: %+v, %v; want 15 records, lag 0", s, err)
	}
	if n := loaded(inits); n != 3+6 {
		t.Errorf("second burst: %d InitProducerId requests, want 6 (each known id fenced, then its producer)", n-3)
	}
	if got := f.readAllOpts(Target, "src.orders", readCommitted); len(got) != 45 {
		t.Errorf("a read_committed reader sees %d records on the target, want 45", len(got))
	}
}

// TestFakeExactlyOnceNewIDTakenBeforeItsProducer: orders-0's transactional id is new when the
// burst starts (not fenced), and another instance of the flow initializes it and commits all
// of orders-0 with its position just before the burst's own producer of it initializes. The
// producer's epoch (1, not 0) shows it: the burst reads the position again and leaves orders-0,
// copied to its end, alone; every record is on the target once.
func TestFakeExactlyOnceNewIDTakenBeforeItsProducer(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 2})
	recs := f.produce("orders", 2, 10)
	f.opts.ExactlyOnce = true
	e := f.engine()
	id := e.TransactionalID(TP{"orders", 0})
	var (
		first, other atomic.Bool
		otherErr     atomic.Value
	)
	f.tgt.ControlKey(int16(kmsg.InitProducerID), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.tgt.KeepControl()
		r := req.(*kmsg.InitProducerIDRequest)
		if r.TransactionalID == nil || *r.TransactionalID != id || other.Load() || first.Swap(true) {
			return nil, nil, false
		}
		f.tgt.SleepControl(func() {
			other.Store(true)
			if err := f.commitAsOtherInstance(e, id, TP{"orders", 0}, "src.orders", inPartition(recs, 0)); err != nil {
				otherErr.Store(err)
			}
		})
		return nil, nil, false
	})
	s, err := e.Burst(context.Background(), BurstOptions{})
	if !other.Load() || otherErr.Load() != nil {
		t.Fatalf("the other instance's commit: ran %v, %v", other.Load(), otherErr.Load())
	}
	if err != nil || s.Reason != ReasonDone || s.Lag != 0 || s.Records != 10 {
		t.Errorf("burst: reason %s, records %d, lag %d, err %v; want done, 10 records (orders-1), lag 0", s.Reason, s.Records, s.Lag, err)
	}
	f.assertCommittedOnce(recs, "src.orders")
	if pos := f.positions(); pos[TP{"orders", 0}] != 9 || pos[TP{"orders", 1}] != 9 {
		t.Errorf("positions %v, want 9 for both partitions", pos)
	}
}

// TestFakeExactlyOnceCoordinatorLoadingStillSkipsFencing: a cluster that never served a
// transaction creates its transaction state topic on the first request that needs a
// coordinator, and answers COORDINATOR_NOT_AVAILABLE until it is loaded (a fresh Kafka 4.1.1
// broker did for the first DescribeTransactions of a 1,000-partition copy, which then fenced
// every id: 1,000 needless InitProducerId requests, 3 s). The burst asks again and, the ids
// being unknown, initializes only its producers' 3 ids.
func TestFakeExactlyOnceCoordinatorLoadingStillSkipsFencing(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 3})
	recs := f.produce("orders", 3, 10)
	f.opts.ExactlyOnce = true
	var refused atomic.Int32
	f.tgt.ControlKey(int16(kmsg.FindCoordinator), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.tgt.KeepControl()
		r := req.(*kmsg.FindCoordinatorRequest)
		if r.CoordinatorType != 1 || refused.Load() >= 2 { // 1: transaction coordinator
			return nil, nil, false
		}
		refused.Add(1)
		resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		keys := r.CoordinatorKeys
		if len(keys) == 0 && r.CoordinatorKey != "" {
			keys = []string{r.CoordinatorKey}
		}
		for _, k := range keys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.ErrorCode = k, kerr.CoordinatorNotAvailable.Code
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return resp, nil, true
	})
	inits := countRequests(f.tgt, kmsg.InitProducerID)
	if s, err := f.engine().Burst(context.Background(), BurstOptions{}); err != nil || s.Records != 30 || s.Lag != 0 {
		t.Fatalf("burst: %+v, %v; want 30 records, lag 0", s, err)
	}
	if n := refused.Load(); n != 2 {
		t.Fatalf("the target refused %d FindCoordinator requests, want 2: the test did not hold what it meant to", n)
	}
	if n := loaded(inits); n != 3 {
		t.Errorf("%d InitProducerId requests, want 3 (one per producer): the ids the loading coordinator could not describe were fenced all the same", n)
	}
	f.assertCommittedOnce(recs, "src.orders")
}

// TestFakeExactlyOnceAdmitsServedPartitionsFirst: of 70 partitions, the target serves the
// remote partitions 64-69 at once and the others (0-63, the first eosProducers in plan order)
// only after a while, as a broker serves a thousand new partitions some seconds after their
// topics were created. The copy gives its first producers to the partitions the target serves
// (the first transactional producers initialized are those of 64-69), not to the first in plan
// order, whose first writes would wait; every record is still copied once.
func TestFakeExactlyOnceAdmitsServedPartitionsFirst(t *testing.T) {
	const parts, late = 70, 64
	f := newFakeFlow(t, map[string]int32{"orders": parts})
	recs := f.produce("orders", parts, 2)
	f.opts.ExactlyOnce = true
	var (
		mu      sync.Mutex
		first   time.Time // the first check of the remote partitions
		initted []string  // transactional ids, in the order their producers were initialized
	)
	f.tgt.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.tgt.KeepControl()
		lreq := req.(*kmsg.ListOffsetsRequest)
		for _, rt := range lreq.Topics {
			if rt.Topic != "src.orders" {
				return nil, nil, false
			}
		}
		mu.Lock()
		if first.IsZero() {
			first = time.Now()
		}
		serving := time.Since(first) > 500*time.Millisecond
		mu.Unlock()
		if serving {
			return nil, nil, false
		}
		return listOffsetsAnswer(lreq, func(_ string, rp kmsg.ListOffsetsRequestTopicPartition, sp *kmsg.ListOffsetsResponseTopicPartition) {
			sp.Offset = 0 // new and empty
			if rp.Partition < late {
				sp.ErrorCode, sp.Offset = kerr.NotLeaderForPartition.Code, -1
			}
		}), nil, true
	})
	f.tgt.ControlKey(int16(kmsg.InitProducerID), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.tgt.KeepControl()
		if id := req.(*kmsg.InitProducerIDRequest).TransactionalID; id != nil {
			mu.Lock()
			initted = append(initted, *id)
			mu.Unlock()
		}
		return nil, nil, false
	})
	s, err := f.engine().Burst(context.Background(), BurstOptions{})
	if err != nil || s.Reason != ReasonDone || s.Lag != 0 || s.Records != int64(len(recs)) {
		t.Fatalf("burst: %+v, %v; want %d records, lag 0, done", s, err, len(recs))
	}
	f.assertCommittedOnce(recs, "src.orders")
	mu.Lock()
	defer mu.Unlock()
	if len(initted) < parts-late {
		t.Fatalf("%d transactional producers initialized, want at least %d", len(initted), parts-late)
	}
	for _, id := range initted[:parts-late] {
		var p int
		if _, err := fmt.Sscanf(id[strings.LastIndex(id, "-")+1:], "%d", &p); err != nil || p < late {
			t.Fatalf("transactional producers initialized first: %v; want those of partitions %d-%d (served) before any other", initted[:parts-late], late, parts-1)
		}
	}
}
