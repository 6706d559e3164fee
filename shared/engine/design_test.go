package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestDesignListsEngineFiles holds docs/design.md's table of the engine's files and exported
// surface against the code: every source file has a row, every row names files that exist,
// every exported name (and every exported method of Engine) is named in its file's row, and
// every identifier a row names in backquotes still exists in the package.
func TestDesignListsEngineFiles(t *testing.T) {
	t.Parallel() // it only reads files
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	start := strings.Index(section, "### shared/engine: files and exported surface")
	if start < 0 {
		t.Fatal("docs/design.md has no section \"### shared/engine: files and exported surface\"")
	}
	section = section[start:]
	if end := strings.Index(section, "\n\n"+"Planning is one set"); end > 0 {
		section = section[:end]
	}
	rows := map[string]string{} // file -> its row's text
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.Contains(cells[1], ".go`") {
			continue
		}
		for _, f := range regexp.MustCompile("`([a-z_]+\\.go)`").FindAllStringSubmatch(cells[1], -1) {
			rows[f[1]] = cells[2]
		}
	}

	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var source strings.Builder
	exported := map[string][]string{} // file -> exported names declared there
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		source.Write(b)
		f, err := parser.ParseFile(fset, name, b, 0)
		if err != nil {
			t.Fatal(err)
		}
		if name == "doc.go" {
			continue
		}
		if _, ok := rows[name]; !ok {
			t.Errorf("docs/design.md: %s has no row in the engine's file table", name)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					exported[name] = append(exported[name], d.Name.Name)
				} else if recvName(d.Recv) == "Engine" {
					exported[name] = append(exported[name], d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							exported[name] = append(exported[name], s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								exported[name] = append(exported[name], n.Name)
							}
						}
					}
				}
			}
		}
	}
	for file := range rows {
		if _, err := os.Stat(file); err != nil {
			t.Errorf("docs/design.md names %s, which does not exist", file)
		}
	}
	var missing []string
	for file, names := range exported {
		for _, n := range names {
			if !regexp.MustCompile("`(Engine\\.)?" + n + "`").MatchString(rows[file]) {
				missing = append(missing, file+": "+n)
			}
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("docs/design.md: the row of %s does not name exported %s", strings.SplitN(m, ":", 2)[0], m)
	}
	// The code's words (maximal runs of word characters): a name is in the code when it is one
	// of them, as `\bname\b` would match, without a regexp scan of the source per name.
	words := map[string]bool{}
	for _, w := range regexp.MustCompile(`\w+`).FindAllString(source.String(), -1) {
		words[w] = true
	}
	word := regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_]*)`")
	for file, row := range rows {
		for _, m := range word.FindAllStringSubmatch(row, -1) {
			if !words[m[1]] {
				t.Errorf("docs/design.md: the row of %s names %q, which the engine's code no longer has", file, m[1])
			}
		}
	}
}

func recvName(fl *ast.FieldList) string {
	if fl == nil || len(fl.List) == 0 {
		return ""
	}
	switch x := fl.List[0].Type.(type) {
	case *ast.StarExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			return id.Name
		}
	case *ast.Ident:
		return x.Name
	}
	return ""
}
