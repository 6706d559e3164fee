package serve

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/protocol"
	"github.com/go-jose/go-jose/v4"
)

// rotatingIssuer is an OIDC issuer on httptest whose one signing key can be swapped, keeping
// its key id, as mock-oauth2-server does when restarted with a new key: its discovery document,
// its key set (the current key only) and tokens signed here.
type rotatingIssuer struct {
	srv *httptest.Server
	mu  sync.Mutex
	key *rsa.PrivateKey
}

func newRotatingIssuer(t *testing.T) *rotatingIssuer {
	t.Helper()
	iss := &rotatingIssuer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": iss.srv.URL, "jwks_uri": iss.srv.URL + "/jwks",
			"id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, _ *http.Request) {
		iss.mu.Lock()
		pub := iss.key.Public()
		iss.mu.Unlock()
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: "k", Algorithm: "RS256", Use: "sig"}}})
	})
	iss.srv = httptest.NewServer(mux)
	t.Cleanup(iss.srv.Close)
	return iss
}

// publish makes key the issuer's only signing key.
func (iss *rotatingIssuer) publish(key *rsa.PrivateKey) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.key = key
}

// token signs a token for sub and aud with key (key id "k"), valid for an hour.
func (iss *rotatingIssuer) token(t *testing.T, key *rsa.PrivateKey, sub, aud string) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: "k"}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	claims, _ := json.Marshal(map[string]any{"iss": iss.srv.URL, "sub": sub, "aud": aud, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	jws, err := sig.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestKeyRotationDropsOldKeyAtOnce: once a token signed with the issuer's new key has been
// accepted (its key set fetched again), a token signed with the key the issuer no longer
// publishes is refused, every time. Each round swaps the issuer's key, keeping its key id, and
// sends a token of the new key, then one of the old.
func TestKeyRotationDropsOldKeyAtOnce(t *testing.T) {
	keys := [2]*rsa.PrivateKey{}
	for i := range keys {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k
	}
	iss := newRotatingIssuer(t)
	iss.publish(keys[0])
	h := NewHTTPHandler(Config{SenderAuth: SenderAuthConfig{keyFetchEvery: time.Nanosecond, Issuer: iss.srv.URL, Audience: sinkAudience}},
		slog.New(slog.DiscardHandler), HandlerFunc(func(context.Context, event.Event) protocol.Result { return nil }))
	send := func(tok string) (int, string) {
		return do(h, binaryRequest("{}", map[string]string{"Authorization": "Bearer " + tok}))
	}
	if code, body := send(iss.token(t, keys[0], trustedSender, sinkAudience)); code != http.StatusOK {
		t.Fatalf("first token: answer %d %q, want 200", code, body)
	}
	const rounds = 500
	accepted := 0
	for i := 1; i <= rounds; i++ {
		cur, old := keys[i%2], keys[(i+1)%2]
		iss.publish(cur)
		if code, body := send(iss.token(t, cur, trustedSender, sinkAudience)); code != http.StatusOK {
			t.Fatalf("round %d: token of the new key: answer %d %q, want 200", i, code, body)
		}
		code, body := send(iss.token(t, old, trustedSender, sinkAudience))
		switch {
		case code == http.StatusOK:
			accepted++
		case code != http.StatusUnauthorized:
			t.Fatalf("round %d: token of the dropped key: answer %d %q, want 401", i, code, body)
		}
	}
	if accepted > 0 {
		t.Errorf("a token of the key the issuer had dropped was accepted after a token of its new key in %d of %d rounds, want 0", accepted, rounds)
	}
}
