// Package secret holds Secret, a string that never prints itself.
//
// It is a leaf package (standard library only) so that both shared/cluster
// and shared/config can use it without an import cycle; shared/config
// re-exports it as config.Secret.
package secret

import (
	"fmt"
	"log/slog"
)

// Redacted is what a Secret prints instead of its value.
const Redacted = "[redacted]"

// Secret is a password, connection string or token. Its String, GoString,
// Format, LogValue, MarshalText and MarshalJSON methods print Redacted, so a
// Secret is safe in errors, fmt output, slog records and JSON; Reveal returns
// the value. The zero Secret is empty.
//
// The value is kept behind a pointer so that even fmt's reflection on an
// unexported Secret field (where methods cannot be called) prints only an
// address. Secrets compare equal with reflect.DeepEqual when their values
// are equal.
type Secret struct {
	p *string
}

// New returns a Secret holding v.
func New(v string) Secret {
	if v == "" {
		return Secret{}
	}
	return Secret{p: &v}
}

// Reveal returns the secret value. Call it only where the value is sent to
// its destination (a SASL handshake, a TLS key parser).
func (s Secret) Reveal() string {
	if s.p == nil {
		return ""
	}
	return *s.p
}

// IsSet reports whether the secret is non-empty.
func (s Secret) IsSet() bool { return s.p != nil && *s.p != "" }

// String implements fmt.Stringer.
func (s Secret) String() string { return Redacted }

// GoString implements fmt.GoStringer.
func (s Secret) GoString() string { return Redacted }

// Format implements fmt.Formatter: every verb prints Redacted.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(Redacted)) }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(Redacted) }

// MarshalText implements encoding.TextMarshaler.
func (s Secret) MarshalText() ([]byte, error) { return []byte(Redacted), nil }

// MarshalJSON implements json.Marshaler.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + Redacted + `"`), nil }

// Decode sets the value; it implements envconfig.Decoder.
func (s *Secret) Decode(v string) error {
	*s = New(v)
	return nil
}
