package vertex

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// Scope is the OAuth2 scope the access tokens are asked for.
const Scope = "https://www.googleapis.com/auth/cloud-platform"

// tokenTimeout bounds one token exchange. The OAuth2 library refreshes
// without the caller's context, so this is what stops a hung token
// endpoint.
const tokenTimeout = 30 * time.Second

// maxAccounts bounds the cached service accounts: rotated keys leave their
// old entries behind, and the cache starts afresh past this many.
const maxAccounts = 1024

// tokens caches one token source per service-account key, so that every
// backend with the same key shares its access token and the library
// refreshes it shortly before it expires.
type tokens struct {
	// ctx carries the HTTP client of the token exchanges (oauth2.HTTPClient).
	ctx context.Context

	mu       sync.Mutex
	accounts map[[sha256.Size]byte]*account
}

// account is one service-account key's token source.
type account struct {
	project string
	source  oauth2.TokenSource
}

// newTokens returns a cache whose token exchanges use client.
func newTokens(client *http.Client) *tokens {
	return &tokens{ctx: context.WithValue(context.Background(), oauth2.HTTPClient, client),
		accounts: map[[sha256.Size]byte]*account{}}
}

// account returns backend b's token source, built from its key on first
// use. A key that is not a service-account key fails over: this backend
// cannot serve, another may.
func (t *tokens) account(b upstream.Backend) (*account, error) {
	key := sha256.Sum256([]byte(b.APIKey))
	t.mu.Lock()
	defer t.mu.Unlock()
	if a, ok := t.accounts[key]; ok {
		return a, nil
	}
	if b.APIKey == "" {
		return nil, credentialError(b, "has no credential: set credentialSecretRef to a Secret key holding a service-account key (JSON)", nil)
	}
	// Only the service_account type: other credential types (external
	// accounts) would make the library fetch URLs the key names.
	creds, err := google.CredentialsFromJSONWithType(t.ctx, []byte(b.APIKey), google.ServiceAccount, Scope)
	if err != nil {
		// The library's message names the problem (type, PEM) and never
		// the key's content.
		return nil, credentialError(b, "is not a usable service-account key", err)
	}
	if len(t.accounts) >= maxAccounts {
		clear(t.accounts)
	}
	a := &account{project: creds.ProjectID, source: creds.TokenSource}
	t.accounts[key] = a
	return a, nil
}

// forget drops backend b's cached token source.
func (t *tokens) forget(b upstream.Backend) {
	key := sha256.Sum256([]byte(b.APIKey))
	t.mu.Lock()
	delete(t.accounts, key)
	t.mu.Unlock()
}

// token returns a valid access token, exchanging the key for a new one when
// the cached one is about to expire. It waits no longer than ctx: an
// exchange that outlives it goes on and its token is cached for the next
// call.
func (a *account) token(ctx context.Context, b upstream.Backend) (string, error) {
	type result struct {
		tok *oauth2.Token
		err error
	}
	ch := make(chan result, 1)
	go func() {
		tok, err := a.source.Token()
		ch <- result{tok, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if r.err != nil {
		var re *oauth2.RetrieveError
		if errors.As(r.err, &re) {
			return "", credentialError(b, "was refused by the OAuth2 token endpoint ("+refusal(re)+")", r.err)
		}
		return "", &upstream.Error{Class: upstream.Failover, Status: http.StatusBadGateway, Retryable: true,
			Message: fmt.Sprintf("backend %q (vertex): the OAuth2 token endpoint could not be reached", b.Name), Err: r.err}
	}
	return r.tok.AccessToken, nil
}

// credentialError is a backend credential that cannot give a token: no
// request left, the next backend is tried, and the client, should none
// serve, sees the gateway's own failure (502), not a fault of its request.
func credentialError(b upstream.Backend, what string, err error) *upstream.Error {
	return &upstream.Error{Class: upstream.Failover, Status: http.StatusBadGateway, Retryable: true,
		Message: fmt.Sprintf("the service-account key of backend %q (vertex) %s", b.Name, what), Err: err}
}

// refusal describes a token endpoint's refusal: its RFC 6749 error and
// description ("invalid_grant: Invalid JWT Signature."), which the JWT flow
// of the library leaves unparsed, else the HTTP status.
func refusal(re *oauth2.RetrieveError) string {
	code, desc := re.ErrorCode, re.ErrorDescription
	if code == "" {
		var body struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		if json.Unmarshal(re.Body, &body) == nil {
			code, desc = body.Error, body.Description
		}
	}
	switch {
	case code != "" && desc != "":
		return code + ": " + desc
	case code != "":
		return code
	case re.Response != nil:
		return re.Response.Status
	}
	return "no reason given"
}
