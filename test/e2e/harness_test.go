package e2e

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
)

// sampleRecords builds records that exercise every part of a Kafka record: null and binary keys,
// empty and null values, duplicate and empty headers, explicit old timestamps.
func sampleRecords(topic string, partitions int32, n int) []*kgo.Record {
	base := time.Date(2020, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	recs := make([]*kgo.Record, 0, n)
	for i := 0; i < n; i++ {
		r := &kgo.Record{
			Topic:     topic,
			Partition: int32(i) % partitions,
			Key:       []byte(fmt.Sprintf("key-%d", i)),
			Value:     []byte(fmt.Sprintf("value-%d-\x00\xff", i)),
			Timestamp: base.Add(time.Duration(i) * time.Millisecond),
			Headers: []kgo.RecordHeader{
				{Key: "h", Value: []byte{byte(i), 0, 0xff}},
				{Key: "h", Value: []byte("dup")},
				{Key: "", Value: nil},
			},
		}
		switch i % 5 {
		case 1:
			r.Key = nil
		case 2:
			r.Value = nil
		case 3:
			r.Headers = nil
			r.Value = []byte{}
		}
		recs = append(recs, r)
	}
	return recs
}

// assertSameRecords compares key, value, headers, timestamp and partition, byte for byte.
func assertSameRecords(t *testing.T, want, got []*kgo.Record) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	byPart := map[int32][]*kgo.Record{}
	for _, r := range want {
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	gotPart := map[int32][]*kgo.Record{}
	for _, r := range got {
		gotPart[r.Partition] = append(gotPart[r.Partition], r)
	}
	for p, ws := range byPart {
		gs := gotPart[p]
		if len(gs) != len(ws) {
			t.Fatalf("partition %d: got %d records, want %d", p, len(gs), len(ws))
		}
		for i := range ws {
			w, g := ws[i], gs[i]
			if (w.Key == nil) != (g.Key == nil) || !bytes.Equal(w.Key, g.Key) {
				t.Errorf("p%d #%d key: got %q (nil %v), want %q (nil %v)", p, i, g.Key, g.Key == nil, w.Key, w.Key == nil)
			}
			if (w.Value == nil) != (g.Value == nil) || !bytes.Equal(w.Value, g.Value) {
				t.Errorf("p%d #%d value: got %q (nil %v), want %q (nil %v)", p, i, g.Value, g.Value == nil, w.Value, w.Value == nil)
			}
			if !w.Timestamp.Equal(g.Timestamp) {
				t.Errorf("p%d #%d timestamp: got %v, want %v", p, i, g.Timestamp, w.Timestamp)
			}
			if len(w.Headers) != len(g.Headers) {
				t.Errorf("p%d #%d headers: got %d, want %d", p, i, len(g.Headers), len(w.Headers))
				continue
			}
			for j := range w.Headers {
				if w.Headers[j].Key != g.Headers[j].Key || !bytes.Equal(w.Headers[j].Value, g.Headers[j].Value) {
					t.Errorf("p%d #%d header %d: got %q=%q, want %q=%q", p, i, j, g.Headers[j].Key, g.Headers[j].Value, w.Headers[j].Key, w.Headers[j].Value)
				}
			}
		}
	}
}

func TestHarnessRoundTripBothClusters(t *testing.T) {
	c := testkit.Require(t)
	for _, cl := range []testkit.Cluster{c.Source, c.Target} {
		t.Run(cl.Name, func(t *testing.T) {
			topic := testkit.CreateTopic(t, cl.Bootstrap, testkit.Name(t, "rt"), 3, nil)
			want := sampleRecords(topic, 3, 30)
			testkit.Produce(t, cl.Bootstrap, want...)
			got := testkit.ReadAll(t, cl.Bootstrap, topic)
			assertSameRecords(t, want, got)
		})
	}
}

// TestRealMirrorMaker2 proves the harness runs genuine MirrorMaker 2: it copies a topic to
// source.<topic> on the target with the records intact.
func TestRealMirrorMaker2(t *testing.T) {
	c := testkit.Require(t)
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "mm2"), 2, nil)
	want := sampleRecords(topic, 2, 20)
	testkit.Produce(t, c.Source.Bootstrap, want...)
	remote := "source." + topic
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, remote)

	start := time.Now()
	name := testkit.StartMM2(t, MM2Properties(c, topic))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("MirrorMaker 2 log:\n%s", tail(testkit.MM2Log(t, name), 4000))
		}
	})
	var got []*kgo.Record
	testkit.WaitFor(t, 90*time.Second, "MirrorMaker 2 to copy "+topic, func() bool {
		ctx := testkit.Context(t, 10*time.Second)
		recs, err := testkit.ReadAllErr(ctx, c.Target.Bootstrap, remote)
		if err != nil {
			return false
		}
		got = recs
		return len(recs) >= len(want)
	})
	t.Logf("real MM2 copied %d records in %s", len(got), time.Since(start).Round(time.Millisecond))
	assertSameRecords(t, want, got)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
