package config

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseProperties: any file parses or fails with an error, never a panic, and a parsed
// key=value line appended to the input is found with its value. Seeds:
// testdata/fuzz/FuzzParseProperties.
func FuzzParseProperties(f *testing.F) {
	f.Add([]byte("a=b\n# c\nx : y \\\n  z\n"))
	f.Add([]byte("key\\u0041=v\\t\\n\n!bang\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := parseProperties(data); err != nil {
			return
		}
		props, err := parseProperties(append(append([]byte{}, data...), "\nfuzz.end.key=fuzz-end-value\n"...))
		if err != nil || len(props) == 0 {
			return // the input ended inside a continuation or escape
		}
		if last := props[len(props)-1]; last.key == "fuzz.end.key" && last.value != "fuzz-end-value" {
			t.Errorf("appended line read as %q=%q", last.key, last.value)
		}
	})
}

// FuzzProviders: any value with ${...} references, under declared file, env and dir providers,
// resolves or fails with an error, never a panic; only files inside allowed.paths are read, and
// a reference to a file outside it stays as written. Seeds: testdata/fuzz/FuzzProviders.
func FuzzProviders(f *testing.F) {
	f.Add("${file:ALLOWED/p.properties:k}")
	f.Add("${env:HOME} ${dir:ALLOWED:p.properties} ${file:OUTSIDE/secret.properties:k}")
	f.Add("${file:ALLOWED/../outside/secret.properties:k}${")
	dir := f.TempDir()
	allowed, outside := filepath.Join(dir, "allowed"), filepath.Join(dir, "outside")
	for _, d := range []string{allowed, outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(allowed, "p.properties"), []byte("k=allowed-value\n"), 0o600); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.properties"), []byte("k=outside-secret\n"), 0o600); err != nil {
		f.Fatal(err)
	}
	props := map[string]string{
		"config.providers":                             "file,env,dir",
		"config.providers.file.class":                  fileProviderClass,
		"config.providers.file.param.allowed.paths":    allowed,
		"config.providers.env.class":                   envProviderClass,
		"config.providers.env.param.allowlist.pattern": "HOME",
		"config.providers.dir.class":                   dirProviderClass,
		"config.providers.dir.param.allowed.paths":     allowed,
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.Fuzz(func(t *testing.T, v string) {
		v = strings.NewReplacer("ALLOWED", allowed, "OUTSIDE", outside).Replace(v)
		p, err := newProviders(props, map[string]bool{}, func(k string) (string, bool) {
			if k == EnvAutomaticConfigProviders {
				return "", false // every provider class allowed
			}
			return "env-" + k, true
		}, logger)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := p.resolve(v)
		if strings.Contains(out, "outside-secret") && !strings.Contains(v, "outside-secret") {
			t.Errorf("%q resolved to %q: a file outside allowed.paths was read", v, out)
		}
	})
}
