package cluster

import (
	"errors"
	"fmt"
	"strings"
)

// jaasEntry is one login module of a sasl.jaas.config value. Options holds
// secrets: never print it.
type jaasEntry struct {
	loginModule string
	controlFlag string
	options     map[string]string
}

// parseJAAS parses a sasl.jaas.config value the way Kafka's JaasConfig does
// (java.io.StreamTokenizer with '-', '_' and '$' as word characters and
// // and /* */ comments): `LoginModule flag key=value ... ;` repeated.
// Unquoted values must be words (letters, '_', '$', then also digits, '.'
// and '-'); anything else must be quoted with " or ', where Java escapes
// (\n, \t, \", \\, octal ...) apply.
//
// Errors never quote the input, which contains passwords: they give the
// entry and option position only.
func parseJAAS(s string) ([]jaasEntry, error) {
	tz := &jaasTokenizer{in: []rune(s)}
	var entries []jaasEntry
	for {
		tok := tz.next()
		if tok.kind == tokEOF {
			break
		}
		n := len(entries) + 1
		if tok.kind != tokWord {
			return nil, fmt.Errorf("login module %d: expected a login module class name", n)
		}
		e := jaasEntry{loginModule: tok.text, options: map[string]string{}}
		flag := tz.next()
		switch {
		case flag.kind == tokEOF:
			return nil, fmt.Errorf("login module %d: control flag not specified", n)
		case flag.kind != tokWord:
			return nil, fmt.Errorf("login module %d: invalid control flag", n)
		}
		switch strings.ToLower(flag.text) {
		case "required", "requisite", "sufficient", "optional":
			e.controlFlag = strings.ToLower(flag.text)
		default:
			return nil, fmt.Errorf("login module %d: invalid control flag (want required, requisite, sufficient or optional)", n)
		}
		for opt := 1; ; opt++ {
			key := tz.next()
			if key.kind == tokEOF {
				return nil, fmt.Errorf("login module %d: not terminated by a semicolon", n)
			}
			if key.kind == tokOrdinary && key.text == ";" {
				break
			}
			eq := tz.next()
			val := tz.next()
			if key.kind != tokWord && key.kind != tokQuoted || eq.kind != tokOrdinary || eq.text != "=" ||
				(val.kind != tokWord && val.kind != tokQuoted) {
				return nil, fmt.Errorf("login module %d option %d: expected key=value (values other than plain words must be quoted)", n, opt)
			}
			e.options[key.text] = val.text
		}
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		return nil, errors.New("login module not specified")
	}
	return entries, nil
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokWord
	tokQuoted
	tokNumber
	tokOrdinary
)

type token struct {
	kind tokKind
	text string
}

type jaasTokenizer struct {
	in  []rune
	pos int
}

func (t *jaasTokenizer) peek() rune {
	if t.pos >= len(t.in) {
		return -1
	}
	return t.in[t.pos]
}

func isJAASWordStart(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0xA0 || c == '_' || c == '$'
}

func isDigit(c rune) bool { return c >= '0' && c <= '9' }

func (t *jaasTokenizer) next() token {
	for {
		c := t.peek()
		switch {
		case c < 0:
			return token{kind: tokEOF}
		case c <= ' ':
			t.pos++
			continue
		case c == '/':
			t.pos++
			if t.peek() == '*' {
				t.pos++
				for t.pos < len(t.in) && !(t.in[t.pos] == '*' && t.pos+1 < len(t.in) && t.in[t.pos+1] == '/') {
					t.pos++
				}
				t.pos += 2
				continue
			}
			// "//" and a lone '/' (StreamTokenizer's default comment
			// character) both comment out the rest of the line.
			for t.pos < len(t.in) && t.in[t.pos] != '\n' && t.in[t.pos] != '\r' {
				t.pos++
			}
			continue
		case isDigit(c) || c == '.' || c == '-':
			start := t.pos
			t.pos++
			if c == '-' && !isDigit(t.peek()) && t.peek() != '.' {
				return token{kind: tokOrdinary, text: "-"}
			}
			for isDigit(t.peek()) || t.peek() == '.' {
				t.pos++
			}
			return token{kind: tokNumber, text: string(t.in[start:t.pos])}
		case isJAASWordStart(c):
			start := t.pos
			for t.pos < len(t.in) {
				c := t.in[t.pos]
				if !isJAASWordStart(c) && !isDigit(c) && c != '.' && c != '-' {
					break
				}
				t.pos++
			}
			return token{kind: tokWord, text: string(t.in[start:t.pos])}
		case c == '"' || c == '\'':
			t.pos++
			return token{kind: tokQuoted, text: t.quoted(c)}
		default:
			t.pos++
			return token{kind: tokOrdinary, text: string(c)}
		}
	}
}

// quoted reads a quoted string body after the opening quote q, with
// StreamTokenizer's escapes; it ends at q, a line end or the input's end.
func (t *jaasTokenizer) quoted(q rune) string {
	var b strings.Builder
	for t.pos < len(t.in) {
		c := t.in[t.pos]
		if c == q {
			t.pos++
			break
		}
		if c == '\n' || c == '\r' {
			break
		}
		t.pos++
		if c != '\\' || t.pos >= len(t.in) {
			b.WriteRune(c)
			continue
		}
		c = t.in[t.pos]
		t.pos++
		switch c {
		case 'a':
			c = 7
		case 'b':
			c = '\b'
		case 'f':
			c = '\f'
		case 'n':
			c = '\n'
		case 'r':
			c = '\r'
		case 't':
			c = '\t'
		case 'v':
			c = '\v'
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := c - '0'
			maxDigits := 2
			if c > '3' {
				maxDigits = 1
			}
			for i := 0; i < maxDigits && t.pos < len(t.in) && t.in[t.pos] >= '0' && t.in[t.pos] <= '7'; i++ {
				v = v*8 + t.in[t.pos] - '0'
				t.pos++
			}
			c = v
		}
		b.WriteRune(c)
	}
	return b.String()
}
