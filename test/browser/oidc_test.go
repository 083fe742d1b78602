package browser

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/framework"
)

// TestOIDCInBrowser signs in to the console in Chromium through the
// stack's OpenID Connect provider (authorization code with PKCE): a viewer
// sees the pages and no key action, and is refused a key form it posts
// anyway; a key manager creates a key and uses it over the API, named as
// the actor on the audit page; another tenant's key manager sees nothing
// of the first tenant and cannot reach its key.
func TestOIDCInBrowser(t *testing.T) {
	browser := requireBrowser(t)
	stack := browserStack(t)
	ctx := context.Background()
	newTenant := func(name, keyName string, viewers, managers []v1.OIDCGroup) *framework.Account {
		t.Helper()
		acct, err := stack.NewAccount(ctx, v1.TenantSpec{DisplayName: name,
			Grants:  []v1.Grant{{ID: "welcome", Credits: ptr.To(v1.Decimal("2000")), Reason: "welcome credit"}},
			Console: &v1.TenantConsole{OIDC: &v1.TenantConsoleOIDC{ViewerGroups: viewers, KeyManagerGroups: managers}}},
			v1.ApiTokenSpec{DisplayName: keyName, Quota: ptr.To[int64](5000000)})
		if err != nil {
			t.Fatal(err)
		}
		if err := stack.WaitCached(ctx, acct.Tenant); err != nil {
			t.Fatal(err)
		}
		return acct
	}
	alpha := newTenant("Alpha Corp", "alpha production key", []v1.OIDCGroup{"alpha-readers"}, []v1.OIDCGroup{"alpha-key-admins"})
	newTenant("Beta Corp", "beta production key", nil, []v1.OIDCGroup{"beta-key-admins"})
	issuer, _ := url.Parse(idp.Issuer())

	p := openPage(t, ctx, browser, 3*time.Minute)
	bctx, shot, step, text := p.ctx, p.shot, p.step, p.text
	base := stack.BaseURL
	count := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(sel)+`).length`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	post := p.post
	csrf := func() string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Value(chromedp.CSS(`form.signout input[name="csrf_token"]`)))
		if err != nil || v == "" {
			t.Fatalf("CSRF token: %v", err)
		}
		return v
	}
	// signIn clicks the provider's button as subject with groups; the
	// provider signs them in at once and the console lands on the overview.
	signIn := func(subject string, groups ...string) {
		t.Helper()
		step("open the sign-in page", chromedp.Navigate(base+"/console/signin"), chromedp.WaitVisible(chromedp.CSS("#signin-oidc")))
		idp.SignInNext(subject, groups...)
		step("sign in as "+subject, chromedp.Click(chromedp.CSS("#signin-oidc")), chromedp.WaitVisible(chromedp.CSS("#balance")))
	}
	signOut := func() {
		t.Helper()
		step("sign out", chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#signin-oidc")))
	}

	step("the sign-in page offers the provider", chromedp.Navigate(base+"/console/signin"),
		chromedp.WaitVisible(chromedp.CSS("#signin-oidc")), chromedp.WaitVisible(chromedp.CSS("#access_token")))
	if got := text("#signin-oidc"); got != "Sign in with your identity provider" {
		t.Fatalf("the provider's button: %q", got)
	}
	shot("oidc-01-signin")

	// A viewer: every page, no key action.
	signIn("vera", "alpha-readers", "unrelated-group")
	if got := text("#who"); got != "vera · viewer" {
		t.Fatalf("the viewer's header: %q", got)
	}
	step("the viewer's keys page", chromedp.Click(chromedp.CSS(`nav a[href="/console/keys"]`)), chromedp.WaitVisible(chromedp.CSS("#keys-read-only")))
	if got := text("#keys"); !strings.Contains(got, "alpha production key") {
		t.Fatalf("the viewer's keys table: %q", got)
	}
	if n := count("#create-key, td.manage, button.disable, button.delete"); n != 0 {
		t.Fatalf("the viewer's keys page has %d key actions", n)
	}
	shot("oidc-02-viewer-keys")
	if st := post("/console/keys", "name=viewer-made&credits=1&csrf_token="+csrf()); st != http.StatusForbidden {
		t.Fatalf("a viewer's create: %d, want 403", st)
	}
	step("back to the overview", chromedp.Navigate(base+"/console/overview"), chromedp.WaitVisible(chromedp.CSS("#balance")))
	if st := post("/console/keys/"+alpha.Token.Name+"/state", "disabled=true&csrf_token="+csrf()); st != http.StatusForbidden {
		t.Fatalf("a viewer's disable: %d, want 403", st)
	}
	step("back to the overview", chromedp.Navigate(base+"/console/overview"), chromedp.WaitVisible(chromedp.CSS("#balance")))
	signOut()

	// A key manager: creates a key and uses it over the API.
	signIn("kim", "alpha-key-admins")
	step("the key manager's keys page", chromedp.Click(chromedp.CSS(`nav a[href="/console/keys"]`)), chromedp.WaitVisible(chromedp.CSS("#create-key")),
		chromedp.SendKeys(chromedp.CSS("#key-name"), "kim's key"), chromedp.SendKeys(chromedp.CSS("#key-credits"), "100"))
	sctx, cancel := context.WithTimeout(bctx, 20*time.Second)
	if _, err := chromedp.RunResponse(sctx, chromedp.Click(chromedp.CSS("#create"))); err != nil {
		t.Fatalf("create the key: %v", err)
	}
	cancel()
	step("the key is shown", chromedp.WaitVisible(chromedp.CSS("#new-key-value")))
	key, err := chromedp.Run(bctx, chromedp.Value(chromedp.CSS("#new-key-value")))
	if err != nil || !strings.HasPrefix(key, "sk-") {
		t.Fatalf("the new key: %q, %v", key, err)
	}
	if got := apiStatus(t, base, key, "GET", "/v1/models", ""); got != http.StatusOK {
		t.Fatalf("the key manager's new key: %d, want 200", got)
	}
	actor := "oidc:" + issuer.Host + ":kim"
	within(t, "the audit page names the key manager", func() bool {
		_, _ = chromedp.Run(bctx, chromedp.Navigate(base+"/console/audit"))
		return strings.Contains(text("main"), actor)
	})
	shot("oidc-03-key-manager-audit")
	signOut()

	// Another tenant's key manager: nothing of Alpha.
	signIn("olga", "beta-key-admins")
	step("the other tenant's keys page", chromedp.Click(chromedp.CSS(`nav a[href="/console/keys"]`)), chromedp.WaitVisible(chromedp.CSS("#create-key")))
	if got := text("body"); !strings.Contains(got, "beta production key") || strings.Contains(got, "alpha") || strings.Contains(got, "Alpha") ||
		strings.Contains(got, "kim") {
		t.Fatalf("the other tenant's keys page: %q", got)
	}
	step("the other tenant's audit", chromedp.Navigate(base+"/console/audit"), chromedp.WaitVisible(chromedp.CSS("main")))
	if got := text("main"); strings.Contains(got, actor) {
		t.Fatalf("the other tenant's audit shows Alpha's actions: %q", got)
	}
	// The key Alpha's key manager made: its name does not resolve in Beta's
	// console.
	list := &v1.ApiTokenList{}
	if err := stack.Client.List(ctx, list, client.InNamespace(alpha.Namespace)); err != nil {
		t.Fatal(err)
	}
	tried := 0
	for _, k := range list.Items {
		if k.Spec.DisplayName != "kim's key" {
			continue
		}
		tried++
		step("back to the keys", chromedp.Navigate(base+"/console/keys"), chromedp.WaitVisible(chromedp.CSS("#create-key")))
		if st := post("/console/keys/"+k.Name+"/delete", "confirm=delete&csrf_token="+csrf()); st != http.StatusNotFound {
			t.Fatalf("the other tenant deleting Alpha's key %s: %d, want 404", k.Name, st)
		}
	}
	if tried != 1 {
		t.Fatalf("Alpha's console keys named \"kim's key\": %d, want 1", tried)
	}
	if got := apiStatus(t, base, key, "GET", "/v1/models", ""); got != http.StatusOK {
		t.Fatalf("Alpha's key after Beta's attempts: %d, want 200", got)
	}
}
