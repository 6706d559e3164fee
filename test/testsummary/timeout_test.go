package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTimedOutPackage: testdata/timeout.json is the go test -json output of a real timed-out
// run: `go test -json -count=1 -timeout 1s` of a package with TestQuick (passes) and TestStuck
// (t.Log("waiting for the broker"), then time.Sleep(time.Hour)). The test that was
// running never gets a fail event, only its package does: its log, the "panic: test timed
// out" and the running tests are printed all the same, it counts as failed, and the report
// names the package as timed out.
func TestTimedOutPackage(t *testing.T) {
	tl, got := filterFile(t, "timeout.json")
	for _, want := range []string{"hang_test.go:11: waiting for the broker", "panic: test timed out after 1s", "\t\tTestStuck (1s)",
		"example.com/ts/hang.TestStuck", "FAIL\texample.com/ts/hang\t1.012s"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "=== RUN") {
		t.Errorf("output has -v's framing:\n%s", got)
	}
	if tl.passed != 1 || tl.failed != 1 {
		t.Errorf("tally: %d passed, %d failed; want 1 (TestQuick) and 1 (TestStuck, running at the timeout)", tl.passed, tl.failed)
	}
	rep := report(t, tl)
	if want := "== tests: 1 passed, 1 failed, 0 skipped; 1 package failed: example.com/ts/hang (timed out)\n"; !strings.HasSuffix(rep, want) {
		t.Errorf("report:\n%s\nwant its last line %q", rep, want)
	}
}

// TestPackageLevelFailures: testdata/pkgfail.json is the go test -json output of a package
// that does not build (var x int = "no") and one whose TestMain prints a line and calls
// os.Exit(1) before any test: no test fails, but the
// count line says that two packages failed, and why.
func TestPackageLevelFailures(t *testing.T) {
	tl, got := filterFile(t, "pkgfail.json")
	for _, want := range []string{"b_test.go:5:40: cannot use", "FAIL\texample.com/ts/buildfail [build failed]", "setup: no cluster here", "FAIL\texample.com/ts/mainexit"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	rep := report(t, tl)
	if want := "== tests: 0 passed, 0 failed, 0 skipped; 2 packages failed: example.com/ts/buildfail (build failed), example.com/ts/mainexit (no test failed)\n"; !strings.HasSuffix(rep, want) {
		t.Errorf("report:\n%s\nwant its last line %q", rep, want)
	}
}

// filterFile is filter of testdata/name: the tally and the output.
func filterFile(t *testing.T, name string) (*tally, string) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out strings.Builder
	return filter(f, &out), out.String()
}

// report is printReport of a tally file holding tl.
func report(t *testing.T, tl *tally) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tally")
	if err := tl.appendTo(file); err != nil {
		t.Fatal(err)
	}
	var rep strings.Builder
	if err := printReport(&rep, file); err != nil {
		t.Fatal(err)
	}
	return rep.String()
}
