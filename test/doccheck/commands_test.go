package doccheck

import (
	"strings"
	"testing"

	"github.com/mm2go/mm2go/shared/app"
)

// TestGuideCommands: every command line of a function in a page's code blocks (`mirror plan`,
// `checkpoint run`, ...) names a sub-command the function has, so a guide's steps can be typed
// as they are.
func TestGuideCommands(t *testing.T) {
	subs := map[string]map[string]bool{
		"mirror":     {"run": true, "serve": true, "-h": true, "help": true},
		"checkpoint": {"run": true, "serve": true, "-h": true, "help": true},
		"heartbeat":  {"run": true, "serve": true, "-h": true, "help": true},
	}
	for name := range app.OpsCommands() {
		subs["mirror"][name] = true
	}
	checked := 0
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
			for len(f) > 0 && strings.Contains(f[0], "=") {
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
		}
	}
	if checked == 0 {
		t.Fatal("no command line found in any page: the test finds nothing to check")
	}
}
