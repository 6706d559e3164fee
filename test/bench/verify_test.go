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
	if got := partitionDirs(dir, map[string]bool{"gosrc.b1-x-1": true}); got != 2 {
		t.Errorf("partitionDirs(gosrc.b1-x-1) = %d, want 2", got)
	}
	if got := partitionDirs(dir, map[string]bool{"gosrc.b1-x-10": true, "gosrc.b1-x-2": true}); got != 1 {
		t.Errorf("partitionDirs(gosrc.b1-x-10, gosrc.b1-x-2) = %d, want 1", got)
	}
	if got := partitionDirs(filepath.Join(dir, "missing"), map[string]bool{"gosrc.b1-x-1": true}); got != 0 {
		t.Errorf("partitionDirs(missing dir) = %d, want 0", got)
	}
}
