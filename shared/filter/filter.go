// Package filter implements MirrorMaker 2's topic and group filters
// (DefaultTopicFilter, DefaultGroupFilter) and the regex-list semantics of
// MM2's LIST settings: a comma separated list of Java regular expressions,
// joined with "|", that must match a whole name. An empty list matches
// nothing; exclusion wins over inclusion.
//
// Go's regexp package (RE2) accepts most Java patterns with the same
// meaning. Constructs it cannot express (lookaround, backreferences,
// possessive quantifiers, atomic groups) or would read differently (nested
// character classes and class intersection) are rejected with an error
// naming the setting, so that no filter silently matches other names than
// MM2 would.
package filter

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
)

// MM2's defaults for the filter settings (Kafka 4.1's DefaultTopicFilter and
// DefaultGroupFilter; Kafka 3.x excluded .*[\-\.]internal instead of
// mm2.*\.internal).
const (
	DefaultTopics        = ".*"
	DefaultTopicsExclude = `mm2.*\.internal, .*\.replica, __.*`
	DefaultGroups        = ".*"
	DefaultGroupsExclude = "console-consumer-.*, connect-.*, __.*"
)

// Setting names the setting a list came from, for errors and explanations.
type Setting struct {
	Property string // MM2 property name, e.g. "topics.exclude"
	Env      string // environment variable, e.g. "MM2_TOPICS_EXCLUDE"
}

// Settings of the topic and group filters.
var (
	TopicsSetting        = Setting{"topics", "MM2_TOPICS"}
	TopicsExcludeSetting = Setting{"topics.exclude", "MM2_TOPICS_EXCLUDE"}
	GroupsSetting        = Setting{"groups", "MM2_GROUPS"}
	GroupsExcludeSetting = Setting{"groups.exclude", "MM2_GROUPS_EXCLUDE"}
)

// PatternError reports a regex list that cannot be used.
type PatternError struct {
	Setting Setting
	Pattern string // the offending pattern (or the joined list)
	Reason  string
}

func (e *PatternError) Error() string {
	return fmt.Sprintf("%s (%s): pattern %q: %s", e.Setting.Env, e.Setting.Property, e.Pattern, e.Reason)
}

// List is a compiled MM2 regex list.
type List struct {
	setting  Setting
	patterns []string
	whole    *regexp.Regexp   // nil: the list is empty and matches nothing
	each     []*regexp.Regexp // per pattern, for explanations; nil where a piece does not compile alone
}

// SplitList splits an MM2 LIST value like Kafka's ConfigDef: the value is
// trimmed, an empty value is an empty list, otherwise it is split on commas
// with any surrounding whitespace (empty pieces are kept, as in Java).
func SplitList(value string) []string {
	value = strings.TrimSpace(value)
	if value == "" {
		return nil
	}
	parts := strings.Split(value, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return parts
}

// NewList compiles value, a comma separated list of Java regexes, for setting.
func NewList(setting Setting, value string) (*List, error) {
	l := &List{setting: setting, patterns: SplitList(value)}
	if len(l.patterns) == 0 {
		return l, nil
	}
	joined := strings.Join(l.patterns, "|")
	if err := checkJava(joined); err != "" {
		return nil, &PatternError{Setting: setting, Pattern: culprit(l.patterns, joined), Reason: err}
	}
	re, err := regexp.Compile(`^(?:` + joined + `)$`)
	if err != nil {
		return nil, &PatternError{Setting: setting, Pattern: culprit(l.patterns, joined), Reason: "invalid regular expression: " + rootCause(err)}
	}
	l.whole = re
	l.each = make([]*regexp.Regexp, len(l.patterns))
	for i, p := range l.patterns {
		// A piece may not compile alone when a group spans a comma
		// ("(a,b)"); such lists are explained as a whole.
		l.each[i], _ = regexp.Compile(`^(?:` + p + `)$`)
	}
	return l, nil
}

// culprit returns the first pattern that fails on its own, else joined.
func culprit(patterns []string, joined string) string {
	for _, p := range patterns {
		if checkJava(p) != "" {
			return p
		}
		if _, err := regexp.Compile(p); err != nil {
			return p
		}
	}
	return joined
}

func rootCause(err error) string {
	var e *syntax.Error
	if errors.As(err, &e) {
		return fmt.Sprintf("%s: %s", e.Code, e.Expr)
	}
	return err.Error()
}

// Patterns returns the list's patterns.
func (l *List) Patterns() []string { return append([]string(nil), l.patterns...) }

// Empty reports whether the list has no pattern (and so matches nothing).
func (l *List) Empty() bool { return len(l.patterns) == 0 }

// Match reports whether name is matched, as a whole, by one of the patterns.
func (l *List) Match(name string) bool {
	return l.whole != nil && l.whole.MatchString(name)
}

// matching returns the first pattern that matches name, or the whole list
// when no single pattern can be tested alone.
func (l *List) matching(name string) string {
	for i, re := range l.each {
		if re != nil && re.MatchString(name) {
			return l.patterns[i]
		}
	}
	return strings.Join(l.patterns, ",")
}

// Filter accepts names matched by an include list and not by an exclude
// list: MM2's DefaultTopicFilter and DefaultGroupFilter.
type Filter struct {
	kind    string
	include *List
	exclude *List
}

// New compiles a filter from two lists. kind ("topic", "group") only appears
// in explanations.
func New(kind string, include Setting, includeValue string, exclude Setting, excludeValue string) (*Filter, error) {
	in, err := NewList(include, includeValue)
	if err != nil {
		return nil, err
	}
	ex, err := NewList(exclude, excludeValue)
	if err != nil {
		return nil, err
	}
	return &Filter{kind: kind, include: in, exclude: ex}, nil
}

// Topics returns MM2's topic filter for the values of topics and
// topics.exclude.
func Topics(include, exclude string) (*Filter, error) {
	return New("topic", TopicsSetting, include, TopicsExcludeSetting, exclude)
}

// Groups returns MM2's group filter for the values of groups and
// groups.exclude.
func Groups(include, exclude string) (*Filter, error) {
	return New("group", GroupsSetting, include, GroupsExcludeSetting, exclude)
}

// Accept reports whether name passes the filter.
func (f *Filter) Accept(name string) bool {
	return f.include.Match(name) && !f.exclude.Match(name)
}

// Explain reports whether name passes the filter and why, in words fit for
// a dry-run listing, e.g. `excluded by topics.exclude pattern "__.*"`.
func (f *Filter) Explain(name string) (accepted bool, reason string) {
	if f.exclude.Match(name) {
		return false, fmt.Sprintf("excluded by %s pattern %q", f.exclude.setting.Property, f.exclude.matching(name))
	}
	if f.include.Empty() {
		return false, fmt.Sprintf("%s is empty, so no %s is included", f.include.setting.Property, f.kind)
	}
	if !f.include.Match(name) {
		return false, fmt.Sprintf("not matched by %s %q", f.include.setting.Property, strings.Join(f.include.patterns, ","))
	}
	return true, fmt.Sprintf("included by %s pattern %q", f.include.setting.Property, f.include.matching(name))
}

// checkJava returns why Java and RE2 would disagree on pattern, or "".
// It scans for constructs Go either rejects with an obscure message or,
// worse, accepts with another meaning.
func checkJava(p string) string {
	inClass := false
	classStart := 0
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '\\' && i+1 < len(p) {
			n := p[i+1]
			switch {
			case n >= '1' && n <= '9':
				return fmt.Sprintf(`backreference \%c is not supported (Go uses RE2, which has no backreferences)`, n)
			case n == 'k' && i+2 < len(p) && p[i+2] == '<':
				return `named backreference \k<...> is not supported (Go uses RE2, which has no backreferences)`
			case n == 'h' || n == 'H' || n == 'v' || n == 'V' || n == 'R' || n == 'X' || n == 'G' || n == 'Z':
				return fmt.Sprintf(`Java escape \%c is not supported by Go's RE2 (or means something else there)`, n)
			case n == 'Q':
				// \Q...\E: quoted text, skip to \E (RE2 supports it).
				end := strings.Index(p[i+2:], `\E`)
				if end < 0 {
					return ""
				}
				i += 2 + end + 1
				continue
			}
			i++
			continue
		}
		if inClass {
			switch {
			case c == ']' && i > classStart:
				inClass = false
			case c == '[' && i > classStart:
				return "nested character classes ([a[b]]) are not supported by Go's RE2 (write one class)"
			case c == '&' && i+1 < len(p) && p[i+1] == '&':
				return "character class intersection (&&) is not supported by Go's RE2"
			}
			continue
		}
		switch c {
		case '[':
			inClass = true
			classStart = i + 1
			if classStart < len(p) && p[classStart] == '^' {
				classStart++
			}
		case '(':
			if strings.HasPrefix(p[i:], "(?=") || strings.HasPrefix(p[i:], "(?!") ||
				strings.HasPrefix(p[i:], "(?<=") || strings.HasPrefix(p[i:], "(?<!") {
				return "lookahead/lookbehind is not supported (Go uses RE2); rewrite the pattern (a negative lookahead in topics can often become a pattern in topics.exclude)"
			}
			if strings.HasPrefix(p[i:], "(?>") {
				return "atomic groups (?>...) are not supported (Go uses RE2)"
			}
			if strings.HasPrefix(p[i:], "(?") {
				// Embedded flags: Java's U is UNICODE_CHARACTER_CLASS, RE2's
				// U is "ungreedy".
				flags := p[i+2:]
				if end := strings.IndexAny(flags, ":)"); end >= 0 && isFlags(flags[:end]) && strings.Contains(flags[:end], "U") {
					return "flag U means UNICODE_CHARACTER_CLASS in Java but ungreedy in Go's RE2"
				}
			}
		case '*', '+', '?':
			if i+1 < len(p) && p[i+1] == '+' {
				return "possessive quantifiers (*+, ++, ?+) are not supported (Go uses RE2)"
			}
		}
	}
	return ""
}

func isFlags(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
			return false
		}
	}
	return true
}

// TopicsOrDefault returns f, or MM2's default topic filter (DefaultTopics,
// DefaultTopicsExclude) when f is nil.
func TopicsOrDefault(f *Filter) (*Filter, error) {
	if f != nil {
		return f, nil
	}
	return Topics(DefaultTopics, DefaultTopicsExclude)
}
