package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProvidersRestricted (F8): without a config.providers line the env provider is not
// available (Kafka resolves nothing then; mm2go keeps the file provider only); a value a
// declared provider resolved into a setting that is not a secret is never quoted in errors;
// allowed.paths=/ allows every absolute path (Kafka's AllowedPaths); relative paths are refused
// in allowed.paths and in references; a provider file over 1 MiB is refused.
func TestProvidersRestricted(t *testing.T) {
	dir := t.TempDir()
	const password = "hunter2-very-secret"
	vars := map[string]string{"APP_SECRET": password}
	load := func(t *testing.T, content string) error {
		t.Helper()
		path := filepath.Join(dir, "mm2.properties")
		writeFile(t, path, content)
		vars["MM2_CONFIG_FILE"] = path
		_, err := Load(env(vars), nil)
		return err
	}
	const flow = "clusters=A,B\nA->B.enabled=true\nB.bootstrap.servers=b:9092\n"

	// Undeclared: ${env:...} stays literal, so the password is never read.
	err := load(t, flow+"A.bootstrap.servers=${env:APP_SECRET}\n")
	if err == nil || strings.Contains(err.Error(), password) || !strings.Contains(err.Error(), "${env:APP_SECRET}") {
		t.Errorf("undeclared env provider: %v, want the reference left unresolved", err)
	}
	// Declared: resolved, but the error names the reference, not the value.
	err = load(t, "config.providers=env\nconfig.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"+
		flow+"A.bootstrap.servers=${env:APP_SECRET}\n")
	if err == nil || strings.Contains(err.Error(), password) || !strings.Contains(err.Error(), "A.bootstrap.servers") {
		t.Errorf("env value resolved into bootstrap.servers: %v, want an error naming the setting without the value", err)
	}

	// allowed.paths=/ allows every absolute path.
	writeFile(t, filepath.Join(dir, "access.properties"), "SRC=s:9092\n")
	fileProv := "config.providers=file\nconfig.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider\n"
	if err := load(t, fileProv+"config.providers.file.param.allowed.paths=/\n"+flow+"A.bootstrap.servers=${file:"+dir+"/access.properties:SRC}\n"); err != nil {
		t.Errorf("allowed.paths=/: %v, want the file read", err)
	}
	// Relative paths: refused in allowed.paths, unresolved in a reference.
	if err := load(t, fileProv+"config.providers.file.param.allowed.paths=etc/kafka\n"+flow+"A.bootstrap.servers=a:1\n"); err == nil ||
		!strings.Contains(err.Error(), `param.allowed.paths: "etc/kafka" is not an absolute path`) {
		t.Errorf("relative allowed.paths: %v, want it refused", err)
	}
	t.Chdir(dir)
	if err := load(t, flow+"A.bootstrap.servers=${file:access.properties:SRC}\n"); err == nil || !strings.Contains(err.Error(), "${file:access.properties:SRC}") {
		t.Errorf("relative reference: %v, want it left unresolved", err)
	}
	// A provider file over 1 MiB.
	big := filepath.Join(dir, "big.properties")
	if err := os.WriteFile(big, []byte("SRC=s:9092\n"+strings.Repeat("#", 1<<20)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := load(t, flow+"A.bootstrap.servers=${file:"+big+":SRC}\n"); err == nil || !strings.Contains(err.Error(), "larger than 1048576 bytes") {
		t.Errorf("provider file over 1 MiB: %v, want it refused", err)
	}
}

// TestAutomaticConfigProviders: MM2_AUTOMATIC_CONFIG_PROVIDERS is Kafka's system property
// org.apache.kafka.automatic.config.providers: unset, every provider is available (and mm2go's
// undeclared "file"); set, only the provider classes it lists, comma separated ("none", or any
// value naming no class, forbids them all). A declared provider whose class is not listed is a
// configuration error naming the setting and the class; the undeclared "file" provider exists
// only when FileConfigProvider is listed, else a reference stays as written.
func TestAutomaticConfigProviders(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "access.properties"), "SRC=s:9092\n")
	const flow = "clusters=A,B\nA->B.enabled=true\nB.bootstrap.servers=b:9092\n"
	ref := "A.bootstrap.servers=${file:" + dir + "/access.properties:SRC}\n"
	declared := "config.providers=file\nconfig.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider\n"
	load := func(t *testing.T, allowed *string, content string) (*Config, error) {
		t.Helper()
		path := filepath.Join(dir, "mm2.properties")
		writeFile(t, path, content)
		vars := map[string]string{"MM2_CONFIG_FILE": path}
		if allowed != nil {
			vars[EnvAutomaticConfigProviders] = *allowed
		}
		return Load(env(vars), nil)
	}
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name    string
		allowed *string
		content string
		want    string // bootstrap servers of A, or "" for an error
		err     string
	}{
		{"unset, undeclared file", nil, flow + ref, "s:9092", ""},
		{"unset, declared file", nil, declared + flow + ref, "s:9092", ""},
		{"none, undeclared file", str("none"), flow + ref, "", "${file:"},
		{"empty, undeclared file", str(""), flow + ref, "", "${file:"},
		{"none, declared file", str("none"), declared + flow + ref, "", EnvAutomaticConfigProviders},
		{"env only, declared file", str("org.apache.kafka.common.config.provider.EnvVarConfigProvider"), declared + flow + ref, "", "org.apache.kafka.common.config.provider.FileConfigProvider is not allowed"},
		{"file listed, undeclared file", str(" org.apache.kafka.common.config.provider.EnvVarConfigProvider , org.apache.kafka.common.config.provider.FileConfigProvider"), flow + ref, "s:9092", ""},
		{"file listed, declared file", str("org.apache.kafka.common.config.provider.FileConfigProvider"), declared + flow + ref, "s:9092", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := load(t, tc.allowed, tc.content)
			switch {
			case tc.want != "" && (err != nil || strings.Join(cfg.Source.BootstrapServers, ",") != tc.want):
				t.Errorf("got %v (%v), want A's bootstrap servers %q", cfg, err, tc.want)
			case tc.want == "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("got error %v, want one containing %q", err, tc.err)
			}
		})
	}
}
