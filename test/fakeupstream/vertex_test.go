package fakeupstream

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/oauth2/google"
)

// TestVertexTokenEndpoint: the Google OAuth2 library exchanges the fake's
// service-account key for a token; unsigned assertions and other grants
// are refused.
func TestVertexTokenEndpoint(t *testing.T) {
	g := NewWithT(t)
	s := NewVertex()
	defer s.Close()
	s.SetTokenTTL(90 * time.Second)
	creds, err := google.CredentialsFromJSONWithType(context.Background(), []byte(s.ServiceAccountJSON()), google.ServiceAccount, vertexScope)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(creds.ProjectID).To(Equal(VertexProject))
	tok, err := creds.TokenSource.Token()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tok.AccessToken).To(HavePrefix("ya29.fake-"))
	g.Expect(time.Until(tok.Expiry)).To(BeNumerically("~", 90*time.Second, 5*time.Second))
	g.Expect(s.TokenExchanges()).To(Equal(1))
	g.Expect(s.Count()).To(BeZero(), "token requests are not API requests")

	post := func(form url.Values) (int, string) {
		resp, err := http.PostForm(s.URL+"/token", form)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := post(url.Values{"grant_type": {"client_credentials"}})
	g.Expect(code).To(Equal(400))
	g.Expect(body).To(ContainSubstring("unsupported_grant_type"))

	// An assertion with a signature that does not verify (a foreign key is
	// covered by the provider's tests).
	code, body = post(url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {"e30.e30.AAAA"}})
	g.Expect(code).To(Equal(400))
	g.Expect(body).To(ContainSubstring("Invalid JWT Signature."))
	g.Expect(s.TokenRefusals()).To(Equal(2))
}

// TestVertexAPIChecks: the API wants a live token of the fake, its own
// project, the publisher's method and a Vertex-shaped Claude body.
func TestVertexAPIChecks(t *testing.T) {
	g := NewWithT(t)
	s := NewVertex()
	defer s.Close()
	creds, err := google.CredentialsFromJSONWithType(context.Background(), []byte(s.ServiceAccountJSON()), google.ServiceAccount, vertexScope)
	g.Expect(err).NotTo(HaveOccurred())
	tok, err := creds.TokenSource.Token()
	g.Expect(err).NotTo(HaveOccurred())

	base := s.URL + "/v1/projects/" + VertexProject + "/locations/us-east5/publishers/"
	claude := `{"anthropic_version":"vertex-2023-10-16","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	call := func(path, token, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name, path, token, body string
		code                    int
		msg                     string
	}{
		{"no token", base + "anthropic/models/claude-x:rawPredict", "", claude, 401, "UNAUTHENTICATED"},
		{"unknown token", base + "anthropic/models/claude-x:rawPredict", "ya29.forged", claude, 401, "UNAUTHENTICATED"},
		{"other project", s.URL + "/v1/projects/nope/locations/us-east5/publishers/anthropic/models/claude-x:rawPredict", tok.AccessToken, claude, 403, "PERMISSION_DENIED"},
		{"wrong method", base + "anthropic/models/claude-x:generateContent", tok.AccessToken, claude, 404, "NOT_FOUND"},
		{"unknown model", base + "google/models/claude-x:generateContent", tok.AccessToken, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, 404, "was not found"},
		{"model in the body", base + "anthropic/models/claude-x:rawPredict", tok.AccessToken, `{"model":"claude-x",` + claude[1:], 400, "model: Extra inputs"},
		{"no anthropic_version", base + "anthropic/models/claude-x:rawPredict", tok.AccessToken, `{"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, 400, "anthropic_version: Field required"},
		{"stream flag and method disagree", base + "anthropic/models/claude-x:streamRawPredict", tok.AccessToken, claude, 400, "does not match"},
		{"claude ok", base + "anthropic/models/claude-x:rawPredict", tok.AccessToken, claude, 200, `"type":"message"`},
		{"gemini ok", base + "google/models/gemini-x:generateContent", tok.AccessToken, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, 200, `"usageMetadata"`},
	} {
		code, body := call(tc.path, tc.token, tc.body)
		g.Expect(code).To(Equal(tc.code), tc.name)
		g.Expect(body).To(ContainSubstring(tc.msg), tc.name)
	}

	s.RevokeTokens()
	code, _ := call(base+"google/models/gemini-x:generateContent", tok.AccessToken, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	g.Expect(code).To(Equal(401), "a revoked token")
}
