// Package browser drives the tenant console in headless Chromium against a
// real stack and saves full-page screenshots. It needs a Chromium or Chrome
// binary: under CI=true a missing browser fails the test; elsewhere the test
// skips and says so. Screenshots go to $MODELGATE_TEST_ARTIFACTS, default
// test/artifacts/console (ignored by git).
package browser

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/test/framework"
)

// findBrowser returns a Chromium or Chrome binary: $CHROME_PATH, else the
// first of the usual names on PATH.
func findBrowser() string {
	if p := os.Getenv("CHROME_PATH"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

func artifactsDir(t *testing.T) string {
	dir := os.Getenv("MODELGATE_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(framework.RepoRoot(), "test", "artifacts")
	}
	dir = filepath.Join(dir, "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestConsoleInBrowser(t *testing.T) {
	browser := requireBrowser(t)
	stack := browserStack(t)
	ctx := context.Background()
	acct, err := stack.NewAccount(ctx, v1.TenantSpec{DisplayName: "Browser Tenant",
		Grants: []v1.Grant{{ID: "welcome", Credits: ptr.To(v1.Decimal("2000")), Reason: "welcome credit"}}},
		v1.ApiTokenSpec{DisplayName: "production key", Quota: ptr.To[int64](5000000), DailyQuota: 1000000, RequestsPerMinute: 120})
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: acct.Namespace, Name: acct.Tenant.Status.AccessTokenSecretName}, secret); err != nil {
		t.Fatal(err)
	}
	accessToken := string(secret.Data[v1.AccessTokenSecretKey])
	// Usage over the last week: a few rows a day, so the chart has bars and
	// the table has pages.
	now := time.Now()
	var rows []store.UsageRow
	for d := range 6 {
		for i := range d%3 + 1 {
			rows = append(rows, store.UsageRow{
				RequestID: fmt.Sprintf("%s-%d-%d", acct.Namespace, d, i), CreatedAt: now.Add(-time.Duration(d)*24*time.Hour - time.Duration(i+1)*time.Minute).Unix(),
				UserID: acct.Tenant.Status.UserID, TokenID: acct.Token.Status.TokenID, TokenName: "production key",
				ModelName: []string{"sim-chat", "sim-reasoner", "sim-image"}[(d+i)%3], PromptTokens: int64(200 * (i + 1)), CompletionTokens: int64(50 * (d + 1)),
				BillingPhase: store.PhaseSettled, Quota: billing.Quota(20000 * (d + 1) * (i + 1)),
			})
		}
	}
	if _, err := stack.Ledger.InsertUsage(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if err := stack.WaitCached(ctx, acct.Tenant); err != nil {
		t.Fatal(err)
	}
	taskID := completedImageTask(t, stack, acct.Key)

	p := openPage(t, ctx, browser, 2*time.Minute)
	bctx, shot, step, text := p.ctx, p.shot, p.step, p.text
	location := p.location

	base := stack.BaseURL
	step("open the console", chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.CSS("#access_token")))
	if !strings.HasSuffix(location(), "/console/signin") {
		t.Fatalf("the console without a session is at %s", location())
	}
	shot("01-signin")

	step("sign in with a wrong token",
		chromedp.SendKeys(chromedp.CSS("#user_id"), strconv.FormatInt(acct.Tenant.Status.UserID, 10)),
		chromedp.SendKeys(chromedp.CSS("#access_token"), "wrong-token"),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS(".error")))
	if got := text(".error"); !strings.Contains(got, "Invalid access token or user ID") {
		t.Fatalf("error after a wrong token: %q", got)
	}
	shot("02-signin-refused")

	step("sign in",
		chromedp.SendKeys(chromedp.CSS("#user_id"), strconv.FormatInt(acct.Tenant.Status.UserID, 10)),
		chromedp.SendKeys(chromedp.CSS("#access_token"), accessToken),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#balance")))
	if got := text("#balance"); !strings.Contains(got, "USD") || !strings.Contains(got, "credits") {
		t.Errorf("balance card: %q", got)
	}
	if got := text("#grants"); !strings.Contains(got, "welcome credit") {
		t.Errorf("grants: %q", got)
	}
	shot("03-overview")

	step("keys", chromedp.Click(chromedp.CSS(`nav a[href="/console/keys"]`)), chromedp.WaitVisible(chromedp.CSS("#keys")))
	if got := text("#keys"); !strings.Contains(got, "production key") || !strings.Contains(got, acct.Token.Status.KeyPrefix) ||
		strings.Contains(got, acct.Key) {
		t.Errorf("keys table: %q", got)
	}
	shot("04-keys")

	step("usage", chromedp.Click(chromedp.CSS(`nav a[href="/console/usage"]`)), chromedp.WaitVisible(chromedp.CSS("#usage-chart")))
	bars, err := chromedp.Run(bctx, chromedp.Nodes(chromedp.CSSAll("#usage-chart rect.bar")))
	if err != nil || len(bars) < 6 {
		t.Errorf("chart bars: %d, %v", len(bars), err)
	}
	shot("05-usage")

	// Split by model: one colour per model, applied by the stylesheet under
	// the page's CSP, and the breakdown's requests add up to the rows'. The
	// page before has a breakdown too: wait for the new page's current
	// option, then for its stylesheet (an unstyled bar's fill is black).
	step("usage by model", chromedp.Click(chromedp.CSS(`a.opt-split[href*="split=model"]`)),
		chromedp.WaitVisible(chromedp.CSS(`a.opt-split[href*="split=model"][aria-current]`)), loaded(),
		chromedp.WaitVisible(chromedp.CSS("#breakdown tr.group")))
	fills, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](
		`[...new Set([...document.querySelectorAll("#usage-chart rect.bar")].map(r => getComputedStyle(r).fill))]`))
	if err != nil || len(fills) != 4 {
		t.Errorf("fills of the split chart: %v, %v (want four colours: three models of the rows and the image task's)", fills, err)
	}
	requests, err := chromedp.Run(bctx, chromedp.Evaluate[int](
		`[...document.querySelectorAll("#breakdown tr.group td:nth-child(2)")].reduce((n, td) => n + Number(td.textContent), 0)`))
	if err != nil || requests != len(rows)+1 {
		t.Errorf("the breakdown counts %d requests (%v), the ledger has %d rows and one task", requests, err, len(rows))
	}
	shot("05b-usage-by-model")

	// Paging: two rows a page over the same window.
	step("usage, two rows a page",
		chromedp.Navigate(base+"/console/usage?page_size=2&start_timestamp="+strconv.FormatInt(now.Add(-7*24*time.Hour).Unix(), 10)+
			"&end_timestamp="+strconv.FormatInt(now.Add(time.Minute).Unix(), 10)),
		chromedp.WaitVisible(chromedp.CSS("#next-page")))
	first := text("#usage tbody")
	shot("06-usage-page1")
	step("next page", chromedp.Click(chromedp.CSS("#next-page")), chromedp.WaitVisible(chromedp.CSS("#first-page")))
	second := text("#usage tbody")
	if first == second || !strings.Contains(location(), "cursor=") {
		t.Errorf("the next page shows the same rows (%s)", location())
	}
	shot("07-usage-page2")

	step("tasks", chromedp.Click(chromedp.CSS(`nav a[href="/console/tasks"]`)), chromedp.WaitVisible(chromedp.CSS("#tasks a.result")))
	if got := text("#tasks"); !strings.Contains(got, taskID) || !strings.Contains(got, "completed") || !strings.Contains(got, "settled") {
		t.Errorf("tasks page: %q", got)
	}
	shot("08-tasks")

	step("prices", chromedp.Click(chromedp.CSS(`nav a[href="/console/prices"]`)), chromedp.WaitVisible(chromedp.CSS("#prices")))
	if got := text("#prices"); !strings.Contains(got, browserImageModel) || !strings.Contains(got, "0.04") {
		t.Errorf("prices page: %q", got)
	}
	shot("09-prices")

	step("overview at phone width", chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(base+"/console/overview"), chromedp.WaitVisible(chromedp.CSS("#balance")))
	shot("10-overview-phone")
	step("usage at phone width", chromedp.Navigate(base+"/console/usage"), chromedp.WaitVisible(chromedp.CSS("#usage-chart")))
	shot("11-usage-phone")

	step("sign out", chromedp.EmulateViewport(1280, 900), chromedp.Click(chromedp.CSS("#signout")),
		chromedp.WaitVisible(chromedp.CSS("#access_token")))
	step("the overview needs a new sign-in", chromedp.Navigate(base+"/console/overview"), chromedp.WaitVisible(chromedp.CSS("#access_token")))
	if !strings.HasSuffix(location(), "/console/signin") {
		t.Errorf("after sign-out the overview is at %s", location())
	}
	shot("12-signed-out")
}

// browserImageModel is the image model of the browser test's catalog.
const browserImageModel = "browser-image"

// completedImageTask publishes a simulated image model with a price,
// submits one task with the key and waits until it is completed and
// settled, so the tasks and prices pages have something to show.
func completedImageTask(t *testing.T, stack *framework.Stack, key string) string {
	t.Helper()
	ctx := context.Background()
	publishImage(t, stack)
	task, err := stack.CompletedImageTask(ctx, key, browserImageModel, "a lighthouse at dusk")
	if err != nil {
		t.Fatal(err)
	}
	return task["id"].(string)
}
