package dispatcher

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFindJava: the dispatcher's runtime is the first candidate of Java 21 or newer, by what
// `java -version` says; with only older ones there is none (and Java skips the test).
func TestFindJava(t *testing.T) {
	dir := t.TempDir()
	fake := func(name, version string) string {
		p := filepath.Join(dir, name)
		script := "#!/bin/sh\necho '" + version + "' >&2\n"
		if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	j17 := fake("j17", `openjdk version "17.0.15" 2025-04-15`)
	j8 := fake("j8", `java version "1.8.0_412"`)
	j25 := fake("j25", `openjdk version "25" 2025-09-16 LTS`)
	j21 := fake("j21", `openjdk version "21.0.5" 2024-10-15`)
	broken := fake("broken", `no version here`)
	for _, tc := range []struct {
		cands []string
		want  string
	}{
		{[]string{j17, j8, broken}, ""},
		{[]string{j17, j25}, j25},
		{[]string{j21, j25}, j21},
		{nil, ""},
	} {
		if got, seen := findJava(tc.cands); got != tc.want {
			t.Errorf("findJava(%v) = %q (tried %v), want %q", tc.cands, got, seen, tc.want)
		}
	}
	if v := javaVersion(j8); v != 8 {
		t.Errorf("javaVersion of 1.8.0_412 = %d, want 8", v)
	}
}
