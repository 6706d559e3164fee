package cluster

import (
	"cmp"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"

	"github.com/mm2go/mm2go/shared/secret"
)

// How secrets stay out of text
//
// Secrets are held as secret.Secret, which prints as [redacted] in every
// fmt verb, slog record and JSON, and their values are revealed only where
// they are handed to their destination (the SASL mechanism, the key
// parsers). Errors built here name settings and describe problems; none
// formats a secret's value. That is the defence.
//
// leakGuard is a second line for text this package did not write (franz-go
// log lines, broker and identity-provider messages): when such a text
// contains the value of a secret, the text is replaced whole by a notice
// naming the setting. It never edits text, so it cannot turn "unable" into
// "una[redacted]le" the way substring replacement of a one-letter password
// did. Secrets shorter than minGuardedSecret are looked for only where a
// value stands: right after '=', '"' or '\'' and not followed by a letter or
// digit (password="pw1", key=abc;). Found anywhere, a short value says
// nothing: it occurs by chance in most sentences, and withholding every such
// sentence would hide every diagnosis.

// minGuardedSecret is the length from which leakGuard looks for a secret
// anywhere in a text.
const minGuardedSecret = 8

// guardedSecret is one secret value and the property it comes from.
type guardedSecret struct {
	prop, value string
}

// leakGuard is the secrets of one cluster's settings, longest first.
type leakGuard []guardedSecret

// guardOf returns the guard of s: every secret.Secret field of s (found by
// reflection, so new secret settings are covered without a change here),
// the password of sasl.jaas.config and the SharedAccessKey of an Event Hubs
// connection string.
func guardOf(s Settings) leakGuard {
	var g leakGuard
	add := func(prop, v string) {
		v = strings.TrimSpace(v)
		if v == "" {
			return
		}
		for _, have := range g {
			if have.value == v {
				return
			}
		}
		g = append(g, guardedSecret{prop: prop, value: v})
	}
	secretFields(reflect.ValueOf(s), "", add)
	if s.SASLJAASConfig.IsSet() {
		if entries, err := parseJAAS(s.SASLJAASConfig.Reveal()); err == nil {
			for _, e := range entries {
				for k, v := range e.options {
					if lk := strings.ToLower(k); strings.Contains(lk, "password") || strings.Contains(lk, "secret") {
						add("sasl.jaas.config", v)
					}
				}
			}
		}
	}
	if cs := s.EventHubsConnectionString.Reveal(); cs != "" {
		for part := range strings.SplitSeq(cs, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
			switch k = strings.TrimSpace(k); {
			case !ok:
			case strings.EqualFold(k, "SharedAccessKey"):
				add("eventhubs.connection.string", v)
			case strings.EqualFold(k, "SharedAccessSignature"):
				// "SharedAccessSignature sr=...&sig=...&se=...&skn=...": the whole token, and its
				// signature alone (the part that grants access).
				add("eventhubs.connection.string", v)
				for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == '&' || r == ' ' }) {
					if name, sig, ok := strings.Cut(f, "="); ok && name == "sig" {
						add("eventhubs.connection.string", sig)
					}
				}
			}
		}
	}
	slices.SortStableFunc(g, func(a, b guardedSecret) int { return cmp.Compare(len(b.value), len(a.value)) })
	return g
}

var secretType = reflect.TypeFor[secret.Secret]()

// secretFields calls add with the MM2 property and value of every Secret in
// struct v, nested structs included.
func secretFields(v reflect.Value, prefix string, add func(prop, value string)) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		prop := prefix + f.Tag.Get("mm2")
		switch {
		case f.Type == secretType:
			add(prop, v.Field(i).Interface().(secret.Secret).Reveal())
		case f.Type.Kind() == reflect.Struct:
			p := prefix
			if tag := f.Tag.Get("mm2"); tag != "" {
				p += tag + "."
			}
			secretFields(v.Field(i), p, add)
		}
	}
}

// find returns the property whose secret text contains (a short one only
// where a value stands, see above).
func (g leakGuard) find(text string) (string, bool) {
	for _, s := range g {
		if len(s.value) >= minGuardedSecret {
			if strings.Contains(text, s.value) {
				return s.prop, true
			}
		} else if standsAsValue(text, s.value) {
			return s.prop, true
		}
	}
	return "", false
}

// standsAsValue reports whether v occurs in text right after '=', '"' or
// '\” and is not followed by a letter or digit.
func standsAsValue(text, v string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], v)
		if j < 0 {
			return false
		}
		at := i + j
		end := at + len(v)
		before := at > 0 && strings.IndexByte("=\"'", text[at-1]) >= 0
		after := end == len(text) || !isAlnum(text[end])
		if before && after {
			return true
		}
		i = at + 1
	}
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// withheld is the notice that stands for a text holding a secret.
func withheld(prop string) string {
	return "[text withheld: it contained the value of " + prop + "]"
}

// text returns text unchanged, or the notice when it holds a secret.
func (g leakGuard) text(text string) string {
	if prop, ok := g.find(text); ok {
		return withheld(prop)
	}
	return text
}

// value returns a log value unchanged, or the notice when its text holds a
// secret. Numbers, booleans and slog.LogValuers (secret.Secret) pass as they
// are.
func (g leakGuard) value(v any) any {
	var text string
	switch v := v.(type) {
	case nil, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64, slog.LogValuer:
		return v
	case string:
		text = v
	case error:
		text = v.Error()
	default:
		text = fmt.Sprint(v)
	}
	if prop, ok := g.find(text); ok {
		return withheld(prop)
	}
	return v
}

// err returns err unchanged, or an error whose text is the notice and whose
// Unwrap gives err (for errors.Is/As) when err's text holds a secret.
func (g leakGuard) err(err error) error {
	if err == nil {
		return nil
	}
	if prop, ok := g.find(err.Error()); ok {
		return &withheldError{msg: withheld(prop), err: err}
	}
	return err
}

// withheldError stands for an error whose text held a secret. Unwrap gives
// the original for errors.Is/As; its text is the caller's to guard.
type withheldError struct {
	msg string
	err error
}

func (e *withheldError) Error() string { return e.msg }
func (e *withheldError) Unwrap() error { return e.err }
