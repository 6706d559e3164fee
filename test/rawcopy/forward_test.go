package rawcopy

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
)

// TestForwardCopiesBatchesByteForByte: the batch forwarder's copy holds the source's records
// (keys, values, headers, timestamps, partitions) byte for byte, from uncompressed and from
// lz4 batches, and it counts what it copied.
func TestForwardCopiesBatchesByteForByte(t *testing.T) {
	c := testkit.Require(t)
	for _, tc := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"none", kgo.NoCompression()}, {"lz4", kgo.Lz4Compression()}} {
		t.Run(tc.name, func(t *testing.T) {
			topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "fwd"), 3, nil)
			prefix := testkit.Name(t, "fwdto") + "."
			testkit.CreateTopic(t, c.Target.Bootstrap, prefix+topic, 3, nil)
			want := testkit.SampleRecords(topic, 3, 300)
			cl := testkit.Client(t, c.Source.Bootstrap, kgo.ProducerBatchCompression(tc.codec), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
			if err := cl.ProduceSync(testkit.Context(t, 30*time.Second), want...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			n, err := Forward(testkit.Context(t, time.Minute), Options{Source: c.Source.Bootstrap, Target: c.Target.Bootstrap, Topics: []string{topic}, Prefix: prefix})
			if err != nil || n != int64(len(want)) {
				t.Fatalf("Forward: %d records, %v; want %d", n, err, len(want))
			}
			testkit.AssertSameRecords(t, want, testkit.ReadAll(t, c.Target.Bootstrap, prefix+topic))
		})
	}
}
