package serve

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
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
	now := time.Now()
	claims, _ := json.Marshal(map[string]any{"iss": iss.srv.URL, "sub": sub, "aud": aud, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	return compactJWS(t, jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: "k"}}, (&jose.SignerOptions{}).WithType("JWT"), claims)
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

// heldJWKS is a key set endpoint on httptest that the test controls: each request takes the
// keys published when it arrives, says so on arrived, and answers only once the test opened the
// gate (or the client gave up), with status (an error page unless 200).
type heldJWKS struct {
	srv     *httptest.Server
	status  int
	arrived chan struct{}
	gate    chan struct{}
	once    sync.Once

	mu       sync.Mutex
	requests int
	keys     []jose.JSONWebKey
}

func newHeldJWKS(t *testing.T, status int) *heldJWKS {
	t.Helper()
	j := &heldJWKS{status: status, arrived: make(chan struct{}, 64), gate: make(chan struct{})}
	j.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		j.mu.Lock()
		j.requests++
		keys := j.keys
		j.mu.Unlock()
		select {
		case j.arrived <- struct{}{}:
		default:
		}
		select {
		case <-j.gate:
		case <-r.Context().Done():
			return
		}
		if j.status != http.StatusOK {
			http.Error(w, "issuer trouble", j.status)
			return
		}
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: keys})
	}))
	t.Cleanup(j.srv.Close)
	t.Cleanup(j.open) // runs first: lets held requests end before Close waits for them
	return j
}

// open lets held and later requests be answered.
func (j *heldJWKS) open() { j.once.Do(func() { close(j.gate) }) }

// publish makes the public halves of keys the key set, each with its key id.
func (j *heldJWKS) publish(keys map[string]*ecdsa.PrivateKey) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.keys = nil
	for kid, k := range keys {
		j.keys = append(j.keys, jose.JSONWebKey{Key: k.Public(), KeyID: kid, Algorithm: "ES256", Use: "sig"})
	}
}

// count is the number of key set requests so far.
func (j *heldJWKS) count() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.requests
}

// keySet is a keySet for j's URL. timeout only ends a fetch the code under test should not have
// waited for (the gate stays closed), so that such a test fails instead of hanging.
func (j *heldJWKS) keySet(timeout time.Duration) *keySet {
	return &keySet{ctx: context.Background(), url: j.srv.URL + "/jwks", client: &http.Client{Timeout: timeout}, algs: []string{"ES256"}}
}

func ecKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// signed is a compact JWS of a small payload signed with key under key id kid.
func signed(t *testing.T, key *ecdsa.PrivateKey, kid string) string {
	t.Helper()
	return compactJWS(t, jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, nil, []byte(`{"sub":"s"}`))
}

// compactJWS signs payload with key (opts may be nil) and returns the compact serialization.
func compactJWS(t *testing.T, key jose.SigningKey, opts *jose.SignerOptions, payload []byte) string {
	t.Helper()
	sig, err := jose.NewSigner(key, opts)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := sig.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestKeySetWaiterLeavesWhenItsContextEnds: while a key set fetch hangs (the issuer does not
// answer), a verification that needs it returns its own context's error as soon as that context
// ends, whether it started the fetch or found it under way, and starts no fetch of its own.
func TestKeySetWaiterLeavesWhenItsContextEnds(t *testing.T) {
	j := newHeldJWKS(t, http.StatusOK)
	j.publish(map[string]*ecdsa.PrivateKey{"a": ecKey(t)})
	ks := j.keySet(3 * time.Second)
	tok := signed(t, ecKey(t), "b") // a key id the issuer does not publish: anyone can send one

	ctxA, cancelA := context.WithCancel(context.Background())
	errA := make(chan error, 1)
	go func() { _, err := ks.VerifySignature(ctxA, tok); errA <- err }()
	<-j.arrived // A's fetch is under way, held by the issuer

	ctxB, cancelB := context.WithCancel(context.Background())
	cancelB()
	_, errB := ks.VerifySignature(ctxB, tok)
	cancelA()
	eA := <-errA
	fetches := j.count()
	j.open()

	if !errors.Is(eA, context.Canceled) {
		t.Errorf("verification that started the held fetch, its context cancelled: %v, want context.Canceled", eA)
	}
	if !errors.Is(errB, context.Canceled) {
		t.Errorf("verification that found the held fetch under way, its context cancelled: %v, want context.Canceled", errB)
	}
	if fetches != 1 {
		t.Errorf("key set requests before the held one ended: %d, want 1", fetches)
	}
}

// TestKeySetFailedFetchAnswersItsWaiters: verifications that looked at the keys before a fetch
// started all get that fetch's outcome, its error too, rather than fetching again one after
// another (each behind the previous one's timeout while the issuer hangs).
func TestKeySetFailedFetchAnswersItsWaiters(t *testing.T) {
	j := newHeldJWKS(t, http.StatusInternalServerError)
	ks := j.keySet(3 * time.Second)
	tok := signed(t, ecKey(t), "b")
	const waiters = 4
	var looked sync.WaitGroup
	looked.Add(waiters)
	allLooked := make(chan struct{})
	ks.looked = func() { looked.Done(); <-allLooked }
	errs := make(chan error, waiters)
	for range waiters {
		go func() { _, err := ks.VerifySignature(context.Background(), tok); errs <- err }()
	}
	looked.Wait()
	close(allLooked)
	<-j.arrived
	j.open()
	for range waiters {
		if err := <-errs; err == nil || !strings.Contains(err.Error(), "500") {
			t.Errorf("verification while the issuer answers 500: %v, want the fetch's error", err)
		}
	}
	if n := j.count(); n != 1 {
		t.Errorf("%d verifications that looked before the first fetch failed made %d key set requests, want 1 (its error shared)", waiters, n)
	}
}

// TestKeySetWaitsForFetchStartedAfterItLooked: a token of the issuer's new key that arrives
// while a fetch started before the rotation is under way is verified by a fetch started after
// it looked, not refused with the old keys that fetch brings.
func TestKeySetWaitsForFetchStartedAfterItLooked(t *testing.T) {
	j := newHeldJWKS(t, http.StatusOK)
	oldKey, newKey := ecKey(t), ecKey(t)
	j.publish(map[string]*ecdsa.PrivateKey{"k": oldKey})
	ks := j.keySet(3 * time.Second)
	looked := make(chan struct{}, 2)
	ks.looked = func() { looked <- struct{}{} }

	errA := make(chan error, 1)
	go func() { _, err := ks.VerifySignature(context.Background(), signed(t, oldKey, "k")); errA <- err }()
	<-looked
	<-j.arrived // A's fetch is held; it answers the old key
	j.publish(map[string]*ecdsa.PrivateKey{"k": newKey})
	errB := make(chan error, 1)
	go func() { _, err := ks.VerifySignature(context.Background(), signed(t, newKey, "k")); errB <- err }()
	<-looked // B found no key while A's fetch, started before the rotation, is under way
	j.open()

	if err := <-errA; err != nil {
		t.Errorf("token of the old key, fetch started before the rotation: %v, want verified", err)
	}
	if err := <-errB; err != nil {
		t.Errorf("token of the new key, looked after the held fetch started: %v, want verified by a fetch started after it looked", err)
	}
}

// TestKeySetErrorsNameWhatFailed: a failed verification says which key set URL a failed fetch
// was for and, when no key signed the token, the token's key id; never the token.
func TestKeySetErrorsNameWhatFailed(t *testing.T) {
	key := ecKey(t)
	tok := signed(t, key, "gone")
	var errs []error

	j := newHeldJWKS(t, http.StatusInternalServerError)
	j.open()
	ks := j.keySet(3 * time.Second)
	_, err := ks.VerifySignature(context.Background(), tok)
	if err == nil || !strings.Contains(err.Error(), "fetching keys: ") || !strings.Contains(err.Error(), ks.url) || !strings.Contains(err.Error(), "500") {
		t.Errorf("key set answering 500: %v, want 'fetching keys: ', %s and the status", err, ks.url)
	}
	errs = append(errs, err)

	dead := newHeldJWKS(t, http.StatusOK)
	ks = dead.keySet(3 * time.Second)
	dead.open()
	dead.srv.Close()
	_, err = ks.VerifySignature(context.Background(), tok)
	if err == nil || !strings.Contains(err.Error(), ks.url) {
		t.Errorf("unreachable key set: %v, want %s", err, ks.url)
	}
	errs = append(errs, err)

	ok := newHeldJWKS(t, http.StatusOK)
	ok.publish(map[string]*ecdsa.PrivateKey{"current": ecKey(t)})
	ok.open()
	ks = ok.keySet(3 * time.Second)
	_, err = ks.VerifySignature(context.Background(), tok)
	if err == nil || !strings.Contains(err.Error(), `"gone"`) || !strings.Contains(err.Error(), ks.url) {
		t.Errorf("token of a key id the key set lacks: %v, want its key id %q and %s", err, "gone", ks.url)
	}
	errs = append(errs, err)

	for _, e := range errs {
		if e != nil && strings.Contains(e.Error(), tok) {
			t.Errorf("error quotes the token: %v", e)
		}
	}
}

// TestSenderAuthRequestEndedWhileVerifying: a request whose context ended while its token's key
// was not known (the dispatcher went away, or the server is shutting down) gets 503, which
// KafkaSource retries, not 401, which sends the event to the dead-letter sink.
func TestSenderAuthRequestEndedWhileVerifying(t *testing.T) {
	iss := newRotatingIssuer(t)
	key, other := rsaKey(t), rsaKey(t)
	iss.publish(key)
	h := NewHTTPHandler(Config{SenderAuth: SenderAuthConfig{keyFetchEvery: time.Nanosecond, Issuer: iss.srv.URL, Audience: sinkAudience}},
		slog.New(slog.DiscardHandler), HandlerFunc(func(context.Context, event.Event) protocol.Result { return nil }))
	if code, body := do(h, binaryRequest("{}", map[string]string{"Authorization": "Bearer " + iss.token(t, key, trustedSender, sinkAudience)})); code != http.StatusOK {
		t.Fatalf("token of the issuer's key: answer %d %q, want 200", code, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := binaryRequest("{}", map[string]string{"Authorization": "Bearer " + iss.token(t, other, trustedSender, sinkAudience)}).WithContext(ctx)
	if code, body := do(h, req); code != http.StatusServiceUnavailable {
		t.Errorf("request ended while its token's key was unknown: answer %d %q, want 503", code, body)
	}
}

func rsaKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
