package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mm2go/mm2go/shared/mm2"
)

// Deterministic faults of the target, injected by kfake, against the engine's exported API:
// each runs on the engine's three ways of writing to the target (a burst's record producer, a
// burst's batch forwarder, serve's copies of one partition each) and asserts what a user would
// check afterwards: the remote topic byte for byte, the stored positions and the offset syncs.

// writePath is one way the engine copies records to the target.
type writePath struct {
	name   string
	decode bool // DecodeRecords: the record producer, not the batch forwarder
	serve  bool // CopyPartition per partition on one long-lived engine, not Burst
}

// onWritePaths runs test as parallel subtests, one per writePath. Each gets a flow whose
// source topic orders has 2 partitions of 30 records, and copy, which copies orders to its
// end: a burst (failing unless it ends done with lag 0) or serve's copy of each partition (one
// engine, the sweep off so that each call copies its own partition), and returns how many
// records were copied.
func onWritePaths(t *testing.T, test func(t *testing.T, f *fakeFlow, recs []*kgo.Record, copy func() (int64, error))) {
	for _, path := range []writePath{{name: "records", decode: true}, {name: "batches"}, {name: "serve", serve: true}} {
		t.Run(path.name, func(t *testing.T) {
			f := newFakeFlow(t, map[string]int32{"orders": 2})
			recs := f.produce("orders", 2, 30)
			f.opts.DecodeRecords = path.decode
			f.opts.NoSweep = path.serve
			var served *Engine
			copy := func() (int64, error) {
				ctx := context.Background()
				if !path.serve {
					s, err := f.engine().Burst(ctx, BurstOptions{})
					if err == nil && (s.Lag != 0 || s.Reason != ReasonDone) {
						err = fmt.Errorf("burst ended %s with lag %d", s.Reason, s.Lag)
					}
					return s.Records, err
				}
				if served == nil {
					served = f.engine()
				}
				var n int64
				var errs []error
				for p := range int32(2) {
					s, err := served.CopyPartition(ctx, "orders", p, -1)
					n += s.Records
					errs = append(errs, err)
				}
				return n, errors.Join(errs...)
			}
			test(t, f, recs, copy)
		})
	}
}

// topicID creates topic on the target as the engine would (parts partitions) and returns its
// ID: produce requests from version 13 name a topic by ID only.
func (f *fakeFlow) topicID(topic string, parts int32) [16]byte {
	f.t.Helper()
	f.createTopic(Target, topic, parts, nil)
	md, err := kadm.NewClient(f.client(Target)).Metadata(context.Background(), topic)
	if err != nil || md.Topics[topic].Err != nil {
		f.t.Fatalf("metadata of %s: %v %v", topic, err, md.Topics[topic].Err)
	}
	return md.Topics[topic].ID
}

// producesTo reports whether a produce request carries records for the topic of name or id.
func producesTo(req kmsg.Request, name string, id [16]byte) bool {
	for _, rt := range req.(*kmsg.ProduceRequest).Topics {
		if rt.Topic == name || rt.TopicID == id {
			return true
		}
	}
	return false
}

// failProduce answers a produce request with code for every partition it carries, having
// written none of them.
func failProduce(req kmsg.Request, code int16) kmsg.Response {
	preq := req.(*kmsg.ProduceRequest)
	resp := preq.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range preq.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// copiesAll runs copy (onWritePaths) on the flow's 2-partition topic orders, holding recs (30
// per partition), and checks it copied every record once, byte for byte, with positions and
// the final offset syncs at the last record. check runs between the copy and the assertions
// on the target (the test's own check that its fault happened).
func (f *fakeFlow) copiesAll(recs []*kgo.Record, copy func() (int64, error), check func()) {
	f.t.Helper()
	if n, err := copy(); err != nil || n != 60 {
		f.t.Fatalf("copy: %d records, %v; want 60\n%s", n, err, strings.Join(f.logs.lines, "\n"))
	}
	check()
	f.assertCopied(recs, "src.orders")
	pos := f.positions()
	for p := range int32(2) {
		if pos[TP{"orders", p}] != 29 {
			f.t.Errorf("position of orders-%d = %d, want 29", p, pos[TP{"orders", p}])
		}
	}
	f.assertSyncsEndAt("orders", 2, 29)
}

// assertSyncsEndAt checks that the last offset sync of each partition of topic is last->last
// (a gapless copy), for parts partitions.
func (f *fakeFlow) assertSyncsEndAt(topic string, parts int32, last int64) {
	f.t.Helper()
	syncs := f.readSyncs(topic)
	for p := range parts {
		ss := syncs[p]
		if len(ss) == 0 || ss[len(ss)-1].UpstreamOffset != last || ss[len(ss)-1].DownstreamOffset != last {
			f.t.Errorf("offset syncs of %s-%d: %+v; want %d->%d last", topic, p, ss, last, last)
		}
	}
}

// TestFakeRetriableProduceErrorRiddenOut: the target answers the first five produce requests
// of the remote topic with NOT_ENOUGH_REPLICAS (retriable, nothing written), as a target
// losing an in-sync replica does. The burst rides it out: it succeeds, the remote topic holds
// every source record once, in order, byte for byte (no duplicate: a refused request wrote
// nothing), and positions and the final offset syncs are at the end.
func TestFakeRetriableProduceErrorRiddenOut(t *testing.T) {
	onWritePaths(t, func(t *testing.T, f *fakeFlow, recs []*kgo.Record, copy func() (int64, error)) {
		id := f.topicID("src.orders", 2)
		var refused atomic.Int32
		f.tgt.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
			f.tgt.KeepControl()
			if !producesTo(req, "src.orders", id) || refused.Load() >= 5 {
				return nil, nil, false
			}
			refused.Add(1)
			return failProduce(req, kerr.NotEnoughReplicas.Code), nil, true
		})
		f.copiesAll(recs, copy, func() {
			if n := refused.Load(); n != 5 {
				t.Fatalf("%d produce requests refused, want 5 (the test needs the fault)", n)
			}
		})
	})
}

// TestFakeProduceOutcomeUnknown: the target writes the first two produce requests of the
// remote topic and then answers them with REQUEST_TIMED_OUT, so the engine cannot know they
// were written. No record may be lost. Any copy sent again is a duplicate the at-least-once
// contract allows; the idempotent producer (the engine's default, on both paths) lets the
// target recognise the resent batch, so the count of duplicates is exactly zero. Positions and
// offset syncs end at the last record.
func TestFakeProduceOutcomeUnknown(t *testing.T) {
	onWritePaths(t, func(t *testing.T, f *fakeFlow, recs []*kgo.Record, copy func() (int64, error)) {
		// kfake applies a produce faulted with REQUEST_TIMED_OUT before answering with it.
		fault := f.tgt.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "src.orders", Err: kerr.RequestTimedOut, Count: 2})
		f.copiesAll(recs, copy, func() {
			if n := fault.Hits(); n != 2 {
				t.Fatalf("%d produce requests written and answered REQUEST_TIMED_OUT, want 2 (the test needs the fault)", n)
			}
			got := f.readAll(Target, "src.orders")
			seen := map[string]int{}
			dups := 0
			for _, r := range got {
				if seen[string(r.Key)]++; seen[string(r.Key)] > 1 {
					dups++
				}
			}
			for _, r := range recs {
				if seen[string(r.Key)] == 0 {
					t.Errorf("record %q (orders-%d offset %d) lost", r.Key, r.Partition, r.Offset)
				}
			}
			if dups != 0 {
				t.Errorf("%d duplicates on src.orders (%d records for %d), want 0: the idempotent producer's resend is recognised", dups, len(got), len(recs))
			}
		})
	})
}

// TestFakeProduceAuthorizationFails: after a first burst copied 30 records of each partition,
// the target refuses every produce to partition 1 of the remote topic with
// TOPIC_AUTHORIZATION_FAILED (an ACL removed). The next burst fails with an error naming the
// partition and the authorization failure; partition 1's stored position stays at what is on
// the target (29), and no offset sync of partition 1 points past it; partition 0 is copied
// to its end.
func TestFakeProduceAuthorizationFails(t *testing.T) {
	onWritePaths(t, func(t *testing.T, f *fakeFlow, recs []*kgo.Record, copy func() (int64, error)) {
		if n, err := copy(); err != nil || n != 60 {
			t.Fatalf("first copy: %d records, %v; want 60", n, err)
		}
		recs = append(recs, f.produce("orders", 2, 30)...)
		f.tgt.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "src.orders", Partitions: []int32{1},
			Err: kerr.TopicAuthorizationFailed, Count: -1})
		if n, err := copy(); err == nil {
			t.Fatalf("copy refused by the target: %d records, no error; want it failed", n)
		} else if !errors.Is(err, kerr.TopicAuthorizationFailed) || !strings.Contains(err.Error(), "orders-1") {
			t.Errorf("error %q; want TOPIC_AUTHORIZATION_FAILED naming orders-1", err)
		}
		got := f.readAll(Target, "src.orders")
		if n := len(inPartition(got, 1)); n != 30 {
			t.Fatalf("orders-1 has %d records on the target, want the first burst's 30", n)
		}
		// Partition 0 may be stopped by the failed copy anywhere after its first 30: what
		// it has on the target is a prefix of the source, once each.
		got0, want0 := inPartition(got, 0), inPartition(recs, 0)
		if len(got0) < 30 || len(got0) > len(want0) {
			t.Fatalf("orders-0 has %d records on the target, want 30 to %d", len(got0), len(want0))
		}
		for i, g := range got0 {
			if string(g.Key) != string(want0[i].Key) || string(g.Value) != string(want0[i].Value) {
				t.Fatalf("record %d of orders-0 on the target: %q=%q, want %q=%q", i, g.Key, g.Value, want0[i].Key, want0[i].Value)
			}
		}
		pos := f.positions()
		if p := pos[TP{"orders", 1}]; p != 29 {
			t.Errorf("position of orders-1 = %d, want 29 (the last record on the target)", p)
		}
		if p := pos[TP{"orders", 0}]; p < 29 || p >= int64(len(got0)) {
			t.Errorf("position of orders-0 = %d, want 29 to %d (the records on the target)", p, len(got0)-1)
		}
		for _, sy := range f.readSyncs("orders")[1] {
			if sy.UpstreamOffset > 29 || sy.DownstreamOffset > 29 {
				t.Errorf("offset sync %+v of orders-1 past the records on the target", sy)
			}
		}
	})
}

// producedRecords counts the records a produce request carries for the topic of name or id.
func producedRecords(t testing.TB, req kmsg.Request, name string, id [16]byte) int {
	n := 0
	for _, rt := range req.(*kmsg.ProduceRequest).Topics {
		if rt.Topic != name && rt.TopicID != id {
			continue
		}
		for _, rp := range rt.Partitions {
			for b := rp.Records; len(b) > 0; {
				var batch kmsg.RecordBatch
				if err := batch.ReadFrom(b); err != nil {
					t.Errorf("undecodable batch in a produce request: %v", err)
					return n
				}
				n += int(batch.NumRecords)
				b = b[12+int(batch.Length):]
			}
		}
	}
	return n
}

// TestFakeProduceOutcomeUnknownWithoutIdempotence: as TestFakeProduceOutcomeUnknown, with the
// user's producer not idempotent (producer.enable.idempotence=false), so the target cannot
// recognise a resent batch. No record is lost, and the duplicates are exactly the records of
// the two requests written whose answer was an error (each was sent once more); positions end
// at the last record and every offset sync maps a source record to one of its copies.
func TestFakeProduceOutcomeUnknownWithoutIdempotence(t *testing.T) {
	onWritePaths(t, func(t *testing.T, f *fakeFlow, recs []*kgo.Record, copy func() (int64, error)) {
		f.tgtExtra = []kgo.Opt{kgo.DisableIdempotentWrite()}
		id := f.topicID("src.orders", 2)
		// The control sees every produce request before the fault does, in the same
		// order: the first two of the remote topic are the faulted ones.
		var seen, faulted atomic.Int32
		f.tgt.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
			f.tgt.KeepControl()
			if producesTo(req, "src.orders", id) && seen.Add(1) <= 2 {
				faulted.Add(int32(producedRecords(t, req, "src.orders", id)))
			}
			return nil, nil, false
		})
		fault := f.tgt.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "src.orders", Err: kerr.RequestTimedOut, Count: 2})
		if n, err := copy(); err != nil || n != 60 {
			t.Fatalf("copy: %d records, %v; want 60\n%s", n, err, strings.Join(f.logs.lines, "\n"))
		}
		if n := fault.Hits(); n != 2 || faulted.Load() == 0 {
			t.Fatalf("%d produce requests (%d records) written and answered REQUEST_TIMED_OUT, want 2 (the test needs the fault)", n, faulted.Load())
		}
		got := f.readAll(Target, "src.orders")
		copies := map[string]int{}
		for _, r := range got {
			copies[string(r.Key)]++
		}
		for _, r := range recs {
			if copies[string(r.Key)] == 0 {
				t.Errorf("record %q (orders-%d offset %d) lost", r.Key, r.Partition, r.Offset)
			}
		}
		t.Logf("%d records on the target for %d: %d in the two requests answered with an error", len(got), len(recs), faulted.Load())
		if dups := len(got) - len(recs); dups != int(faulted.Load()) {
			t.Errorf("%d duplicates on src.orders, want %d: the records of the two requests answered with an error, sent once more", dups, faulted.Load())
		}
		pos := f.positions()
		for p := range int32(2) {
			if pos[TP{"orders", p}] != 29 {
				t.Errorf("position of orders-%d = %d, want 29", p, pos[TP{"orders", p}])
			}
		}
		syncs := f.readSyncs("orders")
		var all []mm2.OffsetSync
		for p := range int32(2) {
			if ss := syncs[p]; len(ss) == 0 || ss[len(ss)-1].UpstreamOffset != 29 {
				t.Errorf("offset syncs of orders-%d: %+v; want 29 last", p, ss)
			}
			all = append(all, syncs[p]...)
		}
		assertSyncsPointAtCopies(t, all, "orders", recs, got)
	})
}

// TestFakeUnconfirmedRecordsReported: the target answers every produce to the remote topic
// with NOT_LEADER_OR_FOLLOWER (a leader that is going away), so no record is acknowledged, and
// the burst is stopped by its MaxDuration with a short Grace. Its summary counts the records
// it sent whose outcome it does not know (Unconfirmed): the target may hold them and the next
// burst copies them again, the duplicates at-least-once allows. Before this field a failed
// burst's summary said only what was acknowledged, and a run that met a target outage could
// leave on the target thousands of records more than its summary accounted for.
func TestFakeUnconfirmedRecordsReported(t *testing.T) {
	for _, decode := range []bool{true, false} {
		t.Run(map[bool]string{true: "records", false: "batches"}[decode], func(t *testing.T) {
			f := newFakeFlow(t, map[string]int32{"orders": 2})
			f.produce("orders", 2, 30)
			f.opts.DecodeRecords = decode
			id := f.topicID("src.orders", 2)
			var refused atomic.Int64
			f.tgt.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
				f.tgt.KeepControl()
				if !producesTo(req, "src.orders", id) {
					return nil, nil, false
				}
				refused.Add(1)
				return failProduce(req, kerr.NotLeaderForPartition.Code), nil, true
			})
			s, _ := f.engine().Burst(context.Background(), BurstOptions{MaxDuration: 300 * time.Millisecond, Grace: 200 * time.Millisecond})
			if refused.Load() == 0 {
				t.Fatal("no produce to src.orders was refused (the test needs the fault)")
			}
			if s.Records != 0 || s.Lag != 60 {
				t.Errorf("summary: %d records copied, lag %d; want 0 and 60", s.Records, s.Lag)
			}
			if s.Unconfirmed != 60 {
				t.Errorf("summary: %d records unconfirmed, want 60 (every record sent, none acknowledged)\n%s", s.Unconfirmed, strings.Join(f.logs.lines, "\n"))
			}
		})
	}
}
