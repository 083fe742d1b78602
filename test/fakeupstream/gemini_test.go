package fakeupstream_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/test/fakeupstream"
)

func geminiPost(t *testing.T, f *fakeupstream.Server, path, key, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("x-goog-api-key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func TestGeminiFake(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewGemini()
	defer f.Close()
	const hi = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`

	f.Enqueue(fakeupstream.Reply{Text: "Hello there", Usage: fakeupstream.Usage{InputTokens: 8, OutputTokens: 5, ReasoningTokens: 3, CacheRead: fakeupstream.Int64(4)}})
	resp, body := geminiPost(t, f, "/v1beta/models/gemini-x:generateContent", f.Key(), hi)
	g.Expect(resp.StatusCode).To(Equal(200))
	g.Expect(body).To(MatchJSON(`{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello there"}]},"finishReason":"STOP","index":0}],
		"usageMetadata":{"promptTokenCount":12,"cachedContentTokenCount":4,"candidatesTokenCount":2,"thoughtsTokenCount":3,"totalTokenCount":17},
		"modelVersion":"gemini-x","responseId":"` + gjson(body, "responseId") + `"}`))
	g.Expect(f.Last().Model()).To(Equal("gemini-x"))
	g.Expect(f.Last().Stream()).To(BeFalse())

	f.Enqueue(fakeupstream.Reply{Text: "a b", ToolCall: &fakeupstream.ToolCall{Name: "f", Arguments: `{"x":1}`}})
	resp, body = geminiPost(t, f, "/v1beta/models/gemini-x:streamGenerateContent?alt=sse", f.Key(), hi)
	g.Expect(resp.Header.Get("Content-Type")).To(HavePrefix("text/event-stream"))
	frames := strings.Split(strings.TrimSuffix(body, "\r\n\r\n"), "\r\n\r\n")
	g.Expect(frames).To(HaveLen(3))
	g.Expect(frames[2]).To(ContainSubstring(`"functionCall":{"args":{"x":1},"name":"f"}`))
	g.Expect(frames[2]).To(ContainSubstring(`"finishReason":"STOP"`))
	g.Expect(frames[0]).NotTo(ContainSubstring(`finishReason`))
	g.Expect(f.Last().Stream()).To(BeTrue())
	g.Expect(f.Last().Query).To(Equal("alt=sse"))

	// Without alt=sse the stream is one JSON array.
	_, body = geminiPost(t, f, "/v1beta/models/gemini-x:streamGenerateContent", f.Key(), hi)
	var arr []any
	g.Expect(json.Unmarshal([]byte(body), &arr)).To(Succeed())

	for _, tc := range []struct {
		name, path, key, body string
		status                int
		want                  string
	}{
		{"no key", "/v1beta/models/m:generateContent", "", hi, 403, "PERMISSION_DENIED"},
		{"wrong key", "/v1beta/models/m:generateContent", "nope", hi, 400, "API key not valid"},
		{"bad method", "/v1beta/models/m:embed", f.Key(), hi, 404, "NOT_FOUND"},
		{"no contents", "/v1beta/models/m:generateContent", f.Key(), `{"contents":[]}`, 400, "contents is not specified"},
		{"unknown field", "/v1beta/models/m:generateContent", f.Key(), `{"model":"m","contents":[{"parts":[{"text":"x"}]}]}`, 400, "Invalid JSON payload"},
		{"bad role", "/v1beta/models/m:generateContent", f.Key(), `{"contents":[{"role":"assistant","parts":[{"text":"x"}]}]}`, 400, "valid role"},
		{"response not an object", "/v1beta/models/m:generateContent", f.Key(), `{"contents":[{"parts":[{"functionResponse":{"name":"f","response":"x"}}]}]}`, 400, "function_response.response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			resp, body := geminiPost(t, f, tc.path, tc.key, tc.body)
			g.Expect(resp.StatusCode).To(Equal(tc.status))
			g.Expect(body).To(ContainSubstring(tc.want))
		})
	}

	f.Enqueue(fakeupstream.Reply{Status: 429, ErrorMessage: "quota", RetryDelay: "7s"})
	resp, body = geminiPost(t, f, "/v1beta/models/m:generateContent", f.Key(), hi)
	g.Expect(resp.StatusCode).To(Equal(429))
	g.Expect(body).To(MatchJSON(`{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED",
		"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"7s"}]}}`))
}

func gjson(body, key string) string {
	var m map[string]any
	_ = json.Unmarshal([]byte(body), &m)
	s, _ := m[key].(string)
	return s
}
