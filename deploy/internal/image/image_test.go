package image

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// tinyBinaries builds a small static Go program once and returns it under every function name.
func tinyBinaries(t *testing.T) []Binary {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nimport \"os\"\n\nfunc main() { os.Stdout.WriteString(\"hello \" + os.Args[0] + \"\\n\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "prog")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GO111MODULE=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var bins []Binary
	for _, n := range Functions {
		bins = append(bins, Binary{Name: n, Data: data})
	}
	return bins
}

func TestBuildLayoutAndConfig(t *testing.T) {
	bins := tinyBinaries(t)
	created := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	img, err := Build(Options{Binaries: bins, Created: created, Labels: map[string]string{"org.opencontainers.image.version": "1.2.3"}})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" || c.WorkingDir != HomeDir || strings.Join(c.Entrypoint, " ") != "/usr/local/bin/mirror" || strings.Join(c.Cmd, " ") != "serve" {
		t.Errorf("config user %q workdir %q entrypoint %q cmd %q", c.User, c.WorkingDir, c.Entrypoint, c.Cmd)
	}
	if cf.OS != "linux" || cf.Architecture == "" || !cf.Created.Time.Equal(created) {
		t.Errorf("platform %s/%s created %v", cf.OS, cf.Architecture, cf.Created)
	}
	if c.Labels["org.opencontainers.image.source"] != SourceURL || c.Labels["org.opencontainers.image.version"] != "1.2.3" {
		t.Errorf("labels %v", c.Labels)
	}

	files, err := Files(img)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range Functions {
		f, ok := files["usr/local/bin/"+n]
		if !ok || f.Mode != 0o755 || f.UID != 0 || !bytes.Equal(f.Data, bins[0].Data) {
			t.Errorf("usr/local/bin/%s: present %v mode %o uid %d", n, ok, f.Mode, f.UID)
		}
	}
	if f := files["tmp"]; !f.Dir || f.Mode != 0o1777 {
		t.Errorf("/tmp: dir %v mode %o, want 1777", f.Dir, f.Mode)
	}
	if f := files["home/nonroot"]; !f.Dir || f.UID != UID || f.GID != GID {
		t.Errorf("/home/nonroot: %+v", f)
	}
	if !strings.Contains(string(files["etc/passwd"].Data), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd lacks the non-root user: %q", files["etc/passwd"].Data)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(files["etc/ssl/certs/ca-certificates.crt"].Data) {
		t.Error("CA bundle does not parse")
	}
	if n := strings.Count(string(files["etc/ssl/certs/ca-certificates.crt"].Data), "BEGIN CERTIFICATE"); n < 100 {
		t.Errorf("CA bundle has %d certificates, want the NSS roots (> 100)", n)
	}

	// Same inputs, same digest (reproducible); a different time, a different digest.
	again, err := Build(Options{Binaries: bins, Created: created, Labels: map[string]string{"org.opencontainers.image.version": "1.2.3"}})
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds of the same inputs differ: %s %s", d1, d2)
	}
	other, _ := Build(Options{Binaries: bins, Created: created.Add(time.Second)})
	if d3, _ := other.Digest(); d3 == d1 {
		t.Error("creation time does not reach the digest")
	}

	// The docker-load tarball round-trips.
	tarPath := filepath.Join(t.TempDir(), "img.tar")
	if err := WriteTarball(tarPath, "mm2go:test", img); err != nil {
		t.Fatal(err)
	}
	loaded, err := tarball.ImageFromPath(tarPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A docker-load tarball keeps the config and layers, not the manifest: compare those.
	c1, _ := img.ConfigName()
	if c, _ := loaded.ConfigName(); c != c1 {
		t.Errorf("tarball holds config %s, built %s", c, c1)
	}
	l1, _ := img.Layers()
	l2, _ := loaded.Layers()
	if len(l1) != len(l2) {
		t.Fatalf("tarball has %d layers, built %d", len(l2), len(l1))
	}
	for i := range l1 {
		a, _ := l1[i].Digest()
		b, _ := l2[i].Digest()
		if a != b {
			t.Errorf("layer %d: tarball %s, built %s", i, b, a)
		}
	}
	if err := WriteLayout(filepath.Join(t.TempDir(), "oci"), "mm2go:test", img); err != nil {
		t.Fatal(err)
	}
}

func TestBuildRejects(t *testing.T) {
	bins := tinyBinaries(t)
	if _, err := Build(Options{Binaries: bins[1:]}); err == nil || !strings.Contains(err.Error(), "mirror") {
		t.Errorf("missing entrypoint binary: %v", err)
	}
	if _, err := Build(Options{Binaries: []Binary{{Name: "mirror", Data: []byte("#!/bin/sh\n")}}}); err == nil {
		t.Error("a script was accepted as a binary")
	}
	if _, err := Build(Options{Binaries: bins, CACerts: []byte("not pem")}); err == nil {
		t.Error("a CA bundle without certificates was accepted")
	}
	// A dynamically linked executable from the build machine, if there is one.
	for _, p := range []string{"/bin/true", "/usr/bin/true"} {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if _, err := CheckStatic("true", data); err == nil || !strings.Contains(err.Error(), "dynamic") && !strings.Contains(err.Error(), "shared") {
			t.Errorf("%s: dynamic executable not rejected: %v", p, err)
		}
		break
	}
	der, _ := pem.Decode(FallbackCACerts())
	if der == nil {
		t.Error("fallback CA bundle is empty")
	}
}
