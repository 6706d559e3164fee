package cluster

import (
	"strings"
	"testing"
)

// FuzzParseJAAS: any sasl.jaas.config text parses or fails with an error, never a panic; a
// parsed entry names its login module and control flag, and an error never quotes an option's
// value (it may be a password). Seeds: testdata/fuzz/FuzzParseJAAS.
func FuzzParseJAAS(f *testing.F) {
	f.Add(`org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";`)
	f.Add(`org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="c" clientSecret="s\"q" scope="a b";`)
	f.Fuzz(func(t *testing.T, s string) {
		entries, err := parseJAAS(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error: %q", err)
			}
			return
		}
		for _, e := range entries {
			if e.loginModule == "" || e.controlFlag == "" {
				t.Errorf("entry without module or flag: %+v from %q", e, s)
			}
		}
	})
}
