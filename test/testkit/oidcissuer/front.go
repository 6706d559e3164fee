package oidcissuer

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// FrontOptions shape a Front.
type FrontOptions struct {
	// Token, if set, is the bearer token the front requires on discovery and key set requests
	// (401 without it), as a Kubernetes API server does for its service account issuer unless
	// anonymous discovery is granted.
	Token string
	// KeysElsewhere serves the key set on a second host and names it in the discovery
	// document's jwks_uri, as an API server does: its issuer is
	// https://kubernetes.default.svc.cluster.local, its jwks_uri the advertise address
	// (https://<node IP>:6443/openid/v1/jwks).
	KeysElsewhere bool
}

// Front serves the issuer over HTTPS (an httptest TLS server proxying to the real issuer with
// X-Forwarded-Proto: https, so the issuer names itself https://<front>/<name> in its discovery
// document and in its tokens' iss).
type Front struct {
	// URL is the front's base, https://127.0.0.1:<port>; Issuer(name) is URL + "/" + name.
	URL string
	// KeysURL is the base of the key set's host (URL unless KeysElsewhere).
	KeysURL string
	// CAFile is a PEM file trusted for both hosts.
	CAFile string

	t       testing.TB // StartTLSFront's; nil from NewFront
	client  *http.Client
	closers []func()
	mu      sync.Mutex
	seen    map[string][]string // host -> Authorization headers of discovery and key set requests
}

// StartTLSFront starts a Front for s; it stops when the test ends.
func (s *Server) StartTLSFront(t testing.TB, o FrontOptions) *Front {
	t.Helper()
	f, err := NewFront(s.Base, o, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f.t = t
	t.Cleanup(f.Close)
	return f
}

// NewFront starts a Front for the issuer server at base (http://127.0.0.1:<port>), writing its
// CA file into dir; Close stops it. For programs that are not tests (the bench); tests use
// Server.StartTLSFront.
func NewFront(base string, o FrontOptions, dir string) (*Front, error) {
	f := &Front{seen: map[string][]string{}}
	target, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	var keys *httptest.Server
	handler := func(rewriteKeys bool) http.Handler {
		proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host // the issuer builds its URLs from the front's host
			r.Out.Header.Set("X-Forwarded-Proto", "https")
			r.Out.Header.Del("Accept-Encoding")
		}}
		if rewriteKeys {
			proxy.ModifyResponse = func(resp *http.Response) error {
				if !strings.HasSuffix(resp.Request.URL.Path, "/.well-known/openid-configuration") || keys == nil {
					return nil
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					return err
				}
				var doc map[string]any
				if err := json.Unmarshal(b, &doc); err != nil {
					return err
				}
				if u, ok := doc["jwks_uri"].(string); ok {
					if pu, err := url.Parse(u); err == nil {
						doc["jwks_uri"] = keys.URL + pu.Path
					}
				}
				if b, err = json.Marshal(doc); err != nil {
					return err
				}
				resp.Body = io.NopCloser(bytes.NewReader(b))
				resp.ContentLength = int64(len(b))
				resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
				return nil
			}
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasSuffix(r.URL.Path, "/token") {
				authz := r.Header.Get("Authorization")
				f.mu.Lock()
				f.seen[r.Host] = append(f.seen[r.Host], authz)
				f.mu.Unlock()
				if o.Token != "" && authz != "Bearer "+o.Token {
					http.Error(w, "Unauthorized", http.StatusUnauthorized)
					return
				}
			}
			proxy.ServeHTTP(w, r)
		})
	}
	front := httptest.NewTLSServer(handler(o.KeysElsewhere))
	f.closers = append(f.closers, front.Close)
	f.URL, f.KeysURL, f.client = front.URL, front.URL, front.Client()
	certs := [][]byte{front.Certificate().Raw}
	if o.KeysElsewhere {
		keys = httptest.NewTLSServer(handler(false))
		f.closers = append(f.closers, keys.Close)
		f.KeysURL = keys.URL
		certs = append(certs, keys.Certificate().Raw)
	}
	var ca []byte
	for _, c := range certs {
		ca = append(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c})...)
	}
	f.CAFile = filepath.Join(dir, "front-ca.pem")
	if err := os.WriteFile(f.CAFile, ca, 0o600); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Close stops the front's servers.
func (f *Front) Close() {
	for _, c := range f.closers {
		c()
	}
	f.closers = nil
}

// Client returns an HTTP client that trusts the front (for its token endpoint).
func (f *Front) Client() *http.Client { return f.client }

// Issuer returns the https URL of issuer name.
func (f *Front) Issuer(name string) string { return f.URL + "/" + name }

// Token asks issuer name's token endpoint, through the front, for a client_credentials token
// whose sub is clientID and aud is audience (its iss is the front's https issuer).
func (f *Front) Token(name, clientID, audience string) string {
	f.t.Helper()
	return token(f.t, f.client, f.Issuer(name)+"/token", clientID, "unused", audience, "")
}

// Seen returns the Authorization headers of the discovery and key set requests that reached
// the host of base (URL or KeysURL), in order.
func (f *Front) Seen(base string) []string {
	u, err := url.Parse(base)
	if err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen[u.Host]...)
}
