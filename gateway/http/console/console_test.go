package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/http/console"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/test/framework"
)

var (
	stack *framework.Stack
	// idp is the stack's OpenID Connect provider.
	idp *framework.OIDCProvider
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "console-test-")
	if err != nil {
		panic(err)
	}
	if idp, err = framework.StartOIDC(); err != nil {
		panic(err)
	}
	stack, err = framework.StartStack(framework.StackOptions{Dir: dir, ConsoleOIDC: idp.ConsoleConfig(platformAdmins)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start stack:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = stack.Stop()
	_ = idp.Shutdown()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// tenant is an account with its console credentials and some usage.
type tenant struct {
	acct        *framework.Account
	accessToken string
	userID      string
	t0          int64
}

func newTenant(t *testing.T, keyName string, rows int) *tenant {
	t.Helper()
	ctx := context.Background()
	acct, err := stack.NewAccount(ctx, v1.TenantSpec{DisplayName: "Tenant " + keyName, CreditLimit: ptr.To(v1.Decimal("40")),
		Grants: []v1.Grant{{ID: "welcome", Credits: ptr.To(v1.Decimal("1000")), Reason: "welcome <credit>"}}},
		v1.ApiTokenSpec{DisplayName: keyName, Quota: ptr.To[int64](1000000), DailyQuota: 250000, RequestsPerMinute: 60})
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: acct.Namespace, Name: acct.Tenant.Status.AccessTokenSecretName}, s); err != nil {
		t.Fatal(err)
	}
	tn := &tenant{acct: acct, accessToken: string(s.Data[v1.AccessTokenSecretKey]),
		userID: strconv.FormatInt(acct.Tenant.Status.UserID, 10), t0: time.Now().Add(-time.Hour).Unix()}
	var urows []store.UsageRow
	for i := range rows {
		urows = append(urows, store.UsageRow{
			RequestID: fmt.Sprintf("%s-%d", acct.Namespace, i), CreatedAt: tn.t0 + int64(i),
			UserID: acct.Tenant.Status.UserID, TokenID: acct.Token.Status.TokenID, TokenName: keyName,
			ModelName: "sim-chat", PromptTokens: 100, CompletionTokens: int64(10 * (i + 1)),
			BillingPhase: store.PhaseSettled, Quota: billing.Quota(1000 * (i + 1)), Backend: "secret-backend",
		})
	}
	// Two rows of another model, for the chart's split by model.
	for i := range 2 {
		urows = append(urows, store.UsageRow{
			RequestID: fmt.Sprintf("%s-img-%d", acct.Namespace, i), CreatedAt: tn.t0 + 10 + int64(i),
			UserID: acct.Tenant.Status.UserID, TokenID: acct.Token.Status.TokenID, TokenName: keyName,
			ModelName: "sim-image", BillingPhase: store.PhaseSettled, Quota: 20000,
		})
	}
	// One row two days ago, for the chart's other bar.
	urows = append(urows, store.UsageRow{RequestID: acct.Namespace + "-old", CreatedAt: tn.t0 - 2*86400,
		UserID: acct.Tenant.Status.UserID, TokenID: acct.Token.Status.TokenID, TokenName: keyName, ModelName: "sim-chat",
		PromptTokens: 1, CompletionTokens: 1, BillingPhase: store.PhaseSettled, Quota: 500000})
	if _, err := stack.Ledger.InsertUsage(ctx, urows); err != nil {
		t.Fatal(err)
	}
	// The gateway's cache must hold the tenant before its credentials work.
	if err := stack.WaitCached(ctx, acct.Tenant); err != nil {
		t.Fatal(err)
	}
	return tn
}

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func do(t *testing.T, method, path string, form url.Values, cookie *http.Cookie, header map[string]string) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, stack.BaseURL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(raw)
}

func sessionCookie(resp *http.Response) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == console.CookieName {
			return c
		}
	}
	return nil
}

func signIn(t *testing.T, tn *tenant) *http.Cookie {
	t.Helper()
	resp, _ := do(t, "POST", "/console/signin", url.Values{"user_id": {tn.userID}, "access_token": {tn.accessToken}}, nil, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/overview" {
		t.Fatalf("sign-in: status %d, location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	c := sessionCookie(resp)
	if c == nil {
		t.Fatal("sign-in set no session cookie")
	}
	return c
}

func page(t *testing.T, path string, c *http.Cookie) string {
	t.Helper()
	resp, body := do(t, "GET", path, nil, c, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d: %s", path, resp.StatusCode, body)
	}
	if got := resp.Header.Get("Content-Security-Policy"); got != console.CSP {
		t.Fatalf("GET %s: CSP %q", path, got)
	}
	// The one script is the console's own file (the Keys page's copy
	// button); nothing inline.
	if strings.Contains(strings.ToLower(strings.ReplaceAll(body, copyScript, "")), "<script") {
		t.Fatalf("GET %s: the page has a script element other than the console's own", path)
	}
	return body
}

const copyScript = `<script src="/console/static/copy.js" defer></script>`

var logIDCell = regexp.MustCompile(`<td class="n log-id">(\d+)</td>`)

// groupRow is a row of the chart's breakdown: name, requests, tokens, quota.
var groupRow = regexp.MustCompile(`<tr class="group"><td><span class="swatch s\d" aria-hidden="true"></span><span class="group-name">([^<]*)</span></td><td class="n">(\d+)</td><td class="n">(\d+)</td><td class="n">(\d+)</td>`)

func logIDs(body string) []string {
	var ids []string
	for _, m := range logIDCell.FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// apiRows calls the usage API and returns the page's log IDs and next cursor.
func apiRows(t *testing.T, tn *tenant, query string) ([]string, string, []map[string]any) {
	t.Helper()
	resp, body := do(t, "GET", "/api/usage/tokens/requests?"+query, nil, nil,
		map[string]string{"Authorization": "Bearer " + tn.accessToken, "X-User-Id": tn.userID})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("usage API: %d %s", resp.StatusCode, body)
	}
	var out struct {
		Data []map[string]any
		Meta struct {
			NextCursor string `json:"next_cursor"`
		}
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range out.Data {
		ids = append(ids, string(r["log_id"].(json.Number)))
	}
	return ids, out.Meta.NextCursor, out.Data
}

func TestConsole(t *testing.T) {
	a := newTenant(t, "alpha <key>", 5)
	b := newTenant(t, "bravo key", 3)

	t.Run("pages need a session", func(t *testing.T) {
		for _, p := range []string{"/console/", "/console/overview", "/console/keys", "/console/usage", "/console/tasks", "/console/prices"} {
			resp, _ := do(t, "GET", p, nil, nil, nil)
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/signin" {
				t.Errorf("GET %s without a session: %d %q", p, resp.StatusCode, resp.Header.Get("Location"))
			}
			if resp.Header.Get("Content-Security-Policy") != console.CSP {
				t.Errorf("GET %s: no CSP", p)
			}
		}
		body := page(t, "/console/signin", nil)
		if !strings.Contains(body, `name="access_token"`) {
			t.Error("the sign-in form has no access token field")
		}
	})

	t.Run("bad credentials are refused without a cookie", func(t *testing.T) {
		for name, form := range map[string]url.Values{
			"wrong token":        {"user_id": {a.userID}, "access_token": {a.accessToken + "x"}},
			"API key":            {"user_id": {a.userID}, "access_token": {a.acct.Key}},
			"other user's ID":    {"user_id": {b.userID}, "access_token": {a.accessToken}},
			"no user ID":         {"access_token": {a.accessToken}},
			"non-numeric userID": {"user_id": {"abc"}, "access_token": {a.accessToken}},
			"empty":              {},
		} {
			resp, body := do(t, "POST", "/console/signin", form, nil, nil)
			if resp.StatusCode != http.StatusUnauthorized || sessionCookie(resp) != nil {
				t.Errorf("%s: status %d, cookie %v", name, resp.StatusCode, sessionCookie(resp))
			}
			if !strings.Contains(body, "Invalid access token or user ID.") {
				t.Errorf("%s: no error message", name)
			}
			if strings.Contains(body, a.accessToken) {
				t.Errorf("%s: the page echoes the access token", name)
			}
		}
		resp, _ := do(t, "POST", "/console/signin", url.Values{"user_id": {a.userID}, "access_token": {a.accessToken}},
			nil, map[string]string{"Origin": "https://evil.example"})
		if resp.StatusCode != http.StatusForbidden || sessionCookie(resp) != nil {
			t.Errorf("a cross-origin sign-in: status %d", resp.StatusCode)
		}
	})

	t.Run("the session cookie", func(t *testing.T) {
		c := signIn(t, a)
		if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.Path != "/console/" {
			t.Errorf("cookie attributes: HttpOnly %v SameSite %v Secure %v Path %q", c.HttpOnly, c.SameSite, c.Secure, c.Path)
		}
		if c.MaxAge != int(console.DefaultSessionTTL/time.Second) {
			t.Errorf("Max-Age %d", c.MaxAge)
		}
		if strings.Contains(c.Value, a.accessToken) || strings.Contains(c.Value, a.acct.Tenant.Status.AccessTokenHash) {
			t.Error("the cookie carries the access token or its hash")
		}
		if !strings.HasPrefix(c.Value, "v1."+a.userID+".") {
			t.Errorf("cookie value %q", c.Value)
		}
		resp, _ := do(t, "POST", "/console/signin", url.Values{"user_id": {a.userID}, "access_token": {a.accessToken}},
			nil, map[string]string{"X-Forwarded-Proto": "https"})
		if sc := sessionCookie(resp); sc == nil || !sc.Secure {
			t.Error("a sign-in over TLS did not set a Secure cookie")
		}
		// A forged or altered cookie is no session.
		parts := strings.Split(c.Value, ".")
		for _, v := range []string{
			strings.Join([]string{parts[0], b.userID, parts[2], parts[3]}, "."),
			strings.Join([]string{parts[0], parts[1], strconv.FormatInt(time.Now().Add(time.Hour*24).Unix(), 10), parts[3]}, "."),
			"v1." + a.userID + ".9999999999.AAAA",
			"garbage",
		} {
			resp, _ := do(t, "GET", "/console/overview", nil, &http.Cookie{Name: console.CookieName, Value: v}, nil)
			if resp.StatusCode != http.StatusSeeOther {
				t.Errorf("altered cookie %q: status %d", v, resp.StatusCode)
			}
		}
	})

	t.Run("every page renders the tenant's own data", func(t *testing.T) {
		c := signIn(t, a)
		body := page(t, "/console/overview", c)
		for _, want := range []string{
			"5 USD", "1000 credits", // the grant: 1000 credits = 5 USD
			"Credit line 0.2 USD (40 credits) · 5.2 USD available", // spec.creditLimit
			"welcome &lt;credit&gt;",                               // escaped
			`id="used-today"`, `id="used-month"`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("overview lacks %q", want)
			}
		}
		body = page(t, "/console/keys", c)
		prefix := a.acct.Token.Status.KeyPrefix
		if prefix == "" || !strings.Contains(body, html.EscapeString(prefix)) {
			t.Errorf("keys page lacks the key prefix %q", prefix)
		}
		if strings.Contains(body, a.acct.Key) || strings.Contains(body, strings.TrimPrefix(a.acct.Key, "sk-")) {
			t.Error("keys page shows the raw key")
		}
		for _, want := range []string{"alpha &lt;key&gt;", "enabled", "60 requests/min", "daily", "0.5 USD"} {
			if !strings.Contains(body, want) {
				t.Errorf("keys page lacks %q", want)
			}
		}
		if strings.Contains(body, "alpha <key>") {
			t.Error("keys page shows an unescaped name")
		}
		body = page(t, "/console/usage", c)
		if !strings.Contains(body, `<svg id="usage-chart"`) || !strings.Contains(body, `class="bar s0"`) {
			t.Error("usage page lacks the chart")
		}
		if got := logIDs(body); len(got) != 8 {
			t.Errorf("usage page of the last 7 days has %d rows, want 8", len(got))
		}
		if strings.Contains(body, "secret-backend") {
			t.Error("usage page shows the backend")
		}
		body = page(t, "/console/tasks", c)
		if !strings.Contains(body, "No image or video tasks.") {
			t.Error("tasks page of an account without tasks")
		}
		body = page(t, "/console/prices", c)
		if !strings.Contains(body, "GET /v1/pricing") {
			t.Error("prices page")
		}
		resp, css := do(t, "GET", "/console/static/console.css", nil, nil, nil)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/css") || !strings.Contains(css, ".bar") {
			t.Errorf("stylesheet: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	})

	t.Run("usage rows equal the API's, page by page", func(t *testing.T) {
		c := signIn(t, a)
		window := fmt.Sprintf("start_timestamp=%d&end_timestamp=%d", a.t0-3*86400, a.t0+3600)
		api, cursor := []string{}, ""
		for {
			q := window + "&page_size=2"
			if cursor != "" {
				q += "&cursor=" + url.QueryEscape(cursor)
			}
			ids, next, _ := apiRows(t, a, q)
			api = append(api, ids...)
			if next == "" {
				break
			}
			cursor = next
		}
		var pages []string
		path := "/console/usage?" + window + "&page_size=2"
		for n := 0; path != "" && n < 10; n++ {
			body := page(t, path, c)
			ids := logIDs(body)
			pages = append(pages, ids...)
			path = ""
			if m := regexp.MustCompile(`id="next-page" href="([^"]+)"`).FindStringSubmatch(body); m != nil {
				path = html.UnescapeString(m[1])
				if len(ids) != 2 {
					t.Errorf("a page before the last has %d rows", len(ids))
				}
			}
		}
		if len(api) != 8 || strings.Join(api, ",") != strings.Join(pages, ",") {
			t.Errorf("console rows %v, API rows %v", pages, api)
		}
		// The same row shows the API's cost.
		_, _, data := apiRows(t, a, window+"&page_size=1")
		body := page(t, "/console/usage?"+window+"&page_size=1", c)
		if !strings.Contains(body, fmt.Sprintf(`<td class="n">%s</td>`, data[0]["cost_usd"])) {
			t.Errorf("the first row's cost %v is not on the page", data[0]["cost_usd"])
		}
		// A bad window is the API's 422.
		resp, _ := do(t, "GET", fmt.Sprintf("/console/usage?start_timestamp=%d&end_timestamp=%d", a.t0, a.t0+40*86400), nil, c, nil)
		if resp.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("a 40-day window: %d", resp.StatusCode)
		}
	})

	t.Run("the chart's totals equal the API's rows", func(t *testing.T) {
		c := signIn(t, a)
		window := fmt.Sprintf("start_timestamp=%d&end_timestamp=%d", a.t0-3*86400, a.t0+3600)
		// Every row of the window, summed per model and per key as the chart does.
		type sums struct{ requests, tokens, quota int64 }
		byModel, byKey, all := map[string]sums{}, map[string]sums{}, sums{}
		cursor := ""
		for {
			q := window + "&page_size=100"
			if cursor != "" {
				q += "&cursor=" + url.QueryEscape(cursor)
			}
			_, next, rows := apiRows(t, a, q)
			for _, r := range rows {
				n := func(k string) int64 { v, _ := r[k].(json.Number).Int64(); return v }
				add := func(m map[string]sums, k string) {
					s := m[k]
					s.requests++
					s.tokens += n("prompt_tokens") + n("completion_tokens")
					s.quota += n("quota")
					m[k] = s
				}
				add(byModel, r["model_name"].(string))
				add(byKey, fmt.Sprintf("%s #%s", r["token_name"], r["token_id"]))
				all.requests++
				all.quota += n("quota")
			}
			if next == "" {
				break
			}
			cursor = next
		}
		if len(byModel) != 2 || all.requests != 8 {
			t.Fatalf("the API's rows: %d models, %d rows", len(byModel), all.requests)
		}
		breakdown := func(body string) map[string]sums {
			out := map[string]sums{}
			for _, m := range groupRow.FindAllStringSubmatch(body, -1) {
				r, _ := strconv.ParseInt(m[2], 10, 64)
				tk, _ := strconv.ParseInt(m[3], 10, 64)
				q, _ := strconv.ParseInt(m[4], 10, 64)
				out[html.UnescapeString(m[1])] = sums{r, tk, q}
			}
			return out
		}
		for _, tc := range []struct {
			query string
			want  map[string]sums
		}{
			{"&split=model", byModel},
			{"&split=model&bucket=hour&metric=tokens", byModel},
			{"&split=key&metric=requests", byKey},
		} {
			body := page(t, "/console/usage?"+window+tc.query, c)
			if got := breakdown(body); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s: the chart's groups %v, the API's %v", tc.query, got, tc.want)
			}
			if n := strings.Count(body, `<rect class="bar s`); n < 2 {
				t.Errorf("%s: %d bar segments", tc.query, n)
			}
			if !strings.Contains(body, fmt.Sprintf(`<span id="window-cost">%s</span>`, billing.Quota(all.quota).CostUSD())) {
				t.Errorf("%s: the window's cost is not %s USD", tc.query, billing.Quota(all.quota).CostUSD())
			}
		}
		// Both models have their own colour, and each hour has one segment
		// per model used in it (newTenant's rows: sim-chat at t0…t0+4 and
		// two days before, sim-image at t0+10 and t0+11).
		body := page(t, "/console/usage?"+window+"&split=model&bucket=hour", c)
		if !strings.Contains(body, `class="bar s1"`) || strings.Count(body, `<text class="label"`) == 0 {
			t.Error("the split chart lacks a second colour or its labels")
		}
		segments := map[string]bool{fmt.Sprint(a.t0-2*86400-(a.t0-2*86400)%3600, "chat"): true}
		for _, r := range []struct {
			at    int64
			model string
		}{{a.t0, "chat"}, {a.t0 + 4, "chat"}, {a.t0 + 10, "image"}, {a.t0 + 11, "image"}} {
			segments[fmt.Sprint(r.at-r.at%3600, r.model)] = true
		}
		if got := strings.Count(body, "</rect>"); got != len(segments) {
			t.Errorf("hourly by model: %d segments, want %d", got, len(segments))
		}
		for _, bad := range []string{"&metric=euros", "&split=colour", "&bucket=minute"} {
			if resp, _ := do(t, "GET", "/console/usage?"+window+bad, nil, c, nil); resp.StatusCode != http.StatusUnprocessableEntity {
				t.Errorf("%s: %d", bad, resp.StatusCode)
			}
		}
		month := fmt.Sprintf("start_timestamp=%d&end_timestamp=%d&bucket=hour", a.t0-30*86400, a.t0)
		if resp, _ := do(t, "GET", "/console/usage?"+month, nil, c, nil); resp.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("30 days per hour: %d", resp.StatusCode)
		}
	})

	t.Run("tasks and prices show the tenant's tasks and catalog", func(t *testing.T) {
		ctx := context.Background()
		model := "console-image-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
		remove, err := stack.PublishSimulatedImage(ctx, model, "0.04")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(remove)
		done, err := stack.CompletedImageTask(ctx, a.acct.Key, model, "a cat at a console")
		if err != nil {
			t.Fatal(err)
		}
		taskID := done["id"].(string)
		// The console's cache may lag the API's answer by an event.
		c := signIn(t, a)
		var body string
		for deadline := time.Now().Add(framework.Timeout); ; time.Sleep(100 * time.Millisecond) {
			body = page(t, "/console/tasks", c)
			if strings.Contains(body, `class="result"`) || time.Now().After(deadline) {
				break
			}
		}
		billingView := done["billing"].(map[string]any)
		for _, want := range []string{"<code>" + taskID + "</code>", model, `class="status-completed">completed`, "100%",
			`<td class="n">` + billingView["cost_usd"].(string) + `</td>`, `<td class="n">` + billingView["credits"].(string) + `</td>`} {
			if !strings.Contains(body, want) {
				t.Errorf("tasks page lacks %q", want)
			}
		}
		link := regexp.MustCompile(`<a class="result" href="([^"]+)"`).FindStringSubmatch(body)
		if link == nil {
			t.Fatal("tasks page has no result link")
		}
		resp, err := http.Get(html.UnescapeString(link[1]))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "image/") {
			t.Errorf("the result link answers %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if other := page(t, "/console/tasks", signIn(t, b)); strings.Contains(other, taskID) {
			t.Error("B's tasks page shows A's task")
		}

		pricing, err := stack.CallJSON(ctx, a.acct.Key, "GET", "/v1/pricing?model="+model, "")
		if err != nil {
			t.Fatal(err)
		}
		catalog := pricing["data"].([]any)[0].(map[string]any)
		p := catalog["prices"].([]any)[0].(map[string]any)
		body = page(t, "/console/prices", c)
		row := fmt.Sprintf("<td>%s</td><td>%s</td><td>%s</td>", model, catalog["type"], p["group"])
		if !strings.Contains(body, row) || !strings.Contains(body, fmt.Sprintf(`<td class="n">%s</td><td>%s</td>`, p["unit_price"], p["unit"])) {
			t.Errorf("prices page lacks the catalog's row %s at %v %v", row, p["unit_price"], p["unit"])
		}
	})

	t.Run("tenant A never sees tenant B", func(t *testing.T) {
		ca, cb := signIn(t, a), signIn(t, b)
		window := fmt.Sprintf("start_timestamp=%d&end_timestamp=%d", a.t0-3*86400, a.t0+3600)
		aIDs, _, _ := apiRows(t, a, window)
		bIDs, _, _ := apiRows(t, b, window)
		bBody := page(t, "/console/usage?"+window, cb)
		if got := logIDs(bBody); strings.Join(got, ",") != strings.Join(bIDs, ",") {
			t.Errorf("B's usage page %v, B's API rows %v", got, bIDs)
		}
		for _, id := range aIDs {
			for _, bid := range logIDs(bBody) {
				if id == bid {
					t.Errorf("B's usage page shows A's row %s", id)
				}
			}
		}
		for _, p := range []string{"/console/overview", "/console/keys", "/console/usage", "/console/tasks", "/console/prices"} {
			body := page(t, p, cb)
			for _, leak := range []string{"alpha", a.acct.Token.Status.KeyPrefix + "…", a.acct.Namespace, "Tenant alpha"} {
				if strings.Contains(body, html.EscapeString(leak)) {
					t.Errorf("B's %s shows A's %q", p, leak)
				}
			}
			if !strings.Contains(page(t, p, ca), html.EscapeString("Tenant alpha")) {
				t.Errorf("A's %s does not name A", p)
			}
		}
		// A cursor of A's pages is not valid for B.
		_, next, _ := apiRows(t, a, window+"&page_size=1")
		resp, _ := do(t, "GET", "/console/usage?"+window+"&page_size=1&cursor="+url.QueryEscape(next), nil, cb, nil)
		if resp.StatusCode == http.StatusOK {
			_, body := do(t, "GET", "/console/usage?"+window+"&page_size=1&cursor="+url.QueryEscape(next), nil, cb, nil)
			for _, id := range aIDs {
				if strings.Contains(body, `log-id">`+id+`<`) {
					t.Errorf("A's cursor shows B A's row %s", id)
				}
			}
		}
	})

	t.Run("sign-out clears the cookie", func(t *testing.T) {
		c := signIn(t, a)
		resp, _ := do(t, "POST", "/console/signout", url.Values{}, c, nil)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/signin" {
			t.Fatalf("sign-out: %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		cleared := sessionCookie(resp)
		if cleared == nil || cleared.Value != "" || cleared.MaxAge >= 0 || !cleared.HttpOnly || cleared.Path != "/console/" {
			t.Fatalf("sign-out cookie: %+v", cleared)
		}
		resp, _ = do(t, "GET", "/console/overview", nil, cleared, nil)
		if resp.StatusCode != http.StatusSeeOther {
			t.Errorf("after sign-out: %d", resp.StatusCode)
		}
	})

	t.Run("rotating the access token ends sessions", func(t *testing.T) {
		c := signIn(t, b)
		ctx := context.Background()
		tn := &v1.Tenant{}
		if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(b.acct.Tenant), tn); err != nil {
			t.Fatal(err)
		}
		old := tn.Status.AccessTokenHash
		tn.Spec.AccessTokenRotation++
		if err := stack.Client.Update(ctx, tn); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(framework.Timeout)
		for {
			resp, _ := do(t, "GET", "/console/overview", nil, c, nil)
			if resp.StatusCode == http.StatusSeeOther {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the session outlived the rotation of access token %s", old[:8])
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}
