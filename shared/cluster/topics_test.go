package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/mm2go/mm2go/test/testkit"
)

// TestWaitForServing: once WaitForServing returns for a topic just created, every partition's
// leader answers ListOffsets, and DescribeTopic names a leader for each; for a topic that does
// not exist it gives up when ctx ends, naming the topic.
func TestWaitForServing(t *testing.T) {
	c := testkit.Require(t)
	cl := testkit.Client(t, c.Target.Bootstrap)
	ctx := testkit.Context(t, time.Minute)
	name := testkit.Name(t, "served")
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, name)
	if _, _, err := EnsureTopic(ctx, cl, name, 12, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := WaitForServing(ctx, cl, name); err != nil {
		t.Fatal(err)
	}
	st, err := DescribeTopic(ctx, cl, name)
	if err != nil || !st.Led || len(st.Leaders) != 12 {
		t.Fatalf("after WaitForServing: %+v, %v; want 12 led partitions", st, err)
	}
	// Right after, a ListOffsets through franz-go's retries answers for every partition.
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, name)
	if err != nil || ends.Error() != nil || len(ends[name]) != 12 {
		t.Fatalf("end offsets after WaitForServing: %v, %v", ends, err)
	}

	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	missing := testkit.Name(t, "missing")
	if err := WaitForServing(short, cl, missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing topic: %v; want an error naming %s", err, missing)
	}
}
