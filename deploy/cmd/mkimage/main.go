// Command mkimage builds mm2go's container image without Docker: it takes the three static
// function binaries (mirror, checkpoint, heartbeat) and a CA bundle and writes an image
// tarball that `docker load` and `podman load` accept, and optionally an OCI image layout.
//
//	go build -trimpath -ldflags "-s -w" -o dist/bin/ ./functions/...   (CGO_ENABLED=0)
//	cd deploy && go run ./cmd/mkimage -bin ../dist/bin -o ../dist/mm2go-image.tar
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
	bin := fs.String("bin", "bin", "directory holding the static binaries "+strings.Join(image.Functions, ", "))
	out := fs.String("o", "dist/mm2go-image.tar", "docker-load tarball to write")
	ociDir := fs.String("oci-layout", "", "also write an OCI image layout to this directory")
	ref := fs.String("tag", "mm2go:dev", "image reference recorded in the tarball (docker load tags the image with it)")
	caFile := fs.String("ca-file", "", "PEM CA bundle to install (default: the NSS roots pinned by golang.org/x/crypto/x509roots/fallback)")
	created := fs.String("created", "", "creation time, RFC 3339 or Unix seconds (default: $SOURCE_DATE_EPOCH, else the Unix epoch)")
	version := fs.String("version", "", "org.opencontainers.image.version label")
	revision := fs.String("revision", "", "org.opencontainers.image.revision label (git commit)")
	comp := fs.String("compression", image.CompressionZstd, "layer compression: zstd (64 MiB window, the three binaries share code) or gzip (larger, for runtimes without zstd)")
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
	bins, err := image.ReadBinaries(*bin, image.Functions)
	if err != nil {
		return err
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
	img, err := image.Build(image.Options{Binaries: bins, CACerts: certs, Created: t, Labels: labels, Compression: *comp})
	if err != nil {
		return err
	}
	if err := image.WriteTarball(*out, *ref, img); err != nil {
		return fmt.Errorf("writing %s: %w", *out, err)
	}
	if *ociDir != "" {
		if err := image.WriteLayout(*ociDir, *ref, img); err != nil {
			return err
		}
	}
	st, err := os.Stat(*out)
	if err != nil {
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s (%s, %.1f MB, manifest %s)\n", *out, *ref, float64(st.Size())/1e6, d)
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
