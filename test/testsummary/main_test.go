package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestFilterAndReport runs `go test -json` on testdata/sample (a pass, three skips with two
// reasons, a failed subtest, a failed test whose cleanup logs 200 lines of a service's log):
// the filtered output is what plain go test prints (the failures, not the passing test's log
// nor -v's framing), and the report counts the skips by reason and repeats each failed test's
// messages, the first line of each, so that the end of the output says what went wrong.
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
	for _, want := range []string{"--- FAIL: TestSub/failed", "sample_test.go:16: wrong answer", "FAIL\tgithub.com/mm2go/mm2go/test/testsummary/testdata/sample"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"not shown", "=== RUN", "TestSkipKit"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("output has %q:\n%s", unwanted, got)
		}
	}
	if tl.passed != 1 || tl.failed != 3 || len(tl.skips) != 3 {
		t.Errorf("tally: %d passed, %d failed, %d skipped; want 1, 3 (TestSub and its subtest, TestDump), 3", tl.passed, tl.failed, len(tl.skips))
	}

	file := filepath.Join(t.TempDir(), "tally")
	if err := tl.appendTo(file); err != nil {
		t.Fatal(err)
	}
	if err := (&tally{passed: 4, skips: []skip{{"github.com/mm2go/mm2go/deploy/check", "TestImage", "no docker"}},
		slow: []timed{{"github.com/mm2go/mm2go/test/e2e", "TestA", 12.25}, {"github.com/mm2go/mm2go/deploy/replay", "TestB", 80}}}).appendTo(file); err != nil {
		t.Fatal(err)
	}
	var rep strings.Builder
	if err := printReport(&rep, file); err != nil {
		t.Fatal(err)
	}
	want := "slow: deploy/replay TestB: 80.0s\n" +
		"slow: test/e2e TestA: 12.2s\n" +
		"skipped: test/testsummary/testdata/sample TestSkipKit: the kit is not here\n" +
		"skipped: test/testsummary/testdata/sample TestSkipKitToo: the kit is not here\n" +
		"skipped: test/testsummary/testdata/sample TestSub/skipped: no broker: 1\n" +
		"skipped: deploy/check TestImage: no docker\n" +
		"failed: test/testsummary/testdata/sample TestSub/failed\n" +
		"    sample_test.go:16: wrong answer\n" +
		"failed: test/testsummary/testdata/sample TestSub\n" +
		"failed: test/testsummary/testdata/sample TestDump\n" +
		"    sample_test.go:28: produced 10 records\n" +
		"    sample_test.go:29: records missing on the target: 3 of 10\n" +
		"    sample_test.go:26: service log:\n" +
		"== tests: 5 passed, 3 failed, 4 skipped: 2 the kit is not here; 1 no broker: 1; 1 no docker; 1 package failed: test/testsummary/testdata/sample\n"
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

// TestFilterKeepsSlowTopLevelTests: a top-level test that took slowTest or more is kept with its
// time; a quicker one and a slow subtest are not.
func TestFilterKeepsSlowTopLevelTests(t *testing.T) {
	events := `{"Action":"pass","Package":"p","Test":"TestSlow","Elapsed":11.5}
{"Action":"pass","Package":"p","Test":"TestSlow/sub","Elapsed":30}
{"Action":"fail","Package":"p","Test":"TestSlowFail","Elapsed":10}
{"Action":"pass","Package":"p","Test":"TestQuick","Elapsed":9.9}
`
	tl := filter(strings.NewReader(events), io.Discard)
	want := []timed{{"p", "TestSlow", 11.5}, {"p", "TestSlowFail", 10}}
	if !slices.Equal(tl.slow, want) {
		t.Errorf("slow tests %v, want %v", tl.slow, want)
	}
}
