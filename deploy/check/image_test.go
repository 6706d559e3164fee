package check

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/mm2go/mm2go/deploy/internal/image"
)

// maxImageBytes is the size budget of the image tarball.
const maxImageBytes = 20_000_000

// TestImageFromFunctions builds the three functions the way `make image` does, runs the
// mkimage command on them, loads the tarball it wrote and checks it: size, non-root user,
// entrypoint, the binaries (static ELF, and each answers -h with its settings).
func TestImageFromFunctions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the functions and the image; skipped with -short")
	}
	root := repoRoot(t)
	for _, fn := range image.Functions {
		if m, _ := filepath.Glob(filepath.Join(root, "functions", fn, "*.go")); len(m) == 0 {
			msg := "functions/" + fn + " has no Go files: nothing to put in the image"
			if os.Getenv("CI") == "true" {
				t.Fatal(msg + "; CI=true, so this is a failure, not a skip")
			}
			t.Skip(msg)
		}
	}
	tmp := t.TempDir()
	run := func(dir string, env []string, name string, args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	// Exactly the Makefile's image recipe, with temporary paths (functionBinaries builds like
	// `make image` does, once for this test and TestDashboardMetricsOnEndpoint).
	bin := functionBinaries(t)
	mk := filepath.Join(tmp, "mkimage")
	run(filepath.Join(root, "deploy"), nil, "go", "build", "-o", mk, "./cmd/mkimage")
	tarPath := filepath.Join(tmp, "mm2go-image.tar")
	run(root, nil, mk, "-bin", bin, "-o", tarPath, "-tag", "mm2go:test", "-oci-layout", filepath.Join(tmp, "oci"))

	st, err := os.Stat(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image tarball: %d bytes (%.1f MB); budget %d", st.Size(), float64(st.Size())/1e6, maxImageBytes)
	if st.Size() > maxImageBytes {
		t.Errorf("image tarball is %d bytes, over the %d budget", st.Size(), maxImageBytes)
	}

	img, err := tarball.ImageFromPath(tarPath, nil)
	if err != nil {
		t.Fatalf("loading the tarball: %v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != image.User || strings.HasPrefix(c.User, "0") || c.User == "root" {
		t.Errorf("image user %q, want %s", c.User, image.User)
	}
	if len(c.Entrypoint) != 1 || c.Entrypoint[0] != image.BinDir+"/"+image.DefaultEntry {
		t.Errorf("entrypoint %q", c.Entrypoint)
	}
	if c.Labels["org.opencontainers.image.source"] == "" {
		t.Error("no org.opencontainers.image.source label")
	}
	files, err := image.Files(img)
	if err != nil {
		t.Fatal(err)
	}
	if len(files[strings.TrimPrefix(image.CACertsPath, "/")].Data) == 0 {
		t.Errorf("no CA certificates at %s", image.CACertsPath)
	}
	known := functionSettings(t)
	for _, fn := range image.Functions {
		f, ok := files[strings.TrimPrefix(image.BinDir, "/")+"/"+fn]
		if !ok {
			t.Errorf("%s/%s missing from the image", image.BinDir, fn)
			continue
		}
		if f.Mode&0o111 == 0 {
			t.Errorf("%s: not executable (mode %o)", fn, f.Mode)
		}
		if _, err := image.CheckStatic(fn, f.Data); err != nil {
			t.Error(err)
		}
		// Run the binary taken out of the image with -h, in an empty environment.
		exe := filepath.Join(tmp, "extracted-"+fn)
		if err := os.WriteFile(exe, f.Data, 0o755); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, exe, "-h")
		cmd.Env = []string{}
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("%s -h: %v\n%s", fn, err, out)
			continue
		}
		if !strings.Contains(string(out), "MM2_SOURCE_BOOTSTRAP_SERVERS") {
			t.Errorf("%s -h does not list its settings:\n%s", fn, out)
		}
		for name := range known {
			if strings.HasPrefix(name, "MM2_") && !strings.Contains(string(out), name) {
				t.Logf("%s -h does not mention %s", fn, name)
			}
		}
	}
}
