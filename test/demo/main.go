// Command demo is test/demo.sh's helper: `demo seed SOURCE` creates the topic "orders"
// (4 partitions) on the source cluster and writes orders with keys, headers and a few
// tombstones; `demo verify SOURCE TARGET` compares source "orders" with target
// "source.orders" record by record, byte for byte, and exits 1 on any difference.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	topic      = "orders"
	remote     = "source.orders"
	partitions = 4
	records    = 5000
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: demo seed SOURCE | demo verify SOURCE TARGET")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	switch {
	case os.Args[1] == "seed":
		err = seed(ctx, os.Args[2])
	case os.Args[1] == "verify" && len(os.Args) == 4:
		err = verify(ctx, os.Args[2], os.Args[3])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func seed(ctx context.Context, bootstrap string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating %s: %w", topic, err)
	}
	recs := make([]*kgo.Record, 0, records)
	start := time.Now().Add(-time.Hour)
	for i := 0; i < records; i++ {
		customer := fmt.Sprintf("customer-%03d", i%250)
		r := &kgo.Record{
			Topic:     topic,
			Key:       []byte(customer),
			Value:     fmt.Appendf(nil, `{"order":%d,"customer":%q,"amount":%d.%02d}`, i, customer, i%500, i%100),
			Timestamp: start.Add(time.Duration(i) * time.Millisecond),
			Headers: []kgo.RecordHeader{
				{Key: "trace-id", Value: fmt.Appendf(nil, "%016x", i*7919)},
				{Key: "source", Value: []byte("demo")},
				{Key: "source", Value: []byte("duplicate header")},
			},
		}
		if i%500 == 499 {
			r.Value = nil // a tombstone
		}
		recs = append(recs, r)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("producing: %w", err)
	}
	fmt.Printf("seeded %d records into %s (%d partitions) on %s\n", records, topic, partitions, bootstrap)
	return nil
}

func readAll(ctx context.Context, bootstrap, t string) (map[int32][]*kgo.Record, int, error) {
	adm, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return nil, 0, err
	}
	defer adm.Close()
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, t)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, 0, fmt.Errorf("end offsets of %s: %w", t, err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	out := map[int32][]*kgo.Record{}
	if len(want) == 0 {
		return out, 0, nil
	}
	offs := map[string]map[int32]kgo.Offset{t: {}}
	for p := range want {
		offs[t][p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumePartitions(offs))
	if err != nil {
		return nil, 0, err
	}
	defer cl.Close()
	n, left := 0, len(want)
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return nil, 0, fmt.Errorf("reading %s: %w", t, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= want[r.Partition] {
				return
			}
			out[r.Partition] = append(out[r.Partition], r)
			n++
			if r.Offset == want[r.Partition]-1 {
				left--
			}
		})
	}
	return out, n, nil
}

func verify(ctx context.Context, source, target string) error {
	src, ns, err := readAll(ctx, source, topic)
	if err != nil {
		return err
	}
	tgt, nt, err := readAll(ctx, target, remote)
	if err != nil {
		return err
	}
	fmt.Printf("source %s: %d records; target %s: %d records\n", topic, ns, remote, nt)
	bad := 0
	for p := int32(0); p < partitions; p++ {
		s, t := src[p], tgt[p]
		if len(s) != len(t) {
			fmt.Printf("  partition %d: %d source records, %d target records\n", p, len(s), len(t))
			bad++
			continue
		}
		for i := range s {
			if d := diff(s[i], t[i]); d != "" {
				if bad++; bad <= 5 {
					fmt.Printf("  partition %d record %d: %s\n", p, i, d)
				}
			}
		}
		fmt.Printf("  partition %d: %d records identical (key, value, headers, timestamp)\n", p, len(s))
	}
	if bad > 0 || ns != nt {
		return fmt.Errorf("%d differences", bad)
	}
	fmt.Println("verified: target is a byte-for-byte copy of the source")
	return nil
}

func diff(a, b *kgo.Record) string {
	switch {
	case (a.Key == nil) != (b.Key == nil) || !bytes.Equal(a.Key, b.Key):
		return "key differs"
	case (a.Value == nil) != (b.Value == nil) || !bytes.Equal(a.Value, b.Value):
		return "value differs"
	case !a.Timestamp.Equal(b.Timestamp):
		return "timestamp differs"
	case len(a.Headers) != len(b.Headers):
		return "header count differs"
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) {
			return fmt.Sprintf("header %d differs", i)
		}
	}
	return ""
}
