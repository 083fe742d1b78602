package framework

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/modelgate/modelgate/gateway/http/console"
)

// OIDCProvider is a real OpenID Connect provider on loopback (mockoidc):
// discovery, JWKS, the authorization endpoint (which signs in the next
// queued user at once, without a login form) and the token endpoint, which
// checks the client secret and the PKCE verifier and issues RS256-signed
// ID tokens with the user's groups claim.
type OIDCProvider struct {
	*mockoidc.MockOIDC

	mu     sync.Mutex
	tamper func(jwt.MapClaims)
}

// StartOIDC starts a provider; Shutdown stops it.
func StartOIDC() (*OIDCProvider, error) {
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		return nil, err
	}
	p := &OIDCProvider{MockOIDC: m}
	if err := m.AddMiddleware(p.tamperIDToken); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return p, m.Start(ln, nil)
}

// ConsoleConfig is the console's configuration for this provider.
func (p *OIDCProvider) ConsoleConfig(platformAdminGroup string) console.OIDC {
	return console.OIDC{Issuer: p.Issuer(), ClientID: p.ClientID, ClientSecret: p.ClientSecret,
		PlatformAdminGroup: platformAdminGroup}
}

// SignInNext makes the next authorization request sign in subject with
// groups.
func (p *OIDCProvider) SignInNext(subject string, groups ...string) {
	p.QueueUser(&mockoidc.MockUser{Subject: subject, Email: subject + "@example.com",
		PreferredUsername: subject, Groups: groups})
}

// TamperNext rewrites the claims of the next ID token the token endpoint
// issues (then signs it again with the provider's key), for tests of what
// the relying party must refuse: another issuer, an expired token, a
// wrong nonce.
func (p *OIDCProvider) TamperNext(f func(jwt.MapClaims)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tamper = f
}

func (p *OIDCProvider) tamperIDToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		f := p.tamper
		p.mu.Unlock()
		if f == nil || r.URL.Path != mockoidc.TokenEndpoint {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		var resp map[string]any
		if rec.Code == http.StatusOK && json.Unmarshal(body, &resp) == nil {
			if raw, ok := resp["id_token"].(string); ok {
				claims := jwt.MapClaims{}
				if _, _, err := jwt.NewParser().ParseUnverified(raw, claims); err == nil {
					f(claims)
					if signed, err := p.Keypair.SignJWT(claims); err == nil {
						resp["id_token"] = signed
						body, _ = json.Marshal(resp)
						// Only the one issued token: a refused request (a
						// client trying one way to authenticate, then
						// another) leaves the change for the next.
						p.mu.Lock()
						p.tamper = nil
						p.mu.Unlock()
					}
				}
			}
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(rec.Code)
		_, _ = bytes.NewReader(body).WriteTo(w)
	})
}
