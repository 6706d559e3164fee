package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// productPages are the pages about the product as it is: README.md, docs/ (not
// docs/contributing/), every README below deploy/ and knative/, the benchmark's README and
// its latest results.
func productPages(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, p := range userPages(t) {
		if !strings.HasPrefix(p, "docs/contributing/") {
			out = append(out, p)
		}
	}
	return append(out, "test/bench/results/latest.md")
}

// workHistory matches what belongs to how mm2go was built, not to what it is: a work session
// ("session 9", "the session before", a results folder "2026-12-04-session12") and paths of
// the machine it was built on. A Kafka session timeout is not one.
var (
	workHistory = regexp.MustCompile(`(?i)\bsessions?\b\W*\w*|-session\d+|/work/|/home/[a-z]|/Users/[A-Za-z]|/root/`)
	kafkaTerm   = regexp.MustCompile(`(?i)^sessions?\W*timeouts?$`)
)

// historyIn returns the first mention of work history in line, or "".
func historyIn(line string) string {
	for _, m := range workHistory.FindAllString(line, -1) {
		if !kafkaTerm.MatchString(m) {
			return m
		}
	}
	return ""
}

// TestProductPagesHaveNoWorkHistory: a product page names no work session, no results folder
// of one and no path of a build machine, and (but for docs/design.md, which names the team's
// kit beside the repository) sends its reader to no file outside the repository (../shared).
func TestProductPagesHaveNoWorkHistory(t *testing.T) {
	for _, page := range productPages(t) {
		for i, l := range strings.Split(read(t, page), "\n") {
			if m := historyIn(l); m != "" {
				t.Errorf("%s:%d: %q is how mm2go was built, not what it is (a work session or a build machine's path): %s", page, i+1, m, clip(l))
			}
			if !contributorPage(page) && kitPath.MatchString(l) {
				t.Errorf("%s:%d names a file outside the repository (../shared): %s", page, i+1, clip(l))
			}
		}
	}
}

// clip shortens a line for a message.
func clip(l string) string {
	l = strings.TrimSpace(l)
	if len(l) > 160 {
		return l[:160] + "…"
	}
	return l
}

// benchResultFolder is how a folder of test/bench/results is named: the date of its run and
// what it measured ("2026-12-05-scaleout"), never the work session it came from.
var benchResultFolder = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}-[A-Za-z0-9][A-Za-z0-9.-]*$`)

// TestBenchResultFoldersNamedByDateAndTopic: every folder of test/bench/results is named by
// its date and what it measured, and none by a work session.
func TestBenchResultFoldersNamedByDateAndTopic(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(root(t), "test", "bench", "results"))
	if err != nil {
		t.Fatal(err)
	}
	folders := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		folders++
		name := e.Name()
		if !benchResultFolder.MatchString(name) || strings.Contains(strings.ToLower(name), "session") {
			t.Errorf("test/bench/results/%s: name a results folder by its date and what it measured (2026-12-05-scaleout), not by a work session", name)
		}
	}
	if folders == 0 {
		t.Error("test/bench/results holds no results folder")
	}
}
