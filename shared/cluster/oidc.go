package cluster

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/mm2go/mm2go/shared/secret"
)

// Kafka's OAUTHBEARER login classes (KIP-768) that fetch tokens from an OIDC token endpoint with
// the client_credentials grant. The ".secured." name is the one before Kafka 3.4.
const (
	OAuthBearerLoginCallbackHandler       = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
	OAuthBearerLoginCallbackHandlerLegacy = "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler"
	OAuthBearerLoginModule                = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
	// ClientCredentialsJwtRetriever and DefaultJwtRetriever are the Kafka 4.1
	// sasl.oauthbearer.jwt.retriever.class values that mean the client_credentials grant (or a
	// token read from a file:) URL).
	ClientCredentialsJwtRetriever = "org.apache.kafka.common.security.oauthbearer.ClientCredentialsJwtRetriever"
	DefaultJwtRetriever           = "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever"
)

// OAuthBearerConfig is Kafka's OIDC client-credentials login for SASL OAUTHBEARER, with Kafka's
// own property names below "<alias>.sasl." (MM2_<CLUSTER>_SASL_*). The client ID, secret and
// scope come from the properties below or, as in most Kafka configurations, from the JAAS line:
//
//	sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="..." clientSecret="..." scope="...";
//
// The properties win over the JAAS options. Zero numbers and empty strings mean Kafka's defaults.
type OAuthBearerConfig struct {
	LoginCallbackHandlerClass string        `envconfig:"LOGIN_CALLBACK_HANDLER_CLASS" mm2:"login.callback.handler.class" desc:"OAUTHBEARER login handler: org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler (or its older ...oauthbearer.secured... name); may be left out when the token endpoint is set"`
	TokenEndpointURL          string        `envconfig:"OAUTHBEARER_TOKEN_ENDPOINT_URL" mm2:"oauthbearer.token.endpoint.url" desc:"OIDC token endpoint (client_credentials grant) of any issuer, https URL; or file:/path of a JWT re-read at each refresh"`
	AllowedURLs               string        `envconfig:"OAUTHBEARER_ALLOWED_URLS" mm2:"oauthbearer.allowed.urls" desc:"comma-separated token endpoint URLs this cluster's login may use, exactly as written in sasl.oauthbearer.token.endpoint.url (Kafka 4's JVM property org.apache.kafka.sasl.oauthbearer.allowed.urls; empty: none, every token endpoint is refused)"`
	ClientID                  string        `envconfig:"OAUTHBEARER_CLIENT_CREDENTIALS_CLIENT_ID" mm2:"oauthbearer.client.credentials.client.id" desc:"OAUTHBEARER client ID (default: the JAAS option clientId)"`
	ClientSecret              secret.Secret `envconfig:"OAUTHBEARER_CLIENT_CREDENTIALS_CLIENT_SECRET" mm2:"oauthbearer.client.credentials.client.secret" desc:"OAUTHBEARER client secret (default: the JAAS option clientSecret) (secret)"`
	Scope                     string        `envconfig:"OAUTHBEARER_SCOPE" mm2:"oauthbearer.scope" desc:"scope requested from the token endpoint (default: the JAAS option scope; empty: none)"`
	JWTRetrieverClass         string        `envconfig:"OAUTHBEARER_JWT_RETRIEVER_CLASS" mm2:"oauthbearer.jwt.retriever.class" desc:"Kafka 4.1 token retriever: ClientCredentialsJwtRetriever or DefaultJwtRetriever (org.apache.kafka.common.security.oauthbearer.*); the jwt-bearer grant is not supported"`
	ScopeClaimName            string        `envconfig:"OAUTHBEARER_SCOPE_CLAIM_NAME" mm2:"oauthbearer.scope.claim.name" defaultdoc:"scope" desc:"JWT claim holding the token's scopes"`
	SubClaimName              string        `envconfig:"OAUTHBEARER_SUB_CLAIM_NAME" mm2:"oauthbearer.sub.claim.name" defaultdoc:"sub" desc:"JWT claim holding the principal; a token without it is refused before it is sent"`
	HeaderURLEncode           bool          `envconfig:"OAUTHBEARER_HEADER_URLENCODE" mm2:"oauthbearer.header.urlencode" default:"false" desc:"URL-encode the client ID and secret in the token request's Basic authorization header (RFC 6749 2.3.1)"`
	LoginRefreshWindowFactor  string        `envconfig:"LOGIN_REFRESH_WINDOW_FACTOR" mm2:"login.refresh.window.factor" defaultdoc:"0.8" desc:"refresh a token after this fraction of its lifetime (0.5 to 1.0)"`
	LoginRefreshWindowJitter  string        `envconfig:"LOGIN_REFRESH_WINDOW_JITTER" mm2:"login.refresh.window.jitter" defaultdoc:"0.05" desc:"random extra fraction of the lifetime added to the refresh time (0 to 0.25)"`
	LoginRefreshMinPeriodSec  int           `envconfig:"LOGIN_REFRESH_MIN_PERIOD_SECONDS" mm2:"login.refresh.min.period.seconds" defaultdoc:"60" desc:"minimum seconds between token refreshes (0 to 900)"`
	LoginRefreshBufferSec     int           `envconfig:"LOGIN_REFRESH_BUFFER_SECONDS" mm2:"login.refresh.buffer.seconds" defaultdoc:"300" desc:"seconds before expiry by which a token is refreshed (0 to 3600)"`
	LoginConnectTimeoutMS     int           `envconfig:"LOGIN_CONNECT_TIMEOUT_MS" mm2:"login.connect.timeout.ms" defaultdoc:"10000" desc:"token endpoint connect timeout, ms"`
	LoginReadTimeoutMS        int           `envconfig:"LOGIN_READ_TIMEOUT_MS" mm2:"login.read.timeout.ms" defaultdoc:"10000" desc:"token endpoint read timeout, ms"`
	LoginRetryBackoffMS       int           `envconfig:"LOGIN_RETRY_BACKOFF_MS" mm2:"login.retry.backoff.ms" defaultdoc:"100" desc:"first wait before retrying a failed token request (network errors and HTTP 5xx), ms"`
	LoginRetryBackoffMaxMS    int           `envconfig:"LOGIN_RETRY_BACKOFF_MAX_MS" mm2:"login.retry.backoff.max.ms" defaultdoc:"10000" desc:"longest wait between token request retries, ms"`
}

// Enabled reports whether the OIDC token endpoint login is configured.
func (o *OAuthBearerConfig) Enabled() bool { return o.TokenEndpointURL != "" }

// oauthOptions returns the options of an OAuthBearerLoginModule JAAS line (nil without one).
func (s *Settings) oauthOptions() (map[string]string, error) {
	if !s.SASLJAASConfig.IsSet() {
		return nil, nil
	}
	entries, err := parseJAAS(s.SASLJAASConfig.Reveal())
	if err != nil {
		return nil, err
	}
	if len(entries) != 1 {
		return nil, fmt.Errorf("has %d login modules, want exactly 1", len(entries))
	}
	if entries[0].loginModule != OAuthBearerLoginModule {
		return nil, fmt.Errorf("login module %s does not do OAUTHBEARER: use %s", entries[0].loginModule, OAuthBearerLoginModule)
	}
	return entries[0].options, nil
}

// oauthClient returns the client ID, secret and scope: the properties, else the JAAS options.
func (s *Settings) oauthClient() (id string, sec secret.Secret, scope string, err error) {
	opts, err := s.oauthOptions()
	if err != nil {
		return "", secret.Secret{}, "", err
	}
	o := &s.OAuthBearer
	id, sec, scope = o.ClientID, o.ClientSecret, o.Scope
	if id == "" {
		id = opts["clientId"]
	}
	if !sec.IsSet() && opts["clientSecret"] != "" {
		sec = secret.New(opts["clientSecret"])
	}
	if scope == "" {
		scope = opts["scope"]
	}
	return id, sec, scope, nil
}

func parseFraction(v, def string, lo, hi float64) (float64, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		v = def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < lo || f > hi {
		return 0, fmt.Errorf("%q is not a number from %g to %g", v, lo, hi)
	}
	return f, nil
}

// normalizeOAuthBearer checks the OIDC login settings; Normalize calls it. bad names a setting
// by its property below the alias.
func (s *Settings) normalizeOAuthBearer(bad func(key, format string, args ...any)) {
	o := &s.OAuthBearer
	o.TokenEndpointURL = strings.TrimSpace(o.TokenEndpointURL)
	o.LoginCallbackHandlerClass = strings.TrimSpace(o.LoginCallbackHandlerClass)
	switch o.LoginCallbackHandlerClass {
	case "", OAuthBearerLoginCallbackHandler, OAuthBearerLoginCallbackHandlerLegacy:
	default:
		bad("sasl.login.callback.handler.class", "%q is not supported: mm2go runs Kafka's OIDC login only (%s, with sasl.oauthbearer.token.endpoint.url)", o.LoginCallbackHandlerClass, OAuthBearerLoginCallbackHandler)
	}
	switch r := strings.TrimSpace(o.JWTRetrieverClass); r {
	case "", ClientCredentialsJwtRetriever, DefaultJwtRetriever:
	default:
		bad("sasl.oauthbearer.jwt.retriever.class", "%q is not supported: use %s (the jwt-bearer grant is not supported)", r, ClientCredentialsJwtRetriever)
	}
	if !o.Enabled() {
		if o.LoginCallbackHandlerClass != "" {
			bad("sasl.oauthbearer.token.endpoint.url", "required with sasl.login.callback.handler.class=%s", o.LoginCallbackHandlerClass)
		}
		if o.ClientID != "" || o.ClientSecret.IsSet() || o.Scope != "" {
			bad("sasl.oauthbearer.token.endpoint.url", "required with the sasl.oauthbearer client credentials and scope settings")
		}
		return
	}
	if s.SASLMechanism != "" && s.SASLMechanism != MechanismOAuthBearer {
		bad("sasl.mechanism", "must be OAUTHBEARER with sasl.oauthbearer.token.endpoint.url")
	}
	if s.Azure.Enabled() {
		bad("sasl.oauthbearer.token.endpoint.url", "set either azure.auth (Azure AD through azidentity) or sasl.oauthbearer.token.endpoint.url (any OIDC token endpoint), not both")
	}
	if s.SASLUsername != "" || s.SASLPassword.IsSet() {
		bad("sasl.username", "OAUTHBEARER takes no SASL user or password: put clientId/clientSecret in sasl.jaas.config or the sasl.oauthbearer.client.credentials.* settings")
	}
	u, err := url.Parse(o.TokenEndpointURL)
	if !urlAllowed(o.AllowedURLs, o.TokenEndpointURL) {
		// Kafka 4 (CVE-2025-27817): ConfigurationUtils.throwIfURLIsNotAllowed, an exact match in
		// the comma-separated org.apache.kafka.sasl.oauthbearer.allowed.urls, empty by default.
		bad("sasl.oauthbearer.allowed.urls", "does not list the token endpoint %q (sasl.oauthbearer.token.endpoint.url): list every URL the login may use, as Kafka's JVM property org.apache.kafka.sasl.oauthbearer.allowed.urls", o.TokenEndpointURL)
	}
	switch {
	case err != nil || (u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "file"):
		bad("sasl.oauthbearer.token.endpoint.url", "%q is not an https, http or file URL", o.TokenEndpointURL)
	case u.Scheme == "file":
	default:
		id, sec, _, err := s.oauthClient()
		switch {
		case err != nil:
			bad("sasl.jaas.config", "%v", err)
		case id == "":
			bad("sasl.jaas.config", "needs the clientId option (or sasl.oauthbearer.client.credentials.client.id) for the token endpoint")
		case !sec.IsSet():
			bad("sasl.jaas.config", "needs the clientSecret option (or sasl.oauthbearer.client.credentials.client.secret) for the token endpoint")
		}
	}
	if _, err := parseFraction(o.LoginRefreshWindowFactor, "0.8", 0.5, 1); err != nil {
		bad("sasl.login.refresh.window.factor", "%v", err)
	}
	if _, err := parseFraction(o.LoginRefreshWindowJitter, "0.05", 0, 0.25); err != nil {
		bad("sasl.login.refresh.window.jitter", "%v", err)
	}
	for key, r := range map[string]struct{ v, lo, hi int }{
		"sasl.login.refresh.min.period.seconds": {o.LoginRefreshMinPeriodSec, 0, 900},
		"sasl.login.refresh.buffer.seconds":     {o.LoginRefreshBufferSec, 0, 3600},
		"sasl.login.connect.timeout.ms":         {o.LoginConnectTimeoutMS, 0, 1 << 30},
		"sasl.login.read.timeout.ms":            {o.LoginReadTimeoutMS, 0, 1 << 30},
		"sasl.login.retry.backoff.ms":           {o.LoginRetryBackoffMS, 0, 1 << 30},
		"sasl.login.retry.backoff.max.ms":       {o.LoginRetryBackoffMaxMS, 0, 1 << 30},
	} {
		if r.v < r.lo || r.v > r.hi {
			bad(key, "%d is out of range (%d to %d)", r.v, r.lo, r.hi)
		}
	}
	s.SASLMechanism = MechanismOAuthBearer
}

// OIDCTokens fetches and caches OAUTHBEARER tokens from an OIDC token endpoint with the
// client_credentials grant, as Kafka's OAuthBearerLoginCallbackHandler does: a token is reused
// until its refresh time (sasl.login.refresh.*), then fetched again. It is safe for concurrent use.
type OIDCTokens struct {
	cluster, envPrefix, propPrefix string
	endpoint                       string
	clientID                       string
	clientSecret                   secret.Secret
	scope                          string
	subClaim                       string
	urlencode                      bool
	extensions                     map[string]string
	factor, jitter                 float64
	minPeriod, buffer              time.Duration
	backoff, backoffMax            time.Duration
	http                           *http.Client
	logger                         *slog.Logger
	guard                          leakGuard
	now                            func() time.Time

	mu        sync.Mutex
	token     string
	refreshAt time.Time
	fetches   int
}

// NewOIDCTokens builds the token source of s (normalized, with a token endpoint). It does no I/O.
func NewOIDCTokens(s Settings, logger *slog.Logger) (*OIDCTokens, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	o := s.OAuthBearer
	id, sec, scope, err := s.oauthClient()
	if err != nil {
		return nil, propErr("sasl.jaas.config", err)
	}
	factor, err := parseFraction(o.LoginRefreshWindowFactor, "0.8", 0.5, 1)
	if err != nil {
		return nil, propErr("sasl.login.refresh.window.factor", err)
	}
	jitter, err := parseFraction(o.LoginRefreshWindowJitter, "0.05", 0, 0.25)
	if err != nil {
		return nil, propErr("sasl.login.refresh.window.jitter", err)
	}
	ms := func(v, def int) time.Duration {
		if v <= 0 {
			v = def
		}
		return time.Duration(v) * time.Millisecond
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: ms(o.LoginConnectTimeoutMS, 10000), KeepAlive: 30 * time.Second}).DialContext
	tr.ResponseHeaderTimeout = ms(o.LoginReadTimeoutMS, 10000)
	if strings.HasPrefix(o.TokenEndpointURL, "https:") {
		// As Kafka does, the token endpoint is trusted with the cluster's truststore; its host
		// name is always verified.
		tc := s
		tc.SSLEndpointIdentificationAlgorithm = "https"
		cfg, err := TLSConfig(tc)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = cfg
	}
	env, prop := prefixes(s.Role, s.Alias)
	ext := map[string]string{}
	if opts, err := s.oauthOptions(); err == nil {
		for k, v := range opts {
			if name, ok := strings.CutPrefix(k, "extension_"); ok {
				ext[name] = v
			}
		}
	}
	sub := o.SubClaimName
	if sub == "" {
		sub = "sub"
	}
	t := &OIDCTokens{
		cluster: s.Alias, envPrefix: env, propPrefix: prop,
		endpoint: o.TokenEndpointURL, clientID: id, clientSecret: sec, scope: scope,
		subClaim: sub, urlencode: o.HeaderURLEncode, extensions: ext,
		factor: factor, jitter: jitter,
		minPeriod:  ms(o.LoginRefreshMinPeriodSec*1000, 60000),
		buffer:     ms(o.LoginRefreshBufferSec*1000, 300000),
		backoff:    ms(o.LoginRetryBackoffMS, 100),
		backoffMax: ms(o.LoginRetryBackoffMaxMS, 10000),
		http:       &http.Client{Transport: tr},
		logger:     logger.With("cluster", s.Alias),
		guard:      guardOf(s),
		now:        time.Now,
	}
	return t, nil
}

// Fetches is how many tokens were fetched (not served from the cache).
func (t *OIDCTokens) Fetches() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fetches
}

// Token returns a valid token, fetching a new one when the cached one is due for refresh.
func (t *OIDCTokens) Token(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if t.token != "" && now.Before(t.refreshAt) {
		return t.token, nil
	}
	tok, err := t.fetch(ctx)
	if err != nil {
		return "", err
	}
	exp, err := t.checkJWT(tok)
	if err != nil {
		return "", err
	}
	t.fetches++
	t.token, t.refreshAt = tok, t.refreshTime(now, exp)
	t.logger.Debug("OAUTHBEARER token fetched", "token_endpoint", t.endpoint, "client_id", t.clientID,
		"expires", exp.UTC().Format(time.RFC3339), "refresh_at", t.refreshAt.UTC().Format(time.RFC3339))
	return tok, nil
}

// refreshTime follows Kafka's ExpiringCredentialRefreshingLogin: after factor (+ jitter) of the
// lifetime, but at least buffer before expiry and at least minPeriod after the fetch (never
// after expiry).
func (t *OIDCTokens) refreshTime(start, exp time.Time) time.Time {
	life := exp.Sub(start)
	at := start.Add(time.Duration(float64(life) * (t.factor + rand.Float64()*t.jitter)))
	if exp.Sub(at) < t.buffer {
		at = exp.Add(-t.buffer)
	}
	if at.Before(start.Add(t.minPeriod)) {
		at = start.Add(t.minPeriod)
	}
	if at.After(exp) {
		at = exp
	}
	return at
}

// OIDCTokenError is a failed token fetch or an unusable token. It names the cluster, the setting
// (environment variable and property), the endpoint and the client ID, never the secret.
type OIDCTokenError struct {
	Cluster  string
	Env      string // e.g. MM2_TARGET_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL
	Property string // e.g. target.sasl.oauthbearer.token.endpoint.url
	Endpoint string
	ClientID string
	Reason   string
	Err      error // the network error, if any
}

func (e *OIDCTokenError) Error() string {
	who := ""
	if e.ClientID != "" {
		who = fmt.Sprintf(" for client ID %q", e.ClientID)
	}
	return fmt.Sprintf("cluster %q: getting an OAUTHBEARER token from %s%s (%s, %s) failed: %s",
		e.Cluster, e.Endpoint, who, e.Env, e.Property, e.Reason)
}

func (e *OIDCTokenError) Unwrap() error { return e.Err }

func (t *OIDCTokens) fail(reason string, err error) error {
	return &OIDCTokenError{Cluster: t.cluster, Env: t.envPrefix + "SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL",
		Property: t.propPrefix + "sasl.oauthbearer.token.endpoint.url", Endpoint: t.endpoint, ClientID: t.clientID,
		Reason: t.guard.text(reason), Err: err}
}

// fetch gets one token: read from a file: URL, or a client_credentials request retried with
// backoff on network errors and 5xx/429 answers.
func (t *OIDCTokens) fetch(ctx context.Context) (string, error) {
	if path, ok := strings.CutPrefix(t.endpoint, "file:"); ok {
		path = strings.TrimPrefix(path, "//")
		b, err := os.ReadFile(path)
		if err != nil {
			return "", t.fail("reading the token file: "+err.Error(), err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	wait := t.backoff
	for attempt := 1; ; attempt++ {
		tok, retry, err := t.request(ctx)
		if err == nil {
			return tok, nil
		}
		if !retry || wait > t.backoffMax || ctx.Err() != nil {
			return "", err
		}
		t.logger.Warn("OAUTHBEARER token request failed, retrying", "attempt", attempt, "wait", wait.String(), "err", err)
		select {
		case <-ctx.Done():
			return "", err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// request sends one token request; retry says whether a failure may pass.
func (t *OIDCTokens) request(ctx context.Context) (token string, retry bool, err error) {
	form := url.Values{"grant_type": {"client_credentials"}}
	if t.scope != "" {
		form.Set("scope", t.scope)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return "", false, t.fail(err.Error(), err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	id, sec := t.clientID, t.clientSecret.Reveal()
	if t.urlencode {
		id, sec = url.QueryEscape(id), url.QueryEscape(sec)
	}
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(id+":"+sec)))
	resp, err := t.http.Do(req)
	if err != nil {
		return "", true, t.fail("the token endpoint did not answer: "+err.Error(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", true, t.fail("reading the token endpoint's answer: "+err.Error(), err)
	}
	var tr struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	jsonErr := json.Unmarshal(body, &tr)
	if resp.StatusCode != http.StatusOK {
		reason := fmt.Sprintf("HTTP %d", resp.StatusCode)
		if tr.Error != "" {
			reason += ": " + tr.Error
			if tr.Description != "" {
				reason += ": " + firstLine(tr.Description)
			}
		} else if len(body) > 0 {
			reason += ": " + firstLine(string(body))
		}
		switch {
		case resp.StatusCode == http.StatusUnauthorized || tr.Error == "invalid_client":
			reason += " (check the client ID and secret: JAAS clientId/clientSecret or sasl.oauthbearer.client.credentials.*)"
		case tr.Error == "invalid_scope":
			reason += " (check the scope: JAAS scope or sasl.oauthbearer.scope)"
		case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed:
			reason += " (is this the issuer's token endpoint? see token_endpoint in its .well-known/openid-configuration)"
		}
		return "", resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests, t.fail(reason, nil)
	}
	if jsonErr != nil || tr.AccessToken == "" {
		return "", false, t.fail("the token endpoint's answer has no access_token", nil)
	}
	return tr.AccessToken, false, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// checkJWT reads the token's claims as Kafka's client does before sending it (no signature
// check: that is the broker's job): a JWT with an "exp" and the sub claim. It returns the expiry.
func (t *OIDCTokens) checkJWT(tok string) (time.Time, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return time.Time{}, t.fail(fmt.Sprintf("the access token is not a JWT (%d parts, want 3): OAUTHBEARER needs JWT access tokens; check the issuer's token format for this client", len(parts)), nil)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	var claims map[string]any
	if err == nil {
		err = json.Unmarshal(raw, &claims)
	}
	if err != nil {
		return time.Time{}, t.fail("the access token's payload is not JSON: "+err.Error(), nil)
	}
	expF, ok := claims["exp"].(float64)
	if !ok {
		return time.Time{}, t.fail(`the access token has no numeric "exp" claim`, nil)
	}
	if sub, ok := claims[t.subClaim].(string); !ok || strings.TrimSpace(sub) == "" {
		return time.Time{}, t.fail(fmt.Sprintf("the access token has no %q claim (%sSASL_OAUTHBEARER_SUB_CLAIM_NAME, %ssasl.oauthbearer.sub.claim.name)", t.subClaim, t.envPrefix, t.propPrefix), nil)
	}
	exp := time.Unix(int64(expF), 0)
	if !exp.After(t.now()) {
		return time.Time{}, t.fail("the token endpoint answered an expired token (exp "+exp.UTC().Format(time.RFC3339)+"): check the clocks", nil)
	}
	return exp, nil
}

// Mechanism returns the SASL OAUTHBEARER mechanism presenting this source's tokens (with the
// JAAS extension_* options as SASL extensions). A broker refusal is logged once per attempt with
// what to check (Kafka's answer is only {"status":"invalid_token"}).
func (t *OIDCTokens) Mechanism() sasl.Mechanism {
	return refusalLogger{onRefusal: t.logRefusal, inner: oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
		tok, err := t.Token(ctx)
		if err != nil {
			return oauth.Auth{}, err
		}
		return oauth.Auth{Token: tok, Extensions: t.extensions}, nil
	})}
}

// logRefusal says what to check when a broker refused a token of this OIDC endpoint.
func (t *OIDCTokens) logRefusal(host, answer string) {
	t.logger.Error("the broker refused the OAUTHBEARER token: check that the broker's sasl.oauthbearer.expected.audience is among the token's aud (set by the scope, "+
		"sasl.oauthbearer.scope or the JAAS scope option), its expected.issuer is the issuer, and its jwks.endpoint.url serves the issuer's keys",
		"broker", host, "token_endpoint", t.endpoint, "client_id", t.clientID, "scope", t.scope, "answer", answer)
}

var errNoTokenSource = errors.New("OAUTHBEARER needs a token source: set azure.auth (default, managed-identity, workload-identity, client-secret, client-certificate or azure-cli) for Azure AD, or sasl.oauthbearer.token.endpoint.url for any OIDC token endpoint")

// urlAllowed reports whether u is in the comma-separated list, entries trimmed, as Kafka 4
// matches org.apache.kafka.sasl.oauthbearer.allowed.urls.
func urlAllowed(list, u string) bool {
	for a := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(a) == u {
			return true
		}
	}
	return false
}
