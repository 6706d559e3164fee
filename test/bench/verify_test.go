package main

import (
	"os"
	"path/filepath"
	"testing"
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
