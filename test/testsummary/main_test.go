package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFilterAndReport runs `go test -json` on testdata/sample (a pass, three skips with two
// reasons, a failed subtest): the filtered output is what plain go test prints (the failure,
// not the passing test's log nor -v's framing), and the report counts the skips by reason.
func TestFilterAndReport(t *testing.T) {
	cmd := exec.Command("go", "test", "-json", "-count=1", "./testdata/sample")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	tl := filter(stdout, &out)
	if err := cmd.Wait(); err == nil {
		t.Error("go test of the sample succeeded; it has a failing test")
	}
	got := out.String()
	for _, want := range []string{"--- FAIL: TestSub/failed", "sample_test.go:13: wrong answer", "FAIL\tgithub.com/mm2go/mm2go/test/testsummary/testdata/sample"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"not shown", "=== RUN", "TestSkipKit"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("output has %q:\n%s", unwanted, got)
		}
	}
	if tl.passed != 1 || tl.failed != 2 || len(tl.skips) != 3 {
		t.Errorf("tally: %d passed, %d failed, %d skipped; want 1, 2 (TestSub and its subtest), 3", tl.passed, tl.failed, len(tl.skips))
	}

	file := filepath.Join(t.TempDir(), "tally")
	if err := tl.appendTo(file); err != nil {
		t.Fatal(err)
	}
	if err := (&tally{passed: 4, skips: []skip{{"github.com/mm2go/mm2go/deploy/check", "TestImage", "no docker"}}}).appendTo(file); err != nil {
		t.Fatal(err)
	}
	var rep strings.Builder
	if err := printReport(&rep, file); err != nil {
		t.Fatal(err)
	}
	want := "skipped: test/testsummary/testdata/sample TestSkipKit: the kit is not here\n" +
		"skipped: test/testsummary/testdata/sample TestSkipKitToo: the kit is not here\n" +
		"skipped: test/testsummary/testdata/sample TestSub/skipped: no broker: 1\n" +
		"skipped: deploy/check TestImage: no docker\n" +
		"== tests: 5 passed, 2 failed, 4 skipped: 2 the kit is not here; 1 no broker: 1; 1 no docker\n"
	if rep.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", rep.String(), want)
	}
	if err := os.WriteFile(file, []byte("skip\tonly two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := printReport(&rep, file); err == nil || !strings.Contains(err.Error(), `line "skip\tonly two"`) {
		t.Errorf("bad tally file: %v, want an error naming the line", err)
	}
}
