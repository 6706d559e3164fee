package doccheck

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/mm2go/mm2go/shared/config"
)

// settingName matches an MM2_* name in a page; MM2_<SOURCE|TARGET>_X stands for both sides.
var settingName = regexp.MustCompile(`MM2_(<SOURCE\\?\|TARGET>_)?[A-Z0-9_]*[A-Z0-9]\*?`)

// TestDocSettingNames: every MM2_* name in a user page is listed by some function's -h, so a
// reader who copies it sets something. Names ending in * are prefixes (MM2_SOURCE_SASL_*): some
// listed name must start with them. A name no -h lists may appear only on a line that says it
// "is not an mm2go setting" (the WARN line such a variable gets at start).
func TestDocSettingNames(t *testing.T) {
	all := map[string]bool{}
	for _, f := range config.Functions {
		for n := range listed(t, f) {
			all[n] = true
		}
	}
	for _, page := range userPages(t) {
		var bad []string
		for i, line := range strings.Split(read(t, page), "\n") {
			if strings.Contains(line, notASetting) {
				continue
			}
			for _, loc := range settingName.FindAllStringIndex(line, -1) {
				m, after := line[loc[0]:loc[1]], line[loc[1]:]
				if !strings.HasSuffix(m, "*") && (strings.HasPrefix(after, "_<") || strings.HasPrefix(after, "_.") ||
					strings.HasPrefix(after, "_…") || strings.HasPrefix(after, "_*")) {
					m += "_*" // MM2_SOURCE_<KEY>, MM2_TARGET_..., MM2_SERVE_OIDC_*: a prefix
				}
				names := []string{m}
				if strings.Contains(m, "TARGET>_") {
					rest := m[strings.Index(m, "TARGET>_")+len("TARGET>_"):]
					names = []string{"MM2_SOURCE_" + rest, "MM2_TARGET_" + rest}
				}
				for _, n := range names {
					if known(all, n) {
						continue
					}
					bad = append(bad, n+" (line "+strconv.Itoa(i+1)+")")
				}
			}
		}
		if len(bad) > 0 {
			sort.Strings(bad)
			t.Errorf("%s names settings no function's -h lists: %s", page, strings.Join(bad, ", "))
		}
	}
}

func known(all map[string]bool, n string) bool {
	if p, ok := strings.CutSuffix(n, "*"); ok {
		for a := range all {
			if strings.HasPrefix(a, p) {
				return true
			}
		}
		return false
	}
	return all[n]
}
