// Command testsummary runs `go test -json` and prints what a plain `go test` prints (each
// package's result line, the output of failed tests, build errors, and of a package that
// failed with tests still running, as on a timeout, their output and the panic), and records
// every skipped test with its reason and every failed package; a second call counts the skips
// by reason and names the failed packages, so the end of `make test` says how many tests did
// not run and why, and which packages failed.
//
//	testsummary -record FILE go test -json ./...   # exit status: the command's
//	testsummary -report FILE                        # a line per skipped test, then the count line
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
)

func main() {
	record := flag.String("record", "", "run the command after the flags (a go test -json) and append its tallies to this file")
	report := flag.String("report", "", "print the tallies of this file: skips by reason and the count line")
	flag.Parse()
	switch {
	case *record != "" && flag.NArg() > 0:
		os.Exit(runRecorded(*record, flag.Args()))
	case *report != "" && flag.NArg() == 0:
		if err := printReport(os.Stdout, *report); err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "usage: testsummary -record FILE go test -json ... | testsummary -report FILE")
		os.Exit(2)
	}
}

// runRecorded runs args, filters its JSON events to out and appends the tallies to file.
func runRecorded(file string, args []string) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		return 1
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "testsummary: starting %s: %v\n", args[0], err)
		return 1
	}
	t := filter(stdout, os.Stdout)
	code := 0
	if err := cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			fmt.Fprintf(os.Stderr, "testsummary: %s: %v\n", args[0], err)
			return 1
		}
		code = ee.ExitCode()
	}
	if err := t.appendTo(file); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		return 1
	}
	return code
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64 // seconds, on pass, fail and skip
	// FailedBuild is set on a package's fail event when its test binary did not build.
	FailedBuild string
}

// tally counts the tests that passed and failed and keeps each skipped test's reason and the
// slow top-level tests' times.
type tally struct {
	passed, failed int
	skips          []skip
	slow           []timed
	pkgFails       []pkgFail
	failures       []failure
}

// failure is a failed test and the first lines of its messages (see messages): what it
// said went wrong, repeated in the report so that it survives where only the end of a long
// output is kept (a test's output can end in pages of a service's log).
type failure struct {
	pkg, test string
	msgs      []string
}

// shownMessages is how many message lines of each failed test the report repeats, and
// messageWidth how many runes of each.
const (
	shownMessages = 6
	messageWidth  = 240
)

type skip struct{ pkg, test, reason string }

// pkgFail is a package whose go test failed; why is "timed out", "build failed", "no test
// failed" (TestMain, a panic outside tests, an os.Exit), or empty when tests of it failed.
type pkgFail struct{ pkg, why string }

// timed is a top-level test that took at least slowTest.
type timed struct {
	pkg, test string
	secs      float64
}

// slowTest is the time from which a top-level test is listed among the slowest, and
// slowestShown how many of them the report lists: where a CI run's time goes.
const (
	slowTest     = 10.0
	slowestShown = 12
)

// filter copies to out what `go test` without -v would print, from the events in r.
func filter(r io.Reader, out io.Writer) *tally {
	t := &tally{}
	outputs := map[string][]string{} // package + test -> output lines so far
	var running []string             // keys of outputs, in the order the tests started
	testFailed := map[string]bool{}  // package -> a test of it failed
	timedOut := map[string]bool{}    // package -> its test binary panicked on -timeout
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(out, "%s\n", line) // not an event: pass it on
			continue
		}
		key := e.Package + " " + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(out, e.Output)
		case e.Test == "" && e.Action == "fail":
			// Tests still running when their package failed (a timeout, a panic, an exit)
			// never get an event of their own: print what they wrote and count them failed.
			for _, k := range running {
				if lines, ok := outputs[k]; ok && strings.HasPrefix(k, e.Package+" ") {
					t.failed++
					testFailed[e.Package] = true
					t.failures = append(t.failures, failure{e.Package, strings.TrimPrefix(k, e.Package+" "), messages(lines)})
					printOutput(out, lines)
					delete(outputs, k)
				}
			}
			why := ""
			switch {
			case timedOut[e.Package]:
				why = "timed out"
			case e.FailedBuild != "":
				why = "build failed"
			case !testFailed[e.Package]:
				why = "no test failed"
			}
			t.pkgFails = append(t.pkgFails, pkgFail{e.Package, why})
		case e.Test == "":
			if e.Action == "output" && e.Output != "PASS\n" {
				if strings.HasPrefix(e.Output, "panic: test timed out") {
					timedOut[e.Package] = true
				}
				fmt.Fprint(out, e.Output)
			}
		case e.Action == "output":
			if _, ok := outputs[key]; !ok {
				running = append(running, key)
			}
			if strings.HasPrefix(e.Output, "panic: test timed out") {
				timedOut[e.Package] = true
			}
			outputs[key] = append(outputs[key], e.Output)
		case e.Action == "fail":
			t.failed++
			testFailed[e.Package] = true
			t.failures = append(t.failures, failure{e.Package, e.Test, messages(outputs[key])})
			t.time(e)
			printOutput(out, outputs[key])
			delete(outputs, key)
		case e.Action == "pass":
			t.passed++
			t.time(e)
			delete(outputs, key)
		case e.Action == "skip":
			t.skips = append(t.skips, skip{e.Package, e.Test, skipReason(outputs[key])})
			delete(outputs, key)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(out, "testsummary: reading the test events:", err)
		t.failed++
	}
	return t
}

// printOutput prints a test's output lines without -v's framing (=== RUN, PAUSE, CONT, NAME).
func printOutput(out io.Writer, lines []string) {
	for _, l := range lines {
		if !strings.HasPrefix(l, "=== ") {
			fmt.Fprint(out, l)
		}
	}
}

// time keeps e's test among the slow ones if it is a top-level test that took slowTest or more.
func (t *tally) time(e event) {
	if e.Elapsed >= slowTest && !strings.Contains(e.Test, "/") {
		t.slow = append(t.slow, timed{e.Package, e.Test, e.Elapsed})
	}
}

// logLine is a test's log line as the testing package prints it: "    file.go:12: message".
var logLine = regexp.MustCompile(`^\s+[^\s:]+\.go:\d+: (.*)$`)

// skipReason returns the message of the last log line a skipped test printed (its t.Skip).
func skipReason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		if m := logLine.FindStringSubmatch(strings.TrimRight(lines[i], "\n")); m != nil {
			return m[1]
		}
	}
	return "(no reason given)"
}

// msgLine is the first line of a test's message: four spaces, then the file and line (the
// lines after a message's first are indented by eight).
var msgLine = regexp.MustCompile(`^    [^\s:]+\.go:\d+: `)

// messages returns the first line of each message a test logged (t.Error, t.Fatal, t.Log:
// "    file.go:12: message"; the lines after a message's first are indented further and left
// out), the first shownMessages of them, clipped to messageWidth runes.
func messages(lines []string) []string {
	var out []string
	for _, l := range lines {
		l = strings.TrimRight(l, "\n")
		if msgLine.MatchString(l) && len(out) < shownMessages {
			out = append(out, clip(strings.Join(strings.Fields(l), " "), messageWidth))
		}
	}
	return out
}

// appendTo appends the tally to file: "pass N", "fail N", then "skip <package> <test> <reason>",
// "time <package> <test> <seconds>", "pkgfail <package> <why>" and "failed <package> <test>
// <message>" lines (tab-separated; a failed test without messages has an empty one).
func (t *tally) appendTo(file string) error {
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("opening the tally file: %w", err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "pass\t%d\nfail\t%d\n", t.passed, t.failed)
	for _, s := range t.skips {
		fmt.Fprintf(w, "skip\t%s\t%s\t%s\n", s.pkg, s.test, s.reason)
	}
	for _, s := range t.slow {
		fmt.Fprintf(w, "time\t%s\t%s\t%.1f\n", s.pkg, s.test, s.secs)
	}
	for _, p := range t.pkgFails {
		fmt.Fprintf(w, "pkgfail\t%s\t%s\n", p.pkg, p.why)
	}
	for _, f := range t.failures {
		if len(f.msgs) == 0 {
			fmt.Fprintf(w, "failed\t%s\t%s\t\n", f.pkg, f.test)
		}
		for _, m := range f.msgs {
			fmt.Fprintf(w, "failed\t%s\t%s\t%s\n", f.pkg, f.test, strings.ReplaceAll(m, "\t", " "))
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("writing the tally file %s: %w", file, err)
	}
	return f.Close()
}

// printReport prints the slowest tests of the tally file, then its skipped tests, a line each,
// grouped by reason (most first), then each failed test with the first lines of its messages,
// then one line counting them by reason: the last line of `make test`.
func printReport(out io.Writer, file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("reading the tally file: %w", err)
	}
	var t tally
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		f := strings.SplitN(l, "\t", 4)
		var n int
		switch {
		case len(f) == 2 && f[0] == "pass":
			_, err = fmt.Sscan(f[1], &n)
			t.passed += n
		case len(f) == 2 && f[0] == "fail":
			_, err = fmt.Sscan(f[1], &n)
			t.failed += n
		case len(f) == 4 && f[0] == "skip":
			t.skips = append(t.skips, skip{f[1], f[2], f[3]})
		case len(f) == 4 && f[0] == "time":
			var secs float64
			_, err = fmt.Sscan(f[3], &secs)
			t.slow = append(t.slow, timed{f[1], f[2], secs})
		case len(f) == 3 && f[0] == "pkgfail":
			t.pkgFails = append(t.pkgFails, pkgFail{f[1], f[2]})
		case len(f) == 4 && f[0] == "failed":
			if n := len(t.failures); n == 0 || t.failures[n-1].pkg != f[1] || t.failures[n-1].test != f[2] {
				t.failures = append(t.failures, failure{pkg: f[1], test: f[2]})
			}
			if f[3] != "" {
				last := &t.failures[len(t.failures)-1]
				last.msgs = append(last.msgs, f[3])
			}
		case l == "":
		default:
			err = errors.New("bad line")
		}
		if err != nil {
			return fmt.Errorf("tally file %s: line %q: %w", file, l, err)
		}
	}
	sort.SliceStable(t.slow, func(i, j int) bool { return t.slow[i].secs > t.slow[j].secs })
	for i, s := range t.slow {
		if i == slowestShown {
			break
		}
		fmt.Fprintf(out, "slow: %s %s: %.1fs\n", shortPkg(s.pkg), s.test, s.secs)
	}
	byReason := map[string][]skip{}
	for _, s := range t.skips {
		byReason[s.reason] = append(byReason[s.reason], s)
	}
	reasons := make([]string, 0, len(byReason))
	for r := range byReason {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if a, b := len(byReason[reasons[i]]), len(byReason[reasons[j]]); a != b {
			return a > b
		}
		return reasons[i] < reasons[j]
	})
	var why []string
	for _, r := range reasons {
		ss := byReason[r]
		for _, sk := range ss {
			fmt.Fprintf(out, "skipped: %s %s: %s\n", shortPkg(sk.pkg), sk.test, r)
		}
		why = append(why, fmt.Sprintf("%d %s", len(ss), clip(r, 60)))
	}
	for _, f := range t.failures {
		fmt.Fprintf(out, "failed: %s %s\n", shortPkg(f.pkg), f.test)
		for _, m := range f.msgs {
			fmt.Fprintf(out, "    %s\n", m)
		}
	}
	line := fmt.Sprintf("== tests: %d passed, %d failed, %d skipped", t.passed, t.failed, len(t.skips))
	if len(why) > 0 {
		line += ": " + strings.Join(why, "; ")
	}
	if n := len(t.pkgFails); n > 0 {
		var pkgs []string
		for _, p := range t.pkgFails {
			if p.why == "" {
				pkgs = append(pkgs, shortPkg(p.pkg))
			} else {
				pkgs = append(pkgs, shortPkg(p.pkg)+" ("+p.why+")")
			}
		}
		line += fmt.Sprintf("; %d %s failed: %s", n, plural(n, "package", "packages"), strings.Join(pkgs, ", "))
	}
	fmt.Fprintln(out, line)
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func shortPkg(p string) string { return strings.TrimPrefix(p, "github.com/mm2go/mm2go/") }

// clip shortens s to n runes with an ellipsis.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
