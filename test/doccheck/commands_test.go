package doccheck

import (
	"strings"
	"testing"
)

// TestGuideCommands: every command line of a function in a page's code blocks (`mirror plan`,
// `checkpoint run`, ...) names a sub-command the function has, and every MM2_* variable set in
// front of it (MM2_FLOW=a->b mirror status) is a setting that function's -h lists, so a guide's
// steps can be typed as they are.
func TestGuideCommands(t *testing.T) {
	subs := map[string]map[string]bool{}
	for _, a := range apps() {
		subs[a.Name] = map[string]bool{"-h": true, "--help": true, "help": true}
		for name := range a.Commands {
			subs[a.Name][name] = true
		}
	}
	checked := 0
	var lists map[string]map[string]bool // function -> the names its -h lists
	for _, page := range userPages(t) {
		fence := false
		for i, l := range strings.Split(read(t, page), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				fence = !fence
				continue
			}
			if !fence {
				continue
			}
			f := strings.Fields(l)
			var vars []string
			for len(f) > 0 && strings.Contains(f[0], "=") {
				name, _, _ := strings.Cut(f[0], "=")
				vars = append(vars, name)
				f = f[1:] // VAR=value mirror run
			}
			if len(f) < 2 {
				continue
			}
			fn := f[0][strings.LastIndex(f[0], "/")+1:] // bin/mirror, /usr/local/bin/mirror
			known, ok := subs[fn]
			if !ok {
				continue
			}
			checked++
			if !known[f[1]] {
				t.Errorf("%s:%d: %q has no sub-command %q", page, i+1, f[0], f[1])
			}
			for _, v := range vars {
				if lists == nil {
					lists = map[string]map[string]bool{}
				}
				if lists[fn] == nil {
					lists[fn] = listed(t, fn)
				}
				if strings.HasPrefix(v, "MM2_") && !lists[fn][v] {
					t.Errorf("%s:%d: %s is not a setting of %s (%s -h does not list it)", page, i+1, v, fn, fn)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no command line found in any page: the test finds nothing to check")
	}
}
