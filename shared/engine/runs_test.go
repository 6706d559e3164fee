package engine

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFakeServeCopyThatCannotOpenFreesItsPartition: a serve copy (CopyPartition) whose target
// producers cannot be connected fails, and its partition is free for the next call. The
// copier returned before settling (bo.settled never called) while runWith had handed that job
// to it, so runShared waited forever and the partition stayed busy: every later call for it
// waited behind a copy that no longer existed.
func TestFakeServeCopyThatCannotOpenFreesItsPartition(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 1})
	f.produce("orders", 1, 10)
	var refuse atomic.Bool
	dial := func(ctx context.Context, side Side, extra ...kgo.Opt) (*kgo.Client, error) {
		if side == Target && refuse.Load() {
			return nil, errors.New("target producers refused by the test")
		}
		return f.dial(ctx, side, extra...)
	}
	e, err := New(context.Background(), f.opts, dial, slog.New(f.logs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	refuse.Store(true)
	if _, err := e.CopyPartition(ctx, "orders", 0, -1); err == nil || !strings.Contains(err.Error(), "connecting target producer") {
		t.Fatalf("CopyPartition without target producers: %v; want it to fail connecting them", err)
	}
	refuse.Store(false)
	s, err := e.CopyPartition(ctx, "orders", 0, -1)
	if err != nil || s.Records != 10 {
		t.Fatalf("second CopyPartition of orders-0: %d records, %v; want the 10 records (the first call's copy failed to open and must have freed the partition)", s.Records, err)
	}
}
