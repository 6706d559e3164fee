package mm2

import (
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mm2go/mm2go/test/testkit"
)

// illFormedUTF8 are byte strings that are not UTF-8: truncated sequences (maximal subparts
// that Java's decoder turns into one U+FFFD each), bytes that never start a sequence, encoded
// surrogates, overlong forms and code points above U+10FFFF.
var illFormedUTF8 = []string{
	"\xe2\x82", "\xe2\x82x", "a\xe2\x82\xe2\x82\xacb", "\xf0\x9f\x98", "\xf0\x9f\x98\xf0\x9f\x98",
	"\xf0\x9f", "\xf0", "\xc2", "\xe0\xa0", "\xf0\x90\x80", "\xf1\x80\x80", "\xf4\x8f\xbf", "\xed\x9f",
	"\xed\xa0\x80", "\xed\xbf\xbf", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xe0\x9f\xbf", "\xf0\x80\x80\x80",
	"\xf0\x8f\xbf\xbf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xf8\x88\x80\x80\x80", "\xfe\xff", "\x80",
	"\x80\xbf\x80", "\xe2\x82\x82\x82", "\xe2\x82\"", "\xf0\x9f\x98\n", "a\xffb", "\xff",
}

// TestJSONStringMatchesJsonConverter writes strings through appendJSONString and through the
// genuine JsonConverter of Connect's offsets topic (test/java/MM2Rules json, with the bytes
// decoded as Kafka's protocol reader decodes a group name) and requires the same bytes, alone
// and inside a checkpoint's Connect offsets key: TestJacksonEscaping's table, the ill-formed
// sequences above and random strings of bytes likely to form (or break) UTF-8 sequences.
func TestJSONStringMatchesJsonConverter(t *testing.T) {
	inputs := []string{"plain", `q"b\s/`, "\b\t\n\f\r", "\x00\x01\x1f\x0b\x7f", "<a>&b", "é€😀\u2028\u2029", "\uFFFD", ""}
	inputs = append(inputs, illFormedUTF8...)
	rng := rand.New(rand.NewPCG(35, 2))
	alphabet := []byte{'a', '"', '\\', 0x01, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc2, 0xdf, 0xe0, 0xe1, 0xed, 0xef, 0xf0, 0xf1, 0xf4, 0xf5, 0xff}
	for range 300 {
		b := make([]byte, 1+rng.IntN(8))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		inputs = append(inputs, string(b))
	}
	var stdin strings.Builder
	for _, in := range inputs {
		stdin.WriteString(hex.EncodeToString([]byte(in)) + "\n")
	}
	out := strings.Split(strings.TrimSuffix(testkit.Java(t, "MM2Rules", stdin.String(), "json"), "\n"), "\n")
	if len(out) != len(inputs) {
		t.Fatalf("MM2Rules json answered %d lines for %d strings", len(out), len(inputs))
	}
	bad := 0
	for i, in := range inputs {
		str, key, ok := strings.Cut(out[i], "\t")
		wantStr, err1 := hex.DecodeString(str)
		wantKey, err2 := hex.DecodeString(key)
		if !ok || err1 != nil || err2 != nil {
			t.Fatalf("bad MM2Rules json line %q", out[i])
		}
		gotStr := appendJSONString(nil, in)
		gotKey := CheckpointOffsetKey("t", 0, in)
		if string(gotStr) != string(wantStr) || string(gotKey) != string(wantKey) {
			if bad++; bad <= 10 {
				t.Errorf("%q: mm2go writes %q, key %q; JsonConverter %q, key %q", in, gotStr, gotKey, wantStr, wantKey)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d strings written differently from JsonConverter", bad, len(inputs))
	}
}
