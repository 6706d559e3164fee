package image

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// asArm64 returns bins with the ELF machine of each set to aarch64: enough for the index
// assembly, which reads the architecture from the ELF header (the real cross-compiled
// binaries are `make image`'s).
func asArm64(t *testing.T, bins []Binary) []Binary {
	t.Helper()
	var out []Binary
	for _, b := range bins {
		data := bytes.Clone(b.Data)
		if binary.LittleEndian.Uint16(data[18:]) != 62 { // EM_X86_64
			t.Skip("the test binary is not x86-64")
		}
		binary.LittleEndian.PutUint16(data[18:], 183) // EM_AARCH64
		out = append(out, Binary{Name: b.Name, Data: data})
	}
	return out
}

func TestIndexLayoutAndSBOM(t *testing.T) {
	amd := tinyBinaries(t)
	arm := asArm64(t, amd)
	created := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var images []PlatformImage
	for _, bins := range [][]Binary{amd, arm} {
		img, err := Build(Options{Binaries: bins, Created: created})
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		images = append(images, PlatformImage{Platform: Platform{OS: cf.OS, Architecture: cf.Architecture}, Image: img, Binaries: bins})
	}
	idx, err := Index(images)
	if err != nil {
		t.Fatal(err)
	}
	sbom, err := SBOM("mm2go:test", created, images)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "oci")
	if err := WriteIndexLayout(dir, "mm2go:test", idx, sbom, created); err != nil {
		t.Fatal(err)
	}
	got := checkLayout(t, dir)
	if strings.Join(got.platforms, " ") != "linux/amd64 linux/arm64" {
		t.Errorf("index platforms %v, want linux/amd64 linux/arm64", got.platforms)
	}
	for _, mt := range got.layerTypes {
		if mt != types.OCILayer {
			t.Errorf("layer media type %s, want %s (gzip by default)", mt, types.OCILayer)
		}
	}
	if !bytes.Equal(got.sbom, sbom) {
		t.Error("the SBOM attached to the index differs from the one returned")
	}
	var doc struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct {
			Name    string `json:"name"`
			Version string `json:"versionInfo"`
			Purpose string `json:"primaryPackagePurpose"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(sbom, &doc); err != nil {
		t.Fatal(err)
	}
	names := map[string]int{}
	for _, p := range doc.Packages {
		names[p.Purpose]++
		if p.Name == "stdlib" && !strings.HasPrefix(p.Version, "go1.") {
			t.Errorf("stdlib version %q", p.Version)
		}
	}
	if doc.SPDXVersion != "SPDX-2.3" || names["CONTAINER"] != 1 || names["APPLICATION"] != 6 || names["LIBRARY"] == 0 {
		t.Errorf("SBOM %s with packages by purpose %v, want 1 image, 6 binaries (3 per platform), the Go libraries", doc.SPDXVersion, names)
	}

	// zstd stays available on request.
	img, err := Build(Options{Binaries: amd, Created: created, Compression: CompressionZstd})
	if err != nil {
		t.Fatal(err)
	}
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if mt, _ := l.MediaType(); mt != types.OCILayerZStd {
			t.Errorf("with zstd: layer media type %s", mt)
		}
	}
	if _, err := Index([]PlatformImage{images[0], images[0]}); err == nil {
		t.Error("an index with one platform twice was accepted")
	}
	if _, err := Index([]PlatformImage{{Platform: Platform{OS: "linux", Architecture: "arm64"}, Image: images[0].Image}}); err == nil {
		t.Error("an amd64 image was accepted as linux/arm64")
	}
}

// layoutFacts is what checkLayout read from an OCI layout.
type layoutFacts struct {
	platforms  []string
	layerTypes []types.MediaType
	sbom       []byte
}

// checkLayout reads an OCI layout as a registry client would: index.json lists the image
// index and an SBOM artifact whose subject is that index; it returns the index's platforms,
// the media types of all layers and the SBOM.
func checkLayout(t *testing.T, dir string) layoutFacts {
	t.Helper()
	var f layoutFacts
	p, err := layout.FromPath(dir)
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
	var idxDesc, sbomDesc *v1.Descriptor
	for i, d := range im.Manifests {
		switch {
		case d.MediaType == types.OCIImageIndex:
			idxDesc = &im.Manifests[i]
		case d.ArtifactType == "application/spdx+json":
			sbomDesc = &im.Manifests[i]
		}
	}
	if idxDesc == nil || sbomDesc == nil {
		t.Fatalf("index.json lists %v: want an image index and an SBOM artifact", im.Manifests)
	}
	idx, err := top.ImageIndex(idxDesc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range m.Manifests {
		f.platforms = append(f.platforms, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != d.Platform.Architecture {
			t.Errorf("index entry %s holds an image for %s", d.Platform, cf.Architecture)
		}
		ls, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			mt, _ := l.MediaType()
			f.layerTypes = append(f.layerTypes, mt)
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", sbomDesc.Digest.Hex))
	if err != nil {
		t.Fatal(err)
	}
	var art struct {
		ArtifactType string          `json:"artifactType"`
		Subject      v1.Descriptor   `json:"subject"`
		Layers       []v1.Descriptor `json:"layers"`
	}
	if err := json.Unmarshal(raw, &art); err != nil {
		t.Fatal(err)
	}
	if art.Subject.Digest != idxDesc.Digest || len(art.Layers) != 1 || art.Layers[0].MediaType != "application/spdx+json" {
		t.Fatalf("SBOM artifact: subject %v (index %v), layers %v", art.Subject.Digest, idxDesc.Digest, art.Layers)
	}
	if f.sbom, err = os.ReadFile(filepath.Join(dir, "blobs", "sha256", art.Layers[0].Digest.Hex)); err != nil {
		t.Fatal(err)
	}
	return f
}
