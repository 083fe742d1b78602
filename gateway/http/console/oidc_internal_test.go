package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestCallbackRefusesFlowWithoutVerifier: a flow cookie signed with the
// session key but without a PKCE verifier (or nonce) is refused before the
// provider is asked; the provider here does not exist, so reaching it
// would answer 503, not 400.
func TestCallbackRefusesFlowWithoutVerifier(t *testing.T) {
	c := New(Deps{SessionKey: []byte("test session key"), OIDC: OIDC{Issuer: "http://127.0.0.1:1/oidc", ClientID: "console"}})
	exp := time.Now().Add(time.Minute).Unix()
	for name, f := range map[string]flow{
		"no verifier": {State: "s", Nonce: "n", Expires: exp},
		"no nonce":    {State: "s", Verifier: "v", Expires: exp},
		"expired":     {State: "s", Nonce: "n", Verifier: "v", Expires: time.Now().Add(-time.Second).Unix()},
	} {
		value, err := c.seal(flowVersion, f)
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest("GET", CallbackPath+"?state=s&code=c", nil)
		req.AddCookie(&http.Cookie{Name: FlowCookieName, Value: value})
		rec := httptest.NewRecorder()
		c.oidcCallback(rec, req)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", name, rec.Code)
		}
		for _, ck := range rec.Result().Cookies() {
			if ck.Name == CookieName {
				t.Errorf("%s: a session cookie was set", name)
			}
		}
	}
	// Control: the complete flow gets past the cookie's checks to the
	// (missing) provider.
	value, _ := c.seal(flowVersion, flow{State: "s", Nonce: "n", Verifier: "v", Expires: exp})
	req := httptest.NewRequest("GET", CallbackPath+"?state=s&code=c", nil)
	req.AddCookie(&http.Cookie{Name: FlowCookieName, Value: value})
	rec := httptest.NewRecorder()
	c.oidcCallback(rec, req)
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("complete flow: status %d, want 503 (provider unreachable)", rec.Code)
	}
}

// TestSessionCookieTampering: a v2 session whose payload was changed (a
// viewer promoting itself) no longer verifies.
func TestSessionCookieTampering(t *testing.T) {
	c := New(Deps{SessionKey: []byte("test session key"), OIDC: OIDC{Issuer: "http://idp.example.com/oidc", ClientID: "console"}})
	good, err := c.seal(oidcSessionVersion, oidcSession{Issuer: "idp.example.com", Subject: "vera", Namespace: "acme", Name: "acme",
		Role: RoleViewer, Expires: time.Now().Add(time.Minute).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := c.seal(oidcSessionVersion, oidcSession{Issuer: "idp.example.com", Subject: "vera", Namespace: "acme", Name: "acme",
		Role: RoleKeyManager, Expires: time.Now().Add(time.Minute).Unix()})
	other := New(Deps{SessionKey: []byte("another key"), OIDC: OIDC{Issuer: "http://idp.example.com/oidc", ClientID: "console"}})
	otherSealed, _ := other.seal(oidcSessionVersion, oidcSession{Issuer: "idp.example.com", Subject: "vera", Role: RoleKeyManager,
		Expires: time.Now().Add(time.Minute).Unix()})
	goodParts := strings.Split(good, ".")
	forgedParts := strings.Split(forged, ".")
	for name, tc := range map[string]struct {
		value string
		ok    bool
	}{
		"as signed":       {good, true},
		"payload swapped": {goodParts[0] + "." + forgedParts[1] + "." + goodParts[2], false},
		"another key":     {otherSealed, false},
		"v1 prefix":       {"v1" + good[2:], false},
		"no MAC":          {goodParts[0] + "." + goodParts[1] + ".", false},
	} {
		req := httptest.NewRequest("GET", "/console/overview", nil)
		req.AddCookie(&http.Cookie{Name: CookieName, Value: tc.value})
		if got := c.oidcSessionOf(req) != nil; got != tc.ok {
			t.Errorf("%s: session %v, want %v", name, got, tc.ok)
		}
	}
}
