// Command mkimage builds mm2go's container image without Docker: it takes the three static
// function binaries (mirror, checkpoint, heartbeat) of each platform and a CA bundle and
// writes an image tarball that `docker load` and `podman load` accept (one platform), an OCI
// image layout holding an image index of every platform with the SBOM attached to it, and
// the SBOM (SPDX 2.3 JSON: every Go module in the binaries) beside them.
//
//	GOOS=linux GOARCH=amd64 go build -trimpath -ldflags "-s -w" -o dist/bin/linux_amd64/ ./functions/...   (CGO_ENABLED=0)
//	GOOS=linux GOARCH=arm64 go build -trimpath -ldflags "-s -w" -o dist/bin/linux_arm64/ ./functions/...
//	cd deploy && go run ./cmd/mkimage -bin ../dist/bin -platforms linux/amd64,linux/arm64 \
//		-o ../dist/mm2go-image.tar -oci-layout ../dist/mm2go-oci -sbom ../dist/mm2go.spdx.json
//
// Without -platforms the binaries are in -bin itself and make a one-platform image.
//
// The image runs as 65532:65532, its entrypoint is /usr/local/bin/mirror with the default
// argument "serve"; pick another function with the container command, e.g.
// ["/usr/local/bin/checkpoint", "run"]. File and creation times come from -created or
// SOURCE_DATE_EPOCH (default: the Unix epoch), so equal inputs give an equal digest.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/mm2go/mm2go/deploy/internal/image"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

type labelFlag map[string]string

func (l labelFlag) String() string { return fmt.Sprint(map[string]string(l)) }
func (l labelFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("label %q: want key=value", s)
	}
	l[k] = v
	return nil
}

func run(args []string) error {
	fs := flag.NewFlagSet("mkimage", flag.ContinueOnError)
	bin := fs.String("bin", "bin", "directory holding the static binaries "+strings.Join(image.Functions, ", ")+" (with -platforms: in <os>_<arch> below it)")
	platforms := fs.String("platforms", "", "comma-separated platforms of the index, e.g. linux/amd64,linux/arm64 (default: the one of the binaries in -bin)")
	out := fs.String("o", "dist/mm2go-image.tar", "docker-load tarball to write (one platform: -load-platform)")
	loadPlatform := fs.String("load-platform", "", "platform of the docker-load tarball (default: linux/"+runtime.GOARCH+" when built, else the first)")
	ociDir := fs.String("oci-layout", "", "also write an OCI image layout with the index of every platform and the SBOM attached")
	sbomFile := fs.String("sbom", "", "also write the SPDX 2.3 JSON SBOM to this file")
	ref := fs.String("tag", "mm2go:dev", "image reference recorded in the tarball (docker load tags the image with it)")
	caFile := fs.String("ca-file", "", "PEM CA bundle to install (default: the NSS roots pinned by golang.org/x/crypto/x509roots/fallback)")
	created := fs.String("created", "", "creation time, RFC 3339 or Unix seconds (default: $SOURCE_DATE_EPOCH, else the Unix epoch)")
	version := fs.String("version", "", "org.opencontainers.image.version label")
	revision := fs.String("revision", "", "org.opencontainers.image.revision label (git commit)")
	comp := fs.String("compression", image.CompressionGzip, "layer compression: gzip (every runtime and scanner reads it) or zstd (64 MiB window, about half the size; Docker 20.10+, containerd 1.5+)")
	labels := labelFlag{}
	fs.Var(labels, "label", "extra label key=value (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	t, err := parseCreated(*created)
	if err != nil {
		return err
	}
	type source struct {
		platform string
		dir      string
	}
	var sources []source
	if *platforms == "" {
		sources = []source{{"", *bin}}
	} else {
		for _, p := range strings.Split(*platforms, ",") {
			pl, err := image.ParsePlatform(strings.TrimSpace(p))
			if err != nil {
				return err
			}
			sources = append(sources, source{pl.String(), filepath.Join(*bin, pl.OS+"_"+pl.Architecture)})
		}
	}
	var certs []byte
	if *caFile != "" {
		if certs, err = os.ReadFile(*caFile); err != nil {
			return fmt.Errorf("reading CA bundle: %w", err)
		}
	}
	if *version != "" {
		labels["org.opencontainers.image.version"] = *version
	}
	if *revision != "" {
		labels["org.opencontainers.image.revision"] = *revision
	}
	var images []image.PlatformImage
	for _, src := range sources {
		bins, err := image.ReadBinaries(src.dir, image.Functions)
		if err != nil {
			return err
		}
		img, err := image.Build(image.Options{Binaries: bins, CACerts: certs, Created: t, Labels: labels, Compression: *comp})
		if err != nil {
			return fmt.Errorf("image of %s: %w", src.dir, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return err
		}
		pl := image.Platform{OS: cf.OS, Architecture: cf.Architecture}
		if src.platform != "" && pl.String() != src.platform {
			return fmt.Errorf("%s: binaries for %s, want %s", src.dir, pl, src.platform)
		}
		images = append(images, image.PlatformImage{Platform: pl, Image: img, Binaries: bins})
	}
	load := images[0]
	want := *loadPlatform
	if want == "" {
		want = "linux/" + runtime.GOARCH
	}
	found := false
	for _, pi := range images {
		if pi.Platform.String() == want {
			load, found = pi, true
		}
	}
	if !found && *loadPlatform != "" {
		return fmt.Errorf("-load-platform %s: not among the platforms built", *loadPlatform)
	}
	if err := image.WriteTarball(*out, *ref, load.Image); err != nil {
		return fmt.Errorf("writing %s: %w", *out, err)
	}
	sbom, err := image.SBOM(*ref, t, images)
	if err != nil {
		return err
	}
	if *sbomFile != "" {
		if err := os.WriteFile(*sbomFile, append(sbom, '\n'), 0o644); err != nil {
			return fmt.Errorf("writing the SBOM: %w", err)
		}
	}
	idx, err := image.Index(images)
	if err != nil {
		return err
	}
	if *ociDir != "" {
		if err := image.WriteIndexLayout(*ociDir, *ref, idx, sbom, t); err != nil {
			return err
		}
	}
	st, err := os.Stat(*out)
	if err != nil {
		return err
	}
	d, err := load.Image.Digest()
	if err != nil {
		return err
	}
	id, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s (%s, %s, %.1f MB, manifest %s); index %s of %d platforms\n", *out, *ref, load.Platform, float64(st.Size())/1e6, d, id, len(images))
	return nil
}

func parseCreated(s string) (time.Time, error) {
	if s == "" {
		s = os.Getenv("SOURCE_DATE_EPOCH")
	}
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(n, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("creation time %q: want RFC 3339 or Unix seconds", s)
	}
	return t.UTC(), nil
}
