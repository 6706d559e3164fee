package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// AzureTokens fetches Entra ID access tokens for one cluster and caches them:
// franz-go asks for a token on every new connection and every
// re-authentication, and MSAL does not cache tokens with less than five
// minutes left. A token is reused until its refresh time (a fifth of its
// lifetime, at most five minutes, before expiry, or the earlier refresh time
// the identity provider suggests). One fetch runs at a time; callers arriving
// meanwhile wait for it.
type AzureTokens struct {
	cluster  string
	credName string
	detail   string // tenant/client, never a secret
	scope    string
	cred     azcore.TokenCredential
	secrets  []string // values scrubbed from error text, defence in depth
	logger   *slog.Logger
	now      func() time.Time
	timeout  time.Duration

	mu       sync.Mutex
	tok      azcore.AccessToken
	refresh  time.Time     // when tok should be replaced
	inflight chan struct{} // closed when the running fetch ends
	fetches  int
}

// NewAzureTokens builds the credential that cfg selects for the cluster named
// alias, with the token scope derived from bootstrap (see AzureScope).
// Building checks the configuration (files, IDs) but fetches no token.
func NewAzureTokens(alias string, cfg AzureConfig, bootstrap []string, logger *slog.Logger, opts ...AzureOption) (*AzureTokens, error) {
	o := azureOptions{now: time.Now, timeout: 30 * time.Second}
	for _, fn := range opts {
		fn(&o)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	scope, err := AzureScope(cfg.Scope, bootstrap)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", alias, err)
	}
	t := &AzureTokens{
		cluster: alias, scope: scope, logger: logger, now: o.now, timeout: o.timeout,
		secrets: []string{cfg.ClientSecret.Reveal(), cfg.ClientCertificatePassword.Reveal()},
	}
	if cfg.TenantID != "" {
		t.detail += fmt.Sprintf(" tenant %q", cfg.TenantID)
	}
	if cfg.ClientID != "" {
		t.detail += fmt.Sprintf(" client %q", cfg.ClientID)
	}
	if o.credential != nil {
		t.cred, t.credName = o.credential, o.credName
		return t, nil
	}
	t.cred, t.credName, err = newAzureCredential(cfg, o.client)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: Azure AD sign-in (azure.auth=%s): %s", alias, cfg.Auth, t.scrub(err.Error()))
	}
	return t, nil
}

// Scope returns the token scope.
func (t *AzureTokens) Scope() string { return t.scope }

// Credential returns the name of the credential in use, as errors name it.
func (t *AzureTokens) Credential() string { return t.credName }

// Fetches returns how many tokens were fetched from the identity provider.
func (t *AzureTokens) Fetches() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fetches
}

// Token returns a valid access token, fetching a new one when the cached one
// is due for refresh. A failed refresh while the cached token is still valid
// is logged and the cached token returned.
func (t *AzureTokens) Token(ctx context.Context) (string, error) {
	for {
		t.mu.Lock()
		now := t.now()
		if t.tok.Token != "" && now.Before(t.refresh) {
			tok := t.tok.Token
			t.mu.Unlock()
			return tok, nil
		}
		if wait := t.inflight; wait != nil {
			t.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return "", fmt.Errorf("cluster %q: waiting for an Azure AD token: %w", t.cluster, ctx.Err())
			}
		}
		done := make(chan struct{})
		t.inflight = done
		t.mu.Unlock()

		tok, err := t.fetch(ctx)

		t.mu.Lock()
		t.inflight = nil
		close(done)
		if err != nil {
			if now := t.now(); t.tok.Token != "" && now.Before(t.tok.ExpiresOn) {
				// Keep the valid token and retry later, not on every new
				// connection in between.
				t.refresh = now.Add(min(30*time.Second, t.tok.ExpiresOn.Sub(now)/2))
				old := t.tok.Token
				t.mu.Unlock()
				t.logger.Warn("refreshing the Azure AD token failed; using the current one until it expires",
					"cluster", t.cluster, "credential", t.credName, "expires", t.tok.ExpiresOn, "error", err.Error())
				return old, nil
			}
			t.mu.Unlock()
			return "", err
		}
		t.fetches++
		t.tok = tok
		t.refresh = refreshTime(t.now(), tok)
		t.mu.Unlock()
		t.logger.Debug("fetched an Azure AD token", "cluster", t.cluster, "credential", t.credName,
			"scope", t.scope, "expires", tok.ExpiresOn)
		return tok.Token, nil
	}
}

// refreshTime is when a token fetched at now should be replaced.
func refreshTime(now time.Time, tok azcore.AccessToken) time.Time {
	life := tok.ExpiresOn.Sub(now)
	margin := min(life/5, 5*time.Minute)
	at := tok.ExpiresOn.Add(-margin)
	if !tok.RefreshOn.IsZero() && tok.RefreshOn.Before(at) {
		at = tok.RefreshOn
	}
	return at
}

func (t *AzureTokens) fetch(ctx context.Context) (azcore.AccessToken, error) {
	// franz-go passes the client's context, which lives as long as the
	// client: bound the fetch ourselves.
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	tok, err := t.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{t.scope}})
	if err == nil && tok.Token == "" {
		err = errors.New("the identity provider returned an empty token")
	}
	if err == nil && !tok.ExpiresOn.After(t.now()) {
		err = fmt.Errorf("the identity provider returned a token that expired at %s", tok.ExpiresOn.UTC().Format(time.RFC3339))
	}
	if err != nil {
		return azcore.AccessToken{}, &AzureTokenError{
			Cluster: t.cluster, Credential: t.credName, Detail: strings.TrimSpace(t.detail), Scope: t.scope,
			Reason: t.scrub(err.Error()),
		}
	}
	return tok, nil
}

// scrub returns s, or a notice in its place when s holds one of the
// credential's secrets (azidentity's messages carry identity provider
// responses, which should not echo secrets, but a buggy proxy could). The
// text is never edited; see leakGuard for why short values are not looked
// for.
func (t *AzureTokens) scrub(s string) string {
	for _, v := range t.secrets {
		if len(v) >= minGuardedSecret && strings.Contains(s, v) {
			return withheld("azure.client.secret or azure.client.certificate.password")
		}
	}
	return s
}

// AzureTokenError is a failed Azure AD token fetch. It names the cluster, the
// credential, the scope and the identity provider's reason, never a secret.
type AzureTokenError struct {
	Cluster    string // cluster alias
	Credential string // e.g. ClientSecretCredential
	Detail     string // tenant and client IDs, when configured
	Scope      string
	Reason     string // the credential's error text, secrets removed
}

func (e *AzureTokenError) Error() string {
	d := ""
	if e.Detail != "" {
		d = " (" + e.Detail + ")"
	}
	return fmt.Sprintf("cluster %q: getting an Azure AD token with %s%s for scope %s failed: %s",
		e.Cluster, e.Credential, d, e.Scope, e.Reason)
}
