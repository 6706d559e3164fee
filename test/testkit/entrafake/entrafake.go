// Package entrafake is a local stand-in for Microsoft Entra ID (Azure AD) in
// tests: an HTTPS authority (OpenID discovery and the v2.0 token endpoint)
// that azidentity's ClientSecretCredential, ClientCertificateCredential and
// WorkloadIdentityCredential talk to, plus the App Service style
// managed-identity endpoint (IDENTITY_ENDPOINT + IDENTITY_HEADER) that Azure
// Container Apps exposes. It mints RS256 JWT access tokens and publishes the
// signing key as a JWKS, so a real Kafka broker can validate the tokens.
//
// The authority is served over TLS with a certificate from a test CA made
// here (crypto/x509); clients trust it through HTTPClient or CAFile.
package entrafake

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Config says which identities the fake knows.
type Config struct {
	// Tenant is the directory ID; default "00000000-0000-0000-0000-0000000000aa".
	Tenant string
	// Secrets maps a client ID to its client secret.
	Secrets map[string]string
	// Certificates maps a client ID to the certificate whose key signs its
	// client assertions (ClientCertificateCredential).
	Certificates map[string]*x509.Certificate
	// Federated maps a client ID to the Kubernetes service account token it
	// presents (WorkloadIdentityCredential reads it from a file).
	Federated map[string]string
	// ManagedIdentities are the client IDs of user-assigned identities the
	// managed-identity endpoint serves; the system-assigned identity is
	// always served, as subject SystemAssignedID.
	ManagedIdentities []string
	// Lifetime of minted tokens; default one hour.
	Lifetime time.Duration
}

// SystemAssignedID is the subject of tokens for the system-assigned identity.
const SystemAssignedID = "system-assigned-identity"

// Issued records one token the fake handed out.
type Issued struct {
	Grant    string // "client_secret", "client_certificate", "workload_identity", "managed_identity"
	ClientID string
	Audience string
	Expires  time.Time
}

// Server is a running fake.
type Server struct {
	// AuthorityHost is the https URL to use as azidentity's authority host.
	AuthorityHost string
	// Tenant is the tenant ID.
	Tenant string
	// Issuer is the "iss" claim of minted access tokens.
	Issuer string
	// IdentityEndpoint and IdentityHeader are the values of the
	// IDENTITY_ENDPOINT and IDENTITY_HEADER variables of an App Service /
	// Container Apps managed identity pointing at this fake.
	IdentityEndpoint, IdentityHeader string
	// CAFile is a PEM file holding the test CA that signed the authority's
	// certificate (usable as SSL_CERT_FILE for a child process).
	CAFile string
	// JWKSFile holds the signing key as a JWKS document.
	JWKSFile string
	// KeyID is the "kid" of the signing key.
	KeyID string

	cfg    Config
	key    *rsa.PrivateKey
	caPool *x509.CertPool
	tlsSrv *httptest.Server
	miSrv  *httptest.Server

	mu       sync.Mutex
	issued   []Issued
	failNext int
	lifetime time.Duration
}

// New starts the fake; it stops when the test ends.
func New(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Tenant == "" {
		cfg.Tenant = "00000000-0000-0000-0000-0000000000aa"
	}
	if cfg.Lifetime == 0 {
		cfg.Lifetime = time.Hour
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{cfg: cfg, key: key, Tenant: cfg.Tenant, lifetime: cfg.Lifetime,
		Issuer: "https://sts.windows.net/" + cfg.Tenant + "/", IdentityHeader: "mi-header-" + randHex(8)}
	s.KeyID = thumb(&key.PublicKey)

	caCert, caKey := newCA(t)
	leaf := newLeaf(t, caCert, caKey)
	s.caPool = x509.NewCertPool()
	s.caPool.AddCert(caCert)
	dir := t.TempDir()
	s.CAFile = filepath.Join(dir, "entrafake-ca.pem")
	if err := os.WriteFile(s.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	s.JWKSFile = filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(s.JWKSFile, s.JWKS(), 0o600); err != nil {
		t.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{tenant}/v2.0/.well-known/openid-configuration", s.discovery)
	mux.HandleFunc("GET /{tenant}/discovery/v2.0/keys", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(s.JWKS())
	})
	mux.HandleFunc("POST /{tenant}/oauth2/v2.0/token", s.token)
	s.tlsSrv = httptest.NewUnstartedServer(mux)
	s.tlsSrv.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}, MinVersion: tls.VersionTLS12}
	s.tlsSrv.StartTLS()
	t.Cleanup(s.tlsSrv.Close)
	s.AuthorityHost = s.tlsSrv.URL + "/"

	s.miSrv = httptest.NewServer(http.HandlerFunc(s.managedIdentity))
	t.Cleanup(s.miSrv.Close)
	s.IdentityEndpoint = s.miSrv.URL + "/msi/token"
	return s
}

// HTTPClient returns an http.Client that trusts the fake's CA, for
// azcore.ClientOptions.Transport.
func (s *Server) HTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.caPool, MinVersion: tls.VersionTLS12}}}
}

// AddCertificate registers a service principal that signs its client
// assertions with cert's key.
func (s *Server) AddCertificate(clientID string, cert *x509.Certificate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.Certificates == nil {
		s.cfg.Certificates = map[string]*x509.Certificate{}
	}
	s.cfg.Certificates[clientID] = cert
}

// SetLifetime changes the lifetime of tokens minted from now on.
func (s *Server) SetLifetime(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lifetime = d
}

// FailNext makes the next n token requests fail with a server error.
func (s *Server) FailNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext = n
}

// Issued returns the tokens handed out so far.
func (s *Server) Issued() []Issued {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Issued(nil), s.issued...)
}

// JWKS returns the public signing key as a JWKS document.
func (s *Server) JWKS() []byte {
	pub := &s.key.PublicKey
	doc := map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "use": "sig", "alg": "RS256", "kid": s.KeyID,
		"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes()),
	}}}
	b, _ := json.Marshal(doc)
	return b
}

// Mint signs an access token for audience and subject with the given
// lifetime relative to now (negative: already expired). Tests use it for
// tokens the real flows would not produce (wrong audience, expired).
func (s *Server) Mint(audience, subject string, issuedAt time.Time, lifetime time.Duration) string {
	claims := map[string]any{
		"aud": audience, "iss": s.Issuer, "sub": subject, "oid": subject, "appid": subject,
		"tid": s.Tenant, "iat": issuedAt.Unix(), "nbf": issuedAt.Unix(), "exp": issuedAt.Add(lifetime).Unix(),
		"ver": "1.0",
	}
	return s.sign(claims)
}

// MintForeign signs a well-formed token with a key the fake does not publish.
func (s *Server) MintForeign(audience, subject string) string {
	other := &Server{key: mustKey(), Issuer: s.Issuer, Tenant: s.Tenant}
	other.KeyID = s.KeyID // same kid, different key: only the signature tells
	return other.Mint(audience, subject, time.Now(), time.Hour)
}

func (s *Server) sign(claims map[string]any) string {
	h, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": s.KeyID})
	c, _ := json.Marshal(claims)
	in := b64(h) + "." + b64(c)
	sum := sha256.Sum256([]byte(in))
	sig, err := rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA256, sum[:])
	if err != nil {
		panic(err)
	}
	return in + "." + b64(sig)
}

func (s *Server) discovery(w http.ResponseWriter, r *http.Request) {
	tenant := r.PathValue("tenant")
	base := strings.TrimSuffix(s.AuthorityHost, "/") + "/" + tenant
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                base + "/v2.0",
		"authorization_endpoint":                base + "/oauth2/v2.0/authorize",
		"token_endpoint":                        base + "/oauth2/v2.0/token",
		"jwks_uri":                              base + "/discovery/v2.0/keys",
		"response_types_supported":              []string{"code", "id_token", "token"},
		"subject_types_supported":               []string{"pairwise"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
	})
}

// aadError answers like Entra ID does, with an AADSTS code.
func aadError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]any{"error": code, "error_description": desc, "error_codes": []int{0}})
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		aadError(w, http.StatusBadRequest, "invalid_request", "AADSTS900144: malformed form")
		return
	}
	if r.PathValue("tenant") != s.Tenant {
		aadError(w, http.StatusBadRequest, "invalid_request", "AADSTS90002: Tenant '"+r.PathValue("tenant")+"' not found.")
		return
	}
	if s.takeFailure() {
		aadError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "AADSTS90033: A transient error has occurred.")
		return
	}
	if g := r.PostForm.Get("grant_type"); g != "client_credentials" {
		aadError(w, http.StatusBadRequest, "unsupported_grant_type", "AADSTS70003: grant type "+g+" not supported by the fake")
		return
	}
	// client_secret_basic (RFC 6749 2.3.1), which Entra ID accepts too and Kafka's OIDC login
	// uses: the credentials move from the header into the form.
	if id, sec, ok := r.BasicAuth(); ok {
		if u, err := url.QueryUnescape(id); err == nil {
			id = u
		}
		if u, err := url.QueryUnescape(sec); err == nil {
			sec = u
		}
		r.PostForm.Set("client_id", id)
		r.PostForm.Set("client_secret", sec)
	}
	client := r.PostForm.Get("client_id")
	var grant string
	switch {
	case r.PostForm.Has("client_secret"):
		want, ok := s.cfg.Secrets[client]
		if !ok {
			aadError(w, http.StatusBadRequest, "unauthorized_client", "AADSTS700016: Application with identifier '"+client+"' was not found in the directory.")
			return
		}
		if r.PostForm.Get("client_secret") != want {
			aadError(w, http.StatusUnauthorized, "invalid_client", "AADSTS7000215: Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID.")
			return
		}
		grant = "client_secret"
	case r.PostForm.Get("client_assertion_type") == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
		assertion := r.PostForm.Get("client_assertion")
		if fed, ok := s.cfg.Federated[client]; ok {
			if assertion != fed {
				aadError(w, http.StatusUnauthorized, "invalid_client", "AADSTS700213: No matching federated identity record found for presented assertion.")
				return
			}
			grant = "workload_identity"
		} else if cert, ok := s.certificate(client); ok {
			if err := verifyAssertion(assertion, cert, client); err != nil {
				aadError(w, http.StatusUnauthorized, "invalid_client", "AADSTS700027: Client assertion contains an invalid signature: "+err.Error())
				return
			}
			grant = "client_certificate"
		} else {
			aadError(w, http.StatusBadRequest, "unauthorized_client", "AADSTS700016: Application with identifier '"+client+"' was not found in the directory.")
			return
		}
	default:
		aadError(w, http.StatusUnauthorized, "invalid_client", "AADSTS7000218: The request body must contain the following parameter: 'client_assertion' or 'client_secret'.")
		return
	}
	aud := ""
	for _, sc := range strings.Fields(r.PostForm.Get("scope")) {
		if strings.HasSuffix(sc, "/.default") {
			aud = strings.TrimSuffix(sc, "/.default")
		}
	}
	if aud == "" {
		aadError(w, http.StatusBadRequest, "invalid_scope", "AADSTS1002012: The provided value for scope is not valid.")
		return
	}
	tok, exp := s.issue(grant, client, aud)
	writeJSON(w, http.StatusOK, map[string]any{
		"token_type": "Bearer", "access_token": tok,
		"expires_in": int(time.Until(exp).Round(time.Second) / time.Second), "ext_expires_in": int(time.Until(exp) / time.Second),
	})
}

func (s *Server) managedIdentity(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-IDENTITY-HEADER") != s.IdentityHeader {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"statusCode": 401, "message": "missing or wrong X-IDENTITY-HEADER"})
		return
	}
	q := r.URL.Query()
	if q.Get("api-version") != "2019-08-01" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"statusCode": 400, "message": "unsupported api-version " + q.Get("api-version")})
		return
	}
	if s.takeFailure() {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"statusCode": 500, "message": "transient failure"})
		return
	}
	subject := SystemAssignedID
	if id := q.Get("client_id"); id != "" {
		known := false
		for _, m := range s.cfg.ManagedIdentities {
			known = known || m == id
		}
		if !known {
			writeJSON(w, http.StatusBadRequest, map[string]any{"statusCode": 400, "message": "No User Assigned or Delegated Managed Identity found for specified ClientId/ResourceId/PrincipalId."})
			return
		}
		subject = id
	}
	aud := strings.TrimSuffix(q.Get("resource"), "/.default")
	if aud == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"statusCode": 400, "message": "resource is required"})
		return
	}
	tok, exp := s.issue("managed_identity", subject, aud)
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": tok, "expires_on": strconv.FormatInt(exp.Unix(), 10), "resource": aud,
		"token_type": "Bearer", "client_id": subject,
	})
}

func (s *Server) certificate(client string) (*x509.Certificate, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.cfg.Certificates[client]
	return c, ok
}

func (s *Server) takeFailure() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failNext > 0 {
		s.failNext--
		return true
	}
	return false
}

func (s *Server) issue(grant, subject, aud string) (string, time.Time) {
	s.mu.Lock()
	life := s.lifetime
	s.mu.Unlock()
	now := time.Now()
	tok := s.Mint(aud, subject, now, life)
	exp := now.Add(life)
	s.mu.Lock()
	s.issued = append(s.issued, Issued{Grant: grant, ClientID: subject, Audience: aud, Expires: exp})
	s.mu.Unlock()
	return tok, exp
}

// verifyAssertion checks a client assertion JWT signed (PS256 or RS256) with
// the key of cert, issued by and about client.
func verifyAssertion(jwt string, cert *x509.Certificate, client string) error {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return errors.New("not a JWT")
	}
	var hdr struct{ Alg string }
	var claims struct {
		Iss, Sub string
		Exp      int64
	}
	if err := decodePart(parts[0], &hdr); err != nil {
		return err
	}
	if err := decodePart(parts[1], &claims); err != nil {
		return err
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return err
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return errors.New("certificate key is not RSA")
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	switch hdr.Alg {
	case "PS256":
		err = rsa.VerifyPSS(pub, crypto.SHA256, sum[:], sig, nil)
	case "RS256":
		err = rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig)
	default:
		err = fmt.Errorf("alg %q", hdr.Alg)
	}
	if err != nil {
		return err
	}
	if claims.Iss != client || claims.Sub != client {
		return errors.New("iss/sub is not the client ID")
	}
	if time.Unix(claims.Exp, 0).Before(time.Now()) {
		return errors.New("assertion expired")
	}
	return nil
}

func decodePart(p string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// ClientCertificate makes a self-signed certificate and key for a service
// principal and writes them as one PEM file (key first, as Azure's tools
// do). It returns the certificate and the file's path.
func ClientCertificate(t testing.TB, client string) (*x509.Certificate, string) {
	t.Helper()
	key := mustKey()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: client},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	p8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_ = pem.Encode(&buf, &pem.Block{Type: "PRIVATE KEY", Bytes: p8})
	_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	path := filepath.Join(t.TempDir(), "client-cert.pem")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, path
}

func newCA(t testing.TB) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "entrafake test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert, key
}

func newLeaf(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func mustKey() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
}

func thumb(pub *rsa.PublicKey) string {
	sum := sha256.Sum256(pub.N.Bytes())
	return b64(sum[:12])
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Audience returns the token audience (resource) for an Event Hubs namespace host.
func Audience(host string) string {
	return (&url.URL{Scheme: "https", Host: host}).String()
}
