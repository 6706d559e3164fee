package serve

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/protocol"
	"github.com/coreos/go-oidc/v3/oidc"
)

// Environment variables of the sender authentication settings, named in errors.
const (
	EnvOIDCIssuer          = "MM2_SERVE_OIDC_ISSUER"
	EnvOIDCAudience        = "MM2_SERVE_OIDC_AUDIENCE"
	EnvOIDCAllowedSubjects = "MM2_SERVE_OIDC_ALLOWED_SUBJECTS"
	EnvOIDCCAFile          = "MM2_SERVE_OIDC_CA_FILE"
	EnvOIDCTokenFile       = "MM2_SERVE_OIDC_ISSUER_TOKEN_FILE"
	// EnvOIDCSubjectEventTypes ties subjects to the event types they may send.
	EnvOIDCSubjectEventTypes = "MM2_SERVE_OIDC_SUBJECT_EVENT_TYPES"
)

// SenderAuthConfig turns on Knative Eventing's OIDC sender authentication: every event request
// must carry `Authorization: Bearer <JWT>` issued by Issuer for Audience (and, when
// AllowedSubjects is set, for one of those subjects). The zero value (Issuer empty) turns it off.
type SenderAuthConfig struct {
	// Issuer is the token issuer URL (its "iss"); keys come from its discovery document's
	// jwks_uri and are fetched again when a token is signed with a key not seen before.
	Issuer string
	// Audience is the "aud" the tokens must carry: the sink audience Knative requests tokens for.
	Audience string
	// AllowedSubjects, if not empty, are the "sub" values accepted, e.g.
	// system:serviceaccount:<namespace>:<service account>; an entry ending in '*' matches every
	// subject with that prefix, as in an EventPolicy's from[].sub.
	AllowedSubjects []string
	// CAFile is a PEM bundle to trust for the issuer's HTTPS endpoints instead of the system
	// roots (in Kubernetes: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt).
	CAFile string
	// TokenFile, if set, is a bearer token file sent with the discovery and JWKS requests, read
	// at each request: a Kubernetes API server serves its service account issuer's discovery
	// only to authenticated callers unless anonymous access is granted
	// (/var/run/secrets/kubernetes.io/serviceaccount/token).
	TokenFile string
	// SubjectEventTypes, if set, ties subjects to the CloudEvent types they may send, as a
	// Knative EventPolicy's filters do for its senders: entries "<subject>=<type>|<type>...",
	// a subject or type ending in '*' matching a prefix. A sender whose subject matches an
	// entry may send only its types (403 otherwise); a subject no entry names, any type.
	SubjectEventTypes []string

	// keyFetchEvery overrides jwksMinInterval (tests that rotate keys within it).
	keyFetchEvery time.Duration
}

// Enabled reports whether sender authentication is on.
func (c SenderAuthConfig) Enabled() bool { return c.Issuer != "" }

// Validate checks the settings without contacting the issuer; errors name the setting. The
// zero value is valid (off).
func (c SenderAuthConfig) Validate() error {
	if !c.Enabled() {
		for env, set := range map[string]bool{EnvOIDCAudience: c.Audience != "", EnvOIDCAllowedSubjects: len(c.AllowedSubjects) > 0, EnvOIDCSubjectEventTypes: len(c.SubjectEventTypes) > 0,
			EnvOIDCCAFile: c.CAFile != "", EnvOIDCTokenFile: c.TokenFile != ""} {
			if set {
				return fmt.Errorf("%s is set but %s is not: set the issuer to turn on sender authentication", env, EnvOIDCIssuer)
			}
		}
		return nil
	}
	_, err := c.validate()
	return err
}

func (c SenderAuthConfig) validate() (*x509.CertPool, error) {
	if c.Audience == "" {
		return nil, fmt.Errorf("%s is required with %s: the audience the senders' tokens are issued for (the sink audience of the KafkaSource or PingSource)", EnvOIDCAudience, EnvOIDCIssuer)
	}
	if !strings.HasPrefix(c.Issuer, "https://") && !strings.HasPrefix(c.Issuer, "http://") {
		return nil, fmt.Errorf("%s: %q is not an http(s) URL", EnvOIDCIssuer, c.Issuer)
	}
	for _, s := range c.AllowedSubjects {
		if i := strings.IndexByte(s, '*'); i >= 0 && i != len(s)-1 {
			return nil, fmt.Errorf("%s: %q: '*' may only end an entry", EnvOIDCAllowedSubjects, s)
		}
	}
	for _, e := range c.SubjectEventTypes {
		sub, types, ok := strings.Cut(e, "=")
		if !ok || strings.TrimSpace(sub) == "" || strings.TrimSpace(types) == "" {
			return nil, fmt.Errorf("%s: %q: want <subject>=<type>|<type>, more types after |", EnvOIDCSubjectEventTypes, e)
		}
	}
	if c.TokenFile != "" && !strings.HasPrefix(c.Issuer, "https://") {
		return nil, fmt.Errorf("%s needs an https %s: the token would go over plain HTTP to %q", EnvOIDCTokenFile, EnvOIDCIssuer, c.Issuer)
	}
	if c.CAFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, fmt.Errorf("%s: reading the issuer CA bundle: %w", EnvOIDCCAFile, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: %s holds no PEM certificate", EnvOIDCCAFile, c.CAFile)
	}
	return pool, nil
}

// senderAuth checks the bearer token of event requests. Discovery happens on the first request
// (and again after a failure), so a server can start while its issuer is still unreachable;
// such requests get 503, which KafkaSource retries.
type senderAuth struct {
	cfg    SenderAuthConfig
	ctx    context.Context // long-lived: key set fetches use it
	client *http.Client
	log    *slog.Logger
	mu     sync.Mutex
	verify *oidc.IDTokenVerifier
	tokens *tokenFileTransport // nil without a token file
}

// newSenderAuth validates cfg and prepares the verifier; errors name the setting. ctx lives as
// long as the server: key set refreshes use it.
func newSenderAuth(ctx context.Context, cfg SenderAuthConfig, logger *slog.Logger) (*senderAuth, error) {
	pool, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if pool != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	var rt http.RoundTripper = tr
	var tokens *tokenFileTransport
	if cfg.TokenFile != "" {
		u, err := url.Parse(cfg.Issuer)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvOIDCIssuer, err)
		}
		tokens = &tokenFileTransport{file: cfg.TokenFile, hosts: map[string]bool{u.Host: true}, next: tr}
		rt = tokens
	}
	every := jwksMinInterval
	if cfg.keyFetchEvery > 0 {
		every = cfg.keyFetchEvery
	}
	rt = &pacedTransport{next: rt, every: every}
	client := &http.Client{Transport: rt, Timeout: 10 * time.Second}
	if len(cfg.AllowedSubjects) == 0 {
		logger.Warn("sender authentication without "+EnvOIDCAllowedSubjects+": every workload that can get a token of the issuer for the audience is trusted; list the senders' subjects",
			"issuer", cfg.Issuer, "audience", cfg.Audience)
	}
	if strings.HasPrefix(cfg.Issuer, "http://") {
		logger.Warn(EnvOIDCIssuer+" is plain http: whoever is on the path to the issuer can serve keys of their own and have any token accepted; use its https URL",
			"issuer", cfg.Issuer)
	}
	return &senderAuth{cfg: cfg, ctx: context.WithoutCancel(ctx), client: client, log: logger, tokens: tokens}, nil
}

// jwksMinInterval is the least time between two requests to the issuer after the first
// (discovery, key set): a token signed with an unknown key makes go-oidc fetch the key set
// again, and anyone who can reach the service can send such tokens.
const jwksMinInterval = 10 * time.Second

// errPaced is pacedTransport's refusal. A token that needed the refused key set fetch is
// answered 503, retried: its key may be new (a rotation) rather than forged.
var errPaced = errors.New("not asking the issuer for its keys again so soon after the last request")

// pacedTransport lets a request through at most every `every` after the first two (discovery
// and the first key set); one arriving sooner fails without reaching the issuer.
type pacedTransport struct {
	next  http.RoundTripper
	every time.Duration

	mu   sync.Mutex
	sent int
	last time.Time
}

func (t *pacedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.mu.Lock()
	now := time.Now()
	if t.sent >= 2 && now.Sub(t.last) < t.every {
		t.mu.Unlock()
		return nil, fmt.Errorf("%w (%v)", errPaced, t.every)
	}
	t.sent++
	t.last = now
	t.mu.Unlock()
	return t.next.RoundTrip(r)
}

// tokenFileTransport adds the bearer token of a file (re-read each time: kubelet rotates it)
// to https requests for the hosts it holds: the issuer's own host, and the host of the
// discovery document's jwks_uri once the issuer named it over TLS (a Kubernetes API server
// names its advertise address there, and answers it to authenticated callers only). Any other
// host, or plain http, gets no token.
type tokenFileTransport struct {
	file string
	next http.RoundTripper

	mu    sync.Mutex
	hosts map[string]bool
}

// allow adds the host of an https URL the issuer named.
func (t *tokenFileTransport) allow(u *url.URL) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.hosts[u.Host] = true
}

func (t *tokenFileTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.mu.Lock()
	send := r.URL.Scheme == "https" && t.hosts[r.URL.Host]
	t.mu.Unlock()
	if !send {
		return t.next.RoundTrip(r)
	}
	b, err := os.ReadFile(t.file)
	if err != nil {
		return nil, fmt.Errorf("%s: reading the token for the issuer: %w", EnvOIDCTokenFile, err)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(b)))
	return t.next.RoundTrip(r)
}

// verifier returns the verifier, running discovery first if it has not succeeded yet.
func (a *senderAuth) verifier(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.verify != nil {
		return a.verify, nil
	}
	// Discovery is bounded by the request; the key set keeps the long-lived context.
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(oidc.ClientContext(dctx, a.client), a.cfg.Issuer)
	if err != nil {
		return nil, err
	}
	var claims struct {
		JWKSURI string   `json:"jwks_uri"`
		Algs    []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := p.Claims(&claims); err != nil {
		return nil, err
	}
	if a.tokens != nil {
		// The discovery document came from the issuer's host over https (validate requires an
		// https issuer with a token file), verified against the system roots or CAFile: the
		// key set's host it names is the issuer's word, and gets the token too.
		if u, err := url.Parse(claims.JWKSURI); err == nil && u.Scheme == "https" {
			a.tokens.allow(u)
		}
	}
	algs := signingAlgs(claims.Algs)
	keys := &keySet{ctx: a.ctx, url: claims.JWKSURI, client: a.client, algs: algs}
	a.verify = oidc.NewVerifier(a.cfg.Issuer, keys, &oidc.Config{ClientID: a.cfg.Audience, SupportedSigningAlgs: algs})
	a.log.Info("sender authentication on", "issuer", a.cfg.Issuer, "audience", a.cfg.Audience,
		"allowed_subjects", a.cfg.AllowedSubjects, "jwks_uri", claims.JWKSURI)
	return a.verify, nil
}

// signingAlgs keeps the asymmetric algorithms the issuer announces (RS256 when it says none):
// "none" and HMAC algorithms are never accepted.
func signingAlgs(announced []string) []string {
	var out []string
	for _, a := range announced {
		switch a {
		case oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512, oidc.PS256, oidc.PS384, oidc.PS512, oidc.EdDSA:
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		out = []string{oidc.RS256}
	}
	return out
}

// authError is a refusal: its status (401, 403, 503) and a one-line reason without the token.
type authError struct {
	status int
	reason string
}

// check verifies r's bearer token; nil means the sender is trusted.
func (a *senderAuth) check(r *http.Request) (string, *authError) {
	h := r.Header.Get("Authorization")
	scheme, raw, ok := strings.Cut(h, " ")
	raw = strings.TrimSpace(raw)
	if h == "" {
		return "", &authError{http.StatusUnauthorized, "sender authentication: missing Authorization: Bearer token"}
	}
	if !ok || !strings.EqualFold(scheme, "Bearer") || raw == "" {
		return "", &authError{http.StatusUnauthorized, "sender authentication: the Authorization header is not a Bearer token"}
	}
	v, err := a.verifier(r.Context())
	if err != nil {
		return "", &authError{http.StatusServiceUnavailable, fmt.Sprintf("sender authentication: discovering issuer %s (%s) failed: %s", a.cfg.Issuer, EnvOIDCIssuer, scrub(err.Error(), raw))}
	}
	tok, err := v.Verify(r.Context(), raw)
	if err != nil && strings.Contains(err.Error(), errPaced.Error()) {
		return "", &authError{http.StatusServiceUnavailable, "sender authentication: the token's key is not known yet and " + errPaced.Error() + "; retry"}
	}
	if cerr := r.Context().Err(); err != nil && cerr != nil && strings.Contains(err.Error(), cerr.Error()) {
		// go-oidc keeps only the text of the key set's error: the request ended (the sender went
		// away, or the server is shutting down) while the token's key was being fetched.
		return "", &authError{http.StatusServiceUnavailable, "sender authentication: the request ended before its token's key was fetched: " + scrub(err.Error(), raw) + "; retry"}
	}
	if err != nil {
		return "", &authError{http.StatusUnauthorized, "sender authentication: invalid token: " + scrub(err.Error(), raw)}
	}
	if !subjectAllowed(a.cfg.AllowedSubjects, tok.Subject) {
		return "", &authError{http.StatusForbidden, fmt.Sprintf("sender authentication: subject %q is not allowed (%s)", tok.Subject, EnvOIDCAllowedSubjects)}
	}
	return tok.Subject, nil
}

func subjectAllowed(allowed []string, sub string) bool {
	if len(allowed) == 0 {
		return true
	}
	for _, a := range allowed {
		if p, ok := strings.CutSuffix(a, "*"); ok && strings.HasPrefix(sub, p) || a == sub {
			return true
		}
	}
	return false
}

// scrub keeps the token out of a reason, should a library ever quote it.
func scrub(s, token string) string {
	if token != "" {
		s = strings.ReplaceAll(s, token, "[token]")
	}
	return s
}

// wrap lets only trusted senders reach next.
func (a *senderAuth) wrap(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sub, e := a.check(r)
		if e != nil {
			a.log.Warn("event refused", "status", e.status, "reason", oneLine(e.reason), "remote", r.RemoteAddr)
			if e.status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			}
			writeText(w, e.status, e.reason)
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), senderKey{}, &sender{subject: sub, types: eventTypesOf(a.cfg.SubjectEventTypes, sub)})))
	}
}

type senderKey struct{}

// sender is a verified sender: its subject and the event types it may send (nil: any).
type sender struct {
	subject string
	types   []string
}

// WithSender returns ctx marked as the context of a request whose sender's token was verified.
// The server marks every request it lets through sender authentication; handlers' tests use it
// to act as such a request.
func WithSender(ctx context.Context) context.Context {
	return context.WithValue(ctx, senderKey{}, &sender{})
}

// Authenticated reports whether ctx is that of a request whose sender's token was verified.
// Without it a handler should answer as to anyone who can reach the service: no topic names,
// counts or cluster errors.
func Authenticated(ctx context.Context) bool { _, ok := ctx.Value(senderKey{}).(*sender); return ok }

// eventTypesOf returns the event types entries allow subject (nil: any type; the entries of
// every matching subject count).
func eventTypesOf(entries []string, subject string) []string {
	var types []string
	for _, e := range entries {
		sub, list, _ := strings.Cut(e, "=")
		if subjectAllowed([]string{strings.TrimSpace(sub)}, subject) {
			for _, t := range strings.Split(list, "|") {
				if t = strings.TrimSpace(t); t != "" {
					types = append(types, t)
				}
			}
		}
	}
	return types
}

// typeRefused answers an event whose type its verified sender may not send (EventPolicy
// filters, MM2_SERVE_OIDC_SUBJECT_EVENT_TYPES), nil when it may.
func typeRefused(ctx context.Context, typ string) protocol.Result {
	sd, _ := ctx.Value(senderKey{}).(*sender)
	if sd == nil || sd.types == nil || subjectAllowed(sd.types, typ) {
		return nil
	}
	return Text(http.StatusForbidden, "sender authentication: subject %q may not send events of type %q (%s)", sd.subject, oneLine(typ), EnvOIDCSubjectEventTypes)
}

// ErrNoSenderAuth is returned by CheckPayloadAuth.
var ErrNoSenderAuth = errors.New("MM2_EVENT_MODE=payload writes each event's body to the target cluster as a record, so it must know who sent the event: " +
	"turn on sender authentication (" + EnvOIDCIssuer + ", " + EnvOIDCAudience + " and " + EnvOIDCAllowedSubjects +
	" naming the KafkaSource's OIDC service account, see docs/events.md) or use MM2_EVENT_MODE=fetch, which needs no trusted sender")

// CheckPayloadAuth refuses payload mode unless sender authentication is on with a subject list
// and an https issuer: without a list any workload able to get a token for the audience could
// write records, and over plain http whoever is on the path to the issuer could serve keys of
// their own and have any token accepted.
func CheckPayloadAuth(cfg SenderAuthConfig) error {
	if !cfg.Enabled() || len(cfg.AllowedSubjects) == 0 {
		return ErrNoSenderAuth
	}
	if !strings.HasPrefix(cfg.Issuer, "https://") {
		return fmt.Errorf("MM2_EVENT_MODE=payload writes each event's body to the target cluster as a record on the word of the sender's token, so %s must be an https URL: %q is not, and whoever is on the path to the issuer could serve keys of their own", EnvOIDCIssuer, cfg.Issuer)
	}
	return nil
}
