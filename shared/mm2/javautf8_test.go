package mm2

import (
	"bufio"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"
)

// sequences are the well-formed UTF-8 sequences Java's decoder accepts (Unicode 16.0 Table 3-7),
// by lead byte: the ranges of the bytes after it. Java departs from the table on one row: after
// 0xED it takes 0x80-0xBF (an encoded surrogate is one ill-formed sequence, one U+FFFD).
var sequences = []struct {
	first, last byte
	next        [][2]byte
}{
	{0xC2, 0xDF, [][2]byte{{0x80, 0xBF}}},
	{0xE0, 0xE0, [][2]byte{{0xA0, 0xBF}, {0x80, 0xBF}}},
	{0xE1, 0xEF, [][2]byte{{0x80, 0xBF}, {0x80, 0xBF}}}, // 0xED: Unicode's second byte is 0x80-0x9F
	{0xF0, 0xF0, [][2]byte{{0x90, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}}},
	{0xF1, 0xF3, [][2]byte{{0x80, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}}},
	{0xF4, 0xF4, [][2]byte{{0x80, 0x8F}, {0x80, 0xBF}, {0x80, 0xBF}}},
}

// javaString is s as Java's new String(bytes, UTF_8) decodes it, written back as UTF-8: every
// well-formed sequence as it is, and one U+FFFD for each maximal subpart of an ill-formed one
// (the longest prefix of a sequence the table allows, or one byte). TestJavaUTF8Oracle checks
// it against Java itself.
func javaString(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			b.WriteByte(s[i])
			i++
			continue
		}
		n := 1 // bytes of the sequence starting at i that fit the table
		whole := false
		for _, seq := range sequences {
			if s[i] < seq.first || s[i] > seq.last {
				continue
			}
			for _, r := range seq.next {
				if i+n >= len(s) || s[i+n] < r[0] || s[i+n] > r[1] {
					break
				}
				n++
			}
			whole = n == len(seq.next)+1
		}
		if whole && (s[i] != 0xED || s[i+1] < 0xA0) {
			b.WriteString(s[i : i+n])
		} else {
			b.WriteRune(utf8.RuneError)
		}
		i += n
	}
	return b.String()
}

// javaCorpus is the byte strings TestJavaUTF8Oracle has Java decode: every string of one and
// two bytes, every lead byte before every byte and a set of third bytes, four-byte leads with
// every mix of edge bytes, each also followed by "z", and random strings of high bytes.
func javaCorpus() []string {
	var out []string
	edges := []byte{0x41, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xE0, 0xFF}
	for a := range 256 {
		out = append(out, string([]byte{byte(a)}))
		for b := range 256 {
			out = append(out, string([]byte{byte(a), byte(b)}))
		}
	}
	for _, a := range []byte{0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xF8, 0xFF, 0x80} {
		for b := range 256 {
			for _, c := range edges {
				s := string([]byte{a, byte(b), c})
				out = append(out, s, s+"z")
			}
		}
	}
	for _, a := range []byte{0xF0, 0xF1, 0xF3, 0xF4} {
		for _, b := range edges {
			for _, c := range edges {
				for _, d := range edges {
					s := string([]byte{a, b, c, d})
					out = append(out, s, s+"z")
				}
			}
		}
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		b := make([]byte, 1+rnd.IntN(12))
		for i := range b {
			b[i] = byte(0x70 + rnd.IntN(0x90))
		}
		out = append(out, string(b))
	}
	return out
}

// TestJavaUTF8Oracle: javaString, the fuzz tests' oracle, and the offset keys' encoder (through
// a decoded SourceOffsetKey) both give what Java's new String(bytes, UTF_8) gives, on
// javaCorpus, run through Java (testdata/JavaUTF8.java). Java 17+ is a requirement of the
// suite (the brokers run on it): without it the test skips, and fails under CI=true.
func TestJavaUTF8Oracle(t *testing.T) {
	java, err := exec.LookPath("java")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("java not found: the suite needs Java 17+ (the brokers run on it)")
		}
		t.Skip("java not found: this test compares with Java's UTF-8 decoder")
	}
	corpus := javaCorpus()
	var in strings.Builder
	for _, s := range corpus {
		in.WriteString(hex.EncodeToString([]byte(s)) + "\n")
	}
	cmd := exec.Command(java, "testdata/JavaUTF8.java")
	cmd.Stdin = strings.NewReader(in.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("java testdata/JavaUTF8.java: %v", err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	bad, lines := 0, 0
	for i := 0; sc.Scan(); i++ {
		lines++
		if i >= len(corpus) {
			t.Fatalf("Java printed more lines than the %d it was given", len(corpus))
		}
		want, err := hex.DecodeString(sc.Text())
		if err != nil {
			t.Fatalf("Java's line %d: %v", i+1, err)
		}
		s := corpus[i]
		if got := javaString(s); got != string(want) {
			bad++
			if bad <= 10 {
				t.Errorf("javaString(% x) = % x; Java gives % x", s, got, want)
			}
		}
		key, err := DecodeOffsetKey(SourceOffsetKey(s, "t", 0))
		if err != nil || key.Cluster != string(want) {
			bad++
			if bad <= 10 {
				t.Errorf("SourceOffsetKey(% x, ...) decodes to cluster % x, %v; Java gives % x", s, key.Cluster, err, want)
			}
		}
		if i == len(corpus)-1 && bad == 0 {
			t.Logf("%d byte strings, as Java decodes them", len(corpus))
		}
	}
	if lines != len(corpus) {
		t.Errorf("Java printed %d lines for %d byte strings", lines, len(corpus))
	}
	if bad > 10 {
		t.Errorf("%d differences in all", bad)
	}
}
