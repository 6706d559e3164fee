package doccheck

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/mm2go/mm2go/shared/cli"
)

// root is the repository's root directory.
func root(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// userPages are the Markdown pages a user reads: README.md, docs/ (contributor pages
// included), the deployment guides and the benchmark's README, relative to the root.
func userPages(t *testing.T) []string {
	t.Helper()
	r := root(t)
	var pages []string
	for _, dir := range []string{"docs", "deploy", "knative", "test/bench"} {
		err := filepath.WalkDir(filepath.Join(r, dir), func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || d.Name() == "results" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(p, ".md") {
				rel, _ := filepath.Rel(r, p)
				pages = append(pages, rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(pages)
	return append([]string{"README.md"}, pages...)
}

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// help is `<function> -h` as the binary prints it.
func help(t *testing.T, function string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := func(string) (string, bool) { return "", false }
	if code := cli.Execute(context.Background(), cli.App{Name: function}, []string{"-h"}, env, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("%s -h: exit %d: %s", function, code, stderr.String())
	}
	return stdout.String()
}

// listed are the names `<function> -h` lists (the first word of its unindented lines).
func listed(t *testing.T, function string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, l := range strings.Split(help(t, function), "\n") {
		if l == "" || l[0] == ' ' {
			continue
		}
		name, _, _ := strings.Cut(l, " ")
		out[name] = true
	}
	return out
}

// update reports whether generated sections should be rewritten rather than checked.
func update() bool { return os.Getenv("MM2GO_UPDATE_DOCS") == "1" }

// replaceGenerated returns doc with the text between the marker lines "<!-- BEGIN name -->"
// and "<!-- END name -->" replaced by body.
func replaceGenerated(t *testing.T, doc, name, body string) string {
	t.Helper()
	begin, end := "<!-- BEGIN "+name+" ", "<!-- END "+name+" -->"
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("markers %q ... %q not found", begin, end)
	}
	i += strings.Index(doc[i:], "\n") + 1
	return doc[:i] + body + doc[j:]
}

// checkGenerated compares rel's generated section name with body, or rewrites it.
func checkGenerated(t *testing.T, rel, name, body string) {
	t.Helper()
	doc := read(t, rel)
	want := replaceGenerated(t, doc, name, body)
	if want == doc {
		return
	}
	if update() {
		if err := os.WriteFile(filepath.Join(root(t), rel), []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the generated section %s is out of date: MM2GO_UPDATE_DOCS=1 go test -run %s ./test/doccheck", rel, name, t.Name())
}
