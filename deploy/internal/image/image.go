// Package image assembles mm2go's container image without a container engine: a base layer
// (CA certificates, /etc/passwd and /etc/group for the non-root user, /tmp, a home directory)
// plus one layer holding the three function binaries, with a config that runs as 65532:65532.
//
// The result has the same file layout as the top-level Dockerfile's final stage, so manifests
// can use either image. All file times and the image creation time come from Options.Created,
// so the same inputs give the same image digest.
package image

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/compression"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// Fixed facts of the image layout, shared with the Dockerfile and the manifests.
const (
	BinDir       = "/usr/local/bin"
	CACertsPath  = "/etc/ssl/certs/ca-certificates.crt"
	HomeDir      = "/home/nonroot"
	UID          = 65532
	GID          = 65532
	User         = "65532:65532"
	UserName     = "nonroot"
	DefaultPort  = "8080"
	SourceURL    = "https://github.com/mm2go/mm2go"
	DefaultEntry = "mirror"
)

// Functions are the binaries the image must contain, in layer order.
var Functions = []string{"mirror", "checkpoint", "heartbeat"}

// Binary is one executable to put in BinDir.
type Binary struct {
	Name string // file name in BinDir, e.g. "mirror"
	Data []byte // a static linux ELF executable
}

// Options describe one image.
type Options struct {
	Binaries []Binary
	// CACerts is a PEM bundle installed at CACertsPath. Empty: the NSS roots pinned by
	// golang.org/x/crypto/x509roots/fallback (see FallbackCACerts).
	CACerts []byte
	// Created is the creation time of the image and the time of every file in it.
	Created time.Time
	// Labels are added to (and override) the default OCI labels.
	Labels map[string]string
	// Compression of the layers: CompressionGzip (default: every runtime, registry and
	// scanner reads it) or CompressionZstd (opt-in: about half the size).
	Compression string
}

// Layer compressions.
const (
	// CompressionZstd is zstd at its best level with a 64 MiB window (ZstdWindow), so the
	// shared code of the three binaries is stored once. Docker 20.10+, containerd 1.5+ and
	// podman pull and load it; decoders need ZstdWindow of memory; some scanners and older
	// runtimes cannot read it, so it is opt-in.
	CompressionZstd = "zstd"
	// CompressionGzip is gzip -9, the default: read by every runtime, registry and scanner;
	// about twice the size of zstd.
	CompressionGzip = "gzip"
	// ZstdWindow is the zstd window: above the distance between the first and the last binary
	// of the layer, and within what common decoders accept without options.
	ZstdWindow = 64 << 20
)

// FallbackCACerts returns the unconstrained roots of the NSS bundle that
// golang.org/x/crypto/x509roots/fallback pins, as PEM. Roots with an NSS distrust-after
// constraint are left out: a PEM file cannot carry that constraint, and keeping them would
// trust what NSS no longer trusts.
func FallbackCACerts() []byte {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
	}
	return b.Bytes()
}

// CheckStatic returns an error unless data is a statically linked ELF executable (no program
// interpreter, no dynamic libraries), and returns its GOARCH-style architecture.
func CheckStatic(name string, data []byte) (arch string, err error) {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return "", fmt.Errorf("%s: not an ELF file: %w", name, err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return "", fmt.Errorf("%s: ELF type %v is not an executable", name, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("%s: dynamically linked (has a program interpreter); build with CGO_ENABLED=0", name)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		return "", fmt.Errorf("%s: needs shared libraries %v; build with CGO_ENABLED=0", name, libs)
	}
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	case elf.EM_S390:
		return "s390x", nil
	case elf.EM_PPC64:
		return "ppc64le", nil
	case elf.EM_RISCV:
		return "riscv64", nil
	}
	return "", fmt.Errorf("%s: unsupported ELF machine %v", name, f.Machine)
}

// Build assembles the image.
func Build(o Options) (v1.Image, error) {
	if len(o.Binaries) == 0 {
		return nil, errors.New("no binaries")
	}
	arch := ""
	seen := map[string]bool{}
	for _, b := range o.Binaries {
		if b.Name == "" || path.Base(b.Name) != b.Name {
			return nil, fmt.Errorf("bad binary name %q", b.Name)
		}
		if seen[b.Name] {
			return nil, fmt.Errorf("binary %q given twice", b.Name)
		}
		seen[b.Name] = true
		a, err := CheckStatic(b.Name, b.Data)
		if err != nil {
			return nil, err
		}
		if arch != "" && a != arch {
			return nil, fmt.Errorf("binary %q is %s, the others are %s", b.Name, a, arch)
		}
		arch = a
	}
	if !seen[DefaultEntry] {
		return nil, fmt.Errorf("binary %q (the entrypoint) is missing", DefaultEntry)
	}
	certs := o.CACerts
	if len(certs) == 0 {
		certs = FallbackCACerts()
	}
	if blk, _ := pem.Decode(certs); blk == nil || blk.Type != "CERTIFICATE" {
		return nil, errors.New("CA bundle holds no PEM certificate")
	}
	created := o.Created.UTC()

	switch o.Compression {
	case "":
		o.Compression = CompressionGzip
	case CompressionZstd, CompressionGzip:
	default:
		return nil, fmt.Errorf("compression %q: want %s or %s", o.Compression, CompressionZstd, CompressionGzip)
	}
	base, err := layer(created, []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf(
			"root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:%s:/sbin/nologin\n", UserName, UID, GID, UserName, HomeDir))},
		{name: "etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\n%s:x:%d:\n", UserName, GID))},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: CACertsPath[1:], mode: 0o644, data: certs},
		{name: "home/", mode: 0o755, dir: true},
		{name: HomeDir[1:] + "/", mode: 0o700, dir: true, uid: UID, gid: GID},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/local/", mode: 0o755, dir: true},
		{name: BinDir[1:] + "/", mode: 0o755, dir: true},
	}, o.Compression)
	if err != nil {
		return nil, err
	}
	adds := []mutate.Addendum{{Layer: base, History: v1.History{
		Created: v1.Time{Time: created}, CreatedBy: "mm2go mkimage: CA certificates, passwd/group, /tmp, " + HomeDir,
	}}}
	// All binaries in ONE layer: they share most of their code, and a compressor whose window
	// spans the whole layer stores the shared parts once (zstd: about half the size of gzip).
	var binEntries []entry
	var names []string
	for _, b := range o.Binaries {
		binEntries = append(binEntries, entry{name: BinDir[1:] + "/" + b.Name, mode: 0o755, data: b.Data})
		names = append(names, b.Name)
	}
	bins, err := layer(created, binEntries, o.Compression)
	if err != nil {
		return nil, err
	}
	adds = append(adds, mutate.Addendum{Layer: bins, History: v1.History{
		Created: v1.Time{Time: created}, CreatedBy: "mm2go mkimage: " + BinDir + "/{" + strings.Join(names, ",") + "}",
	}})

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, adds...)
	if err != nil {
		return nil, fmt.Errorf("appending layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = arch
	cf.Created = v1.Time{Time: created}
	labels := map[string]string{
		"org.opencontainers.image.source":      SourceURL,
		"org.opencontainers.image.url":         SourceURL,
		"org.opencontainers.image.title":       "mm2go",
		"org.opencontainers.image.description": "Kafka MirrorMaker 2 as three serverless functions: mirror, checkpoint, heartbeat (choose one with the container command)",
		"org.opencontainers.image.created":     created.Format(time.RFC3339),
	}
	for k, v := range o.Labels {
		labels[k] = v
	}
	sort.Strings(names)
	labels["dev.mm2go.functions"] = fmt.Sprint(names)
	cf.Config = v1.Config{
		User:         User,
		WorkingDir:   HomeDir,
		Entrypoint:   []string{BinDir + "/" + DefaultEntry},
		Cmd:          []string{"serve"},
		Env:          []string{"PATH=" + BinDir + ":/usr/bin:/bin", "SSL_CERT_FILE=" + CACertsPath, "PORT=" + DefaultPort},
		ExposedPorts: map[string]struct{}{DefaultPort + "/tcp": {}},
		Labels:       labels,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("setting config: %w", err)
	}
	return img, nil
}

// ReadBinaries reads the named binaries from dir.
func ReadBinaries(dir string, names []string) ([]Binary, error) {
	var out []Binary
	for _, n := range names {
		data, err := os.ReadFile(path.Join(dir, n))
		if err != nil {
			return nil, fmt.Errorf("reading binary %q: %w", n, err)
		}
		out = append(out, Binary{Name: n, Data: data})
	}
	return out, nil
}

// WriteTarball writes img as a `docker load` / `podman load` tarball tagged ref.
func WriteTarball(file, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return tarball.WriteToFile(file, tag, img)
}

// WriteLayout writes img into an OCI image layout directory as its only image (an index
// already there is replaced; blobs are kept), annotated org.opencontainers.image.ref.name=ref.
func WriteLayout(dir, ref string, img v1.Image) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("creating OCI layout %s: %w", dir, err)
	}
	return p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref}))
}

type entry struct {
	name     string
	mode     int64
	dir      bool
	uid, gid int
	data     []byte
}

// layer builds a layer from entries, compressed with comp.
func layer(mtime time.Time, entries []entry, comp string) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			ModTime: mtime, Format: tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar header %s: %w", e.name, err)
		}
		if !e.dir {
			if _, err := tw.Write(e.data); err != nil {
				return nil, fmt.Errorf("tar data %s: %w", e.name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	if comp == CompressionGzip {
		// Compressed once here: a layer made from the uncompressed tar would be compressed
		// again each time its digest or bytes are read (tarball, layout, index).
		var gbuf bytes.Buffer
		zw, err := gzip.NewWriterLevel(&gbuf, gzip.BestCompression)
		if err != nil {
			return nil, err
		}
		if _, err := zw.Write(raw); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		gz := gbuf.Bytes()
		return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(gz)), nil
		}, tarball.WithMediaType(types.OCILayer))
	}
	var zbuf bytes.Buffer
	enc, err := zstd.NewWriter(&zbuf, zstd.WithEncoderLevel(zstd.SpeedBestCompression),
		zstd.WithWindowSize(ZstdWindow), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	if _, err := enc.Write(raw); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	compressed := zbuf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(compressed)), nil
	}, tarball.WithCompression(compression.ZStd), tarball.WithMediaType(types.OCILayerZStd))
}

// File is one entry of an image's flattened file system.
type File struct {
	Mode     int64 // permission and special bits (tar header mode)
	Dir      bool
	UID, GID int
	Data     []byte // regular files only
}

// Files flattens img (all layers, whiteouts applied) into path -> File, paths without the
// leading slash as in the layers.
func Files(img v1.Image) (map[string]File, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]File{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading image file system: %w", err)
		}
		f := File{Mode: h.Mode, Dir: h.Typeflag == tar.TypeDir, UID: h.Uid, GID: h.Gid}
		if h.Typeflag == tar.TypeReg {
			if f.Data, err = io.ReadAll(tr); err != nil {
				return nil, err
			}
		}
		out[strings.TrimSuffix(path.Clean(h.Name), "/")] = f
	}
}
