package secret

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
)

func TestSecretNeverPrints(t *testing.T) {
	const value = "hunter2-very-secret"
	s := New(value)
	type holder struct {
		Pass   Secret
		hidden Secret
		Ptr    *Secret
	}
	h := holder{Pass: s, hidden: s, Ptr: &s}
	var outs []string
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
		outs = append(outs, fmt.Sprintf(format, s), fmt.Sprintf(format, h))
	}
	outs = append(outs, s.String(), s.GoString(), fmt.Sprint(s), fmt.Errorf("bad: %v", h).Error())
	j, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	outs = append(outs, string(j))
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	logger.Info("x", "secret", s, "holder", h)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "secret", s, "holder", h)
	outs = append(outs, buf.String())
	for _, out := range outs {
		if strings.Contains(out, value) || strings.Contains(out, fmt.Sprintf("%x", value)) {
			t.Errorf("secret leaked: %s", out)
		}
	}
	if !strings.Contains(string(j), `"Pass":"[redacted]"`) {
		t.Errorf("json = %s", j)
	}
	if s.Reveal() != value || !s.IsSet() {
		t.Errorf("Reveal = %q", s.Reveal())
	}
}

func TestSecretZeroAndDecode(t *testing.T) {
	var z Secret
	if z.IsSet() || z.Reveal() != "" || New("") != z {
		t.Errorf("zero secret not empty")
	}
	var d Secret
	if err := d.Decode("x"); err != nil || d.Reveal() != "x" {
		t.Errorf("Decode: %v %q", err, d.Reveal())
	}
	if !reflect.DeepEqual(New("a"), New("a")) || reflect.DeepEqual(New("a"), New("b")) {
		t.Errorf("DeepEqual does not compare values")
	}
}
