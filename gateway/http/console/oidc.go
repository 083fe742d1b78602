package console

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// OIDC configures the console's sign-in with the platform's OpenID Connect
// provider (authorization code flow with PKCE). An empty Issuer turns it off.
type OIDC struct {
	// Issuer is the provider's issuer URL; its discovery document is read
	// at the first sign-in, not at start, so the gateway starts while the
	// provider is down.
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is the callback the provider sends the browser back to;
	// empty: the request's scheme and host + CallbackPath.
	RedirectURL string
	// GroupsClaim names the ID token claim holding the user's groups;
	// default DefaultGroupsClaim.
	GroupsClaim string
	// Scopes requested; default DefaultScopes.
	Scopes []string
	// PlatformAdminGroup: members sign in as platform admins (no tenant).
	// Empty: nobody does.
	PlatformAdminGroup string
	// HTTPClient reaches the provider (discovery, keys, code exchange); nil:
	// http.DefaultClient.
	HTTPClient *http.Client
}

// Enabled tells whether OIDC sign-in is configured.
func (o OIDC) Enabled() bool { return o.Issuer != "" }

// Validate refuses a configuration the flow cannot work with, at start
// rather than at the first sign-in.
func (o OIDC) Validate() error {
	if !o.Enabled() {
		return nil
	}
	if u, err := url.Parse(o.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("console OIDC issuer %q is not an http(s) URL", o.Issuer)
	}
	if o.ClientID == "" {
		return errors.New("console OIDC needs a client ID (--console-oidc-client-id)")
	}
	if o.RedirectURL != "" {
		if u, err := url.Parse(o.RedirectURL); err != nil || !u.IsAbs() {
			return fmt.Errorf("console OIDC redirect URL %q is not an absolute URL", o.RedirectURL)
		}
	}
	return nil
}

const (
	// DefaultGroupsClaim is the ID token claim read for groups by default.
	DefaultGroupsClaim = "groups"
	// LoginPath starts an OIDC sign-in; CallbackPath ends it.
	LoginPath    = "/console/oidc/login"
	CallbackPath = "/console/oidc/callback"
	// PlatformPath is where a platform admin lands after sign-in.
	PlatformPath = "/console/platform"
	// FlowCookieName holds the state, nonce and PKCE verifier between
	// LoginPath and CallbackPath.
	FlowCookieName = "modelgate_console_oidc"
	// flowTTL bounds the time from LoginPath to CallbackPath.
	flowTTL = 10 * time.Minute
	// flowVersion starts the flow cookie's value and signed message.
	flowVersion = "f1"
	// oidcSessionVersion starts an OIDC session cookie's value and signed message.
	oidcSessionVersion = "v2"
)

// DefaultScopes are requested when OIDC.Scopes is empty: the ID token
// (openid), a name (profile, email) and the groups claim (groups, which
// providers that do not know it ignore).
var DefaultScopes = []string{oidc.ScopeOpenID, "profile", "email", "groups"}

// Role is what an OIDC session may do.
type Role string

const (
	// RoleViewer sees the tenant's pages but may not act on keys.
	RoleViewer Role = "viewer"
	// RoleKeyManager sees the tenant's pages and manages its keys.
	RoleKeyManager Role = "key-manager"
	// RolePlatformAdmin has no tenant: the platform overview.
	RolePlatformAdmin Role = "platform-admin"
)

// oidcClient is the console's relying party. The provider is discovered
// once, at the first sign-in that needs it.
type oidcClient struct {
	cfg        OIDC
	issuerHost string
	mu         sync.Mutex
	provider   *oidc.Provider
}

func newOIDCClient(cfg OIDC) *oidcClient {
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = DefaultGroupsClaim
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = DefaultScopes
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	host := cfg.Issuer
	if u, err := url.Parse(cfg.Issuer); err == nil && u.Host != "" {
		host = u.Host
	}
	return &oidcClient{cfg: cfg, issuerHost: host}
}

// discover reads the provider's discovery document; go-oidc refuses one
// whose issuer is not the configured one. A failure is not kept: the next
// sign-in tries again.
func (o *oidcClient) discover(ctx context.Context) (*oidc.Provider, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.provider != nil {
		return o.provider, nil
	}
	ctx, cancel := context.WithTimeout(oidc.ClientContext(context.WithoutCancel(ctx), o.cfg.HTTPClient), 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(ctx, o.cfg.Issuer)
	if err != nil {
		return nil, err
	}
	o.provider = p
	return p, nil
}

func (o *oidcClient) oauth2(p *oidc.Provider, r *http.Request) *oauth2.Config {
	redirect := o.cfg.RedirectURL
	if redirect == "" {
		scheme := "http"
		if overTLS(r) {
			scheme = "https"
		}
		redirect = scheme + "://" + r.Host + CallbackPath
	}
	return &oauth2.Config{ClientID: o.cfg.ClientID, ClientSecret: o.cfg.ClientSecret,
		Endpoint: p.Endpoint(), RedirectURL: redirect, Scopes: o.cfg.Scopes}
}

// flow is what the flow cookie carries from LoginPath to CallbackPath.
type flow struct {
	State    string `json:"state"`
	Nonce    string `json:"nonce"`
	Verifier string `json:"verifier"`
	Expires  int64  `json:"exp"`
}

// oidcSession is the payload of a v2 session cookie. It is signed, not
// encrypted: it holds nothing secret (no token of the provider).
type oidcSession struct {
	// Issuer is the provider's host, part of the actor's name.
	Issuer  string `json:"iss"`
	Subject string `json:"sub"`
	// Namespace and Name are the tenant's; empty for a platform admin.
	Namespace string `json:"ns,omitempty"`
	Name      string `json:"name,omitempty"`
	Role      Role   `json:"role"`
	Expires   int64  `json:"exp"`
}

// sealed is "<version>.<base64url(JSON)>.<base64url(HMAC)>", the MAC under
// the session key over the version and the encoded payload.
func (c *Console) seal(version string, payload any) (string, error) {
	b, err := json.Marshal(payload)
	if err != nil {
		return "", err
	}
	p := base64.RawURLEncoding.EncodeToString(b)
	return version + "." + p + "." + base64.RawURLEncoding.EncodeToString(c.mac(version, p)), nil
}

func (c *Console) mac(version, payload string) []byte {
	m := hmac.New(sha256.New, c.d.SessionKey)
	m.Write([]byte(version + "|" + payload))
	return m.Sum(nil)
}

// open checks a sealed value's version and MAC and decodes its payload.
func (c *Console) open(version, value string, payload any) bool {
	parts := strings.Split(value, ".")
	if len(parts) != 3 || parts[0] != version {
		return false
	}
	mac, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !hmac.Equal(mac, c.mac(version, parts[1])) {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	return err == nil && json.Unmarshal(b, payload) == nil
}

// oidcSessionOf is the request's valid, unexpired OIDC session from the
// provider configured now, or nil (no session, or an access-token one).
func (c *Console) oidcSessionOf(r *http.Request) *oidcSession {
	if c.oidc == nil {
		return nil
	}
	ck, err := r.Cookie(CookieName)
	if err != nil || !strings.HasPrefix(ck.Value, oidcSessionVersion+".") {
		return nil
	}
	s := &oidcSession{}
	if !c.open(oidcSessionVersion, ck.Value, s) || s.Subject == "" || s.Issuer != c.oidc.issuerHost {
		return nil
	}
	if !c.d.Clock.Now().Before(time.Unix(s.Expires, 0)) {
		return nil
	}
	return s
}

// oidcTenant is the live, registered tenant of an OIDC tenant session. The
// role is not checked against the tenant's mapping again: the session is
// stateless, and SessionTTL bounds how long a removed group still works.
func (c *Console) oidcTenant(r *http.Request, s *oidcSession) *v1.Tenant {
	if s.Role != RoleViewer && s.Role != RoleKeyManager {
		return nil
	}
	t := &v1.Tenant{}
	if err := c.d.Cache.Get(r.Context(), client.ObjectKey{Namespace: s.Namespace, Name: s.Name}, t); err != nil {
		return nil
	}
	if !t.DeletionTimestamp.IsZero() || t.Status.UserID <= 0 {
		return nil
	}
	return t
}

// platformAdminOf is the subject of the request's platform-admin session.
func (c *Console) platformAdminOf(r *http.Request) (subject string, ok bool) {
	s := c.oidcSessionOf(r)
	if s == nil || s.Role != RolePlatformAdmin {
		return "", false
	}
	return s.Subject, true
}

// oidcActor is the actor of an OIDC session: "oidc:<issuer host>:<subject>",
// stable for a person as long as the provider keeps the subject.
func oidcActor(s *oidcSession) string { return "oidc:" + s.Issuer + ":" + s.Subject }

func randomString() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func (c *Console) setFlowCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: FlowCookieName, Value: value, Path: "/console/oidc/", MaxAge: maxAge,
		// Lax, not Strict: the provider's redirect back is a cross-site
		// top-level navigation, which must carry it.
		HttpOnly: true, Secure: overTLS(r), SameSite: http.SameSiteLaxMode,
	})
}

// oidcLogin starts the authorization code flow: a new state, nonce and
// PKCE verifier in the signed flow cookie, and a redirect to the provider.
func (c *Console) oidcLogin(w http.ResponseWriter, r *http.Request) {
	if c.oidc == nil {
		http.NotFound(w, r)
		return
	}
	p, err := c.oidc.discover(r.Context())
	if err != nil {
		slog.ErrorContext(r.Context(), "console OIDC discovery", "issuer", c.oidc.cfg.Issuer, "error", err)
		c.signinPage(w, r, http.StatusServiceUnavailable, "The identity provider cannot be reached right now; try again, or sign in with the access token.")
		return
	}
	state, err1 := randomString()
	nonce, err2 := randomString()
	if err := cmp.Or(err1, err2); err != nil {
		http.Error(w, "the sign-in could not be started", http.StatusInternalServerError)
		return
	}
	f := flow{State: state, Nonce: nonce, Verifier: oauth2.GenerateVerifier(),
		Expires: c.d.Clock.Now().Add(flowTTL).Unix()}
	value, err := c.seal(flowVersion, f)
	if err != nil {
		http.Error(w, "the sign-in could not be started", http.StatusInternalServerError)
		return
	}
	c.setFlowCookie(w, r, value, int(flowTTL/time.Second))
	http.Redirect(w, r, c.oidc.oauth2(p, r).AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(f.Verifier)), http.StatusFound)
}

// errSignin is a refused callback: the reason is logged, the message shown.
type errSignin struct {
	status       int
	reason, text string
}

func (e *errSignin) Error() string { return e.reason }

func refuse(status int, reason, text string) *errSignin {
	return &errSignin{status: status, reason: reason, text: text}
}

// errorCode is the shape of an OAuth 2.0 error code (RFC 6749 4.1.2.1).
var errorCode = regexp.MustCompile(`^[a-z_]{1,64}$`)

// restart is the message of a callback that cannot be trusted or completed.
const restart = "The sign-in could not be completed. Start again from the sign-in page."

// oidcCallback ends the flow: the flow cookie's state must match, the code
// is exchanged with the PKCE verifier, the ID token verified (signature,
// issuer, audience, expiry, then the nonce), and the groups claim mapped
// to a tenant and role or the platform admin role. Neither the code nor
// any token is logged.
func (c *Console) oidcCallback(w http.ResponseWriter, r *http.Request) {
	if c.oidc == nil {
		http.NotFound(w, r)
		return
	}
	// The flow cookie is single-use, whatever the outcome.
	c.setFlowCookie(w, r, "", -1)
	s, err := c.completeSignin(r)
	if err != nil {
		var e *errSignin
		if !errors.As(err, &e) {
			e = refuse(http.StatusBadGateway, err.Error(), restart)
		}
		slog.WarnContext(r.Context(), "console OIDC sign-in refused", "reason", e.reason, "status", e.status)
		c.signinPage(w, r, e.status, e.text)
		return
	}
	value, err := c.seal(oidcSessionVersion, s)
	if err != nil {
		http.Error(w, "the session could not be started", http.StatusInternalServerError)
		return
	}
	exp := time.Unix(s.Expires, 0)
	c.setCookie(w, r, value, exp, int(exp.Sub(c.d.Clock.Now())/time.Second))
	to := Prefix + "overview"
	if s.Role == RolePlatformAdmin {
		to = PlatformPath
	}
	slog.InfoContext(r.Context(), "console OIDC sign-in", "actor", oidcActor(s), "role", s.Role, "namespace", s.Namespace, "tenant", s.Name)
	// A page that moves on, not a redirect: the provider's redirect started
	// this navigation cross-site, and the browser would not send the
	// SameSite=Strict session cookie on a redirect of it.
	c.render(w, r, http.StatusOK, "continue", view{Title: "Signed in", Page: "continue", Data: to})
}

func (c *Console) completeSignin(r *http.Request) (*oidcSession, error) {
	ctx := r.Context()
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		// Only a protocol error code is shown: the query is anyone's to
		// write, and the page must not say what a link's author wants.
		if !errorCode.MatchString(e) {
			e = "unknown error"
		}
		return nil, refuse(http.StatusUnauthorized, "provider error "+e,
			"The identity provider did not sign you in ("+e+"). Start again from the sign-in page.")
	}
	ck, err := r.Cookie(FlowCookieName)
	f := flow{}
	if err != nil || !c.open(flowVersion, ck.Value, &f) {
		return nil, refuse(http.StatusBadRequest, "no valid flow cookie", restart)
	}
	if !c.d.Clock.Now().Before(time.Unix(f.Expires, 0)) {
		return nil, refuse(http.StatusBadRequest, "flow expired", restart)
	}
	state := q.Get("state")
	if f.State == "" || subtle.ConstantTimeCompare([]byte(state), []byte(f.State)) != 1 {
		return nil, refuse(http.StatusBadRequest, "state mismatch", restart)
	}
	if f.Verifier == "" || f.Nonce == "" {
		return nil, refuse(http.StatusBadRequest, "flow without PKCE verifier or nonce", restart)
	}
	code := q.Get("code")
	if code == "" {
		return nil, refuse(http.StatusBadRequest, "no code", restart)
	}
	p, err := c.oidc.discover(ctx)
	if err != nil {
		return nil, refuse(http.StatusServiceUnavailable, "discovery: "+err.Error(),
			"The identity provider cannot be reached right now; try again.")
	}
	xctx, cancel := context.WithTimeout(context.WithValue(ctx, oauth2.HTTPClient, c.oidc.cfg.HTTPClient), 15*time.Second)
	defer cancel()
	tok, err := c.oidc.oauth2(p, r).Exchange(xctx, code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		reason := "code exchange failed"
		if re := (*oauth2.RetrieveError)(nil); errors.As(err, &re) {
			reason += ": " + cmp.Or(re.ErrorCode, "an answer without an error code")
		}
		return nil, refuse(http.StatusUnauthorized, reason, restart)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, refuse(http.StatusUnauthorized, "no ID token in the token response", restart)
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: c.oidc.cfg.ClientID, Now: c.d.Clock.Now}).Verify(ctx, raw)
	if err != nil {
		return nil, refuse(http.StatusUnauthorized, "ID token: "+err.Error(), restart)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(f.Nonce)) != 1 {
		return nil, refuse(http.StatusUnauthorized, "ID token nonce mismatch", restart)
	}
	if idt.Subject == "" {
		return nil, refuse(http.StatusUnauthorized, "ID token without subject", restart)
	}
	claims := map[string]any{}
	if err := idt.Claims(&claims); err != nil {
		return nil, refuse(http.StatusUnauthorized, "ID token claims: "+err.Error(), restart)
	}
	groups := groupsOf(claims[c.oidc.cfg.GroupsClaim])
	s := &oidcSession{Issuer: c.oidc.issuerHost, Subject: idt.Subject,
		Expires: c.d.Clock.Now().Add(c.d.SessionTTL).Truncate(time.Second).Unix()}
	if g := c.oidc.cfg.PlatformAdminGroup; g != "" && slices.Contains(groups, g) {
		s.Role = RolePlatformAdmin
		return s, nil
	}
	list := &v1.TenantList{}
	if err := c.d.Cache.List(ctx, list); err != nil {
		return nil, refuse(http.StatusServiceUnavailable, "list tenants: "+err.Error(), "The console cannot read its tenants right now; try again.")
	}
	m, ok := MatchTenant(list.Items, groups)
	if !ok {
		return nil, refuse(http.StatusForbidden, "no tenant grants the user's groups",
			"You are signed in at your identity provider, but none of your groups gives access to a tenant's console. "+
				"Ask your platform team to add one of your groups to a Tenant's spec.console.oidc.")
	}
	s.Namespace, s.Name, s.Role = m.Namespace, m.Name, m.Role
	return s, nil
}

// groupsOf reads a groups claim: a list of strings, or one string.
func groupsOf(v any) []string {
	switch g := v.(type) {
	case string:
		return []string{g}
	case []any:
		out := make([]string, 0, len(g))
		for _, x := range g {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// Match is the tenant and role a user's groups give.
type Match struct {
	Namespace, Name string
	Role            Role
}

// MatchTenant maps groups to the tenant whose spec.console.oidc names one
// of them, key manager winning over viewer within a tenant. Tenants being
// deleted or not yet registered (no user ID) give nothing. When several
// tenants match, the first by namespace, then name, is taken, so the
// choice is the same on every replica and every sign-in; see
// docs/console.md.
func MatchTenant(tenants []v1.Tenant, groups []string) (Match, bool) {
	var out []Match
	for i := range tenants {
		t := &tenants[i]
		if t.Spec.Console == nil || t.Spec.Console.OIDC == nil || !t.DeletionTimestamp.IsZero() || t.Status.UserID <= 0 {
			continue
		}
		m := Match{Namespace: t.Namespace, Name: t.Name}
		switch o := t.Spec.Console.OIDC; {
		case anyIn(o.KeyManagerGroups, groups):
			m.Role = RoleKeyManager
		case anyIn(o.ViewerGroups, groups):
			m.Role = RoleViewer
		default:
			continue
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return Match{}, false
	}
	return slices.MinFunc(out, func(a, b Match) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	}), true
}

func anyIn(want []v1.OIDCGroup, have []string) bool {
	for _, g := range want {
		if slices.Contains(have, string(g)) {
			return true
		}
	}
	return false
}
