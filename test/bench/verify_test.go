package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestPartitionDirs(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{
		"gosrc.b1-x-1-0", // live partition of a deleted topic
		"gosrc.b1-x-1-1.0ebc579eef9a47b28e821537e122d963-delete", // set aside for deletion
		"gosrc.b1-x-10-0", // another topic sharing the prefix
		"mm2-offsets.gosrc.internal-3",
		"__cluster_metadata-0",
	} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "meta.properties"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := partitionDirs(dir, map[string]bool{"gosrc.b1-x-1": true}); got != 2 || err != nil {
		t.Errorf("partitionDirs(gosrc.b1-x-1) = %d, %v, want 2, nil", got, err)
	}
	if got, err := partitionDirs(dir, map[string]bool{"gosrc.b1-x-10": true, "gosrc.b1-x-2": true}); got != 1 || err != nil {
		t.Errorf("partitionDirs(gosrc.b1-x-10, gosrc.b1-x-2) = %d, %v, want 1, nil", got, err)
	}
	// A directory that cannot be read is an error, not "nothing left": the harness would stop
	// waiting for deletions without a word.
	if got, err := partitionDirs(filepath.Join(dir, "missing"), map[string]bool{"gosrc.b1-x-1": true}); got != 0 || err == nil {
		t.Errorf("partitionDirs(missing dir) = %d, %v, want 0 and an error", got, err)
	}
}

// TestReadCommittedWaitsForMarkers: a transaction on the target is still open when the check
// starts (as a copy's commit markers are still being written when its process has exited) and
// commits 300 ms later. readCommitted must count the partition's 5 records, not the 0 a
// read_committed reader sees before the markers; a transaction that stays open past the bound
// is an error naming the partition.
func TestReadCommittedWaitsForMarkers(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "copy"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	boot := c.ListenAddrs()[0]
	prod, err := kgo.NewClient(kgo.SeedBrokers(boot), kgo.TransactionalID("txn"), kgo.DefaultProduceTopic("copy"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, _, _, err := readCommittedWithin(ctx, boot, []string{"copy"}, 200*time.Millisecond); err == nil || !strings.Contains(err.Error(), "copy[0]") {
		t.Errorf("an open transaction past the bound: %v, want an error naming copy[0]", err)
	}
	time.AfterFunc(300*time.Millisecond, func() { _ = prod.EndTransaction(ctx, kgo.TryCommit) })
	counts, _, _, settled, err := readCommittedWithin(ctx, boot, []string{"copy"}, time.Minute)
	if err != nil || counts["copy/0"] != 5 {
		t.Fatalf("readCommitted: %v, %v; want 5 records in copy/0", counts, err)
	}
	if !strings.Contains(settled, "1 partitions' last stable offsets reached their ends") {
		t.Errorf("note %q does not say one partition's markers were waited for", settled)
	}
}
