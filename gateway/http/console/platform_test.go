package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/http/console"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/test/apicheck"
)

// TestPlatformOverview renders the platform overview for an admin over the
// stack's ledger and informer cache, with usage of two tenants in a window
// of their own (200 days ago: the other tests write around now), and checks
// every figure against the rows inserted and against the store; the route
// itself answers without an admin session as a path nothing serves.
func TestPlatformOverview(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	now := time.Now().UTC()
	day0 := now.Truncate(24*time.Hour).AddDate(0, 0, -200).Unix()
	suffix := strconv.FormatInt(now.UnixNano()%1_000_000, 10)
	chat, image, video := "plat-chat-"+suffix, "plat-image-"+suffix, "plat-video-"+suffix

	a, err := stack.NewAccount(ctx, v1.TenantSpec{DisplayName: "Platform A " + suffix,
		Grants: []v1.Grant{{ID: "welcome", Credits: ptr.To(v1.Decimal("100"))}}}, v1.ApiTokenSpec{DisplayName: "a-key", Quota: ptr.To[int64](1000)})
	g.Expect(err).NotTo(HaveOccurred())
	b, err := stack.NewAccount(ctx, v1.TenantSpec{DisplayName: "Platform B " + suffix,
		Grants: []v1.Grant{{ID: "welcome", Credits: ptr.To(v1.Decimal("100"))}}}, v1.ApiTokenSpec{DisplayName: "b-key", Quota: ptr.To[int64](1000)})
	g.Expect(err).NotTo(HaveOccurred())
	idle, err := stack.NewAccount(ctx, v1.TenantSpec{DisplayName: "Platform idle " + suffix}, v1.ApiTokenSpec{DisplayName: "idle-key"})
	g.Expect(err).NotTo(HaveOccurred())
	for _, acct := range []*v1.Tenant{a.Tenant, b.Tenant, idle.Tenant} {
		g.Expect(stack.WaitCached(ctx, acct)).To(Succeed())
	}

	n := 0
	row := func(acct ids, model string, at int64, quota billing.Quota) store.UsageRow {
		n++
		return store.UsageRow{RequestID: fmt.Sprintf("plat-%s-%d", suffix, n), CreatedAt: at, UserID: acct.user, TokenID: acct.token,
			TokenName: "k", ModelName: model, PromptTokens: 100, CompletionTokens: 20, BillingPhase: store.PhaseSettled, Quota: quota}
	}
	ra, rb := ids{a.Tenant.Status.UserID, a.Token.Status.TokenID}, ids{b.Tenant.Status.UserID, b.Token.Status.TokenID}
	held := row(rb, chat, day0+100, 77777)
	held.BillingPhase = store.PhasePreConsumed // held, not spent: not in the rollups
	_, err = stack.Ledger.InsertUsage(ctx, []store.UsageRow{
		row(ra, chat, day0+3600, 120000),
		row(ra, image, day0+7200, 30000),
		row(ra, chat, day0+86400+10, 50000),
		row(rb, chat, day0+60, 700000),
		row(rb, video, day0+2*86400+5, 400000),
		row(rb, video, day0+3*86400+1, 999), // after the window
		held,
	})
	g.Expect(err).NotTo(HaveOccurred())

	c := console.New(console.Deps{Ledger: stack.Ledger, Cache: stack.Cache, Clock: clocktesting.NewFakePassiveClock(now),
		SessionKey: []byte("0123456789abcdef0123456789abcdef")})
	doc, err := apicheck.Load()
	g.Expect(err).NotTo(HaveOccurred())
	render := func(query string) (int, http.Header, string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/console/platform?"+query, nil)
		c.PlatformPage("admin@example.com").ServeHTTP(rec, req)
		g.Expect(doc.Check(req, rec.Code, rec.Header(), rec.Body.Bytes())).To(Succeed(), "the API reference declares the answer")
		return rec.Code, rec.Header(), rec.Body.String()
	}
	window := fmt.Sprintf("start_timestamp=%d&end_timestamp=%d", day0, day0+3*86400)
	status, header, body := render(window)
	g.Expect(status).To(Equal(http.StatusOK), body)
	g.Expect(header.Get("Content-Security-Policy")).To(Equal(console.CSP))
	g.Expect(body).To(ContainSubstring("platform admin · admin@example.com"))
	// The page only reads: its one form is the header's sign-out.
	g.Expect(strings.Count(strings.ToLower(body), "<form")).To(Equal(1), "the page only reads")
	g.Expect(body).To(ContainSubstring(`<form class="signout" method="post" action="/console/signout">`))

	// The window's totals: five settled rows.
	g.Expect(body).To(ContainSubstring(`<span id="platform-quota">1300000</span>`))
	g.Expect(body).To(ContainSubstring(`<span id="platform-requests">5</span>`))

	// By tenant, the larger first, with the Tenant's name and state.
	tenantRow := func(userID int64) []string {
		re := regexp.MustCompile(`(?s)<tr class="tenant" data-user="` + strconv.FormatInt(userID, 10) + `">\s*<td class="tenant-name">([^<]*)</td>.*?` +
			`<td class="state-([a-z ]+)">.*?<td class="n t-requests">(\d+)</td><td class="n t-tokens">(\d+)</td><td class="n t-quota">(\d+)</td>`)
		m := re.FindStringSubmatch(body)
		g.Expect(m).NotTo(BeNil(), "the row of user %d", userID)
		return m[1:]
	}
	g.Expect(tenantRow(ra.user)).To(Equal([]string{"Platform A " + suffix, "ready", "3", "360", "200000"}))
	g.Expect(tenantRow(rb.user)).To(Equal([]string{"Platform B " + suffix, "ready", "2", "240", "1100000"}))
	g.Expect(strings.Index(body, `data-user="`+strconv.FormatInt(rb.user, 10)+`"`)).
		To(BeNumerically("<", strings.Index(body, `data-user="`+strconv.FormatInt(ra.user, 10)+`"`)))

	// By model and by day: the charts' breakdowns.
	breakdown := func(id string) map[string][]string {
		start := strings.Index(body, `<table id="`+id+`">`)
		g.Expect(start).To(BeNumerically(">=", 0), id)
		section := body[start : start+strings.Index(body[start:], "</table>")]
		out := map[string][]string{}
		for _, m := range groupRow.FindAllStringSubmatch(section, -1) {
			out[m[1]] = m[2:]
		}
		return out
	}
	g.Expect(breakdown("model-breakdown")).To(Equal(map[string][]string{
		chat: {"3", "360", "870000"}, video: {"1", "120", "400000"}, image: {"1", "120", "30000"},
	}))
	g.Expect(breakdown("platform-breakdown")).To(Equal(map[string][]string{"All usage": {"5", "600", "1300000"}}))
	days := regexp.MustCompile(`<rect class="bar s0"[^>]*><title>(\d{4}-\d\d-\d\d) · All usage: ([0-9.]+)</title>`)
	var perDay []string
	for _, m := range days.FindAllStringSubmatch(body[strings.Index(body, `<svg id="platform-chart"`):], -1) {
		perDay = append(perDay, m[1]+" "+m[2])
		if len(perDay) == 3 {
			break
		}
	}
	date := func(d int) string { return time.Unix(day0+int64(d)*86400, 0).UTC().Format("2006-01-02") }
	g.Expect(perDay).To(Equal([]string{date(0) + " " + billing.Quota(850000).CostUSD(), date(1) + " " + billing.Quota(50000).CostUSD(),
		date(2) + " " + billing.Quota(400000).CostUSD()}))

	// Top keys: the two keys, the larger first, named with their tenant.
	keyRow := regexp.MustCompile(`<tr class="key" data-token="(\d+)"><td class="key-name">([^<]*) <span class="muted">#\d+</span></td><td class="key-tenant">([^<]*)</td>\s*<td class="n k-requests">(\d+)</td><td class="n">\d+</td><td class="n k-quota">(\d+)</td>`)
	var keys [][]string
	for _, m := range keyRow.FindAllStringSubmatch(body, -1) {
		keys = append(keys, m[1:])
	}
	g.Expect(keys).To(Equal([][]string{
		{strconv.FormatInt(rb.token, 10), "b-key", "Platform B " + suffix + " (" + b.Namespace + ")", "2", "1100000"},
		{strconv.FormatInt(ra.token, 10), "a-key", "Platform A " + suffix + " (" + a.Namespace + ")", "3", "200000"},
	}))

	// The same figures as the store's own answer for the window.
	totals, err := stack.Ledger.PlatformTotals(ctx, store.PlatformQuery{Start: day0, End: day0 + 3*86400, Bucket: store.BucketDay,
		Split: store.SplitTenant, Limit: 10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(totals).To(Equal([]store.SpendTotal{
		{UserID: rb.user, RequestCount: 2, Tokens: 240, Quota: 1100000},
		{UserID: ra.user, RequestCount: 3, Tokens: 360, Quota: 200000},
	}))

	// Every live Tenant is listed, with or without spend.
	g.Expect(tenantRow(idle.Tenant.Status.UserID)).To(Equal([]string{"Platform idle " + suffix, "ready", "0", "0", "0"}))

	// The window's rules are the usage page's.
	for _, q := range []string{"start_timestamp=10&end_timestamp=5", fmt.Sprintf("start_timestamp=%d&end_timestamp=%d", day0, day0+32*86400),
		"start_timestamp=x", "token_id=1"} {
		status, _, _ := render(q)
		g.Expect(status).To(Equal(http.StatusUnprocessableEntity), q)
	}
	// Without a window: the last 7 days, which hold none of these rows.
	status, _, body = render("")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).NotTo(ContainSubstring(chat))
	g.Expect(body).To(ContainSubstring(`href="/console/platform?end_timestamp=`))
}

// ids are a tenant's user ID and its key's token ID.
type ids struct{ user, token int64 }

// TestPlatformOverviewIsHidden: without a platform admin's session the
// route answers exactly as a console path nothing serves, with or without
// a tenant's session.
func TestPlatformOverviewIsHidden(t *testing.T) {
	g := NewWithT(t)
	tn := newTenant(t, "hidden", 1)
	cookie := signIn(t, tn)
	want, wantBody := do(t, "GET", "/console/no-such-page", nil, nil, nil)
	g.Expect(want.StatusCode).To(Equal(http.StatusNotFound))
	doc, err := apicheck.Load()
	g.Expect(err).NotTo(HaveOccurred())
	for name, c := range map[string]*http.Cookie{"no session": nil, "a tenant's session": cookie} {
		resp, body := do(t, "GET", "/console/platform", nil, c, nil)
		g.Expect(resp.StatusCode).To(Equal(http.StatusNotFound), name)
		g.Expect(doc.Check(resp.Request, resp.StatusCode, resp.Header, []byte(body))).To(Succeed(), name)
		g.Expect(resp.Header.Get("Content-Type")).To(Equal(want.Header.Get("Content-Type")), name)
		g.Expect(resp.Header.Get("Content-Security-Policy")).To(BeEmpty(), name)
		g.Expect(strings.ReplaceAll(body, "/console/platform", "/console/no-such-page")).To(Equal(wantBody), name)
	}
}
