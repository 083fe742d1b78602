package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/http/console"
	"github.com/modelgate/modelgate/test/framework"
)

// platformAdmins is the stack's --console-platform-admin-group.
const platformAdmins = "platform-admins"

// oidcTenant is an account whose console admits OIDC groups.
func oidcTenant(t *testing.T, keyName string, viewers, managers []v1.OIDCGroup) *framework.Account {
	t.Helper()
	ctx := context.Background()
	acct, err := stack.NewAccount(ctx, v1.TenantSpec{DisplayName: "OIDC tenant",
		Grants:  []v1.Grant{{ID: "welcome", Credits: ptr.To(v1.Decimal("1000"))}},
		Console: &v1.TenantConsole{OIDC: &v1.TenantConsoleOIDC{ViewerGroups: viewers, KeyManagerGroups: managers}}},
		v1.ApiTokenSpec{DisplayName: keyName, Quota: ptr.To[int64](100000)})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{acct.Tenant, acct.Token} {
		if err := stack.WaitCached(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	return acct
}

func cookieNamed(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// startOIDC is GET /console/oidc/login: the flow cookie and the provider's
// authorization URL.
func startOIDC(t *testing.T) (*http.Cookie, *url.URL) {
	t.Helper()
	resp, _ := do(t, "GET", console.LoginPath, nil, nil, nil)
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("login: status %d", resp.StatusCode)
	}
	flow := cookieNamed(resp, console.FlowCookieName)
	if flow == nil || !flow.HttpOnly || flow.SameSite != http.SameSiteLaxMode || flow.Path != "/console/oidc/" {
		t.Fatalf("login: flow cookie %+v", flow)
	}
	to, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || !strings.HasPrefix(to.String(), idp.AuthorizationEndpoint()) {
		t.Fatalf("login: redirected to %q", resp.Header.Get("Location"))
	}
	return flow, to
}

// authorize signs subject in at the provider and returns the callback URL
// it sends the browser to.
func authorize(t *testing.T, to *url.URL, subject string, groups ...string) *url.URL {
	t.Helper()
	idp.SignInNext(subject, groups...)
	resp, err := noRedirect.Get(to.String())
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	back, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || err != nil || back.Path != console.CallbackPath {
		t.Fatalf("authorize: status %d, location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return back
}

// callback is the browser's return to the console.
func callback(t *testing.T, back *url.URL, flow *http.Cookie) (*http.Response, string) {
	t.Helper()
	return do(t, "GET", back.RequestURI(), nil, flow, nil)
}

// oidcSignIn runs the whole flow for subject and returns the session cookie.
func oidcSignIn(t *testing.T, wantLanding, subject string, groups ...string) *http.Cookie {
	t.Helper()
	flow, to := startOIDC(t)
	resp, body := callback(t, authorize(t, to, subject, groups...), flow)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `href="`+wantLanding+`"`) {
		t.Fatalf("callback: status %d, body %s", resp.StatusCode, body)
	}
	if c := cookieNamed(resp, console.FlowCookieName); c == nil || c.MaxAge >= 0 {
		t.Fatalf("callback did not clear the flow cookie: %+v", c)
	}
	s := sessionCookie(resp)
	if s == nil || !s.HttpOnly || s.SameSite != http.SameSiteStrictMode || !strings.HasPrefix(s.Value, "v2.") {
		t.Fatalf("callback: session cookie %+v", s)
	}
	return s
}

// actorOf is the actor the console names for subject.
func actorOf(subject string) string {
	u, _ := url.Parse(idp.Issuer())
	return "oidc:" + u.Host + ":" + subject
}

// TestOIDCRoles signs in through the provider as each role: a viewer sees
// the pages and no key action (403 on a POST), a key manager creates a key
// under their own name, another tenant's user sees and reaches nothing of
// the first tenant, a user in no tenant's group gets no session, and a
// platform admin lands on the platform page.
func TestOIDCRoles(t *testing.T) {
	ctx := context.Background()
	acme := oidcTenant(t, "acme first key", []v1.OIDCGroup{"acme-readers"}, []v1.OIDCGroup{"acme-admins"})
	oidcTenant(t, "other first key", nil, []v1.OIDCGroup{"other-admins"})
	acmeOnly := &v1.ApiToken{}
	acmeOnly.Namespace, acmeOnly.Name = acme.Namespace, "acme-only"
	acmeOnly.Spec = v1.ApiTokenSpec{DisplayName: "acme only key", Quota: ptr.To[int64](1000)}
	if err := stack.Client.Create(ctx, acmeOnly); err != nil {
		t.Fatal(err)
	}
	if err := stack.WaitCached(ctx, acmeOnly); err != nil {
		t.Fatal(err)
	}

	t.Run("sign-in page offers the provider", func(t *testing.T) {
		body := page(t, "/console/signin", nil)
		if !strings.Contains(body, `id="signin-oidc" href="/console/oidc/login"`) || !strings.Contains(body, `id="access_token"`) {
			t.Fatalf("sign-in page: %s", body)
		}
	})

	t.Run("viewer sees pages, may not act", func(t *testing.T) {
		s := oidcSignIn(t, "/console/overview", "vera", "acme-readers", "unrelated")
		for _, p := range []string{"/console/overview", "/console/usage", "/console/tasks", "/console/prices", "/console/audit"} {
			if body := page(t, p, s); !strings.Contains(body, "vera · viewer") {
				t.Fatalf("%s does not name the viewer: %s", p, body)
			}
		}
		keys := page(t, "/console/keys", s)
		if !strings.Contains(keys, "acme first key") || strings.Contains(keys, `id="create-key"`) || strings.Contains(keys, `class="disable"`) ||
			!strings.Contains(keys, `id="keys-read-only"`) {
			t.Fatalf("viewer's keys page: %s", keys)
		}
		csrf := csrfOf(t, keys)
		for _, path := range []string{"/console/keys", "/console/keys/" + acme.Token.Name + "/state",
			"/console/keys/" + acme.Token.Name + "/limits", "/console/keys/" + acme.Token.Name + "/delete"} {
			resp, _ := do(t, "POST", path, url.Values{"csrf_token": {csrf}, "name": {"sneaky"}, "disabled": {"true"}, "confirm": {"delete"}}, s, nil)
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("viewer POST %s: status %d", path, resp.StatusCode)
			}
		}
		tok := &v1.ApiToken{}
		if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(acme.Token), tok); err != nil || tok.Spec.Disabled {
			t.Fatalf("the viewer changed the key: %v %+v", err, tok.Spec)
		}
	})

	t.Run("key manager creates a key as themselves", func(t *testing.T) {
		// In both lists: the key manager role wins.
		s := oidcSignIn(t, "/console/overview", "kim", "acme-readers", "acme-admins")
		keys := page(t, "/console/keys", s)
		if !strings.Contains(keys, `id="create-key"`) || !strings.Contains(keys, "kim · key-manager") {
			t.Fatalf("key manager's keys page: %s", keys)
		}
		resp, body := do(t, "POST", "/console/keys", url.Values{"csrf_token": {csrfOf(t, keys)}, "name": {"kim key"}, "credits": {"10"}}, s, nil)
		m := newKeyBox.FindStringSubmatch(body)
		if resp.StatusCode != http.StatusOK || m == nil {
			t.Fatalf("create: status %d, body %s", resp.StatusCode, body)
		}
		if st := keyStatus(t, m[1]); st != http.StatusOK {
			t.Fatalf("the new key: GET /v1/models %d", st)
		}
		list := &v1.ApiTokenList{}
		if err := stack.Client.List(ctx, list, client.InNamespace(acme.Namespace)); err != nil {
			t.Fatal(err)
		}
		var actor string
		for _, k := range list.Items {
			if k.Spec.DisplayName == "kim key" {
				actor = k.Annotations[console.LastActorAnnotation]
			}
		}
		if actor != actorOf("kim") {
			t.Fatalf("key stamped by %q, want %q", actor, actorOf("kim"))
		}
		eventually(t, "the audit page names kim", func() bool { return strings.Contains(page(t, "/console/audit", s), actorOf("kim")) })
	})

	t.Run("another tenant's user sees nothing of this one", func(t *testing.T) {
		s := oidcSignIn(t, "/console/overview", "olga", "other-admins")
		keys := page(t, "/console/keys", s)
		if !strings.Contains(keys, "other first key") {
			t.Fatalf("other tenant's keys page: %s", keys)
		}
		for _, p := range []string{"/console/keys", "/console/overview", "/console/audit", "/console/usage"} {
			if body := page(t, p, s); strings.Contains(body, "acme ") || strings.Contains(body, "kim key") || strings.Contains(body, actorOf("kim")) || strings.Contains(body, acme.Namespace) {
				t.Fatalf("other tenant's %s shows acme: %s", p, body)
			}
		}
		csrf := csrfOf(t, keys)
		for _, path := range []string{"/console/keys/acme-only/delete", "/console/keys/acme-only/state"} {
			resp, _ := do(t, "POST", path, url.Values{"csrf_token": {csrf}, "confirm": {"delete"}, "disabled": {"true"}}, s, nil)
			if resp.StatusCode != http.StatusNotFound {
				t.Fatalf("POST %s from the other tenant: status %d", path, resp.StatusCode)
			}
		}
		tok := &v1.ApiToken{}
		if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(acmeOnly), tok); err != nil || tok.Spec.Disabled {
			t.Fatalf("acme's key: %v %+v", err, tok.Spec)
		}
	})

	t.Run("a user in no tenant's group is refused", func(t *testing.T) {
		flow, to := startOIDC(t)
		resp, body := callback(t, authorize(t, to, "nobody", "some-team"), flow)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "none of your groups gives access") {
			t.Fatalf("status %d, body %s", resp.StatusCode, body)
		}
		if s := sessionCookie(resp); s != nil && s.Value != "" {
			t.Fatalf("a refused sign-in set a session: %+v", s)
		}
	})

	t.Run("platform admin lands on the platform page", func(t *testing.T) {
		s := oidcSignIn(t, console.PlatformPath, "pat", platformAdmins, "acme-admins")
		resp, _ := do(t, "GET", "/console/signin", nil, s, nil)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != console.PlatformPath {
			t.Fatalf("signin with a platform session: %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		// No tenant: the tenant pages are not the admin's.
		resp, _ = do(t, "GET", "/console/keys", nil, s, nil)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/signin" {
			t.Fatalf("keys with a platform session: %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		// The admin signs out from the page's header; the page is then hidden.
		if body := page(t, console.PlatformPath, s); !regexp.MustCompile(
			`<form class="signout" method="post" action="/console/signout">\s*<input type="hidden" name="csrf_token" value="[^"]+">`).MatchString(body) {
			t.Fatalf("the platform page has no sign-out form with the session's CSRF token: %s", body)
		}
		resp, _ = do(t, "POST", "/console/signout", url.Values{}, s, nil)
		cleared := sessionCookie(resp)
		if resp.StatusCode != http.StatusSeeOther || cleared == nil || cleared.Value != "" || cleared.MaxAge >= 0 {
			t.Fatalf("the admin's sign-out: %d, cookie %+v", resp.StatusCode, cleared)
		}
		if resp, _ = do(t, "GET", console.PlatformPath, nil, cleared, nil); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("the platform page after sign-out: %d", resp.StatusCode)
		}
	})

	t.Run("the access-token sign-in still works", func(t *testing.T) {
		tn := newTenant(t, "v1 key", 0)
		c := signIn(t, tn)
		if !strings.HasPrefix(c.Value, "v1.") || !strings.Contains(page(t, "/console/keys", c), `id="create-key"`) {
			t.Fatalf("v1 session %q", c.Value)
		}
	})
}

// TestOIDCRefusals: every callback that cannot be trusted ends on the
// sign-in page with an error and no session.
func TestOIDCRefusals(t *testing.T) {
	oidcTenant(t, "refusal key", nil, []v1.OIDCGroup{"refusal-admins"})
	refused := func(t *testing.T, resp *http.Response, body string, status int) {
		t.Helper()
		if resp.StatusCode != status || !strings.Contains(body, `class="error"`) {
			t.Fatalf("status %d (want %d), body %s", resp.StatusCode, status, body)
		}
		if s := sessionCookie(resp); s != nil && s.Value != "" {
			t.Fatalf("a refused callback set a session: %+v", s)
		}
	}
	tampered := func(t *testing.T, f func(jwt.MapClaims)) (*http.Response, string) {
		flow, to := startOIDC(t)
		back := authorize(t, to, "tess", "refusal-admins")
		idp.TamperNext(f)
		return callback(t, back, flow)
	}

	t.Run("control: an untampered flow signs in", func(t *testing.T) {
		oidcSignIn(t, "/console/overview", "tess", "refusal-admins")
	})
	t.Run("bad state", func(t *testing.T) {
		flow, to := startOIDC(t)
		back := authorize(t, to, "tess", "refusal-admins")
		q := back.Query()
		q.Set("state", q.Get("state")+"x")
		back.RawQuery = q.Encode()
		resp, body := callback(t, back, flow)
		refused(t, resp, body, http.StatusBadRequest)
	})
	t.Run("no flow cookie", func(t *testing.T) {
		_, to := startOIDC(t)
		resp, body := callback(t, authorize(t, to, "tess", "refusal-admins"), nil)
		refused(t, resp, body, http.StatusBadRequest)
	})
	t.Run("another browser's flow cookie", func(t *testing.T) {
		other, _ := startOIDC(t)
		_, to := startOIDC(t)
		resp, body := callback(t, authorize(t, to, "tess", "refusal-admins"), other)
		refused(t, resp, body, http.StatusBadRequest)
	})
	t.Run("wrong issuer", func(t *testing.T) {
		resp, body := tampered(t, func(c jwt.MapClaims) { c["iss"] = "https://evil.example.com/oidc" })
		refused(t, resp, body, http.StatusUnauthorized)
	})
	t.Run("wrong audience", func(t *testing.T) {
		resp, body := tampered(t, func(c jwt.MapClaims) { c["aud"] = []string{"another-client"} })
		refused(t, resp, body, http.StatusUnauthorized)
	})
	t.Run("expired ID token", func(t *testing.T) {
		resp, body := tampered(t, func(c jwt.MapClaims) {
			past := time.Now().Add(-time.Hour)
			c["iat"], c["nbf"], c["exp"] = past.Add(-time.Minute).Unix(), past.Add(-time.Minute).Unix(), past.Unix()
		})
		refused(t, resp, body, http.StatusUnauthorized)
	})
	t.Run("wrong nonce", func(t *testing.T) {
		resp, body := tampered(t, func(c jwt.MapClaims) { c["nonce"] = "replayed" })
		refused(t, resp, body, http.StatusUnauthorized)
	})
	t.Run("provider error", func(t *testing.T) {
		flow, _ := startOIDC(t)
		resp, body := do(t, "GET", console.CallbackPath+"?error=access_denied&state=x", nil, flow, nil)
		refused(t, resp, body, http.StatusUnauthorized)
		if !strings.Contains(body, "(access_denied)") {
			t.Fatalf("the provider's error code is not shown: %s", body)
		}
		// Free text in the query is not shown.
		resp, body = do(t, "GET", console.CallbackPath+"?error="+url.QueryEscape("Call +1 555 0100 to unlock")+"&state=x", nil, flow, nil)
		refused(t, resp, body, http.StatusUnauthorized)
		if strings.Contains(body, "555") || !strings.Contains(body, "(unknown error)") {
			t.Fatalf("free text of the query is shown: %s", body)
		}
	})
	t.Run("PKCE: the code is useless without the verifier", func(t *testing.T) {
		flow, to := startOIDC(t)
		if to.Query().Get("code_challenge_method") != "S256" || to.Query().Get("code_challenge") == "" ||
			to.Query().Get("nonce") == "" || to.Query().Get("state") == "" {
			t.Fatalf("authorization URL without PKCE, nonce or state: %s", to)
		}
		back := authorize(t, to, "tess", "refusal-admins")
		// An attacker holding the code but not the browser's verifier.
		resp, err := http.PostForm(idp.TokenEndpoint(), url.Values{"grant_type": {"authorization_code"}, "code": {back.Query().Get("code")},
			"client_id": {idp.ClientID}, "client_secret": {idp.ClientSecret}, "redirect_uri": {stack.BaseURL + console.CallbackPath}})
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("the provider exchanged the code without the PKCE verifier")
		}
		// The code is spent: the browser's callback fails too.
		resp2, body := callback(t, back, flow)
		refused(t, resp2, body, http.StatusUnauthorized)
	})
}

// TestMatchTenant: the mapping of groups to a tenant and role.
func TestMatchTenant(t *testing.T) {
	tenant := func(ns string, viewers, managers []v1.OIDCGroup) v1.Tenant {
		t := v1.Tenant{}
		t.Namespace, t.Name, t.Status.UserID = ns, ns, 7
		t.Spec.Console = &v1.TenantConsole{OIDC: &v1.TenantConsoleOIDC{ViewerGroups: viewers, KeyManagerGroups: managers}}
		return t
	}
	unregistered := tenant("aaa", []v1.OIDCGroup{"g"}, nil)
	unregistered.Status.UserID = 0
	tenants := []v1.Tenant{tenant("zeta", []v1.OIDCGroup{"g", "z"}, nil), tenant("beta", []v1.OIDCGroup{"g"}, []v1.OIDCGroup{"b"}),
		unregistered, {}}
	for _, tc := range []struct {
		groups []string
		want   console.Match
		ok     bool
	}{
		{[]string{"z"}, console.Match{Namespace: "zeta", Name: "zeta", Role: console.RoleViewer}, true},
		{[]string{"b", "g"}, console.Match{Namespace: "beta", Name: "beta", Role: console.RoleKeyManager}, true},
		// Two tenants match: the first by namespace, whatever the role.
		{[]string{"g", "z"}, console.Match{Namespace: "beta", Name: "beta", Role: console.RoleViewer}, true},
		{[]string{"G"}, console.Match{}, false},
		{nil, console.Match{}, false},
	} {
		got, ok := console.MatchTenant(tenants, tc.groups)
		if got != tc.want || ok != tc.ok {
			t.Errorf("groups %v: got %+v %v, want %+v %v", tc.groups, got, ok, tc.want, tc.ok)
		}
	}
}
