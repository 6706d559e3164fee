package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/mm2go/mm2go/shared/app"
	"github.com/mm2go/mm2go/shared/cli"
	"github.com/mm2go/mm2go/shared/config"
)

// apps are the three functions as their main packages hand them to cli.Main.
func apps() []cli.App { return []cli.App{app.Mirror(), app.Checkpoint(), app.Heartbeat()} }

// exitCodeRow is a row of the exit-code table ("| 4 | ...") and opsExitCodeRow one of the
// table of the commands with codes of their own ("| `mirror cutover` | 4 | ...").
var (
	exitCodeRow    = regexp.MustCompile(`^\| (\d+) \|`)
	opsExitCodeRow = regexp.MustCompile("^\\| `([a-z]+ [a-z]+)` \\| (\\d+) \\|")
)

// TestEveryExitCodeInTable: every exit code a sub-command of any function says it returns (its
// -h lists them) is on docs/summary-and-exit-codes.md: a row of the exit-code table, or of the
// table of the commands with codes of their own for that command; and every sub-command says
// which codes it returns.
func TestEveryExitCodeInTable(t *testing.T) {
	const page = "docs/summary-and-exit-codes.md"
	doc := read(t, page)
	general := map[int]bool{}
	own := map[string]map[int]bool{}
	table := false // inside the exit-code table's markers
	for _, l := range strings.Split(doc, "\n") {
		switch {
		case strings.HasPrefix(l, "<!-- BEGIN exit-codes "):
			table = true
		case strings.HasPrefix(l, "<!-- END exit-codes "):
			table = false
		}
		if m := exitCodeRow.FindStringSubmatch(l); m != nil && table {
			n, _ := strconv.Atoi(m[1])
			general[n] = true
		}
		if m := opsExitCodeRow.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[2])
			if own[m[1]] == nil {
				own[m[1]] = map[int]bool{}
			}
			own[m[1]][n] = true
		}
	}
	if len(general) == 0 {
		t.Fatalf("%s: no exit-code table found", page)
	}
	checked := 0
	for _, a := range apps() {
		for name, c := range a.Commands {
			if len(c.Exits) == 0 {
				t.Errorf("%s %s declares no exit codes (cli.Command.Exits): its -h cannot list them", a.Name, name)
			}
			for _, e := range c.Exits {
				checked++
				if !general[e.Code] && !own[a.Name+" "+name][e.Code] {
					t.Errorf("%s %s exits %d (%s), which %s lists neither in its exit-code table nor for %s %s", a.Name, name, e.Code, e.Meaning, page, a.Name, name)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no exit code declared by any sub-command: the test checks nothing")
	}
}

// notASetting is how a page says that a name it gives is not a setting (the WARN line an
// unread MM2_* variable gets): such a name may be one no -h lists.
const notASetting = "is not an mm2go setting"

// codeSettingName matches a whole MM2_* name in a Go string literal (not a prefix such as
// "MM2_SOURCE_", and not MM2_<SOURCE|TARGET>_... forms).
var codeSettingName = regexp.MustCompile(`\bMM2_[A-Z0-9_]*[A-Z0-9]\b`)

// TestCodeSettingNamesListed: every MM2_* name the code knows is listed by some function's -h:
// config's settings, the process settings, and every whole MM2_* name in a string literal of
// the functions' code (shared/ and functions/, tests left out), which is how code reads a
// variable or names one in an error. A name written as a prefix (MM2_SOURCE_, MM2_SERVE_OIDC_)
// must start some listed name.
func TestCodeSettingNamesListed(t *testing.T) {
	all := map[string]bool{}
	for _, f := range config.Functions {
		for n := range listed(t, f) {
			all[n] = true
		}
	}
	missing := map[string][]string{}
	for _, n := range config.EnvNames() {
		if !all[n] {
			missing[n] = append(missing[n], "shared/config")
		}
	}
	for _, s := range cli.ProcessSettings {
		if !all[s.Name] {
			missing[s.Name] = append(missing[s.Name], "cli.ProcessSettings")
		}
	}
	r := root(t)
	literals := 0
	for _, dir := range []string{"shared", "functions"} {
		err := filepath.WalkDir(filepath.Join(r, dir), func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(r, p)
			tags := map[*ast.BasicLit]bool{} // struct tags: config's, listed above by their full names
			ast.Inspect(f, func(n ast.Node) bool {
				if fld, ok := n.(*ast.Field); ok && fld.Tag != nil {
					tags[fld.Tag] = true
				}
				lit, ok := n.(*ast.BasicLit)
				if ok && tags[lit] {
					return true
				}
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					return true
				}
				for _, loc := range codeSettingName.FindAllStringIndex(s, -1) {
					name, after := s[loc[0]:loc[1]], s[loc[1]:]
					if strings.HasPrefix(after, "_") || strings.HasPrefix(after, "<") || strings.HasPrefix(after, "*") {
						continue // a prefix: MM2_SOURCE_<KEY>
					}
					literals++
					if !all[name] && !strings.Contains(s, notASetting) && !strings.Contains(s, "not a setting") {
						missing[name] = append(missing[name], rel)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if literals == 0 {
		t.Fatal("no MM2_* name found in the code: the test checks nothing")
	}
	var bad []string
	for n, where := range missing {
		sort.Strings(where)
		bad = append(bad, n+" ("+strings.Join(compact(where), ", ")+")")
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("MM2_* names the code knows that no function's -h lists: %s", strings.Join(bad, "; "))
	}
}

func compact(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
