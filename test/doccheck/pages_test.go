package doccheck

import (
	"regexp"
	"strings"
	"testing"

	"github.com/mm2go/mm2go/shared/app"
)

// fenced calls fn with each line (and its 1-based number) of the code blocks of doc fenced as
// lang ("```properties"), or of every code block when lang is "".
func fenced(doc, lang string, fn func(n int, line string)) {
	in, want := false, false
	for i, l := range strings.Split(doc, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "```") {
			if !in {
				want = lang == "" || strings.TrimPrefix(t, "```") == lang
			}
			in = !in
			continue
		}
		if in && want {
			fn(i+1, l)
		}
	}
}

// trailingComment is a '#' after a value on a properties line: Kafka's and mm2go's loaders
// take it as part of the value ("true   # note" is not a boolean), only a line starting with
// '#' or '!' is a comment.
var trailingComment = regexp.MustCompile(`=.*\s#`)

// TestPropertiesExamplesHaveNoTrailingComments: no properties example of a page puts a comment
// after a value, so every example runs as written.
func TestPropertiesExamplesHaveNoTrailingComments(t *testing.T) {
	blocks := 0
	for _, page := range userPages(t) {
		fenced(read(t, page), "properties", func(n int, l string) {
			blocks++
			t0 := strings.TrimSpace(l)
			if strings.HasPrefix(t0, "#") || strings.HasPrefix(t0, "!") {
				return
			}
			if trailingComment.MatchString(l) {
				t.Errorf("%s:%d: a comment after a value is part of the value in a properties file (the run exits 2): put it on a line of its own: %s", page, n, t0)
			}
		})
	}
	if blocks == 0 {
		t.Fatal("no properties example found in any page: the test finds nothing to check")
	}
}

// TestReadmeListsSubcommands: README.md's table of functions names every sub-command of
// mirror.
func TestReadmeListsSubcommands(t *testing.T) {
	var row string
	for _, l := range strings.Split(read(t, "README.md"), "\n") {
		if strings.HasPrefix(l, "| `mirror` |") {
			row = l
		}
	}
	if row == "" {
		t.Fatal("README.md has no table row for `mirror`")
	}
	for _, sub := range append([]string{"run", "serve"}, keys(app.OpsCommands())...) {
		if !strings.Contains(row, "`"+sub+"`") {
			t.Errorf("README.md: the `mirror` row does not name its sub-command `%s`", sub)
		}
	}
}

// chartValuesTop are the top-level keys of the Helm chart's values.yaml.
var chartValuesTop = regexp.MustCompile(`(?m)^([A-Za-z][A-Za-z0-9]*):`)

// TestChartValuesDocumented: every top-level key of the chart's values.yaml is in its README's
// values table (as `key`, `key.x` or `key.*`).
func TestChartValuesDocumented(t *testing.T) {
	values := read(t, "deploy/helm/mm2go/values.yaml")
	var table strings.Builder
	for _, l := range strings.Split(read(t, "deploy/helm/mm2go/README.md"), "\n") {
		if strings.HasPrefix(l, "| `") {
			first, _, _ := strings.Cut(strings.TrimPrefix(l, "| "), " |")
			table.WriteString(first + "\n")
		}
	}
	keys := chartValuesTop.FindAllStringSubmatch(values, -1)
	if len(keys) == 0 {
		t.Fatal("no top-level key found in values.yaml")
	}
	for _, k := range keys {
		if !strings.Contains(table.String(), "`"+k[1]+"`") && !strings.Contains(table.String(), "`"+k[1]+".") {
			t.Errorf("deploy/helm/mm2go/README.md: the values table has no row for %s (values.yaml)", k[1])
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
