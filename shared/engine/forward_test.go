package engine

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
)

// codecs are the producers' codecs the forwarding tests run with, by name.
var codecs = map[string]kgo.CompressionCodec{
	"none": kgo.NoCompression(),
	"lz4":  kgo.Lz4Compression(),
	"zstd": kgo.ZstdCompression(),
}

// produceWith produces recs with a producer compressing with codec, each partition's records
// in batches of at most batch records (a ProduceSync per round).
func produceWith(t *testing.T, bootstrap string, codec kgo.CompressionCodec, batch int, recs []*kgo.Record) {
	t.Helper()
	cl := testkit.Client(t, bootstrap, kgo.ProducerBatchCompression(codec), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(50*time.Millisecond))
	ctx := testkit.Context(t, 30*time.Second)
	for i := 0; i < len(recs); i += batch {
		if err := cl.ProduceSync(ctx, recs[i:min(i+batch, len(recs))]...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// assertSyncsPointAtCopies checks that every offset sync of topic maps an upstream record to
// its copy: the remote record at the downstream offset has the source record's key, value and
// timestamp.
func assertSyncsPointAtCopies(t *testing.T, f *flow, topic string, src, dst []*kgo.Record) {
	t.Helper()
	type at struct {
		p   int32
		off int64
	}
	up, down := map[at]*kgo.Record{}, map[at]*kgo.Record{}
	for _, r := range src {
		up[at{r.Partition, r.Offset}] = r
	}
	for _, r := range dst {
		down[at{r.Partition, r.Offset}] = r
	}
	syncs := f.syncs(topic)
	if len(syncs) == 0 {
		t.Errorf("no offset syncs for %s", topic)
	}
	for _, s := range syncs {
		u, d := up[at{s.Partition, s.UpstreamOffset}], down[at{s.Partition, s.DownstreamOffset}]
		if u == nil || d == nil || !bytes.Equal(u.Key, d.Key) || !bytes.Equal(u.Value, d.Value) || !u.Timestamp.Equal(d.Timestamp) {
			t.Errorf("offset sync %s-%d %d->%d does not map a record to its copy", topic, s.Partition, s.UpstreamOffset, s.DownstreamOffset)
		}
	}
}

// TestForwardByteExact: with the target producer writing the source batches' codec, a burst
// forwards every batch (ForwardedRecords is every record), including a partition with a
// committed and an aborted transaction (their markers are not copied; the aborted records are,
// as read_uncommitted copies them), and the remote records are the source's byte for byte,
// written by an idempotent producer; positions and offset syncs are MM2's.
func TestForwardByteExact(t *testing.T) {
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			c := testkit.Require(t)
			src := c.Source.Bootstrap
			topic := testkit.CreateTopic(t, src, testkit.Name(t, "fwd-"+name), 3, nil)
			recs := testkit.SampleRecords(topic, 3, 600)
			for i := range recs {
				recs[i].Value = bytes.Repeat(recs[i].Value, 8) // compressible
			}
			produceWith(t, src, codec, 150, recs)
			txn := testkit.Client(t, src, kgo.TransactionalID(testkit.Name(t, "txn")), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(codec))
			ctx := testkit.Context(t, 30*time.Second)
			for _, commit := range []bool{true, false} {
				if err := txn.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				tr := testkit.SampleRecords(topic, 1, 20)
				if err := txn.ProduceSync(ctx, tr...).FirstErr(); err != nil {
					t.Fatal(err)
				}
				if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
					t.Fatal(err)
				}
			}
			produceWith(t, src, codec, 150, testkit.SampleRecords(topic, 3, 30))

			f := newFlow(t, topic)
			s, err := f.engineSides(nil, []kgo.Opt{kgo.ProducerBatchCompression(codec)}).Burst(testkit.Context(t, 2*time.Minute), BurstOptions{})
			if err != nil {
				t.Fatalf("burst: %v", err)
			}
			const total = 600 + 40 + 30
			if s.Records != total || s.ForwardedRecords != total || s.Lag != 0 || s.Reason != ReasonDone {
				t.Fatalf("summary: %d records, %d forwarded, lag %d, %s; want %d, all forwarded, 0, done", s.Records, s.ForwardedRecords, s.Lag, s.Reason, total)
			}
			want := sourceRecords(t, src, topic)
			got := testkit.ReadAll(t, c.Target.Bootstrap, f.remote(topic))
			testkit.AssertSameRecords(t, want, got)
			for _, r := range got {
				if r.ProducerID < 0 || r.Attrs.IsTransactional() {
					t.Fatalf("remote record %d/%d: producer ID %d, transactional %v; want an idempotent, plain batch", r.Partition, r.Offset, r.ProducerID, r.Attrs.IsTransactional())
				}
				if want := codec; name != "none" && r.Attrs.CompressionType() == 0 {
					t.Fatalf("remote record %d/%d is uncompressed, want %v", r.Partition, r.Offset, want)
				}
			}
			ends := map[int32]int64{}
			for _, r := range want {
				ends[r.Partition] = r.Offset
			}
			pos := f.positions()
			for p := range int32(3) {
				// Partition 0's last offset is the abort marker's, which the position covers.
				if p != 0 && pos[TP{topic, p}] != ends[p] || p == 0 && pos[TP{topic, p}] < ends[p] {
					t.Errorf("position of %s-%d = %d, want %d", topic, p, pos[TP{topic, p}], ends[p])
				}
			}
			assertSyncsPointAtCopies(t, f, topic, want, got)
		})
	}
}

// TestForwardHandsOver: a partition whose batches cannot all be forwarded is copied record by
// record from the first one that cannot, in order, without a record lost or copied twice: a
// copy that resumes inside a batch, and a batch whose codec is not the target producer's
// after batches that are. The next burst, starting at a batch boundary, forwards again.
func TestForwardHandsOver(t *testing.T) {
	c := testkit.Require(t)
	src := c.Source.Bootstrap
	topic := testkit.CreateTopic(t, src, testkit.Name(t, "handover"), 1, nil)
	lz4 := []kgo.Opt{kgo.ProducerBatchCompression(kgo.Lz4Compression())}
	all := testkit.SampleRecords(topic, 1, 400)
	for i := range all {
		all[i].Value = bytes.Repeat(all[i].Value, 8)
	}
	produceWith(t, src, kgo.Lz4Compression(), 100, all[:100])
	f := newFlow(t, topic)
	burst := func(bo BurstOptions) Summary {
		t.Helper()
		s, err := f.engineSides(nil, lz4).Burst(testkit.Context(t, 2*time.Minute), bo)
		if err != nil {
			t.Fatalf("burst: %v", err)
		}
		return s
	}

	// A record budget copies record by record and stops inside the first batch.
	if s := burst(BurstOptions{MaxRecords: 30}); s.Records != 30 || s.ForwardedRecords != 0 {
		t.Fatalf("budget burst: %d records, %d forwarded; want 30, 0", s.Records, s.ForwardedRecords)
	}
	produceWith(t, src, kgo.Lz4Compression(), 100, all[100:200])
	// Resuming at offset 30, inside the batch 0-99: record by record for the whole burst.
	if s := burst(BurstOptions{}); s.Records != 170 || s.ForwardedRecords != 0 || s.Lag != 0 {
		t.Fatalf("resumed burst: %d records, %d forwarded, lag %d; want 170, 0, 0", s.Records, s.ForwardedRecords, s.Lag)
	}
	if !strings.Contains(fmt.Sprint(f.log), "resumes inside the batch") {
		t.Errorf("no handover logged for the resume inside a batch:\n%s", f.log)
	}
	// Batches at a boundary again: 100 lz4 records forwarded, then 100 uncompressed ones
	// (not the target's codec) copied record by record.
	produceWith(t, src, kgo.Lz4Compression(), 100, all[200:300])
	produceWith(t, src, kgo.NoCompression(), 100, all[300:400])
	if s := burst(BurstOptions{}); s.Records != 200 || s.ForwardedRecords != 100 || s.Lag != 0 {
		t.Fatalf("mixed burst: %d records, %d forwarded, lag %d; want 200, 100, 0", s.Records, s.ForwardedRecords, s.Lag)
	}
	want := sourceRecords(t, src, topic)
	got := testkit.ReadAll(t, c.Target.Bootstrap, f.remote(topic))
	testkit.AssertSameRecords(t, want, got)
	for i, r := range got {
		if r.Offset != int64(i) {
			t.Fatalf("remote record #%d at offset %d: a record was copied twice or lost", i, r.Offset)
		}
	}
	if p := f.positions()[TP{topic, 0}]; p != 399 {
		t.Errorf("position %d, want 399", p)
	}
	assertSyncsPointAtCopies(t, f, topic, want, got)
}
