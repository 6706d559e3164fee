package serve

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/protocol"
	"github.com/go-jose/go-jose/v4"

	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/oidcissuer"
)

// Knative's sender identities: the OIDC service account of a KafkaSource, and another one.
const (
	trustedSender = "system:serviceaccount:mm2go:kafkasource-mm2go-mirror-oidc"
	otherSender   = "system:serviceaccount:default:curl"
	sinkAudience  = "mm2go-mirror"
)

// TestSenderAuth runs the sender authentication against a real OIDC issuer
// (mock-oauth2-server): its discovery document, its JWKS, tokens from its token endpoint.
func TestSenderAuth(t *testing.T) {
	iss := oidcissuer.Start(t, oidcissuer.Options{})
	var logs testkit.SyncBuffer
	handled := 0
	h := NewHTTPHandler(Config{SenderAuth: SenderAuthConfig{keyFetchEvery: time.Millisecond,
		Issuer:          iss.Issuer(oidcissuer.DefaultIssuer),
		Audience:        sinkAudience,
		AllowedSubjects: []string{trustedSender, "system:serviceaccount:trusted-ns:*"},
	}}, slog.New(slog.NewTextHandler(&logs, nil)), HandlerFunc(func(context.Context, event.Event) protocol.Result {
		handled++
		return nil
	}))
	token := func(sub, aud string) string {
		// mock-oauth2-server puts the requested scopes into "aud".
		return iss.Token(oidcissuer.DefaultIssuer, sub, "unused", aud, "")
	}
	send := func(t *testing.T, authz string) (int, string) {
		t.Helper()
		hdr := map[string]string{}
		if authz != "" {
			hdr["Authorization"] = authz
		}
		return do(h, binaryRequest("{}", hdr))
	}
	// refused checks the status and the one-line reason, and that neither the answer nor the
	// log holds the token.
	refused := func(t *testing.T, tok string, authz string, wantStatus int, wantReason string) {
		t.Helper()
		before := handled
		code, body := send(t, authz)
		if code != wantStatus || !strings.Contains(body, wantReason) {
			t.Errorf("answer %d %q, want %d with %q", code, body, wantStatus, wantReason)
		}
		if strings.Count(strings.TrimSpace(body), "\n") != 0 {
			t.Errorf("reason is not one line: %q", body)
		}
		if handled != before {
			t.Errorf("a refused event reached the handler")
		}
		if tok != "" {
			sig := tok[strings.LastIndexByte(tok, '.')+1:]
			if sig == "" {
				sig = tok
			}
			if strings.Contains(body, sig) || strings.Contains(logs.String(), sig) || strings.Contains(logs.String(), tok) {
				t.Errorf("the token leaked into the answer or the log:\n%s\n%s", body, logs.String())
			}
		}
	}

	good := token(trustedSender, sinkAudience)
	t.Run("accepted", func(t *testing.T) {
		if code, body := send(t, "Bearer "+good); code != http.StatusOK {
			t.Fatalf("answer %d %q, want 200", code, body)
		}
		if code, body := send(t, "Bearer "+token("system:serviceaccount:trusted-ns:any", sinkAudience)); code != http.StatusOK {
			t.Fatalf("prefix-allowed subject: answer %d %q, want 200", code, body)
		}
		if handled != 2 {
			t.Fatalf("handled %d events, want 2", handled)
		}
	})
	t.Run("missing token", func(t *testing.T) {
		refused(t, "", "", http.StatusUnauthorized, "sender authentication: missing Authorization: Bearer token")
		refused(t, "", "Basic YWxpY2U6eA==", http.StatusUnauthorized, "not a Bearer token")
	})
	t.Run("wrong audience", func(t *testing.T) {
		tok := token(trustedSender, "some-other-sink")
		refused(t, tok, "Bearer "+tok, http.StatusUnauthorized, `invalid token: oidc: expected audience "mm2go-mirror"`)
	})
	t.Run("unsigned", func(t *testing.T) {
		// The issuer's own claims with alg "none" and no signature.
		parts := strings.Split(good, ".")
		none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
		refused(t, none, "Bearer "+none, http.StatusUnauthorized, "invalid token: oidc: malformed jwt")
	})
	t.Run("tampered", func(t *testing.T) {
		parts := strings.Split(good, ".")
		claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
		forged := bytes.Replace(claims, []byte(trustedSender), []byte(otherSender), 1)
		tok := parts[0] + "." + base64.RawURLEncoding.EncodeToString(forged) + "." + parts[2]
		refused(t, tok, "Bearer "+tok, http.StatusUnauthorized, "invalid token: failed to verify signature")
	})
	t.Run("other issuer", func(t *testing.T) {
		// Same server, another issuer: its own "iss" and its own key, which the configured
		// issuer's JWKS does not hold (go-oidc checks the signature before the "iss").
		tok := iss.Token("other", trustedSender, "unused", sinkAudience, "")
		refused(t, tok, "Bearer "+tok, http.StatusUnauthorized, "invalid token: failed to verify signature")
	})
	t.Run("subject not allowed", func(t *testing.T) {
		tok := token(otherSender, sinkAudience)
		refused(t, tok, "Bearer "+tok, http.StatusForbidden, `sender authentication: subject "system:serviceaccount:default:curl" is not allowed (MM2_SERVE_OIDC_ALLOWED_SUBJECTS)`)
	})
	t.Run("key rotation", func(t *testing.T) {
		iss.Rotate(t, oidcissuer.Options{})
		// The verifier has the old key cached; a token signed with the new one makes it fetch
		// the JWKS again.
		if code, body := send(t, "Bearer "+token(trustedSender, sinkAudience)); code != http.StatusOK {
			t.Fatalf("token signed with the rotated key: answer %d %q, want 200", code, body)
		}
		refused(t, good, "Bearer "+good, http.StatusUnauthorized, "invalid token: failed to verify signature")
	})
	t.Run("expired", func(t *testing.T) {
		// The same issuer and key, its clock two hours back: tokens for one hour, expired now.
		iss.Restart(t, oidcissuer.Options{Clock: time.Now().Add(-2 * time.Hour)})
		tok := token(trustedSender, sinkAudience)
		refused(t, tok, "Bearer "+tok, http.StatusUnauthorized, "invalid token: oidc: token is expired")
	})
	t.Run("probes stay open", func(t *testing.T) {
		code, _ := do(h, mustRequest(t, http.MethodGet, "/healthz"))
		if code != http.StatusOK {
			t.Fatalf("/healthz answered %d without a token, want 200", code)
		}
	})
}

func mustRequest(t *testing.T, method, path string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestSenderAuthSettings checks that Run refuses bad settings, naming them, and that an issuer
// that cannot be reached gives 503 (retried by KafkaSource), not a crash.
func TestSenderAuthSettings(t *testing.T) {
	for _, tc := range []struct {
		cfg  SenderAuthConfig
		want string
	}{
		{SenderAuthConfig{Issuer: "https://issuer.example"}, "MM2_SERVE_OIDC_AUDIENCE is required with MM2_SERVE_OIDC_ISSUER"},
		{SenderAuthConfig{Issuer: "issuer.example", Audience: "a"}, `MM2_SERVE_OIDC_ISSUER: "issuer.example" is not an http(s) URL`},
		{SenderAuthConfig{Issuer: "https://issuer.example", Audience: "a", AllowedSubjects: []string{"a*b"}}, "MM2_SERVE_OIDC_ALLOWED_SUBJECTS"},
		{SenderAuthConfig{Issuer: "https://issuer.example", Audience: "a", CAFile: "/nonexistent/ca.pem"}, "MM2_SERVE_OIDC_CA_FILE: reading the issuer CA bundle"},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		err = Run(context.Background(), Config{Listener: ln, SenderAuth: tc.cfg}, quietLogger(), HandlerFunc(ok))
		ln.Close()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run(%+v) = %v, want an error with %q", tc.cfg, err, tc.want)
		}
	}

	// An issuer that does not answer: 503 with the reason, and the next request tries again.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String()
	ln.Close()
	h := NewHTTPHandler(Config{SenderAuth: SenderAuthConfig{Issuer: dead, Audience: "a"}}, quietLogger(), HandlerFunc(ok))
	code, body := do(h, binaryRequest("{}", map[string]string{"Authorization": "Bearer x.y.z"}))
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "sender authentication: discovering issuer "+dead+" (MM2_SERVE_OIDC_ISSUER) failed") {
		t.Errorf("unreachable issuer: answer %d %q, want 503 naming the issuer", code, body)
	}
}

// TestCheckPayloadAuth: payload mode needs sender authentication and a subject list (the
// dispatcher's identity): issuer and audience alone let any workload of the issuer write records.
func TestCheckPayloadAuth(t *testing.T) {
	for _, cfg := range []SenderAuthConfig{{}, {Issuer: "https://i", Audience: "a"}} {
		if err := CheckPayloadAuth(cfg); !errors.Is(err, ErrNoSenderAuth) || !strings.Contains(err.Error(), EnvOIDCAllowedSubjects) {
			t.Errorf("payload with %+v: %v, want ErrNoSenderAuth naming %s", cfg, err, EnvOIDCAllowedSubjects)
		}
	}
	if err := CheckPayloadAuth(SenderAuthConfig{Issuer: "https://i", Audience: "a", AllowedSubjects: []string{"system:serviceaccount:ns:src"}}); err != nil {
		t.Errorf("payload with sender auth and a subject list: %v", err)
	}
}

// TestPlainHTTPIssuer: an http:// issuer's keys can be served by anyone on the path, so
// payload mode (whose sender's token decides what is written) refuses it, naming the setting;
// fetch mode starts with a WARN naming it.
func TestPlainHTTPIssuer(t *testing.T) {
	cfg := SenderAuthConfig{Issuer: "http://issuer.example/default", Audience: "a", AllowedSubjects: []string{"system:serviceaccount:ns:src"}}
	if err := CheckPayloadAuth(cfg); err == nil || !strings.Contains(err.Error(), EnvOIDCIssuer) || !strings.Contains(err.Error(), "https") {
		t.Errorf("payload mode with an http issuer: %v, want a refusal naming %s and https", err, EnvOIDCIssuer)
	}
	var logs bytes.Buffer
	NewHTTPHandler(Config{SenderAuth: cfg}, slog.New(slog.NewTextHandler(&logs, nil)), HandlerFunc(ok))
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), EnvOIDCIssuer+" is plain http") {
		t.Errorf("fetch mode with an http issuer logged %q, want a WARN naming %s", logs.String(), EnvOIDCIssuer)
	}
}

// TestSenderAuthIssuerToken (F4): with a token file, the discovery request to the issuer's own
// https host carries its token, and so does the key set request to the host its discovery names
// over https (not one over plain http); an http issuer with a token file is refused; and 50
// tokens signed with a key the issuer does not list cost one key set fetch, not 50.
func TestSenderAuthIssuerToken(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/token"
	if err := os.WriteFile(file, []byte("pod-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var jwksAuth []string
	keys := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		jwksAuth = append(jwksAuth, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"keys":[]}`))
	}))
	defer keys.Close()
	var discoveryAuth string
	var issuer *httptest.Server
	issuer = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		discoveryAuth = r.Header.Get("Authorization")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"issuer":%q,"jwks_uri":%q,"id_token_signing_alg_values_supported":["RS256"]}`, issuer.URL, keys.URL+"/jwks")
	}))
	defer issuer.Close()
	ca := dir + "/ca.pem"
	var pemBytes []byte
	for _, srv := range []*httptest.Server{issuer, keys} {
		pemBytes = append(pemBytes, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})...)
	}
	if err := os.WriteFile(ca, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}

	if _, err := newSenderAuth(context.Background(), SenderAuthConfig{Issuer: "http://issuer.example", Audience: "a", TokenFile: file}, quietLogger()); err == nil ||
		!strings.Contains(err.Error(), EnvOIDCTokenFile+" needs an https "+EnvOIDCIssuer) {
		t.Errorf("token file with an http issuer: %v, want it refused", err)
	}

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: "unknown"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(fmt.Appendf(nil, `{"iss":%q,"aud":"a","sub":"s","exp":%d}`, issuer.URL, time.Now().Add(time.Hour).Unix()))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	h := NewHTTPHandler(Config{SenderAuth: SenderAuthConfig{Issuer: issuer.URL, Audience: "a", TokenFile: file, CAFile: ca, AllowedSubjects: []string{"s"}}}, quietLogger(), HandlerFunc(ok))
	for range 50 {
		// 401 after the key set fetch; 503 (retried) while a new fetch is not due yet.
		if code, body := do(h, binaryRequest("{}", map[string]string{"Authorization": "Bearer " + tok})); code != http.StatusUnauthorized && code != http.StatusServiceUnavailable {
			t.Fatalf("token signed with an unknown key: answer %d %q, want 401 or 503", code, body)
		}
	}
	mu.Lock()
	if discoveryAuth != "Bearer pod-token" {
		t.Errorf("discovery request to the issuer carried Authorization %q, want the token file's", discoveryAuth)
	}
	if len(jwksAuth) != 1 {
		t.Errorf("%d key set fetches for 50 tokens with an unknown key, want 1", len(jwksAuth))
	}
	for _, a := range jwksAuth {
		if a != "Bearer pod-token" {
			t.Errorf("key set request to the host the issuer's discovery named over https carried Authorization %q, want the token file's", a)
		}
	}
	mu.Unlock()

	// A jwks_uri over plain http gets no token, even from an https issuer.
	var plainAuth []string
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		plainAuth = append(plainAuth, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"keys":[]}`))
	}))
	defer plain.Close()
	var issuer2 *httptest.Server
	issuer2 = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"issuer":%q,"jwks_uri":%q,"id_token_signing_alg_values_supported":["RS256"]}`, issuer2.URL, plain.URL+"/jwks")
	}))
	defer issuer2.Close()
	ca2 := dir + "/ca2.pem"
	if err := os.WriteFile(ca2, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: issuer2.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	h = NewHTTPHandler(Config{SenderAuth: SenderAuthConfig{Issuer: issuer2.URL, Audience: "a", TokenFile: file, CAFile: ca2, AllowedSubjects: []string{"s"}}}, quietLogger(), HandlerFunc(ok))
	do(h, binaryRequest("{}", map[string]string{"Authorization": "Bearer " + tok}))
	mu.Lock()
	defer mu.Unlock()
	if len(plainAuth) != 1 || plainAuth[0] != "" {
		t.Errorf("key set requests over plain http carried Authorization %q, want one request without", plainAuth)
	}
}

// TestSenderAuthWarnsWithoutSubjects: sender authentication without a subject list trusts every
// workload of the issuer; the server says so at start, naming the setting.
func TestSenderAuthWarnsWithoutSubjects(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	NewHTTPHandler(Config{SenderAuth: SenderAuthConfig{Issuer: "https://issuer.example", Audience: "mm2go"}}, logger, HandlerFunc(ok))
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), EnvOIDCAllowedSubjects) {
		t.Fatalf("start without a subject list logged %q, want a WARN naming %s", logs.String(), EnvOIDCAllowedSubjects)
	}
	logs.Reset()
	NewHTTPHandler(Config{SenderAuth: SenderAuthConfig{Issuer: "https://issuer.example", Audience: "mm2go", AllowedSubjects: []string{"system:serviceaccount:ns:src"}}}, logger, HandlerFunc(ok))
	if strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("start with a subject list logged %q, want no WARN", logs.String())
	}
}

// TestSenderAuthAPIServerIssuer: an issuer shaped like a Kubernetes API server's service
// account issuer (kubeadm, kind, k3s): discovery on the issuer's host, the key set on another
// host (the API server's advertise address) named by the discovery document's jwks_uri, both
// answering only requests carrying the pod's token. The real issuer (mock-oauth2-server) behind
// an HTTPS front plays it. A valid token is accepted (200); the token file went to those two
// hosts, the ones the operator named (the issuer) and the issuer named over TLS (jwks_uri).
func TestSenderAuthAPIServerIssuer(t *testing.T) {
	iss := oidcissuer.Start(t, oidcissuer.Options{})
	front := iss.StartTLSFront(t, oidcissuer.FrontOptions{Token: "pod-token", KeysElsewhere: true})
	file := t.TempDir() + "/token"
	if err := os.WriteFile(file, []byte("pod-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := NewHTTPHandler(Config{SenderAuth: SenderAuthConfig{Issuer: front.Issuer(oidcissuer.DefaultIssuer), Audience: sinkAudience,
		AllowedSubjects: []string{trustedSender}, CAFile: front.CAFile, TokenFile: file}}, quietLogger(), HandlerFunc(ok))
	tok := front.Token(oidcissuer.DefaultIssuer, trustedSender, sinkAudience)
	if code, body := do(h, binaryRequest("{}", map[string]string{"Authorization": "Bearer " + tok})); code != http.StatusOK {
		t.Fatalf("valid token, key set on the API server's advertise address: answer %d %q, want 200", code, body)
	}
	for _, base := range []string{front.URL, front.KeysURL} {
		seen := front.Seen(base)
		if len(seen) == 0 {
			t.Errorf("no request reached %s", base)
		}
		for _, a := range seen {
			if a != "Bearer pod-token" {
				t.Errorf("a request to %s carried Authorization %q, want the token file's", base, a)
			}
		}
	}
}

// TestSubjectEventTypes: MM2_SERVE_OIDC_SUBJECT_EVENT_TYPES ties subjects to the event types
// they may send (Knative EventPolicy's filters on a policy's senders): the ping source's
// identity may send ticks but not record events (403, the handler not called), the KafkaSource's
// identity record events; a subject without an entry sends any type. Tokens from the real
// issuer.
func TestSubjectEventTypes(t *testing.T) {
	iss := oidcissuer.Start(t, oidcissuer.Options{})
	const ping, kafka, other = "system:serviceaccount:mm2go:ping-oidc", "system:serviceaccount:mm2go:kafkasource-oidc", "system:serviceaccount:mm2go:admin"
	handled := 0
	h := NewHTTPHandler(Config{SenderAuth: SenderAuthConfig{Issuer: iss.Issuer(oidcissuer.DefaultIssuer), Audience: sinkAudience,
		AllowedSubjects:   []string{ping, kafka, other},
		SubjectEventTypes: []string{ping + "=dev.knative.sources.ping", "system:serviceaccount:mm2go:kafkasource-*=dev.knative.kafka.event|com.example.*"},
	}}, quietLogger(), HandlerFunc(func(context.Context, event.Event) protocol.Result { handled++; return nil }))
	send := func(sub, typ string) (int, string) {
		t.Helper()
		tok := iss.Token(oidcissuer.DefaultIssuer, sub, "unused", sinkAudience, "")
		return do(h, binaryRequest("{}", map[string]string{"Authorization": "Bearer " + tok, "ce-type": typ}))
	}
	for _, tc := range []struct {
		sub, typ string
		want     int
	}{
		{ping, "dev.knative.sources.ping", 200},
		{ping, "dev.knative.kafka.event", 403},
		{kafka, "dev.knative.kafka.event", 200},
		{kafka, "com.example.order", 200},
		{kafka, "dev.knative.sources.ping", 403},
		{other, "dev.knative.kafka.event", 200},
	} {
		before := handled
		code, body := send(tc.sub, tc.typ)
		if code != tc.want || (code == 403) != (handled == before) {
			t.Errorf("%s sending %s: answer %d %q (handler called %d times), want %d", tc.sub, tc.typ, code, body, handled-before, tc.want)
		}
	}
	if err := (SenderAuthConfig{Issuer: "https://i", Audience: "a", SubjectEventTypes: []string{"no-equals-sign"}}).Validate(); err == nil || !strings.Contains(err.Error(), EnvOIDCSubjectEventTypes) {
		t.Errorf("an entry without '=': %v, want an error naming %s", err, EnvOIDCSubjectEventTypes)
	}
}
