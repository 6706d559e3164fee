package image

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Platform is one os/architecture of the image index, e.g. {OS: "linux", Architecture: "arm64"}.
type Platform = v1.Platform

// ParsePlatform parses "linux/amd64".
func ParsePlatform(s string) (Platform, error) {
	os, arch, ok := strings.Cut(s, "/")
	if !ok || os != "linux" || arch == "" || strings.Contains(arch, "/") {
		return Platform{}, fmt.Errorf("platform %q: want linux/<arch>", s)
	}
	return Platform{OS: os, Architecture: arch}, nil
}

// PlatformImage is one image of an index.
type PlatformImage struct {
	Platform Platform
	Image    v1.Image
	Binaries []Binary
}

// Index puts the images into one OCI image index, each under its platform, in the order given.
func Index(images []PlatformImage) (v1.ImageIndex, error) {
	if len(images) == 0 {
		return nil, errors.New("no images for the index")
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	seen := map[string]bool{}
	for _, pi := range images {
		cf, err := pi.Image.ConfigFile()
		if err != nil {
			return nil, err
		}
		if cf.OS != pi.Platform.OS || cf.Architecture != pi.Platform.Architecture {
			return nil, fmt.Errorf("image for %s has binaries for %s/%s", pi.Platform, cf.OS, cf.Architecture)
		}
		if seen[pi.Platform.String()] {
			return nil, fmt.Errorf("platform %s given twice", pi.Platform)
		}
		seen[pi.Platform.String()] = true
		p := pi.Platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: pi.Image, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return idx, nil
}

// SBOM media type and the OCI empty config of an artifact manifest.
const (
	SBOMMediaType    = "application/spdx+json"
	emptyConfigType  = "application/vnd.oci.empty.v1+json"
	emptyConfigBytes = "{}"
)

// spdxDoc is the part of an SPDX 2.3 JSON document this package writes.
type spdxDoc struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreation       `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name                  string         `json:"name"`
	SPDXID                string         `json:"SPDXID"`
	VersionInfo           string         `json:"versionInfo,omitempty"`
	DownloadLocation      string         `json:"downloadLocation"`
	FilesAnalyzed         bool           `json:"filesAnalyzed"`
	PrimaryPackagePurpose string         `json:"primaryPackagePurpose,omitempty"`
	Checksums             []spdxChecksum `json:"checksums,omitempty"`
	ExternalRefs          []spdxRef      `json:"externalRefs,omitempty"`
	Comment               string         `json:"comment,omitempty"`
}

type spdxChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

var spdxIDChars = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

func spdxID(parts ...string) string {
	return "SPDXRef-" + spdxIDChars.ReplaceAllString(strings.Join(parts, "-"), "-")
}

func goPURL(path, version string) string {
	return "pkg:golang/" + path + "@" + url.PathEscape(version)
}

// SBOM writes an SPDX 2.3 JSON document of the images: the image, each binary per platform
// (with its SHA-256), and every Go module compiled into them (debug/buildinfo: the same list
// `go version -m` prints), with the Go toolchain, each module named by its package URL.
func SBOM(ref string, created time.Time, images []PlatformImage) ([]byte, error) {
	imgID := spdxID("Image")
	d := spdxDoc{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT", Name: ref,
		CreationInfo: spdxCreation{Created: created.UTC().Format(time.RFC3339), Creators: []string{"Tool: mm2go-mkimage"}},
		Packages: []spdxPackage{{Name: ref, SPDXID: imgID, DownloadLocation: "NOASSERTION", PrimaryPackagePurpose: "CONTAINER",
			Comment: "OCI image index; platforms listed by the binaries"}},
		Relationships: []spdxRelationship{{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: imgID}},
	}
	h := sha256.New()
	modules := map[string]spdxPackage{}
	for _, pi := range images {
		for _, b := range pi.Binaries {
			bi, err := buildinfo.Read(bytes.NewReader(b.Data))
			if err != nil {
				return nil, fmt.Errorf("build info of %s (%s): %w", b.Name, pi.Platform, err)
			}
			sum := sha256.Sum256(b.Data)
			h.Write(sum[:])
			binID := spdxID("Binary", b.Name, pi.Platform.OS, pi.Platform.Architecture)
			d.Packages = append(d.Packages, spdxPackage{
				Name: b.Name + " (" + pi.Platform.String() + ")", SPDXID: binID, VersionInfo: bi.Main.Version,
				DownloadLocation: "NOASSERTION", PrimaryPackagePurpose: "APPLICATION",
				Checksums: []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: hex.EncodeToString(sum[:])}},
				Comment:   "/usr/local/bin/" + b.Name + ", package " + bi.Path + ", built with " + bi.GoVersion,
			})
			d.Relationships = append(d.Relationships, spdxRelationship{Element: imgID, Type: "CONTAINS", Related: binID})
			deps := []*debugModule{{Path: "stdlib", Version: bi.GoVersion}}
			if bi.Main.Path != "" {
				deps = append(deps, &debugModule{Path: bi.Main.Path, Version: bi.Main.Version})
			}
			for _, m := range bi.Deps {
				if m.Replace != nil {
					m = m.Replace
				}
				deps = append(deps, &debugModule{Path: m.Path, Version: m.Version})
			}
			for _, m := range deps {
				id := spdxID("Module", m.Path, m.Version)
				if _, ok := modules[id]; !ok {
					modules[id] = spdxPackage{Name: m.Path, SPDXID: id, VersionInfo: m.Version, DownloadLocation: "NOASSERTION", PrimaryPackagePurpose: "LIBRARY",
						ExternalRefs: []spdxRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: goPURL(m.Path, m.Version)}}}
				}
				d.Relationships = append(d.Relationships, spdxRelationship{Element: binID, Type: "DEPENDS_ON", Related: id})
			}
		}
	}
	ids := make([]string, 0, len(modules))
	for id := range modules {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		d.Packages = append(d.Packages, modules[id])
	}
	d.DocumentNamespace = "https://github.com/mm2go/mm2go/spdx/" + url.PathEscape(ref) + "/" + hex.EncodeToString(h.Sum(nil))[:16]
	return json.MarshalIndent(d, "", "  ")
}

type debugModule struct{ Path, Version string }

// WriteIndexLayout writes idx into an OCI image layout directory as its image (an index.json
// already there is replaced; blobs are kept), annotated org.opencontainers.image.ref.name=ref,
// and, when sbom is not empty, the SBOM as an OCI artifact whose subject is idx (what `oras
// attach` makes; `oras discover --oci-layout` lists it).
func WriteIndexLayout(dir, ref string, idx v1.ImageIndex, sbom []byte, created time.Time) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("creating OCI layout %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		return fmt.Errorf("writing the index to %s: %w", dir, err)
	}
	if len(sbom) == 0 {
		return nil
	}
	subject, err := descriptorOf(idx)
	if err != nil {
		return err
	}
	blob := func(data []byte) (v1.Hash, error) {
		h, _, err := v1.SHA256(bytes.NewReader(data))
		if err != nil {
			return v1.Hash{}, err
		}
		return h, p.WriteBlob(h, io.NopCloser(bytes.NewReader(data)))
	}
	cfgHash, err := blob([]byte(emptyConfigBytes))
	if err != nil {
		return err
	}
	sbomHash, err := blob(sbom)
	if err != nil {
		return err
	}
	man := map[string]any{
		"schemaVersion": 2,
		"mediaType":     string(types.OCIManifestSchema1),
		"artifactType":  SBOMMediaType,
		"config":        v1.Descriptor{MediaType: emptyConfigType, Digest: cfgHash, Size: int64(len(emptyConfigBytes)), Data: []byte(emptyConfigBytes)},
		"layers": []v1.Descriptor{{MediaType: SBOMMediaType, Digest: sbomHash, Size: int64(len(sbom)),
			Annotations: map[string]string{"org.opencontainers.image.title": "sbom.spdx.json"}}},
		"subject":     subject,
		"annotations": map[string]string{"org.opencontainers.image.created": created.UTC().Format(time.RFC3339)},
	}
	raw, err := json.Marshal(man)
	if err != nil {
		return err
	}
	manHash, err := blob(raw)
	if err != nil {
		return err
	}
	return p.AppendDescriptor(v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: manHash, Size: int64(len(raw)), ArtifactType: SBOMMediaType,
		Annotations: map[string]string{"org.opencontainers.image.ref.name": ref + ".sbom"}})
}

func descriptorOf(idx v1.ImageIndex) (v1.Descriptor, error) {
	d, err := idx.Digest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	n, err := idx.Size()
	if err != nil {
		return v1.Descriptor{}, err
	}
	mt, err := idx.MediaType()
	if err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: mt, Digest: d, Size: n}, nil
}
