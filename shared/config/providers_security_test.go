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
