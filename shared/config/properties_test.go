package config

import (
	"reflect"
	"testing"
)

func TestParseProperties(t *testing.T) {
	for _, test := range []struct {
		name string
		in   string
		want [][2]string
	}{
		{"separators", "a=1\nb:2\nc 3\nd\t=\t4\ne = : 5\nf", [][2]string{{"a", "1"}, {"b", "2"}, {"c", "3"}, {"d", "4"}, {"e", ": 5"}, {"f", ""}}},
		{"comments and blanks", "# c\n! c\n\n   \n  # indented\nk=v", [][2]string{{"k", "v"}}},
		{"comment not continued", "# c \\\nk=v", [][2]string{{"k", "v"}}},
		{"continuation", "k=a,\\\n    b,\\\n\tc", [][2]string{{"k", "a,b,c"}}},
		{"even backslashes", "k=a\\\\\nn=b", [][2]string{{"k", `a\`}, {"n", "b"}}},
		{"continued hash is not comment", "k=a\\\n#b", [][2]string{{"k", "a#b"}}},
		{"escapes", `k=\t\n\r\f\u0041\\\=\:\ x`, [][2]string{{"k", "\t\n\r\fA\\=: x"}}},
		{"escaped key separators", `a\=b\:c\ d=v`, [][2]string{{"a=b:c d", "v"}}},
		{"trailing spaces kept", "k=v  ", [][2]string{{"k", "v  "}}},
		{"crlf and cr", "a=1\r\nb=2\rc=3", [][2]string{{"a", "1"}, {"b", "2"}, {"c", "3"}}},
		{"flow keys", "source->target.enabled = true", [][2]string{{"source->target.enabled", "true"}}},
		{"surrogate pair", `k=\uD83D\uDE00`, [][2]string{{"k", "\U0001F600"}}},
		{"utf8", "k=é", [][2]string{{"k", "é"}}},
		{"jaas", `sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";`,
			[][2]string{{"sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";`}}},
	} {
		t.Run(test.name, func(t *testing.T) {
			props, err := parseProperties([]byte(test.in))
			if err != nil {
				t.Fatal(err)
			}
			var got [][2]string
			for _, p := range props {
				got = append(got, [2]string{p.key, p.value})
			}
			if !reflect.DeepEqual(got, test.want) {
				t.Errorf("got %q\nwant %q", got, test.want)
			}
		})
	}
	latin1, err := parseProperties([]byte{'k', '=', 0xe9})
	if err != nil || latin1[0].value != "é" {
		t.Errorf("latin-1: %+v, %v", latin1, err)
	}
	if _, err := parseProperties([]byte(`k=\u12`)); err == nil {
		t.Errorf("malformed \\u accepted")
	}
}
