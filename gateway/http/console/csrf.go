package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
)

// CSRFField is the form field of the CSRF token in every state-changing
// form of a signed-in page.
const CSRFField = "csrf_token"

// csrfToken is the CSRF token of the request's session: HMAC-SHA256 under
// the session key over a fixed label and the session cookie's value. It is
// tied to the session (another session's token does not fit, a new sign-in
// makes a new one) and needs no server state, as the session itself. Empty
// without a session cookie.
func (c *Console) csrfToken(r *http.Request) string {
	ck, err := r.Cookie(CookieName)
	if err != nil || ck.Value == "" {
		return ""
	}
	m := hmac.New(sha256.New, c.d.SessionKey)
	m.Write([]byte("csrf|" + ck.Value))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkCSRF tells whether a parsed form carries its session's CSRF token.
// It comes on top of the SameSite=Strict cookie and the Origin check
// (sameOrigin), so a browser that sends neither Origin nor Sec-Fetch-Site
// is still covered.
func (c *Console) checkCSRF(r *http.Request) bool {
	want := c.csrfToken(r)
	got := r.PostForm.Get(CSRFField)
	return want != "" && hmac.Equal([]byte(got), []byte(want))
}
