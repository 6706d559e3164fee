package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
)

// keySet is the issuer's JSON Web Key Set as the verifier's oidc.KeySet: the keys of the last
// fetch that succeeded, fetched again when a token's signature matches none of them (a rotation,
// or a forgery: pacedTransport bounds how often). A fetch's keys are the cached keys before any
// verification uses them. A verification that found no key takes the outcome, keys or error, of
// a fetch that started after it looked: one under way or just ended if there is one, else one
// it starts; a fetch that started before it looked may predate a rotation. At most one fetch
// runs at a time, in a goroutine of its own under the server's context, so a verification
// waits for it only as long as its own context lasts. go-oidc's RemoteKeySet answers the
// verifications waiting on a fetch before it stores the fetched keys and lets the next fetch
// start, so right after a rotation a token of the new key could be refused (it joined the fetch
// that had just ended, with the old keys) and one of the dropped key accepted (the cache still
// held it).
type keySet struct {
	ctx    context.Context // the server's: a fetch outlives the request that started it
	url    string
	client *http.Client
	algs   []string // the signing algorithms a token may use (signingAlgs)

	// looked, when set (tests), runs after a verification read the cached keys.
	looked func()

	mu      sync.Mutex
	keys    []jose.JSONWebKey
	started uint64    // fetches started; a fetch's number is the count once it started
	running *keyFetch // the fetch under way, nil if none
	last    *keyFetch // the fetch that ended last, nil before the first
}

// keyFetch is one fetch of the key set: its number among the fetches started and, once done is
// closed, its outcome.
type keyFetch struct {
	n    uint64
	done chan struct{}
	keys []jose.JSONWebKey
	err  error
}

var _ oidc.KeySet = (*keySet)(nil)

// VerifySignature returns the payload of the compact JWS raw if one of the issuer's keys with its
// key id signed it. Waiting for a fetch ends with ctx.
func (k *keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, k.jwsAlgs())
	if err != nil {
		return nil, fmt.Errorf("malformed jwt: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, fmt.Errorf("the token has %d signatures, want 1", len(jws.Signatures))
	}
	kid := jws.Signatures[0].Header.KeyID
	k.mu.Lock()
	keys, seen := k.keys, k.started
	k.mu.Unlock()
	if k.looked != nil {
		k.looked()
	}
	if payload, ok := verifyWith(jws, kid, keys); ok {
		return payload, nil
	}
	keys, err = k.refresh(ctx, seen)
	if err != nil {
		return nil, fmt.Errorf("fetching keys: %w", err)
	}
	if payload, ok := verifyWith(jws, kid, keys); ok {
		return payload, nil
	}
	if kid == "" {
		return nil, fmt.Errorf("no key of the issuer's key set %s signed the token (it names no key id)", k.url)
	}
	return nil, fmt.Errorf("no key of the issuer's key set %s with the token's key id %q signed the token", k.url, clip(kid))
}

// clip shortens s, which the sender chose, to what an error needs to name it.
func clip(s string) string {
	const most = 64
	if len(s) <= most {
		return s
	}
	return s[:most] + "..."
}

// refresh returns the outcome of a fetch that started after the seen'th: one under way or
// ended, or one it starts. It waits only as long as ctx lasts.
func (k *keySet) refresh(ctx context.Context, seen uint64) ([]jose.JSONWebKey, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("waiting for the key set of %s: %w", k.url, err)
		}
		k.mu.Lock()
		if f := k.last; f != nil && f.n > seen {
			k.mu.Unlock()
			return f.keys, f.err
		}
		f := k.running
		if f == nil {
			k.started++
			f = &keyFetch{n: k.started, done: make(chan struct{})}
			k.running = f
			go k.run(f)
		}
		k.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the key set of %s: %w", k.url, ctx.Err())
		case <-f.done:
		}
		if f.n > seen {
			return f.keys, f.err
		}
		// f started before the verification looked: its keys may predate a rotation.
	}
}

// run performs f and publishes its outcome: the keys (if it succeeded) become the cached keys,
// then f is the last fetch, and then its waiters are woken.
func (k *keySet) run(f *keyFetch) {
	f.keys, f.err = k.fetch()
	k.mu.Lock()
	if f.err == nil {
		k.keys = f.keys
	}
	k.last, k.running = f, nil
	k.mu.Unlock()
	close(f.done)
}

// fetch gets the key set document (bounded by the client's timeout).
func (k *keySet) fetch() ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(k.ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, fmt.Errorf("oidc: key set request for %s: %w", k.url, err)
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("oidc: getting the key set: %w", err) // err, a *url.Error, names the URL
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("oidc: reading the key set of %s: %w", k.url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("oidc: getting the key set of %s: %s %s", k.url, resp.Status, oneLine(string(body)))
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("oidc: the key set of %s is not a JSON Web Key Set: %w", k.url, err)
	}
	return set.Keys, nil
}

// jwsAlgs is algs as go-jose's type.
func (k *keySet) jwsAlgs() []jose.SignatureAlgorithm {
	out := make([]jose.SignatureAlgorithm, len(k.algs))
	for i, a := range k.algs {
		out[i] = jose.SignatureAlgorithm(a)
	}
	return out
}

// verifyWith returns the payload of jws if a key of keys with key id kid (any key when the
// token names none) signed it.
func verifyWith(jws *jose.JSONWebSignature, kid string, keys []jose.JSONWebKey) ([]byte, bool) {
	for _, key := range keys {
		if kid != "" && key.KeyID != kid {
			continue
		}
		if payload, err := jws.Verify(&key); err == nil {
			return payload, true
		}
	}
	return nil, false
}
