package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
)

// keySet is the issuer's JSON Web Key Set as the verifier's oidc.KeySet: the keys of the last
// fetch, fetched again when a token's signature matches none of them (a rotation, or a
// forgery: pacedTransport bounds how often). A fetch's keys are the cached keys before any
// verification uses them, and a verification that found no key waits for a fetch that started
// after it looked. go-oidc's RemoteKeySet answers the verifications waiting on a fetch before
// it stores the fetched keys and lets the next fetch start, so right after a rotation a token
// of the new key could be refused (it joined the fetch that had just ended, with the old keys)
// and one of the dropped key accepted (the cache still held it).
type keySet struct {
	ctx    context.Context // the server's: a fetch outlives the request that started it
	url    string
	client *http.Client
	algs   []string // the signing algorithms a token may use (signingAlgs)

	fetchMu sync.Mutex // one fetch at a time; held across it

	mu      sync.Mutex
	keys    []jose.JSONWebKey
	fetches uint64 // fetches that succeeded: a verification waits for one after the keys it tried
}

var _ oidc.KeySet = (*keySet)(nil)

// VerifySignature returns the payload of the compact JWS raw if one of the issuer's keys with its
// key id signed it.
func (k *keySet) VerifySignature(_ context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, k.jwsAlgs())
	if err != nil {
		return nil, fmt.Errorf("malformed jwt: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, fmt.Errorf("the token has %d signatures, want 1", len(jws.Signatures))
	}
	kid := jws.Signatures[0].Header.KeyID
	k.mu.Lock()
	keys, seen := k.keys, k.fetches
	k.mu.Unlock()
	if payload, ok := verifyWith(jws, kid, keys); ok {
		return payload, nil
	}
	keys, err = k.refresh(seen)
	if err != nil {
		return nil, fmt.Errorf("fetching keys %w", err)
	}
	if payload, ok := verifyWith(jws, kid, keys); ok {
		return payload, nil
	}
	return nil, errors.New("no key of the issuer's key set signed the token")
}

// refresh returns the keys of a fetch that succeeded after the seen'th: one another
// verification ran meanwhile, or its own.
func (k *keySet) refresh(seen uint64) ([]jose.JSONWebKey, error) {
	k.fetchMu.Lock()
	defer k.fetchMu.Unlock()
	k.mu.Lock()
	if k.fetches != seen {
		defer k.mu.Unlock()
		return k.keys, nil
	}
	k.mu.Unlock()
	keys, err := k.fetch()
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys = keys
	k.fetches++
	return keys, nil
}

// fetch gets the key set document (bounded by the client's timeout).
func (k *keySet) fetch() ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(k.ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, fmt.Errorf("oidc: key set request for %s: %w", k.url, err)
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("oidc: get keys failed: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("oidc: reading the key set of %s: %w", k.url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("oidc: get keys failed: %s %s", resp.Status, oneLine(string(body)))
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
