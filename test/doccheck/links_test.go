package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	kitPath = regexp.MustCompile("(^|[\\s(`\"'])\\.\\./shared/|/work/shared")
)

// contributorPages may name the team's kit beside the repository; user pages may not.
func contributorPage(page string) bool {
	return page == "docs/design.md" || strings.HasPrefix(page, "docs/contributing/")
}

// TestLinks: every relative link of a user page names a file of the repository, and its
// #anchor a heading of that page; no user page sends its reader to ../shared (the team's kit
// beside the repository, which a user does not have).
func TestLinks(t *testing.T) {
	r := root(t)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(rel string) map[string]bool {
		if a, ok := anchors[rel]; ok {
			return a
		}
		a := map[string]bool{}
		for _, sec := range sections(read(t, rel)) {
			a[slug(sec.heading)] = true
		}
		anchors[rel] = a
		return a
	}
	for _, page := range userPages(t) {
		doc := read(t, page)
		if !contributorPage(page) {
			for i, l := range strings.Split(doc, "\n") {
				if kitPath.MatchString(l) {
					t.Errorf("%s:%d sends the reader to the team's kit (../shared): %s", page, i+1, strings.TrimSpace(l))
				}
			}
		}
		for _, m := range mdLink.FindAllStringSubmatch(doc, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			rel := page
			if path != "" {
				rel = filepath.Join(filepath.Dir(page), path)
				if _, err := os.Stat(filepath.Join(r, rel)); err != nil {
					t.Errorf("%s: link %s: no such file %s", page, target, rel)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(rel, ".md") && !anchorsOf(rel)[anchor] {
				t.Errorf("%s: link %s: %s has no heading #%s", page, target, rel, anchor)
			}
		}
	}
}

// slug is GitHub's anchor of a heading: lower case, spaces to dashes, punctuation dropped.
func slug(h string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(h) {
		switch {
		case c == ' ':
			b.WriteByte('-')
		case c == '-' || c == '_' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c > 127:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// history matches development history in prose: work sessions, behaviour that changed.
var history = regexp.MustCompile(`(?i)\bsession \d+|\bused to (be|fail|exit|take|copy|wait|read|write|say|run)\b|\btaken back\b|\breverted\b`)

// TestNoDevelopmentHistory: user pages say what is, not how it came to be (git and the
// contributors' engineering log keep that).
func TestNoDevelopmentHistory(t *testing.T) {
	for _, page := range userPages(t) {
		if contributorPage(page) {
			continue
		}
		for i, l := range strings.Split(read(t, page), "\n") {
			if m := history.FindString(l); m != "" {
				t.Errorf("%s:%d: %q is development history: %s", page, i+1, m, strings.TrimSpace(l))
			}
		}
	}
}
