package engine

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
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

// TestEngineFilesFormNoLoop holds the package's layering (docs/design.md, "the engine's
// layers"): its non-test files refer to each other without a loop, each only to files below it.
// A file refers to another when it uses a package-level name or a method declared there (a
// struct's fields go with its type). A loop is reported with every reference that ties it:
// the names each of its files uses from the next.
func TestEngineFilesFormNoLoop(t *testing.T) {
	t.Parallel() // it only reads files
	refs, err := fileRefs(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, loop := range fileLoops(refs) {
		in := map[string]bool{}
		for _, f := range loop {
			in[f] = true
		}
		var arrows []string
		for _, from := range loop {
			var tos []string
			for to := range refs[from] {
				if in[to] {
					tos = append(tos, to)
				}
			}
			sort.Strings(tos)
			for _, to := range tos {
				var names []string
				for n := range refs[from][to] {
					names = append(names, n)
				}
				sort.Strings(names)
				arrows = append(arrows, fmt.Sprintf("%s -> %s (%s)", from, to, strings.Join(names, ", ")))
			}
		}
		t.Errorf("engine files in a loop: %s", strings.Join(arrows, ", "))
	}
}

// fileRefs returns, for the non-test Go files of dir, which file uses which names declared in
// which other file: refs[from][to] is the set of names. Imports are stubbed as empty packages
// and type errors ignored, so it reads the package without its dependencies.
func fileRefs(dir string) (map[string]map[string]map[string]bool, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: stubImporter{}, Error: func(error) {}}
	pkg, _ := conf.Check("engine", fset, files, info)
	refs := map[string]map[string]map[string]bool{}
	for _, f := range files {
		refs[filepath.Base(fset.Position(f.Pos()).Filename)] = map[string]map[string]bool{}
	}
	for id, obj := range info.Uses {
		if obj == nil || obj.Pkg() != pkg || !obj.Pos().IsValid() {
			continue
		}
		if _, method := obj.(*types.Func); !method && obj.Parent() != pkg.Scope() {
			continue // locals, parameters and fields
		}
		from := filepath.Base(fset.Position(id.Pos()).Filename)
		to := filepath.Base(fset.Position(obj.Pos()).Filename)
		if from == to {
			continue
		}
		if refs[from][to] == nil {
			refs[from][to] = map[string]bool{}
		}
		refs[from][to][obj.Name()] = true
	}
	return refs, nil
}

// stubImporter imports every package as an empty one.
type stubImporter struct{}

func (stubImporter) Import(path string) (*types.Package, error) {
	p := types.NewPackage(path, path[strings.LastIndex(path, "/")+1:])
	p.MarkComplete()
	return p, nil
}

// fileLoops returns the strongly connected components of refs with more than one file (Tarjan),
// each sorted, in the order of their first file.
func fileLoops(refs map[string]map[string]map[string]bool) [][]string {
	var nodes []string
	for f := range refs {
		nodes = append(nodes, f)
	}
	sort.Strings(nodes)
	index, low, onStack := map[string]int{}, map[string]int{}, map[string]bool{}
	var stack []string
	var loops [][]string
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		onStack[v] = true
		for w := range refs[v] {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var scc []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			scc = append(scc, w)
			if w == v {
				break
			}
		}
		if len(scc) > 1 {
			sort.Strings(scc)
			loops = append(loops, scc)
		}
	}
	for _, v := range nodes {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	sort.Slice(loops, func(i, j int) bool { return loops[i][0] < loops[j][0] })
	return loops
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
