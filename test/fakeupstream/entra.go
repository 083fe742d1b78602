package fakeupstream

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"time"
)

// The identity the Entra ID fake knows from the start.
const (
	EntraTenant       = "72f988bf-86f1-41af-91ab-2d7cd011db47"
	EntraClientID     = "00001111-aaaa-2222-bbbb-3333cccc4444"
	EntraClientSecret = "fake~client~secret"
)

// EntraScope is the scope Azure OpenAI tokens are issued for.
const EntraScope = "https://cognitiveservices.azure.com/.default"

// EntraID is a fake of the Microsoft identity platform's v2.0 endpoints
// for the OAuth 2.0 client credentials grant, as Microsoft's pages
// describe them (learn.microsoft.com/entra/identity-platform/
// v2-oauth2-client-creds-grant-flow): GET
// /{tenant}/v2.0/.well-known/openid-configuration (the tenant's metadata,
// which MSAL reads first) and POST /{tenant}/oauth2/v2.0/token with a form
// of grant_type=client_credentials, client_id, client_secret (or a
// client_assertion: a workload identity's federated token) and scope,
// answering {"token_type": "Bearer", "expires_in", "ext_expires_in",
// "access_token"}, or {"error", "error_description", "error_codes", …}
// with AADSTS codes. It serves TLS (MSAL takes https authorities only):
// give the credential Client(), which trusts its certificate.
type EntraID struct {
	*httptest.Server

	mu         sync.Mutex
	secrets    map[string]string // client ID → secret
	assertions map[string]string // client ID → federated token
	tokens     map[string]time.Time
	reqs       []Request
	seq        int
	ttl        time.Duration
}

// NewEntraID starts the fake with the application EntraClientID of tenant
// EntraTenant, whose secret is EntraClientSecret.
func NewEntraID() *EntraID {
	f := &EntraID{secrets: map[string]string{EntraClientID: EntraClientSecret}, assertions: map[string]string{},
		tokens: map[string]time.Time{}, ttl: time.Hour}
	f.Server = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	return f
}

// Federate lets client ID sign in with the federated token (a workload
// identity's service account token).
func (f *EntraID) Federate(clientID, token string) {
	f.mu.Lock()
	f.assertions[clientID] = token
	f.mu.Unlock()
}

// Valid reports whether token is one the fake issued and that has not
// expired or been revoked.
func (f *EntraID) Valid(token string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	exp, ok := f.tokens[token]
	return ok && time.Now().Before(exp)
}

// RevokeAll invalidates every token issued so far.
func (f *EntraID) RevokeAll() {
	f.mu.Lock()
	clear(f.tokens)
	f.mu.Unlock()
}

// Issued counts the tokens issued.
func (f *EntraID) Issued() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq
}

// Requests returns copies of the requests received so far.
func (f *EntraID) Requests() []Request { return cloneRequests(&f.mu, &f.reqs) }

func entraError(w http.ResponseWriter, status int, code string, aadsts int, desc string) {
	writeJSON(w, status, map[string]any{"error": code,
		"error_description": fmt.Sprintf("AADSTS%d: %s Trace ID: 0000 Correlation ID: 0000 Timestamp: %s", aadsts, desc, time.Now().UTC().Format("2006-01-02 15:04:05Z")),
		"error_codes":       []int{aadsts}, "timestamp": time.Now().UTC().Format("2006-01-02 15:04:05Z"),
		"trace_id": "00000000-0000-0000-0000-000000000000", "correlation_id": "00000000-0000-0000-0000-000000000000"})
}

func (f *EntraID) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	f.mu.Unlock()
	tenant, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodGet && rest == "v2.0/.well-known/openid-configuration":
		if tenant != EntraTenant {
			entraError(w, http.StatusBadRequest, "invalid_tenant", 90002, "Tenant '"+tenant+"' not found.")
			return
		}
		base := f.URL + "/" + tenant
		writeJSON(w, http.StatusOK, map[string]any{"token_endpoint": base + "/oauth2/v2.0/token",
			"authorization_endpoint": base + "/oauth2/v2.0/authorize", "issuer": base + "/v2.0",
			"jwks_uri": f.URL + "/" + tenant + "/discovery/v2.0/keys", "token_endpoint_auth_methods_supported": []string{"client_secret_post", "private_key_jwt", "client_secret_basic"},
			"response_types_supported": []string{"code", "id_token", "code id_token", "id_token token"}, "tenant_region_scope": "WW"})
	case r.Method == http.MethodPost && rest == "oauth2/v2.0/token":
		f.token(w, tenant, body)
	default:
		http.NotFound(w, r)
	}
}

func (f *EntraID) token(w http.ResponseWriter, tenant string, body []byte) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		entraError(w, http.StatusBadRequest, "invalid_request", 900144, "The request body must contain the following parameter: 'grant_type'.")
		return
	}
	client := form.Get("client_id")
	f.mu.Lock()
	secret, known := f.secrets[client]
	assertion, federated := f.assertions[client]
	f.mu.Unlock()
	switch {
	case tenant != EntraTenant:
		entraError(w, http.StatusBadRequest, "invalid_tenant", 90002, "Tenant '"+tenant+"' not found.")
		return
	case form.Get("grant_type") != "client_credentials":
		entraError(w, http.StatusBadRequest, "unsupported_grant_type", 70003, "The app requested an unsupported grant type.")
		return
	case !known && !federated:
		entraError(w, http.StatusBadRequest, "unauthorized_client", 700016,
			"Application with identifier '"+client+"' was not found in the directory.")
		return
	case form.Get("client_assertion") != "":
		if !federated || form.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" || form.Get("client_assertion") != assertion {
			entraError(w, http.StatusUnauthorized, "invalid_client", 700211, "No matching federated identity record found for presented assertion.")
			return
		}
	case form.Get("client_secret") != secret || secret == "":
		entraError(w, http.StatusUnauthorized, "invalid_client", 7000215, "Invalid client secret provided.")
		return
	}
	if !entraScopeOK(form.Get("scope")) {
		entraError(w, http.StatusBadRequest, "invalid_scope", 70011, "The provided value for the input parameter 'scope' is not valid.")
		return
	}
	f.mu.Lock()
	f.seq++
	tok := fmt.Sprintf("eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.fake-entra-%d.sig", f.seq)
	f.tokens[tok] = time.Now().Add(f.ttl)
	ttl := int(f.ttl / time.Second)
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"token_type": "Bearer", "expires_in": ttl, "ext_expires_in": ttl, "access_token": tok})
}

// entraScopeOK reports a scope list that asks for Azure OpenAI's .default
// scope, beside at most the OpenID Connect scopes MSAL adds.
func entraScopeOK(scope string) bool {
	found := false
	for _, s := range strings.Fields(scope) {
		switch s {
		case EntraScope:
			found = true
		case "openid", "offline_access", "profile":
		default:
			return false
		}
	}
	return found
}
