package filter

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestSplitList(t *testing.T) {
	for _, test := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"   ", nil},
		{"a", []string{"a"}},
		{" a , b,c ", []string{"a", "b", "c"}},
		{"a,,b", []string{"a", "", "b"}},
		{"a,", []string{"a", ""}},
		{DefaultTopicsExclude, []string{`mm2.*\.internal`, `.*\.replica`, "__.*"}},
	} {
		if got := SplitList(test.in); !reflect.DeepEqual(got, test.want) {
			t.Errorf("SplitList(%q) = %q, want %q", test.in, got, test.want)
		}
	}
}

func TestDefaultTopics(t *testing.T) {
	f, err := Topics(DefaultTopics, DefaultTopicsExclude)
	if err != nil {
		t.Fatal(err)
	}
	for _, test := range []struct {
		topic  string
		accept bool
		reason string
	}{
		{"orders", true, `included by topics pattern ".*"`},
		{"A.orders", true, `included by topics pattern ".*"`},
		{"__consumer_offsets", false, `excluded by topics.exclude pattern "__.*"`},
		{"mm2-offsets.A.internal", false, `excluded by topics.exclude pattern "mm2.*\\.internal"`},
		{"connect-configs-internal", true, ""},
		{"orders.internal", true, ""},
		{"mm2-offsets-internal", true, ""},
		{"x.replica", false, `excluded by topics.exclude pattern ".*\\.replica"`},
		{"internal", true, ""},
		{"xinternal", true, ""},
		{"x.replicas", true, ""},
		{"a__b", true, ""},
	} {
		if got := f.Accept(test.topic); got != test.accept {
			t.Errorf("Accept(%q) = %v, want %v", test.topic, got, test.accept)
		}
		ok, reason := f.Explain(test.topic)
		if ok != test.accept || (test.reason != "" && reason != test.reason) {
			t.Errorf("Explain(%q) = %v, %q; want %v, %q", test.topic, ok, reason, test.accept, test.reason)
		}
	}
}

func TestDefaultGroups(t *testing.T) {
	f, err := Groups(DefaultGroups, DefaultGroupsExclude)
	if err != nil {
		t.Fatal(err)
	}
	for group, want := range map[string]bool{
		"app":                    true,
		"console-consumer-12345": false,
		"connect-mirror":         false,
		"__internal":             false,
		"my-connect-x":           true,
		"console-consumer":       true,
	} {
		if got := f.Accept(group); got != want {
			t.Errorf("Accept(%q) = %v, want %v", group, got, want)
		}
	}
}

func TestFilterSemantics(t *testing.T) {
	for _, test := range []struct {
		name             string
		include, exclude string
		topic            string
		accept           bool
		reason           string
	}{
		{"whole name only", "topic1", "", "topic10", false, `not matched by topics "topic1"`},
		{"whole name prefix", "topic1", "", "xtopic1", false, ""},
		{"list", "topic1,topic2", "", "topic2", true, `included by topics pattern "topic2"`},
		{"list spaces", " topic1 ,  topic2 ", "", "topic2", true, ""},
		{"alternation anchored", "a|b.*", "", "bcd", true, ""},
		{"alternation anchored 2", "a|b", "", "ab", false, ""},
		{"empty include matches nothing", "", "", "anything", false, "topics is empty, so no topic is included"},
		{"blank include matches nothing", "  ", "", "anything", false, ""},
		{"empty exclude excludes nothing", ".*", "", "__x", true, ""},
		{"exclude wins", "secret.*", "secret.*", "secret1", false, `excluded by topics.exclude pattern "secret.*"`},
		{"trailing comma", "a,", "", "a", true, ""},
		{"group across comma", "(a,b)", "", "a", true, `included by topics pattern "(a,b)"`},
		{"comma is a separator", "(a,b)", "", "a,b", false, ""},
		{"case sensitive", "Orders", "", "orders", false, ""},
		{"inline flag", "(?i)orders", "", "ORDERS", true, ""},
		{"quoted", `\Qa.b\E`, "", "a.b", true, ""},
		{"quoted no wildcard", `\Qa.b\E`, "", "axb", false, ""},
		{"posix-free class", `[a-c]+\d`, "", "abc1", true, ""},
	} {
		t.Run(test.name, func(t *testing.T) {
			f, err := Topics(test.include, test.exclude)
			if err != nil {
				t.Fatal(err)
			}
			ok, reason := f.Explain(test.topic)
			if ok != test.accept || f.Accept(test.topic) != test.accept {
				t.Errorf("Explain(%q) = %v (%s), want %v", test.topic, ok, reason, test.accept)
			}
			if test.reason != "" && reason != test.reason {
				t.Errorf("reason = %q, want %q", reason, test.reason)
			}
		})
	}
}

func TestInvalidPatterns(t *testing.T) {
	for _, test := range []struct {
		name, include, exclude string
		env, prop, pattern     string
		reason                 string
	}{
		{"syntax", "a(b", "", "MM2_TOPICS", "topics", "a(b", "invalid regular expression"},
		{"lookahead", ".*", "(?!keep).*", "MM2_TOPICS_EXCLUDE", "topics.exclude", "(?!keep).*", "lookahead"},
		{"lookbehind", ".*(?<=x)", "", "MM2_TOPICS", "topics", ".*(?<=x)", "lookbehind"},
		{"backref", `(a)\1`, "", "MM2_TOPICS", "topics", `(a)\1`, "backreference"},
		{"named backref", `(?<n>a)\k<n>`, "", "MM2_TOPICS", "topics", `(?<n>a)\k<n>`, "backreference"},
		{"possessive", "a*+", "", "MM2_TOPICS", "topics", "a*+", "possessive"},
		{"atomic", "(?>a)", "", "MM2_TOPICS", "topics", "(?>a)", "atomic"},
		{"intersection", "[a-z&&[^x]]", "", "MM2_TOPICS", "topics", "[a-z&&[^x]]", "intersection"},
		{"nested class", "[a[bc]]", "", "MM2_TOPICS", "topics", "[a[bc]]", "nested"},
		{"java vertical space", `\v`, "", "MM2_TOPICS", "topics", `\v`, `\v`},
		{"unicode flag", "(?U)\\w+", "", "MM2_TOPICS", "topics", "(?U)\\w+", "UNICODE_CHARACTER_CLASS"},
		{"second of list", "ok,(?=x)", "", "MM2_TOPICS", "topics", "(?=x)", "lookahead"},
	} {
		t.Run(test.name, func(t *testing.T) {
			_, err := Topics(test.include, test.exclude)
			var pe *PatternError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *PatternError", err)
			}
			if pe.Setting.Env != test.env || pe.Setting.Property != test.prop || pe.Pattern != test.pattern || !strings.Contains(pe.Reason, test.reason) {
				t.Errorf("err = %+v", pe)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, test.env+" ("+test.prop+")") {
				t.Errorf("message %q does not start with the setting names", msg)
			}
		})
	}
	// Named groups and escaped specials are fine.
	for _, ok := range []string{`(?<User>a)`, `\(?=x\)`, `[\[]`, `a\+\+`, `[*+]+`} {
		if _, err := Topics(ok, ""); err != nil {
			t.Errorf("Topics(%q): %v", ok, err)
		}
	}
	if _, err := Groups(".*", "(?=x)"); err == nil || !strings.Contains(err.Error(), "MM2_GROUPS_EXCLUDE (groups.exclude)") {
		t.Errorf("groups error = %v", err)
	}
}
