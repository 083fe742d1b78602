package browser

import (
	"context"
	"encoding/csv"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/http/console"
	"github.com/modelgate/modelgate/gateway/store"
)

// apiStatus is the status of an API call with key.
func apiStatus(t *testing.T, base, key, method, path, body string) int {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// within polls cond for up to 20 s: the gateway's cache and the ledger's
// limits follow an edit by a watch event and a reconcile.
func within(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s", what)
		}
	}
}

// TestKeysInBrowser manages keys on the Keys page in Chromium and checks
// each change over the API: a created key works at once, a disabled one is
// refused, a lowered monthly limit is enforced, a GitOps key cannot be
// changed, a form without its CSRF token is refused; then the audit page
// and the usage export.
func TestKeysInBrowser(t *testing.T) {
	browser := requireBrowser(t)
	stack := browserStack(t)
	ctx := context.Background()
	acct, err := stack.NewAccount(ctx, v1.TenantSpec{DisplayName: "Keys Tenant",
		Grants: []v1.Grant{{ID: "welcome", Credits: ptr.To(v1.Decimal("2000")), Reason: "welcome credit"}}},
		v1.ApiTokenSpec{DisplayName: "production key", Quota: ptr.To[int64](5000000)})
	if err != nil {
		t.Fatal(err)
	}
	gitops := &v1.ApiToken{}
	gitops.Namespace, gitops.Name = acct.Namespace, "pipeline-key"
	gitops.Labels = map[string]string{console.ManagedByLabel: console.ManagedByGitOps}
	gitops.Spec = v1.ApiTokenSpec{DisplayName: "pipeline key", Quota: ptr.To[int64](100000)}
	if err := stack.Client.Create(ctx, gitops); err != nil {
		t.Fatal(err)
	}
	publishImage(t, stack)
	secret := &corev1.Secret{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: acct.Namespace, Name: acct.Tenant.Status.AccessTokenSecretName}, secret); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{acct.Tenant, gitops} {
		if err := stack.WaitCached(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	p := openPage(t, ctx, browser, 3*time.Minute)
	bctx, shot, step, text := p.ctx, p.shot, p.step, p.text
	post := p.post

	// click clicks a form's submit button and waits for the page that
	// answers the form.
	click := func(what, sel string) {
		t.Helper()
		sctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		if _, err := chromedp.RunResponse(sctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	base := stack.BaseURL
	step("sign in", chromedp.Navigate(base+"/console/signin"),
		chromedp.SendKeys(chromedp.CSS("#user_id"), strconv.FormatInt(acct.Tenant.Status.UserID, 10)),
		chromedp.SendKeys(chromedp.CSS("#access_token"), string(secret.Data[v1.AccessTokenSecretKey])),
		chromedp.Click(chromedp.CSS("#signin")), chromedp.WaitVisible(chromedp.CSS("#balance")))

	step("create a key", chromedp.Click(chromedp.CSS(`nav a[href="/console/keys"]`)), chromedp.WaitVisible(chromedp.CSS("#create-key")),
		chromedp.SendKeys(chromedp.CSS("#key-name"), "service a"),
		chromedp.SendKeys(chromedp.CSS("#key-credits"), "100"),
		chromedp.SendKeys(chromedp.CSS("#key-monthly"), "50"))
	click("create the key", "#create")
	step("the key is shown", chromedp.WaitVisible(chromedp.CSS("#new-key-value")))
	key, err := chromedp.Run(bctx, chromedp.Value(chromedp.CSS("#new-key-value")))
	if err != nil || !strings.HasPrefix(key, "sk-") {
		t.Fatalf("the new key: %q, %v", key, err)
	}
	shot("13-keys-created")
	if got := apiStatus(t, base, key, "GET", "/v1/models", ""); got != http.StatusOK {
		t.Fatalf("the new key at once: %d, want 200", got)
	}
	if _, err := stack.CompletedImageTask(ctx, key, browserImageModel, "a harbour at noon"); err != nil {
		t.Fatal(err) // 0.04 USD this month, within the 50-credit (0.25 USD) limit
	}
	step("the key is on the page, not the raw key", chromedp.Navigate(base+"/console/keys"), chromedp.WaitVisible(chromedp.CSS("#keys")))
	if got := text("#keys"); !strings.Contains(got, "service a") || strings.Contains(got, key) || !strings.Contains(got, "managed by console") {
		t.Fatalf("keys table: %q", got)
	}
	list := &v1.ApiTokenList{}
	if err := stack.Client.List(ctx, list, client.InNamespace(acct.Namespace), client.MatchingLabels{console.ManagedByLabel: console.ManagedByConsole}); err != nil || len(list.Items) != 1 {
		t.Fatalf("console keys: %v, %v", list.Items, err)
	}
	obj := list.Items[0].Name
	row := `tr[data-object="` + obj + `"] `

	click("disable it", row+"button.disable")
	step("the key shows disabled", chromedp.WaitVisible(chromedp.CSS(row+"button.enable")))
	within(t, "the disabled key answers 401", func() bool { return apiStatus(t, base, key, "GET", "/v1/models", "") == http.StatusUnauthorized })
	click("enable it", row+"button.enable")
	step("the key shows enabled", chromedp.WaitVisible(chromedp.CSS(row+"button.disable")))
	within(t, "the enabled key answers 200", func() bool { return apiStatus(t, base, key, "GET", "/v1/models", "") == http.StatusOK })

	submit := `{"model":"` + browserImageModel + `","prompt":"one more"}`
	step("lower its monthly limit below this month's use",
		chromedp.Click(chromedp.CSS(row+"details summary")),
		chromedp.SetValue(chromedp.CSS(row+`input[name="monthly_credits"]`), "1"))
	click("save the limits", row+"button.save-limits")
	if got := text(row + ".limits"); !strings.Contains(got, "monthly 0.04 / 0.005 USD") {
		t.Fatalf("limits after the edit: %q", got)
	}
	var refused int
	within(t, "a submission beyond the monthly limit is refused", func() bool {
		refused = apiStatus(t, base, key, "POST", "/v1/images/generations", submit)
		return refused == http.StatusPaymentRequired || refused == http.StatusTooManyRequests
	})
	t.Logf("beyond the monthly limit: %d", refused)
	shot("14-keys-limits")

	// The GitOps key: read-only on the page, and refused by the server.
	grow := `tr[data-object="pipeline-key"] `
	if got := text(grow + ".manage"); !strings.Contains(got, "managed by GitOps") {
		t.Fatalf("the GitOps key's row: %q", got)
	}
	if n, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('tr[data-object="pipeline-key"] form').length`)); n != 0 {
		t.Fatalf("the GitOps key's row has %d forms", n)
	}
	csrf, err := chromedp.Run(bctx, chromedp.Value(chromedp.CSS(`#create-key input[name="csrf_token"]`)))
	if err != nil || csrf == "" {
		t.Fatalf("CSRF token: %v", err)
	}
	if st := post("/console/keys/pipeline-key/state", "disabled=true&csrf_token="+csrf); st != http.StatusForbidden || !strings.Contains(text("body"), "managed by GitOps") {
		t.Fatalf("disabling the GitOps key: %d, want 403", st)
	}
	shot("15-keys-gitops-refused")
	// The same form without its CSRF token is refused, and changes nothing.
	step("back to the keys", chromedp.Navigate(base+"/console/keys"), chromedp.WaitVisible(chromedp.CSS("#keys")))
	if st := post("/console/keys/"+obj+"/state", "disabled=true"); st != http.StatusForbidden || !strings.Contains(text("body"), "CSRF") {
		t.Fatalf("a form without its CSRF token: %d, want 403", st)
	}
	step("back to the keys", chromedp.Navigate(base+"/console/keys"), chromedp.WaitVisible(chromedp.CSS("#keys")))
	if st := post("/console/keys", "name=csrf-less"); st != http.StatusForbidden {
		t.Fatalf("create without a CSRF token: %d, want 403", st)
	}
	if got := apiStatus(t, base, key, "GET", "/v1/models", ""); got != http.StatusOK {
		t.Fatalf("the key after a form without CSRF token: %d, want 200 (still enabled)", got)
	}
	if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(gitops), gitops); err != nil || gitops.Spec.Disabled {
		t.Fatalf("the GitOps key was changed: %v", err)
	}
	step("keys page with the GitOps key", chromedp.Navigate(base+"/console/keys"), chromedp.WaitVisible(chromedp.CSS("#keys")))

	step("delete the key", chromedp.Click(chromedp.CSS(row+"details:nth-of-type(2) summary")),
		chromedp.Click(chromedp.CSS(row+`input[name="confirm"]`)))
	click("delete the key", row+"button.delete")
	within(t, "the deleted key answers 401", func() bool { return apiStatus(t, base, key, "GET", "/v1/models", "") == http.StatusUnauthorized })

	step("audit", chromedp.Click(chromedp.CSS(`nav a[href="/console/audit"]`)), chromedp.WaitVisible(chromedp.CSS("#audit")))
	audit := text("#audit")
	for _, want := range []string{"Created", "Disabled", "Enabled", "LimitsChanged", "Deleted", "access token"} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit page lacks %q: %s", want, audit)
		}
	}
	shot("16-audit")

	// The usage export: every row of the window, as the ledger has them.
	step("usage", chromedp.Click(chromedp.CSS(`nav a[href="/console/usage"]`)), chromedp.WaitVisible(chromedp.CSS("#export-csv")))
	shot("17-usage-export")
	href, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector("#export-csv").href`))
	if err != nil {
		t.Fatal(err)
	}
	// The link is a download; the browser's CSP allows no fetch, so the
	// file is read over HTTP with a session of the same account.
	form := url.Values{"user_id": {strconv.FormatInt(acct.Tenant.Status.UserID, 10)}, "access_token": {string(secret.Data[v1.AccessTokenSecretKey])}}
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	if resp, err := hc.PostForm(base+"/console/signin", form); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("sign in over HTTP: %v", err)
	} else {
		_ = resp.Body.Close()
	}
	resp, err := hc.Get(href)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("export: %v", err)
	}
	raw, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	body := string(raw)
	if err != nil || !strings.HasSuffix(body, "# end\n") {
		t.Fatalf("export: %v, %q", err, body)
	}
	records, err := csv.NewReader(strings.NewReader(strings.TrimSuffix(body, "# end\n"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	hu, err := url.Parse(href)
	if err != nil {
		t.Fatal(err)
	}
	start, _ := strconv.ParseInt(hu.Query().Get("start_timestamp"), 10, 64)
	end, _ := strconv.ParseInt(hu.Query().Get("end_timestamp"), 10, 64)
	page, err := stack.Ledger.ListUsage(ctx, store.UsageQuery{UserID: acct.Tenant.Status.UserID, Start: start, End: end, PageSize: store.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != len(page.Rows)+1 || len(page.Rows) == 0 {
		t.Fatalf("the export has %d lines, the ledger %d rows", len(records), len(page.Rows))
	}
	for i, r := range page.Rows {
		if records[i+1][0] != strconv.FormatInt(r.LogID, 10) || records[i+1][5] != r.ModelName || records[i+1][14] != r.Quota.CostUSD() {
			t.Fatalf("export row %d: %v, ledger %+v", i, records[i+1], r)
		}
	}
}
