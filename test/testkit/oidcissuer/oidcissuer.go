// Package oidcissuer runs a real OpenID Connect issuer on loopback for tests: NAV's
// mock-oauth2-server (Maven Central no.nav.security:mock-oauth2-server, pinned in
// test/kafka/oidc/pom.xml and installed by `test/kafka/kafka.sh install`), started as its own
// JVM process with its standalone main.
//
// The server hosts any number of issuers on one port: the first path segment names the issuer
// ("default", "other", ...), so http://127.0.0.1:<port>/default is one issuer with
// /default/.well-known/openid-configuration, /default/jwks and /default/token. Its token
// endpoint grants client_credentials and answers RS256-signed JWT access tokens with
// sub = the client ID, aud = the requested audience parameter or else the requested scopes, and
// kid = the issuer's name. It does not check client secrets.
//
// The helper gives the default issuer a signing key made here, so that Rotate can restart the
// server on the same port with a new key (key rotation as clients see it: same issuer, new JWKS),
// and Restart with a clock in the past, so that its tokens are already expired when they arrive.
package oidcissuer

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/mm2go/mm2go/test/testkit"
)

// EnvLib names the directory holding the issuer's jars; `kafka.sh env` prints it. Without it the
// default test/kafka/.cache/oidc-lib of the repository is used.
const EnvLib = "MM2GO_TEST_OIDC_LIB"

// DefaultIssuer is the issuer name whose signing key the helper controls.
const DefaultIssuer = "default"

// Options shape the server.
type Options struct {
	// Clock, if set, is the fixed time at which the server mints every token (iat/nbf), e.g. two
	// hours ago for tokens that are expired on arrival.
	Clock time.Time
}

// Server is one running mock-oauth2-server process.
type Server struct {
	// Base is http://127.0.0.1:<port>.
	Base string

	t       testing.TB
	lib     string
	port    int
	logFile string
	key     *rsa.PrivateKey

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Start starts the server or ends the test: a skip when the jars are not installed on a
// developer machine, a failure under CI=true. It stops when the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	lib := os.Getenv(EnvLib)
	if lib == "" {
		lib = filepath.Join(testkit.RepoRoot(t), "test", "kafka", ".cache", "oidc-lib")
	}
	if jars, _ := filepath.Glob(filepath.Join(lib, "mock-oauth2-server-*.jar")); len(jars) == 0 {
		msg := "the OIDC issuer test needs mock-oauth2-server's jars in " + lib + ": run `test/kafka/kafka.sh install`"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + "; CI=true, so this is a failure, not a skip")
		}
		t.Skip(msg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	s := &Server{
		Base: fmt.Sprintf("http://127.0.0.1:%d", port),
		t:    t, lib: lib, port: port,
		logFile: filepath.Join(t.TempDir(), "mock-oauth2-server.log"),
		key:     newKey(t),
	}
	t.Cleanup(s.stop)
	s.launch(t, o)
	return s
}

func newKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Issuer is the issuer URL of issuer name (e.g. DefaultIssuer): the "iss" of its tokens.
func (s *Server) Issuer(name string) string { return s.Base + "/" + name }

// TokenEndpoint is the token endpoint URL of issuer name.
func (s *Server) TokenEndpoint(name string) string { return s.Issuer(name) + "/token" }

// JWKSURL is the JWKS URL of issuer name.
func (s *Server) JWKSURL(name string) string { return s.Issuer(name) + "/jwks" }

// Log returns what the server logged so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.logFile)
	return string(b)
}

// Rotate restarts the server on the same port with a new signing key for the default issuer:
// tokens minted before no longer verify against its JWKS, new ones carry the new key. A
// failure ends t, the calling (sub)test.
func (s *Server) Rotate(t testing.TB, o Options) {
	t.Helper()
	s.stop()
	s.key = newKey(t)
	s.launch(t, o)
}

// Restart restarts the server on the same port with the same key and new options. A failure
// ends t, the calling (sub)test.
func (s *Server) Restart(t testing.TB, o Options) {
	t.Helper()
	s.stop()
	s.launch(t, o)
}

// Token asks issuer name's token endpoint for a client_credentials token (client_secret_post)
// with the given scope and, if not empty, audience parameter, and returns the access token.
func (s *Server) Token(name, clientID, clientSecret, scope, audience string) string {
	s.t.Helper()
	return token(s.t, http.DefaultClient, s.TokenEndpoint(name), clientID, clientSecret, scope, audience)
}

// token asks endpoint for a client_credentials token through client.
func token(t testing.TB, client *http.Client, endpoint, clientID, clientSecret, scope, audience string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {clientID}, "client_secret": {clientSecret}}
	if scope != "" {
		form.Set("scope", scope)
	}
	if audience != "" {
		form.Set("audience", audience)
	}
	resp, err := client.PostForm(endpoint, form)
	if err != nil {
		t.Fatalf("token request to %s: %v", endpoint, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &tr) != nil || tr.AccessToken == "" {
		t.Fatalf("token request to %s: HTTP %d: %s", endpoint, resp.StatusCode, body)
	}
	return tr.AccessToken
}

// config is the server's JSON_CONFIG: Netty, no login page, our key for the default issuer.
func (s *Server) config(t testing.TB, o Options) string {
	t.Helper()
	jwk, err := json.Marshal(jose.JSONWebKey{Key: s.key, KeyID: DefaultIssuer, Algorithm: "RS256", Use: "sig"})
	if err != nil {
		t.Fatal(err)
	}
	provider := map[string]any{"keyProvider": map[string]any{"initialKeys": string(jwk), "algorithm": "RS256"}}
	if !o.Clock.IsZero() {
		provider["systemTime"] = o.Clock.UTC().Format(time.RFC3339)
	}
	cfg := map[string]any{"interactiveLogin": false, "httpServer": "NettyWrapper", "tokenProvider": provider}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// launch starts the server and waits until its default issuer's discovery document answers;
// a failure ends t.
func (s *Server) launch(t testing.TB, o Options) {
	t.Helper()
	logf, err := os.OpenFile(s.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		"-cp", filepath.Join(s.lib, "*"), "no.nav.security.mock.oauth2.StandaloneMockOAuth2ServerKt")
	cmd.Env = append(os.Environ(), "SERVER_HOSTNAME=127.0.0.1", fmt.Sprintf("SERVER_PORT=%d", s.port),
		"JSON_CONFIG="+s.config(t, o))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting mock-oauth2-server: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()

	// Ready when the default issuer's discovery document answers: the JVM starts in about 2 s
	// on an idle machine, 5-8 s at a load of 25 on 2 cores, and more beside other JVMs. No
	// bound of its own: it waits until the process exits or the test binary's -timeout is
	// near, and then fails with the server's log rather than as a timeout's goroutine dump.
	ctx, cancel := context.WithCancel(context.Background())
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if end, has := d.Deadline(); has {
			ctx, cancel = context.WithDeadline(context.Background(), end.Add(-deadlineMargin))
		}
	}
	defer cancel()
	start := time.Now()
	disc := s.Issuer(DefaultIssuer) + "/.well-known/openid-configuration"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, disc, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			ok := resp.StatusCode == http.StatusOK
			resp.Body.Close()
			if ok {
				return
			}
		}
		select {
		case <-exited:
			t.Fatalf("mock-oauth2-server exited during start:\n%s", tail(s.Log(), 30))
		case <-ctx.Done():
			t.Fatalf("mock-oauth2-server did not answer %s in %v, as the test binary's -timeout nears:\n%s", disc, time.Since(start).Round(time.Second), tail(s.Log(), 30))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// deadlineMargin is the time left before the test binary's -timeout when launch gives up
// waiting for the server: enough to fail, stop the processes and print the logs.
const deadlineMargin = 30 * time.Second

// stop ends the process group this helper started and waits until the port is free.
func (s *Server) stop() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	for range 100 {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.port), 100*time.Millisecond); err != nil {
			return
		} else {
			c.Close()
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
