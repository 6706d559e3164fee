package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFakeWriteRecordAtBeyondSourceEnd: a payload record for an offset the source partition does
// not hold (a forged event naming the partition's end) is refused with ErrNoSuchRecord, as fetch
// mode refuses it, and writes nothing; once the source holds that offset the same write succeeds.
func TestFakeWriteRecordAtBeyondSourceEnd(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 1})
	f.produce("orders", 1, 2)
	f.opts.NoSweep = true
	e := f.engine()
	ctx := context.Background()
	if _, err := e.CopyThrough(ctx, "orders", 0, 1); err != nil {
		t.Fatal(err)
	}
	forged := &kgo.Record{Offset: 2, Value: []byte("forged")}
	if err := e.WriteRecordAt(ctx, "orders", 0, forged); !errors.Is(err, ErrNoSuchRecord) {
		t.Fatalf("payload record at the source's end (2): %v, want ErrNoSuchRecord", err)
	}
	if got := f.readAll(Target, "src.orders"); len(got) != 2 {
		t.Fatalf("%d records on the target after the refused write, want 2", len(got))
	}
	if n, ok, err := e.Next(ctx, "orders", 0); err != nil || !ok || n != 2 {
		t.Fatalf("next %d %v %v, want 2", n, ok, err)
	}
	f.produce("orders", 1, 1) // the source now holds offset 2
	if err := e.WriteRecordAt(ctx, "orders", 0, &kgo.Record{Offset: 2, Value: []byte("genuine")}); err != nil {
		t.Fatalf("payload record the source holds: %v", err)
	}
	got := f.readAll(Target, "src.orders")
	if len(got) != 3 || string(got[2].Value) != "genuine" {
		t.Fatalf("%d records on the target, want 3 ending in the genuine payload", len(got))
	}
}
