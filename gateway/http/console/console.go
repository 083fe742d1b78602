// Package console serves the tenant console at /console/: a few
// server-rendered pages (overview, keys, usage, tasks, prices, audit) for the owner
// of one account, signed in with the account's usage access token and user
// ID, the credentials of GET /api/usage/tokens/*, or with the platform's
// OpenID Connect provider, whose groups the Tenant maps to a role (viewer or
// key manager). Sessions are stateless signed cookies, so any gateway
// replica serves any session. Pages are
// html/template with embedded assets; the Keys page manages the account's
// keys through the code POST /v1/tokens uses. A read-only platform overview
// (/console/platform) serves platform admins, who have no tenant; see
// docs/console.md.
package console

import (
	"bytes"
	"context"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/pricing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/tasks"
	"github.com/modelgate/modelgate/gateway/tokenspec"
)

// Prefix is where the console is mounted.
const Prefix = "/console/"

// CSP is the Content-Security-Policy of every console response: nothing but
// the console's own stylesheet, data: images and its one script file (the
// Keys page's copy button; no inline script), no framing, forms posting
// only to the console itself.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Accounts checks credentials from the informer cache;
// *auth.Authenticator implements it.
type Accounts interface {
	// CheckAccessToken is the usage API's own check of an access token and
	// user ID.
	CheckAccessToken(userID int64, token string) (*v1.Tenant, *auth.Failure)
	// TenantsByUserID are the live Tenants with a user ID.
	TenantsByUserID(userID int64) []*v1.Tenant
}

// Ledger is the part of the ledger the pages read; *store.Store implements it.
type Ledger interface {
	// TenantStanding and TokenStanding read a balance and what leases hold
	// of it in one statement, so the page's figures agree.
	TenantStanding(ctx context.Context, userID int64) (b store.Balance, leased, granted billing.Quota, err error)
	TokenStanding(ctx context.Context, tokenID int64) (store.TokenBalance, store.TokenHolds, error)
	ListUsage(ctx context.Context, uq store.UsageQuery) (store.Page[store.UsageRecord], error)
	UsageSeries(ctx context.Context, q store.SeriesQuery) ([]store.SeriesPoint, error)
	// PlatformSeries and PlatformTotals are every tenant's usage together
	// (the platform overview).
	PlatformSeries(ctx context.Context, q store.PlatformQuery) ([]store.SeriesPoint, error)
	PlatformTotals(ctx context.Context, q store.PlatformQuery) ([]store.SpendTotal, error)
}

// Catalog builds the tenant's price catalog as GET /v1/pricing does
// (handlers.Pricing.TenantCatalog).
type Catalog func(ctx context.Context, tenant *v1.Tenant, q pricing.CatalogQuery) (*pricing.CatalogPage, error)

// Deps are what the console needs.
type Deps struct {
	Accounts Accounts
	Ledger   Ledger
	// Cache reads the tenant's ApiTokens and GenerationTasks, and for the
	// platform overview every Tenant and GenerationTask.
	Cache   client.Reader
	Catalog Catalog
	// Results signs the result links of completed tasks, as GET
	// /v1/{images,videos}/generations/{task_id} does; nil shows no links.
	Results tasks.Signer
	Clock   clock.PassiveClock
	// SessionKey signs session cookies; the same on every replica.
	SessionKey []byte
	// SessionTTL is how long a session lasts; default DefaultSessionTTL.
	SessionTTL time.Duration
	// Writer writes the ApiTokens the Keys page creates, changes and
	// deletes, and the audit Events.
	Writer client.Writer
	// Registry registers a new key in the ledger, as POST /v1/tokens does.
	Registry tokenspec.Registry
	// KnowsKey tells when this replica's cache holds a new key
	// (auth.Authenticator.KnowsKey); nil does not wait.
	KnowsKey func(keyHash string) bool
	// Live reads from the API server, not the cache: the tenant's Events
	// for the audit page (the gateway watches no Events), and the key an
	// action changes, so the change starts from its current version.
	Live client.Reader
	// OIDC configures sign-in with the platform's identity provider; zero:
	// the access-token sign-in only.
	OIDC OIDC
	// Unmatched answers a request no route matches, as the gateway's
	// server does (handlers.Unmatched); the platform overview answers a
	// request without a platform admin's session with it. nil: net/http's
	// 404.
	Unmatched func(w http.ResponseWriter, r *http.Request, status int, allow []string)
}

// DefaultSessionTTL is the lifetime of a session.
const DefaultSessionTTL = 30 * time.Minute

// Mux is where the console is mounted (http.ServeMux or the gateway server).
type Mux interface {
	Handle(pattern string, h http.Handler)
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Console is the console's handler set.
type Console struct {
	d     Deps
	pages map[string]*template.Template
	// oidc is the relying party of OIDC sign-in; nil when not configured.
	oidc *oidcClient
}

// New parses the templates and returns the console.
func New(d Deps) *Console {
	if d.Clock == nil {
		d.Clock = clock.RealClock{}
	}
	if d.SessionTTL <= 0 {
		d.SessionTTL = DefaultSessionTTL
	}
	if len(d.SessionKey) == 0 {
		panic("console: a session key is required")
	}
	c := &Console{d: d, pages: map[string]*template.Template{}}
	if d.OIDC.Enabled() {
		c.oidc = newOIDCClient(d.OIDC)
	}
	for _, name := range []string{"signin", "continue", "overview", "keys", "usage", "tasks", "prices", "audit", "platform"} {
		c.pages[name] = template.Must(template.New("layout.html").Funcs(funcs).
			ParseFS(templateFS, "templates/layout.html", "templates/chart.html", "templates/"+name+".html"))
	}
	return c
}

// Register mounts the console under Prefix.
func Register(mux Mux, d Deps) {
	c := New(d)
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /console", http.RedirectHandler(Prefix, http.StatusSeeOther))
	mux.Handle("GET /console/static/", secure(http.StripPrefix("/console/static/", staticFiles(static))))
	mux.Handle("GET /console/{$}", secure(http.HandlerFunc(c.index)))
	mux.Handle("GET /console/signin", secure(http.HandlerFunc(c.signinForm)))
	mux.Handle("POST /console/signin", secure(http.HandlerFunc(c.signin)))
	mux.Handle("POST /console/signout", secure(http.HandlerFunc(c.signout)))
	mux.Handle("GET "+LoginPath, secure(http.HandlerFunc(c.oidcLogin)))
	mux.Handle("GET "+CallbackPath, secure(http.HandlerFunc(c.oidcCallback)))
	mux.Handle("GET /console/overview", secure(c.session(c.overview)))
	mux.Handle("GET /console/keys", secure(c.session(c.keys)))
	mux.Handle("GET /console/usage", secure(c.session(c.usage)))
	mux.Handle("GET /console/tasks", secure(c.session(c.tasks)))
	mux.Handle("GET /console/prices", secure(c.session(c.prices)))
	mux.Handle("POST /console/keys", secure(c.action(c.createKey)))
	mux.Handle("POST /console/keys/{name}/state", secure(c.action(c.setKeyState)))
	mux.Handle("POST /console/keys/{name}/limits", secure(c.action(c.editLimits)))
	mux.Handle("POST /console/keys/{name}/delete", secure(c.action(c.deleteKey)))
	mux.Handle("GET /console/audit", secure(c.session(c.audit)))
	mux.Handle("GET /console/usage.csv", secure(c.session(c.usageCSV)))
	// Not behind secure: without a platform admin the answer is the
	// gateway's own 404, headers and all (platformGuard).
	mux.Handle("GET /console/platform", c.platformGuard(c.platform))
}

// secure sets the headers every console response carries.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin") // no URL leaves the site; own form posts keep their Origin
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		if !strings.HasPrefix(r.URL.Path, "/console/static/") {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

// staticFiles serves the embedded assets, cacheable for an hour.
func staticFiles(root fs.FS) http.Handler {
	files := http.FileServerFS(root)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	})
}

// pageFunc renders a page for a signed-in tenant.
type pageFunc func(w http.ResponseWriter, r *http.Request, t *v1.Tenant)

// session runs a page with the session's tenant, or sends the browser to
// the sign-in page.
func (c *Console) session(page pageFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := c.tenantOf(r)
		if t == nil {
			http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
			return
		}
		page(w, r, t)
	})
}

func (c *Console) index(w http.ResponseWriter, r *http.Request) {
	if c.tenantOf(r) == nil {
		if _, ok := c.platformAdminOf(r); ok {
			http.Redirect(w, r, PlatformPath, http.StatusSeeOther)
			return
		}
		http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, Prefix+"overview", http.StatusSeeOther)
}

// view is what every page template gets.
type view struct {
	Title  string
	Page   string
	Tenant *v1.Tenant
	// Admin is the platform admin's subject on the platform overview
	// (no tenant).
	Admin string
	Error string
	Data  any
	// CSRF is the session's CSRF token for the page's forms.
	CSRF string
	// Who names the signed-in person and role of an OIDC session; empty
	// for an access-token session.
	Who string
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if v.Tenant != nil || v.Admin != "" {
		v.CSRF = c.csrfToken(r)
	}
	if v.Tenant != nil {
		if s := c.oidcSessionOf(r); s != nil {
			v.Who = s.Subject + " · " + string(s.Role)
		}
	}
	var b bytes.Buffer
	if err := c.pages[name].Execute(&b, v); err != nil {
		slog.ErrorContext(r.Context(), "render console page", "page", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(status)
	_, _ = b.WriteTo(w)
}

// fail renders a page's error without internals.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, name string, t *v1.Tenant, err error, msg string) {
	slog.ErrorContext(r.Context(), "console page", "page", name, "userID", t.Status.UserID, "error", err)
	c.render(w, r, http.StatusServiceUnavailable, name, view{Title: name, Page: name, Tenant: t, Error: msg})
}

var funcs = template.FuncMap{
	"usd":     func(q billing.Quota) string { return q.CostUSD() },
	"credits": func(q billing.Quota) string { return q.CreditsString() },
	"utc": func(unix int64) string {
		if unix <= 0 {
			return "—"
		}
		return time.Unix(unix, 0).UTC().Format("2006-01-02 15:04:05")
	},
	"num":   func(n int64) string { return strconv.FormatInt(n, 10) },
	"quota": func(q billing.Quota) int64 { return int64(q) },
	"deref": func(b *bool) bool { return b != nil && *b },
	"opt": func(p *int64) string {
		if p == nil {
			return "—"
		}
		return strconv.FormatInt(*p, 10)
	},
}
