package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartProfiles: each variable set gets its file written, and a path that cannot be
// created is reported on stderr by the variable's name, without stopping anything.
func TestStartProfiles(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{
		EnvCPUProfile:   filepath.Join(dir, "cpu.pprof"),
		EnvTrace:        filepath.Join(dir, "trace.out"),
		EnvAllocProfile: filepath.Join(dir, "allocs.pprof"),
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	var stderr bytes.Buffer
	stop := startProfiles(lookup, &stderr)
	stop()
	if stderr.Len() != 0 {
		t.Errorf("stderr: %s", stderr.String())
	}
	for k, path := range env {
		if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %s not written (%v)", k, path, err)
		}
	}

	bad := func(k string) (string, bool) {
		if k == EnvTrace {
			return filepath.Join(dir, "missing", "trace.out"), true
		}
		return "", false
	}
	stderr.Reset()
	startProfiles(bad, &stderr)()
	if got := stderr.String(); !strings.Contains(got, EnvTrace+": execution trace not started") {
		t.Errorf("stderr %q, want it to name %s", got, EnvTrace)
	}
}
