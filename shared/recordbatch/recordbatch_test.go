package recordbatch_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mm2go/mm2go/shared/recordbatch"
)

// The batches here are franz-go's own (a kgo producer writes them to a kfake cluster, raw
// Fetch requests read them back) and what the package makes of them is read back by franz-go's
// consumer, so the format is checked against a second implementation, not against this one.

// cluster is a kfake cluster with a client.
type cluster struct {
	cl  *kgo.Client
	adm *kadm.Client
}

func newCluster(t testing.TB) *cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &cluster{cl: cl, adm: kadm.NewClient(cl)}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func (c *cluster) topic(t testing.TB, name string) [16]byte {
	t.Helper()
	if _, err := c.adm.CreateTopic(ctx(t), 1, 1, nil, name); err != nil {
		t.Fatal(err)
	}
	md, err := c.adm.Metadata(ctx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return md.Topics[name].ID
}

// sample returns n records with keys, null keys, values, headers (a null header value among
// them) and timestamps 1 ms apart.
func sample(topic string, from, n int) []*kgo.Record {
	base := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	var out []*kgo.Record
	for i := from; i < from+n; i++ {
		r := &kgo.Record{Topic: topic, Value: bytes.Repeat([]byte{byte(i)}, 100+i%50),
			Timestamp: base.Add(time.Duration(i) * time.Millisecond)}
		if i%3 != 0 {
			r.Key = fmt.Appendf(nil, "k%d", i)
		}
		if i%4 == 0 {
			r.Headers = []kgo.RecordHeader{{Key: "h", Value: []byte{byte(i)}}, {Key: "null"}}
		}
		out = append(out, r)
	}
	return out
}

// produceBatches produces recs, batch records per ProduceSync (so per batch), with codec.
func (c *cluster) produceBatches(t testing.TB, codec kgo.CompressionCodec, batch int, recs []*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.cl.OptValue(kgo.SeedBrokers).([]string)...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < len(recs); i += batch {
		if err := cl.ProduceSync(ctx(t), recs[i:min(i+batch, len(recs))]...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// fetchBatches reads every batch of partition 0 of topic.
func (c *cluster) fetchBatches(t testing.TB, topic string, id [16]byte) []recordbatch.Batch {
	t.Helper()
	var out []recordbatch.Batch
	next := int64(0)
	for range 100 {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 10<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes = next, 10<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx(t), c.cl)
		if err != nil {
			t.Fatal(err)
		}
		part := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
			t.Fatal(err)
		}
		recs, got := part.RecordBatches, false
		for {
			b, rest, ok := recordbatch.Next(recs)
			if !ok {
				break
			}
			recs, got = rest, true
			out = append(out, b)
			next = b.LastOffset() + 1
		}
		if !got {
			return out
		}
	}
	t.Fatal("topic does not end")
	return nil
}

// produceRaw writes b to partition 0 of topic as it is.
func (c *cluster) produceRaw(t testing.TB, topic string, id [16]byte, b recordbatch.Batch) {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = b
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx(t), c.cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("producing the batch: %v", err)
	}
}

// consume reads n records of topic with franz-go's consumer.
func (c *cluster) consume(t testing.TB, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.cl.OptValue(kgo.SeedBrokers).([]string)...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx(t))
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

func sameRecords(t testing.TB, want, got []*kgo.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if !bytes.Equal(g.Key, w.Key) || (g.Key == nil) != (w.Key == nil) || !bytes.Equal(g.Value, w.Value) ||
			!g.Timestamp.Equal(w.Timestamp) || g.Offset != int64(i) || len(g.Headers) != len(w.Headers) {
			t.Fatalf("record %d: got key %q offset %d ts %v, want key %q offset %d ts %v", i, g.Key, g.Offset, g.Timestamp, w.Key, i, w.Timestamp)
		}
		for j, h := range w.Headers {
			if g.Headers[j].Key != h.Key || !bytes.Equal(g.Headers[j].Value, h.Value) || (g.Headers[j].Value == nil) != (h.Value == nil) {
				t.Fatalf("record %d header %d: got %q=%q, want %q=%q", i, j, g.Headers[j].Key, g.Headers[j].Value, h.Key, h.Value)
			}
		}
	}
}

func payload(recs []*kgo.Record) int64 {
	var n int64
	for _, r := range recs {
		n += int64(len(r.Key) + len(r.Value))
		for _, h := range r.Headers {
			n += int64(len(h.Key) + len(h.Value))
		}
	}
	return n
}

// TestReadAndRewrite: franz-go's batches read as written (offsets, count, codec, timestamps,
// payload bytes); rewritten with a producer identity, each is still a valid batch (CRC) that
// a broker takes and franz-go's consumer reads back record for record.
func TestReadAndRewrite(t *testing.T) {
	for _, tc := range []struct {
		name  string
		codec kgo.CompressionCodec
		want  int8
	}{{"none", kgo.NoCompression(), 0}, {"lz4", kgo.Lz4Compression(), 3}, {"zstd", kgo.ZstdCompression(), 4}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			srcID, dstID := c.topic(t, "src"), c.topic(t, "dst")
			recs := sample("src", 0, 90)
			c.produceBatches(t, tc.codec, 30, recs)
			batches := c.fetchBatches(t, "src", srcID)
			if len(batches) != 3 {
				t.Fatalf("%d batches, want 3", len(batches))
			}
			for i, b := range batches {
				if b.BaseOffset() != int64(30*i) || b.LastOffset() != int64(30*i+29) || b.Count() != 30 || !b.Contiguous() ||
					b.Magic() != 2 || b.Codec() != tc.want || b.Control() || b.LogAppendTime() || !b.ValidCRC() {
					t.Fatalf("batch %d: base %d last %d count %d magic %d codec %d", i, b.BaseOffset(), b.LastOffset(), b.Count(), b.Magic(), b.Codec())
				}
				if b.FirstTimestamp() != recs[30*i].Timestamp.UnixMilli() || b.MaxTimestamp() != recs[30*i+29].Timestamp.UnixMilli() {
					t.Errorf("batch %d: timestamps %d-%d", i, b.FirstTimestamp(), b.MaxTimestamp())
				}
				n, ok := b.PayloadBytes()
				if want := payload(recs[30*i : 30*i+30]); tc.want == 0 && (!ok || n != want) {
					t.Errorf("batch %d: payload %d (%v), want %d", i, n, ok, want)
				} else if tc.want != 0 && ok {
					t.Errorf("batch %d: compressed, yet payload bytes %d", i, n)
				}
				b.Rewrite(7, 3, int32(30*i))
				if !b.ValidCRC() || b.BaseOffset() != 0 {
					t.Fatalf("batch %d: rewritten CRC invalid or base offset %d", i, b.BaseOffset())
				}
				c.produceRaw(t, "dst", dstID, b)
			}
			got := c.consume(t, "dst", 90)
			sameRecords(t, recs, got)
			for _, r := range got {
				if r.ProducerID != 7 || r.ProducerEpoch != 3 {
					t.Fatalf("record %d: producer %d epoch %d, want 7, 3", r.Offset, r.ProducerID, r.ProducerEpoch)
				}
			}
		})
	}
}

// TestBuilderJoins: uncompressed batches of different sizes and timestamps joined into one
// batch hold the same records, with offsets 0..n-1 and the same timestamps, as franz-go's
// consumer reads them; a batch that does not follow, or a compressed one, is refused.
func TestBuilderJoins(t *testing.T) {
	c := newCluster(t)
	srcID, dstID := c.topic(t, "src"), c.topic(t, "dst")
	recs := sample("src", 0, 100)
	recs[70].Timestamp = recs[0].Timestamp.Add(-time.Hour) // a negative delta after joining
	sizes := []int{1, 9, 60, 30}
	at := 0
	for _, n := range sizes {
		c.produceBatches(t, kgo.NoCompression(), n, recs[at:at+n])
		at += n
	}
	batches := c.fetchBatches(t, "src", srcID)
	if len(batches) != len(sizes) {
		t.Fatalf("%d batches, want %d", len(batches), len(sizes))
	}
	var bd recordbatch.Builder
	bd.Reset(nil)
	var want int64
	for i, b := range batches {
		n, _ := b.PayloadBytes()
		want += n
		if !bd.Add(b, n) {
			t.Fatalf("batch %d not added", i)
		}
	}
	if bd.Add(batches[1], 0) {
		t.Error("a batch that does not follow the last one was added")
	}
	if bd.Count() != 100 || bd.BaseOffset() != 0 || bd.LastOffset() != 99 || bd.PayloadBytes() != want {
		t.Fatalf("builder: %d records, offsets %d-%d, payload %d (want %d)", bd.Count(), bd.BaseOffset(), bd.LastOffset(), bd.PayloadBytes(), want)
	}
	joined := bd.Batch()
	if n, ok := joined.PayloadBytes(); !ok || n != want || !joined.ValidCRC() || !joined.Contiguous() {
		t.Fatalf("joined batch: payload %d (%v), CRC %v", n, ok, joined.ValidCRC())
	}
	joined.Rewrite(1, 0, 0)
	c.produceRaw(t, "dst", dstID, joined)
	sameRecords(t, recs, c.consume(t, "dst", 100))

	lz4ID := c.topic(t, "lz4")
	c.produceBatches(t, kgo.Lz4Compression(), 10, sample("lz4", 0, 10))
	bd.Reset(nil)
	if bd.Add(c.fetchBatches(t, "lz4", lz4ID)[0], 0) {
		t.Error("a compressed batch was added")
	}
}

// TestNextPartial: a fetch that ends inside a batch yields the complete ones, and Size reads
// the cut batch's full size from its header.
func TestNextPartial(t *testing.T) {
	c := newCluster(t)
	id := c.topic(t, "src")
	c.produceBatches(t, kgo.NoCompression(), 10, sample("src", 0, 20))
	batches := c.fetchBatches(t, "src", id)
	all := append(append([]byte{}, batches[0]...), batches[1]...)
	cut := all[:len(batches[0])+len(batches[1])/2]
	b, rest, ok := recordbatch.Next(cut)
	if !ok || len(b) != len(batches[0]) {
		t.Fatalf("first batch: %v, %d bytes", ok, len(b))
	}
	if _, _, ok := recordbatch.Next(rest); ok {
		t.Fatal("a cut batch was returned")
	}
	if n := recordbatch.Size(rest); n != len(batches[1]) {
		t.Errorf("Size of the cut batch %d, want %d", n, len(batches[1]))
	}
	if recordbatch.Size(rest[:5]) != 0 {
		t.Error("Size of 5 bytes is not 0")
	}
}

// benchBatches returns n uncompressed records of 512 B in batches of batch records.
func benchBatches(b *testing.B, n, batch int) []recordbatch.Batch {
	b.ReportAllocs()
	c := newCluster(b)
	id := c.topic(b, "src")
	recs := sample("src", 0, n)
	for _, r := range recs {
		r.Value = bytes.Repeat([]byte{1}, 512)
	}
	c.produceBatches(b, kgo.NoCompression(), batch, recs)
	return c.fetchBatches(b, "src", id)
}

// BenchmarkPayloadBytes: the walk over an uncompressed batch of 1,000 records of 512 B (one op
// is one batch; ns/op / 1000 is the cost per record).
func BenchmarkPayloadBytes(b *testing.B) {
	batch := benchBatches(b, 1000, 1000)[0]
	b.SetBytes(int64(len(batch)))
	for b.Loop() {
		if _, ok := batch.PayloadBytes(); !ok {
			b.Fatal("not well formed")
		}
	}
}

// BenchmarkJoin: joining 16 uncompressed batches of 64 records of 512 B (one op is one joined
// batch of 1,024 records).
func BenchmarkJoin(b *testing.B) {
	batches := benchBatches(b, 1024, 64)
	buf := make([]byte, 0, 1<<20)
	b.SetBytes(int64(len(batches) * len(batches[0])))
	var bd recordbatch.Builder
	for b.Loop() {
		bd.Reset(buf)
		for _, batch := range batches {
			if !bd.Add(batch, 0) {
				b.Fatal("not added")
			}
		}
		_ = bd.Batch()
	}
}
