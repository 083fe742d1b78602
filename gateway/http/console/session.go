package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// CookieName is the session cookie.
const CookieName = "modelgate_console"

// sessionVersion starts every cookie value and the signed message.
const sessionVersion = "v1"

// sign is the MAC of a session: HMAC-SHA256 under the session key over the
// user ID, the expiry and the SHA-256 of the account's current access
// token. The access token hash is signed, not sent: rotating the access
// token ends every session made with the old one, and the cookie carries
// nothing secret but the MAC.
func (c *Console) sign(userID, expires int64, accessTokenHash string) []byte {
	m := hmac.New(sha256.New, c.d.SessionKey)
	m.Write([]byte(sessionVersion + "|" + strconv.FormatInt(userID, 10) + "|" + strconv.FormatInt(expires, 10) + "|" + accessTokenHash))
	return m.Sum(nil)
}

// cookieValue is "v1.<userID>.<expires>.<MAC>".
func (c *Console) cookieValue(t *v1.Tenant, expires int64) string {
	mac := base64.RawURLEncoding.EncodeToString(c.sign(t.Status.UserID, expires, t.Status.AccessTokenHash))
	return sessionVersion + "." + strconv.FormatInt(t.Status.UserID, 10) + "." + strconv.FormatInt(expires, 10) + "." + mac
}

// tenantOf returns the tenant of the request's valid, unexpired session:
// an access-token session (v1) or an OIDC tenant session (v2).
func (c *Console) tenantOf(r *http.Request) *v1.Tenant {
	ck, err := r.Cookie(CookieName)
	if err != nil {
		return nil
	}
	if s := c.oidcSessionOf(r); s != nil {
		return c.oidcTenant(r, s)
	}
	parts := strings.Split(ck.Value, ".")
	if len(parts) != 4 || parts[0] != sessionVersion {
		return nil
	}
	userID, err1 := strconv.ParseInt(parts[1], 10, 64)
	expires, err2 := strconv.ParseInt(parts[2], 10, 64)
	mac, err3 := base64.RawURLEncoding.DecodeString(parts[3])
	if err1 != nil || err2 != nil || err3 != nil || userID <= 0 {
		return nil
	}
	if !c.d.Clock.Now().Before(time.Unix(expires, 0)) {
		return nil
	}
	for _, t := range c.d.Accounts.TenantsByUserID(userID) {
		if t.Status.AccessTokenHash != "" && hmac.Equal(mac, c.sign(userID, expires, t.Status.AccessTokenHash)) {
			return t
		}
	}
	return nil
}

// overTLS tells whether the browser reached the gateway over TLS, directly
// or through a proxy that says so.
func overTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, value string, expires time.Time, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: value, Path: Prefix, Expires: expires, MaxAge: maxAge,
		HttpOnly: true, Secure: overTLS(r), SameSite: http.SameSiteStrictMode,
	})
}

// sameOrigin refuses a form posted from another site: the Origin header,
// which browsers send with every POST, must name this host ("null", sent
// by a page with no referrer, is refused), and Sec-Fetch-Site, when sent,
// must not say cross-site.
func sameOrigin(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true // not a browser, or a browser that sends none: SameSite and the CSP still apply
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func (c *Console) signinForm(w http.ResponseWriter, r *http.Request) {
	if c.tenantOf(r) != nil {
		http.Redirect(w, r, Prefix+"overview", http.StatusSeeOther)
		return
	}
	if _, ok := c.platformAdminOf(r); ok {
		http.Redirect(w, r, PlatformPath, http.StatusSeeOther)
		return
	}
	c.signinPage(w, r, http.StatusOK, "")
}

// signinData is the sign-in page: whether to offer the identity provider.
type signinData struct {
	OIDC bool
}

// signinPage renders the sign-in page with a status and message.
func (c *Console) signinPage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, status, "signin", view{Title: "Sign in", Page: "signin", Error: msg, Data: signinData{OIDC: c.oidc != nil}})
}

// signin checks the access token and user ID exactly as the usage API does
// and starts a session.
func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-origin sign-in refused", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		c.signinPage(w, r, http.StatusBadRequest, "The form could not be read.")
		return
	}
	userID, err := strconv.ParseInt(strings.TrimSpace(r.PostForm.Get("user_id")), 10, 64)
	if err != nil {
		userID = 0
	}
	t, f := c.d.Accounts.CheckAccessToken(userID, strings.TrimSpace(r.PostForm.Get("access_token")))
	if f != nil {
		c.signinPage(w, r, http.StatusUnauthorized, "Invalid access token or user ID.")
		return
	}
	exp := c.d.Clock.Now().Add(c.d.SessionTTL).Truncate(time.Second)
	c.setCookie(w, r, c.cookieValue(t, exp.Unix()), exp, int(c.d.SessionTTL/time.Second))
	http.Redirect(w, r, Prefix+"overview", http.StatusSeeOther)
}

// signout clears the cookie. The session is stateless, so a copy of the
// cookie taken before stays valid until it expires (at most SessionTTL).
func (c *Console) signout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-origin sign-out refused", http.StatusForbidden)
		return
	}
	c.setCookie(w, r, "", time.Unix(1, 0), -1)
	http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
}
