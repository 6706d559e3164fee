package testkit

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// SampleRecords builds n records for topic spread over partitions that exercise every part of
// a Kafka record: null, empty and binary keys; null and empty values; duplicate headers,
// headers with null and empty values; explicit old timestamps.
func SampleRecords(topic string, partitions int32, n int) []*kgo.Record {
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
				{Key: "empty", Value: []byte{}},
			},
		}
		switch i % 7 {
		case 1:
			r.Key = nil
		case 2:
			r.Value = nil
		case 3:
			r.Headers = nil
			r.Value = []byte{}
		case 4:
			r.Key = []byte{}
		case 5:
			r.Key, r.Value = nil, nil
		}
		recs = append(recs, r)
	}
	return recs
}

// SameRecord reports how got differs from want (key, value, headers, timestamp; nil and empty
// are different), or "" if they are the same.
func SameRecord(want, got *kgo.Record) string {
	if (want.Key == nil) != (got.Key == nil) || !bytes.Equal(want.Key, got.Key) {
		return fmt.Sprintf("key: got %q (nil %v), want %q (nil %v)", got.Key, got.Key == nil, want.Key, want.Key == nil)
	}
	if (want.Value == nil) != (got.Value == nil) || !bytes.Equal(want.Value, got.Value) {
		return fmt.Sprintf("value: got %q (nil %v), want %q (nil %v)", got.Value, got.Value == nil, want.Value, want.Value == nil)
	}
	if !want.Timestamp.Equal(got.Timestamp) {
		return fmt.Sprintf("timestamp: got %v, want %v", got.Timestamp, want.Timestamp)
	}
	if len(want.Headers) != len(got.Headers) {
		return fmt.Sprintf("headers: got %d, want %d", len(got.Headers), len(want.Headers))
	}
	for j := range want.Headers {
		w, g := want.Headers[j], got.Headers[j]
		if w.Key != g.Key || (w.Value == nil) != (g.Value == nil) || !bytes.Equal(w.Value, g.Value) {
			return fmt.Sprintf("header %d: got %q=%q (nil %v), want %q=%q (nil %v)", j, g.Key, g.Value, g.Value == nil, w.Key, w.Value, w.Value == nil)
		}
	}
	return ""
}

// AssertSameRecords fails the test unless got holds the same records as want, partition by
// partition in the same order, byte for byte (see SameRecord).
func AssertSameRecords(t testing.TB, want, got []*kgo.Record) {
	t.Helper()
	byPart := func(rs []*kgo.Record) map[int32][]*kgo.Record {
		m := map[int32][]*kgo.Record{}
		for _, r := range rs {
			m[r.Partition] = append(m[r.Partition], r)
		}
		return m
	}
	wp, gp := byPart(want), byPart(got)
	if len(want) != len(got) {
		t.Errorf("got %d records, want %d", len(got), len(want))
	}
	for p, ws := range wp {
		gs := gp[p]
		if len(gs) != len(ws) {
			t.Errorf("partition %d: got %d records, want %d", p, len(gs), len(ws))
			continue
		}
		bad := 0
		for i := range ws {
			if d := SameRecord(ws[i], gs[i]); d != "" {
				if bad++; bad <= 5 {
					t.Errorf("partition %d record #%d: %s", p, i, d)
				}
			}
		}
	}
	for p := range gp {
		if _, ok := wp[p]; !ok {
			t.Errorf("partition %d: got %d unexpected records", p, len(gp[p]))
		}
	}
}

// RetentionMS is a retention.ms for tests that set one on a topic holding SampleRecords: 100
// years, so that a broker's periodic retention check never deletes the records, stamped 2020
// (a day's retention did so in a loaded CI run, between a copy and its comparison).
// RetentionMSLonger is a second such value, for a test that changes it.
const (
	RetentionMS       = "3153600000000"
	RetentionMSLonger = "6307200000000"
)
