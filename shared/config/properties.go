package config

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// property is one key/value pair of a Java .properties file.
type property struct {
	key, value string
	line       int // first line of the logical line, 1-based
}

// parseProperties reads data with java.util.Properties.load's rules:
// '#'/'!' comment lines, key and value separated by '=', ':' or whitespace,
// logical lines continued with an odd number of trailing backslashes (the
// next line's leading whitespace is dropped), and the escapes \t \n \r \f
// \uXXXX and \<char>. Later duplicates win when the result is put in a map.
//
// Java reads the bytes as ISO-8859-1; we read UTF-8 when the file is valid
// UTF-8 (what editors write today) and fall back to ISO-8859-1 otherwise.
func parseProperties(data []byte) ([]property, error) {
	var text []rune
	if utf8.Valid(data) {
		text = []rune(string(data))
	} else {
		text = make([]rune, len(data))
		for i, b := range data {
			text[i] = rune(b)
		}
	}
	lines := splitNaturalLines(text)
	var props []property
	for i := 0; i < len(lines); {
		start := i + 1
		line := trimLeftSpace(lines[i])
		i++
		if len(line) == 0 || line[0] == '#' || line[0] == '!' {
			continue
		}
		logical := append([]rune(nil), line...)
		for trailingBackslashes(logical)%2 == 1 {
			logical = logical[:len(logical)-1]
			if i >= len(lines) {
				break
			}
			logical = append(logical, trimLeftSpace(lines[i])...)
			i++
		}
		key, value, err := splitKeyValue(logical)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", start, err)
		}
		props = append(props, property{key: key, value: value, line: start})
	}
	return props, nil
}

func splitNaturalLines(text []rune) [][]rune {
	var lines [][]rune
	start := 0
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '\n':
			lines = append(lines, text[start:i])
			start = i + 1
		case '\r':
			lines = append(lines, text[start:i])
			if i+1 < len(text) && text[i+1] == '\n' {
				i++
			}
			start = i + 1
		}
	}
	if start < len(text) {
		lines = append(lines, text[start:])
	}
	return lines
}

func isPropSpace(c rune) bool { return c == ' ' || c == '\t' || c == '\f' }

func trimLeftSpace(l []rune) []rune {
	for len(l) > 0 && isPropSpace(l[0]) {
		l = l[1:]
	}
	return l
}

func trailingBackslashes(l []rune) int {
	n := 0
	for i := len(l) - 1; i >= 0 && l[i] == '\\'; i-- {
		n++
	}
	return n
}

// splitKeyValue splits a logical line like Properties.load0.
func splitKeyValue(l []rune) (string, string, error) {
	keyLen, valueStart := 0, len(l)
	hasSep, escaped := false, false
	for ; keyLen < len(l); keyLen++ {
		c := l[keyLen]
		if !escaped && (c == '=' || c == ':') {
			valueStart, hasSep = keyLen+1, true
			break
		}
		if !escaped && isPropSpace(c) {
			valueStart = keyLen + 1
			break
		}
		escaped = c == '\\' && !escaped
	}
	for ; valueStart < len(l); valueStart++ {
		c := l[valueStart]
		if isPropSpace(c) {
			continue
		}
		if !hasSep && (c == '=' || c == ':') {
			hasSep = true
			continue
		}
		break
	}
	key, err := unescapeProperty(l[:keyLen])
	if err != nil {
		return "", "", err
	}
	value, err := unescapeProperty(l[valueStart:])
	if err != nil {
		return "", "", fmt.Errorf("value of %q: %w", key, err)
	}
	return key, value, nil
}

func unescapeProperty(s []rune) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteRune(c)
			continue
		}
		i++
		if i >= len(s) {
			break // a lone backslash at the end of the input is dropped
		}
		switch c = s[i]; c {
		case 't':
			b.WriteRune('\t')
		case 'n':
			b.WriteRune('\n')
		case 'r':
			b.WriteRune('\r')
		case 'f':
			b.WriteRune('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf(`malformed \uxxxx encoding`)
			}
			v, err := strconv.ParseUint(string(s[i+1:i+5]), 16, 16)
			if err != nil {
				return "", fmt.Errorf(`malformed \uxxxx encoding`)
			}
			i += 4
			r := rune(v)
			// Java strings are UTF-16: join an escaped surrogate pair.
			if utf16.IsSurrogate(r) && i+6 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
				if lo, err := strconv.ParseUint(string(s[i+3:i+7]), 16, 16); err == nil {
					if pair := utf16.DecodeRune(r, rune(lo)); pair != utf8.RuneError {
						r = pair
						i += 6
					}
				}
			}
			b.WriteRune(r)
		default:
			b.WriteRune(c)
		}
	}
	return b.String(), nil
}
