package fakeupstream

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"golang.org/x/oauth2/google"
)

func TestGeminiCountFake(t *testing.T) {
	g := NewWithT(t)
	s := NewGemini()
	defer s.Close()
	post := func(body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/v1beta/models/gemini-x:countTokens", strings.NewReader(body))
		req.Header.Set("x-goog-api-key", s.Key())
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	contents := `[{"role":"user","parts":[{"text":"hi"}]}]`
	for _, tc := range []struct {
		name, body string
		code       int
		msg        string
	}{
		{"contents", `{"contents":` + contents + `}`, 200, `"totalTokens":`},
		{"a whole request", `{"generateContentRequest":{"model":"models/gemini-x","contents":` + contents + `,"systemInstruction":{"parts":[{"text":"be brief"}]}}}`, 200, `"totalTokens":`},
		{"both", `{"contents":` + contents + `,"generateContentRequest":{"model":"models/gemini-x","contents":` + contents + `}}`, 400, "mutually exclusive"},
		{"request without its model", `{"generateContentRequest":{"contents":` + contents + `}}`, 400, "model: Field required"},
		{"another model", `{"generateContentRequest":{"model":"models/other","contents":` + contents + `}}`, 400, "is not the model of the URL"},
		{"unknown field", `{"contents":` + contents + `,"maxTokens":3}`, 400, "INVALID_ARGUMENT"},
	} {
		code, body := post(tc.body)
		g.Expect(code).To(Equal(tc.code), tc.name+": "+body)
		g.Expect(body).To(ContainSubstring(tc.msg), tc.name)
	}
	g.Expect(s.Last().Model()).To(Equal("gemini-x"))
	s.Enqueue(Reply{Status: 429, RetryDelay: "3s"})
	code, body := post(`{"contents":` + contents + `}`)
	g.Expect(code).To(Equal(429))
	g.Expect(body).To(ContainSubstring("RetryInfo"))
	s.Enqueue(Reply{Usage: Usage{InputTokens: 77}})
	_, body = post(`{"contents":` + contents + `}`)
	g.Expect(body).To(ContainSubstring(`"totalTokens":77`))
}

func TestVertexCountFake(t *testing.T) {
	g := NewWithT(t)
	s := NewVertex()
	defer s.Close()
	creds, err := google.CredentialsFromJSONWithType(context.Background(), []byte(s.ServiceAccountJSON()), google.ServiceAccount, vertexScope)
	g.Expect(err).NotTo(HaveOccurred())
	tok, err := creds.TokenSource.Token()
	g.Expect(err).NotTo(HaveOccurred())
	base := s.URL + "/v1/projects/" + VertexProject + "/locations/us-east5/publishers/"
	call := func(path, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	claude := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		name, path, body string
		code             int
		msg              string
	}{
		{"claude", "anthropic/models/count-tokens:rawPredict", `{"anthropic_version":"vertex-2023-10-16","model":"claude-x",` + claude + `}`, 200, `"input_tokens":`},
		{"claude without its model", "anthropic/models/count-tokens:rawPredict", `{"anthropic_version":"vertex-2023-10-16",` + claude + `}`, 400, "model: Field required"},
		{"claude without anthropic_version", "anthropic/models/count-tokens:rawPredict", `{"model":"claude-x",` + claude + `}`, 400, "anthropic_version: Field required"},
		{"claude without messages", "anthropic/models/count-tokens:rawPredict", `{"anthropic_version":"vertex-2023-10-16","model":"claude-x"}`, 400, "messages: Field required"},
		{"claude streamed", "anthropic/models/count-tokens:streamRawPredict", `{"anthropic_version":"vertex-2023-10-16","model":"claude-x",` + claude + `}`, 400, "rawPredict"},
		{"gemini", "google/models/gemini-x:countTokens", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"systemInstruction":{"parts":[{"text":"be brief"}]}}`, 200, `"totalTokens":`},
		{"gemini without contents", "google/models/gemini-x:countTokens", `{}`, 400, "contents is not specified"},
	} {
		code, body := call(tc.path, tc.body)
		g.Expect(code).To(Equal(tc.code), tc.name+": "+body)
		g.Expect(body).To(ContainSubstring(tc.msg), tc.name)
	}
}
