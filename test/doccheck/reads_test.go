package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/mm2go/mm2go/shared/config"
)

// everyFunction are the Config fields read before any function's own code runs: the loader
// reads MM2_CONFIG_FILE and MM2_FLOW to find the flow, and every function names its clusters.
var everyFunction = []string{"ConfigFile", "Flow", "SourceAlias", "TargetAlias", "Source", "Target"}

// TestHelpListsWhatItReads: the functions a setting's fn tag names (hence the -h that lists
// it) are the functions whose code reads its field. The code is shared/app's, from the entry
// points functions/<name>/main.go hands to cli.App, through the package's functions and
// Config's methods (Policy, TopicFilter, ClientOpts, ...); shared/cli's reads count for every
// function. A field only some functions read must name them; a field every function reads
// names none.
func TestHelpListsWhatItReads(t *testing.T) {
	r := root(t)
	g := newReadGraph()
	g.parseDir(t, filepath.Join(r, "shared", "app"), "")
	g.parseDir(t, filepath.Join(r, "shared", "config"), "Config")
	g.parseDir(t, filepath.Join(r, "shared", "cli"), "")

	reads := map[string]map[string]bool{}
	for _, fn := range config.Functions {
		roots := entryPoints(t, filepath.Join(r, "functions", fn, "main.go"))
		if len(roots) == 0 {
			t.Fatalf("functions/%s/main.go: no shared/app entry points found", fn)
		}
		reads[fn] = g.reach(roots)
		for _, f := range everyFunction {
			reads[fn][f] = true
		}
		for f := range g.cliReads {
			reads[fn][f] = true
		}
	}
	for _, s := range config.SettingFields() {
		top, _, _ := strings.Cut(s.Field, ".")
		var readers []string
		for _, fn := range config.Functions {
			if reads[fn][top] {
				readers = append(readers, fn)
			}
		}
		want := readers
		if len(readers) == len(config.Functions) {
			want = nil
		}
		if !slices.Equal(s.Functions, want) {
			t.Errorf("%s (Config.%s): fn tag %v, but the code read by %v reads it (a tag lists the readers; none: every function)", s.Env, s.Field, s.Functions, readers)
		}
	}
}

// entryPoints are the shared/app names a function's main.go refers to (app.MirrorRun, ...).
func entryPoints(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "app" {
				out = append(out, sel.Sel.Name)
			}
		}
		return true
	})
	return out
}

// readGraph is which Config fields each function or Config method reads, and which functions
// and methods it refers to.
type readGraph struct {
	fields   map[string]map[string]bool // node -> Config fields
	edges    map[string]map[string]bool // node -> nodes
	cliReads map[string]bool
	funcs    map[string]bool
}

func newReadGraph() *readGraph {
	return &readGraph{fields: map[string]map[string]bool{}, edges: map[string]map[string]bool{}, cliReads: map[string]bool{}, funcs: map[string]bool{}}
}

// parseDir adds a package's non-test files. recv "Config": only the methods of Config, whose
// receiver reads fields; "": the package-level functions, where cfg, env.Config and cfgs[i]
// are the loaded Config.
func (g *readGraph) parseDir(t *testing.T, dir, recv string) {
	t.Helper()
	fset := token.NewFileSet()
	matches, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	isCLI := filepath.Base(dir) == "cli"
	var decls []*ast.FuncDecl
	for _, m := range matches {
		if strings.HasSuffix(m, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, m, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if recv == "Config" {
				if fd.Recv == nil || len(fd.Recv.List) != 1 || !strings.Contains(exprString(fd.Recv.List[0].Type), "Config") {
					continue
				}
			} else if fd.Recv != nil {
				continue
			}
			decls = append(decls, fd)
			g.funcs[nodeName(recv, fd.Name.Name)] = true
		}
	}
	for _, fd := range decls {
		node := nodeName(recv, fd.Name.Name)
		g.fields[node], g.edges[node] = map[string]bool{}, map[string]bool{}
		cfgRoot := func(x ast.Expr) bool {
			switch x := x.(type) {
			case *ast.Ident:
				return x.Name == "cfg" || (recv == "Config" && x.Name == "c")
			case *ast.SelectorExpr:
				id, ok := x.X.(*ast.Ident)
				return ok && id.Name == "env" && x.Sel.Name == "Config"
			case *ast.IndexExpr:
				id, ok := x.X.(*ast.Ident)
				return ok && id.Name == "cfgs"
			}
			return false
		}
		// x.Name is a field or another package's name, never this package's function.
		sels := map[*ast.Ident]bool{}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				sels[sel.Sel] = true
			}
			return true
		})
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if cfgRoot(n.X) {
					name := n.Sel.Name
					if g.funcs[nodeName("Config", name)] || isMethodName(name) {
						g.edges[node][nodeName("Config", name)] = true
					} else {
						g.fields[node][name] = true
						if isCLI {
							g.cliReads[name] = true
						}
					}
				}
			case *ast.Ident:
				if recv == "" && g.funcs[n.Name] && !sels[n] {
					g.edges[node][n.Name] = true
				}
			}
			return true
		})
	}
}

// isMethodName reports the exported methods of Config the graph may meet before it parsed
// shared/config (app is parsed first).
func isMethodName(name string) bool {
	switch name {
	case "Policy", "TopicFilter", "GroupFilter", "SenderAuth", "ClientOpts", "ConnectError":
		return true
	}
	return false
}

func nodeName(recv, name string) string {
	if recv == "" {
		return name
	}
	return recv + "." + name
}

// reach returns the Config fields read from roots on.
func (g *readGraph) reach(roots []string) map[string]bool {
	seen := map[string]bool{}
	out := map[string]bool{}
	var visit func(string)
	visit = func(n string) {
		if seen[n] {
			return
		}
		seen[n] = true
		for f := range g.fields[n] {
			out[f] = true
		}
		names := make([]string, 0, len(g.edges[n]))
		for e := range g.edges[n] {
			names = append(names, e)
		}
		sort.Strings(names)
		for _, e := range names {
			visit(e)
		}
	}
	for _, r := range roots {
		visit(r)
	}
	return out
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return "*" + exprString(e.X)
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	}
	return ""
}
