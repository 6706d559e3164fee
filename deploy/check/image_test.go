package check

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/mod/modfile"

	"github.com/mm2go/mm2go/deploy/internal/image"
)

// maxImageBytes is the size budget of the image tarball with gzip layers (the default; zstd
// is about half).
const maxImageBytes = 36_000_000

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
	sbomPath := filepath.Join(tmp, "mm2go.spdx.json")
	run(root, nil, mk, "-bin", bin, "-o", tarPath, "-tag", "mm2go:test", "-oci-layout", filepath.Join(tmp, "oci"), "-sbom", sbomPath)
	checkImageSBOM(t, sbomPath, filepath.Join(tmp, "oci"))

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
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range layers {
		mt, err := l.MediaType()
		if err != nil {
			t.Fatal(err)
		}
		// The tarball's layers as written: gzip, which every runtime and scanner reads (read
		// back from a docker-load tarball they carry Docker's media type for it).
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		magic := make([]byte, 2)
		_, err = io.ReadFull(rc, magic)
		rc.Close()
		if err != nil || (mt != types.OCILayer && mt != types.DockerLayer) || magic[0] != 0x1f || magic[1] != 0x8b {
			t.Errorf("layer %d: media type %s, first bytes %x (%v); want gzip (%s)", i, mt, magic, err, types.OCILayer)
		}
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

// checkImageSBOM: the SPDX SBOM mkimage wrote names franz-go at the version the main module
// requires (its go.mod), with a package URL, and the OCI layout lists it as an artifact whose
// subject is the image index.
func checkImageSBOM(t *testing.T, sbomPath, ociDir string) {
	t.Helper()
	gomod := mustRead(t, "go.mod")
	mf, err := modfile.Parse("go.mod", gomod, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for _, r := range mf.Require {
		if r.Mod.Path == "github.com/twmb/franz-go" {
			want = r.Mod.Version
		}
	}
	if want == "" {
		t.Fatal("go.mod does not require github.com/twmb/franz-go")
	}
	raw, err := os.ReadFile(sbomPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct {
			Name         string `json:"name"`
			VersionInfo  string `json:"versionInfo"`
			ExternalRefs []struct {
				Type    string `json:"referenceType"`
				Locator string `json:"referenceLocator"`
			} `json:"externalRefs"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("SBOM %s: %v", sbomPath, err)
	}
	found := false
	for _, p := range doc.Packages {
		if p.Name == "github.com/twmb/franz-go" {
			found = p.VersionInfo == want && len(p.ExternalRefs) == 1 && p.ExternalRefs[0].Locator == "pkg:golang/github.com/twmb/franz-go@"+want
			t.Logf("SBOM: %s %s %v", p.Name, p.VersionInfo, p.ExternalRefs)
		}
	}
	if doc.SPDXVersion != "SPDX-2.3" || !found {
		t.Errorf("SBOM (%s, %d packages) does not name github.com/twmb/franz-go %s with its purl", doc.SPDXVersion, len(doc.Packages), want)
	}
	p, err := layout.FromPath(ociDir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, d := range im.Manifests {
		kinds = append(kinds, string(d.MediaType)+" "+d.ArtifactType)
	}
	if len(im.Manifests) != 2 || im.Manifests[0].MediaType != types.OCIImageIndex || im.Manifests[1].ArtifactType != "application/spdx+json" {
		t.Errorf("OCI layout index.json lists %v, want the image index and the SBOM artifact", kinds)
	}
}
