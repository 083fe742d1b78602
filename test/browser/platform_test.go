package browser

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/test/framework"
)

// browserPlatformAdmins is the stack's --console-platform-admin-group.
const browserPlatformAdmins = "platform-admins"

// browserChatModel is the text model the platform test spends on.
const browserChatModel = "browser-chat"

// TestPlatformInBrowser signs in to the console in Chromium as a member of
// the platform-admin group, lands on the platform overview and finds two
// tenants' spend, made over the API with their keys, equal to the ledger's
// rows and to the store's platform totals, and each tenant's state (a
// duplicate Tenant not ready with its reason). A tenant's OIDC user and an
// access-token session get 404 for the page.
func TestPlatformInBrowser(t *testing.T) {
	browser := requireBrowser(t)
	stack := browserStack(t)
	ctx := context.Background()
	publishImage(t, stack)
	publishChat(t, stack)

	newTenant := func(name string, viewers []v1.OIDCGroup) *framework.Account {
		t.Helper()
		acct, err := stack.NewAccount(ctx, v1.TenantSpec{DisplayName: name,
			Grants:  []v1.Grant{{ID: "welcome", Credits: ptr.To(v1.Decimal("2000")), Reason: "welcome credit"}},
			Console: &v1.TenantConsole{OIDC: &v1.TenantConsoleOIDC{ViewerGroups: viewers}}},
			v1.ApiTokenSpec{DisplayName: name + " key", Quota: ptr.To[int64](5000000)})
		if err != nil {
			t.Fatal(err)
		}
		if err := stack.WaitCached(ctx, acct.Tenant); err != nil {
			t.Fatal(err)
		}
		return acct
	}
	alpha := newTenant("Platform Alpha", []v1.OIDCGroup{"platform-alpha-readers"})
	beta := newTenant("Platform Beta", nil)
	// A second Tenant in Beta's namespace: refused, so not ready.
	dup := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "zz-second", Namespace: beta.Namespace},
		Spec: v1.TenantSpec{DisplayName: "Platform Beta duplicate"}}
	if err := stack.Client.Create(ctx, dup); err != nil {
		t.Fatal(err)
	}

	// Spend over the API with the tenants' keys: Alpha three chat calls and
	// an image task, Beta one chat call.
	chat := func(key string, words int) {
		t.Helper()
		body := `{"model":"` + browserChatModel + `","messages":[{"role":"user","content":"hello [sim:tokens=` + strconv.Itoa(words) + `]"}]}`
		if _, err := stack.CallJSON(ctx, key, http.MethodPost, "/v1/chat/completions", body); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []int{40, 80, 120} {
		chat(alpha.Key, n)
	}
	if _, err := stack.CompletedImageTask(ctx, alpha.Key, browserImageModel, "a lighthouse at noon"); err != nil {
		t.Fatal(err)
	}
	chat(beta.Key, 300)

	// The ledger's settled rows of each tenant; the page's figures must be
	// their sums (the rollups are written with the rows).
	now := time.Now()
	start, end := now.Add(-time.Hour).Truncate(time.Hour).Unix(), now.Add(time.Hour).Truncate(time.Hour).Unix()
	type spend struct{ requests, tokens, quota int64 }
	ledgerSpend := func(acct *framework.Account, want int) spend {
		t.Helper()
		var s spend
		within(t, "the ledger holds the tenant's settled rows", func() bool {
			page, err := stack.Ledger.ListUsage(ctx, store.UsageQuery{UserID: acct.Tenant.Status.UserID, Start: start, End: end, PageSize: 100})
			if err != nil {
				t.Fatal(err)
			}
			s = spend{}
			for _, r := range page.Rows {
				if r.BillingPhase != store.PhaseSettled {
					return false
				}
				s.requests++
				s.tokens += r.PromptTokens + r.CompletionTokens
				s.quota += int64(r.Quota)
			}
			return len(page.Rows) == want
		})
		if s.quota == 0 || s.tokens == 0 {
			t.Fatalf("the tenant's rows cost nothing: %+v", s)
		}
		return s
	}
	wantAlpha, wantBeta := ledgerSpend(alpha, 4), ledgerSpend(beta, 1)
	totals, err := stack.Ledger.PlatformTotals(ctx, store.PlatformQuery{Start: start, End: end, Bucket: store.BucketHour,
		Split: store.SplitTenant, Limit: store.MaxPlatformTotals})
	if err != nil {
		t.Fatal(err)
	}
	storeSpend := map[int64]spend{}
	for _, s := range totals {
		storeSpend[s.UserID] = spend{s.RequestCount, s.Tokens, int64(s.Quota)}
	}
	for _, a := range []struct {
		acct *framework.Account
		want spend
	}{{alpha, wantAlpha}, {beta, wantBeta}} {
		if got := storeSpend[a.acct.Tenant.Status.UserID]; got != a.want {
			t.Fatalf("the store's platform totals for %s: %+v, its rows sum to %+v", a.acct.Tenant.Spec.DisplayName, got, a.want)
		}
	}
	within(t, "the duplicate Tenant is refused in the gateway's cache", func() bool {
		got := &v1.Tenant{}
		if err := stack.Cache.Get(ctx, client.ObjectKeyFromObject(dup), got); err != nil {
			return false
		}
		for _, c := range got.Status.Conditions {
			if c.Type == v1.ConditionReady && c.Status == metav1.ConditionFalse {
				return true
			}
		}
		return false
	})

	p := openPage(t, ctx, browser, 3*time.Minute)
	bctx, shot, step, text := p.ctx, p.shot, p.step, p.text
	base := stack.BaseURL
	platformURL := base + "/console/platform"
	// status navigates to url and answers the document's status.
	status := func(url string) int {
		t.Helper()
		sctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		resp, err := chromedp.RunResponse(sctx, chromedp.Navigate(url))
		if err != nil || resp == nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		return int(resp.Status)
	}
	signOut := func() {
		t.Helper()
		step("sign out", chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#signin-oidc")))
	}

	// The platform admin: the sign-in lands on the overview.
	step("open the sign-in page", chromedp.Navigate(base+"/console/signin"), chromedp.WaitVisible(chromedp.CSS("#signin-oidc")))
	idp.SignInNext("pat", "unrelated-group", browserPlatformAdmins)
	step("sign in as a platform admin", chromedp.Click(chromedp.CSS("#signin-oidc")), chromedp.WaitVisible(chromedp.CSS("#tenants")))
	if loc := p.location(); loc != platformURL {
		t.Fatalf("the platform admin landed on %s", loc)
	}
	if got := text("#admin"); got != "platform admin · pat" {
		t.Fatalf("the admin's header: %q", got)
	}
	step("the platform overview of the last two hours",
		chromedp.Navigate(platformURL+"?start_timestamp="+strconv.FormatInt(start, 10)+"&end_timestamp="+strconv.FormatInt(end, 10)),
		chromedp.WaitVisible(chromedp.CSS("#tenants")), loaded())
	row := func(sel string) string { return `#tenants tr.tenant` + sel + ` ` }
	for _, a := range []struct {
		acct *framework.Account
		want spend
	}{{alpha, wantAlpha}, {beta, wantBeta}} {
		r := row(`[data-user="` + strconv.FormatInt(a.acct.Tenant.Status.UserID, 10) + `"]`)
		got := spend{}
		for _, f := range []struct {
			sel string
			n   *int64
		}{{".t-requests", &got.requests}, {".t-tokens", &got.tokens}, {".t-quota", &got.quota}} {
			n, err := strconv.ParseInt(text(r+f.sel), 10, 64)
			if err != nil {
				t.Fatalf("%s%s: %v", r, f.sel, err)
			}
			*f.n = n
		}
		if got != a.want {
			t.Errorf("the page's spend of %s: %+v, the ledger's %+v", a.acct.Tenant.Spec.DisplayName, got, a.want)
		}
		if name := text(r + ".tenant-name"); name != a.acct.Tenant.Spec.DisplayName {
			t.Errorf("the row of user %d names %q", a.acct.Tenant.Status.UserID, name)
		}
		if state := text(r + "td:nth-child(4)"); state != "ready" {
			t.Errorf("the state of %s: %q", a.acct.Tenant.Spec.DisplayName, state)
		}
		if usd := text(r + "td:nth-child(8)"); usd != billing.Quota(a.want.quota).CostUSD() {
			t.Errorf("the USD of %s: %q, want %s", a.acct.Tenant.Spec.DisplayName, usd, billing.Quota(a.want.quota).CostUSD())
		}
	}
	// The duplicate: no user ID, no spend, not ready with the reason.
	dupState, err := chromedp.Run(bctx, chromedp.Evaluate[string](`[...document.querySelectorAll("#tenants tr.tenant")].
		filter(r => r.querySelector(".tenant-name").textContent === "Platform Beta duplicate").
		map(r => r.querySelector("td:nth-child(4)").textContent).join("|")`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(dupState, "not ready ("+v1.ReasonDuplicateTenant+")") {
		t.Errorf("the duplicate Tenant's state: %q", dupState)
	}
	// Alpha's key among the top keys, with its tenant.
	if got := text("#top-keys"); !strings.Contains(got, "Platform Alpha key") || !strings.Contains(got, "Platform Alpha ("+alpha.Namespace+")") {
		t.Errorf("top keys: %q", got)
	}
	shot("platform-01-overview")

	// The admin signs out; the page is then hidden.
	signOut()
	if st := status(platformURL); st != http.StatusNotFound {
		t.Fatalf("the platform page after sign-out: %d, want 404", st)
	}

	// A tenant's OIDC user: 404.
	step("open the sign-in page", chromedp.Navigate(base+"/console/signin"), chromedp.WaitVisible(chromedp.CSS("#signin-oidc")))
	idp.SignInNext("vic", "platform-alpha-readers")
	step("sign in as Alpha's viewer", chromedp.Click(chromedp.CSS("#signin-oidc")), chromedp.WaitVisible(chromedp.CSS("#balance")))
	if st := status(platformURL); st != http.StatusNotFound {
		t.Fatalf("the platform page for a tenant's OIDC user: %d, want 404", st)
	}
	if got := text("body"); strings.Contains(got, "Platform Beta") {
		t.Fatalf("the 404 shows another tenant: %q", got)
	}
	step("back to the overview", chromedp.Navigate(base+"/console/overview"), chromedp.WaitVisible(chromedp.CSS("#balance")))
	signOut()

	// An access-token session: 404.
	secret := &corev1.Secret{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: beta.Namespace, Name: beta.Tenant.Status.AccessTokenSecretName}, secret); err != nil {
		t.Fatal(err)
	}
	step("sign in with Beta's access token",
		chromedp.SendKeys(chromedp.CSS("#user_id"), strconv.FormatInt(beta.Tenant.Status.UserID, 10)),
		chromedp.SendKeys(chromedp.CSS("#access_token"), string(secret.Data[v1.AccessTokenSecretKey])),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#balance")))
	if st := status(platformURL); st != http.StatusNotFound {
		t.Fatalf("the platform page for an access-token session: %d, want 404", st)
	}
	shot("platform-02-tenant-404")
}

// publishChat publishes the platform test's text model on the simulated
// backend, priced per token, until the test ends.
func publishChat(t *testing.T, stack *framework.Stack) {
	t.Helper()
	ctx := context.Background()
	out := v1.Decimal("15")
	route := &v1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Name: browserChatModel, Namespace: framework.SystemNamespace},
		Spec: v1.ModelRouteSpec{Model: browserChatModel, Type: v1.ModelTypeText, MaxOutputTokens: 64000,
			Backends: []v1.Backend{{Name: "sim", Provider: "simulated", Weight: 1, Groups: []v1.GroupName{"default"}}}}}
	price := &v1.PriceRule{ObjectMeta: metav1.ObjectMeta{Name: browserChatModel, Namespace: framework.SystemNamespace},
		Spec: v1.PriceRuleSpec{Model: browserChatModel, ChargeType: v1.ChargePerToken,
			PriceBasis: v1.BasisTextInputTokens, Unit: v1.Unit1MTokens, UnitPrice: "3", OutputUnitPrice: &out}}
	for _, o := range []client.Object{route, price} {
		if err := stack.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), o) })
		if err := stack.WaitReady(ctx, o); err != nil {
			t.Fatal(err)
		}
		if err := stack.WaitCached(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}
