package gemini

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
)

func TestURL(t *testing.T) {
	g := NewWithT(t)
	b := upstream.Backend{BaseURL: "https://g.example/", UpstreamModel: "models/gemini-2.5-flash"}
	g.Expect(URL(b, false)).To(Equal("https://g.example/v1beta/models/gemini-2.5-flash:generateContent"))
	g.Expect(URL(b, true)).To(Equal("https://g.example/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"))
	b.BaseURL, b.Options = "", map[string]string{"apiVersion": "v1"}
	g.Expect(URL(b, false)).To(Equal(DefaultBaseURL + "/v1/models/gemini-2.5-flash:generateContent"))
}

func TestRetryDelay(t *testing.T) {
	g := NewWithT(t)
	body := `{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED","details":[
		{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[]},
		{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"22.5s"}]}}`
	g.Expect(RetryDelay([]byte(body))).To(Equal(22500 * time.Millisecond))
	g.Expect(RetryDelay([]byte(`{"error":{"code":429}}`))).To(BeZero())
	g.Expect(RetryDelay([]byte(`nope`))).To(BeZero())
}

// TestInvoke: a chat-completions client through the provider: the request
// the upstream sees, the answer the client gets, and the classified errors.
func TestInvoke(t *testing.T) {
	var gotPath, gotKey, gotQuery string
	var gotBody []byte
	status, reply, header := 200, "", http.Header{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotQuery, gotKey = r.URL.Path, r.URL.RawQuery, r.Header.Get("x-goog-api-key")
		gotBody, _ = io.ReadAll(r.Body)
		for k, v := range header {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, reply)
	}))
	defer srv.Close()
	p := New(srv.Client(), nil)
	b := upstream.Backend{Name: "g", Provider: Name, BaseURL: srv.URL, APIKey: "k-123", UpstreamModel: "gemini-x"}
	chat := []byte(`{"model":"client","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`)

	t.Run("complete", func(t *testing.T) {
		g := NewWithT(t)
		status, header = 200, http.Header{"Content-Type": {"application/json"}}
		reply = `{"candidates":[{"content":{"role":"model","parts":[{"text":"hello"}]},"finishReason":"STOP","index":0}],
			"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1,"thoughtsTokenCount":2,"totalTokenCount":6},"modelVersion":"gemini-x"}`
		res, err := upstream.Invoke(context.Background(), p, b, upstream.Request{Protocol: upstream.ChatCompletions, Body: chat})
		g.Expect(err).NotTo(HaveOccurred())
		defer res.Close()
		g.Expect(gotPath).To(Equal("/v1beta/models/gemini-x:generateContent"))
		g.Expect(gotKey).To(Equal("k-123"))
		g.Expect(gotBody).To(MatchJSON(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":5}}`))
		g.Expect(res.Translated).To(BeTrue())
		g.Expect(res.UsageReported).To(BeTrue())
		g.Expect(res.Usage.InputTokens).To(Equal(int64(3)))
		g.Expect(res.Usage.OutputTokens).To(Equal(int64(3)))
		g.Expect(*res.Usage.ReportedTotalTokens).To(Equal(int64(6)))
		g.Expect(string(res.Body)).To(ContainSubstring(`"content":"hello"`))
	})

	t.Run("stream", func(t *testing.T) {
		g := NewWithT(t)
		status, header = 200, http.Header{"Content-Type": {"text/event-stream"}}
		reply = "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"he\"}]},\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":3,\"totalTokenCount\":3}}\r\n\r\n" +
			"data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"llo\"}]},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":3,\"candidatesTokenCount\":2,\"totalTokenCount\":5}}\r\n\r\n"
		res, err := upstream.Invoke(context.Background(), p, b, upstream.Request{Protocol: upstream.Messages, Stream: true,
			Body: []byte(`{"model":"client","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)})
		g.Expect(err).NotTo(HaveOccurred())
		defer res.Close()
		g.Expect(gotPath).To(Equal("/v1beta/models/gemini-x:streamGenerateContent"))
		g.Expect(gotQuery).To(Equal("alt=sse"))
		var names []string
		for {
			ev, err := res.Stream.Next()
			if err == io.EOF {
				break
			}
			g.Expect(err).NotTo(HaveOccurred())
			names = append(names, ev.Name)
		}
		g.Expect(names).To(HaveExactElements("message_start", "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"))
		g.Expect(res.Stream.Complete()).To(BeTrue())
		g.Expect(res.Stream.UsageReported()).To(BeTrue())
		g.Expect(res.Stream.Usage().InputTokens).To(Equal(int64(3)))
		g.Expect(res.Stream.Usage().OutputTokens).To(Equal(int64(2)))
	})

	for _, tc := range []struct {
		name       string
		status     int
		body       string
		retryable  bool
		retryAfter time.Duration
	}{
		{"invalid argument", 400, `{"error":{"code":400,"message":"bad field","status":"INVALID_ARGUMENT"}}`, false, 0},
		{"permission denied", 403, `{"error":{"code":403,"message":"key","status":"PERMISSION_DENIED"}}`, false, 0},
		{"resource exhausted", 429, `{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"7s"}]}}`, true, 7 * time.Second},
		{"internal", 500, `{"error":{"code":500,"message":"oops","status":"INTERNAL"}}`, true, 0},
		{"unavailable", 503, `{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			status, reply, header = tc.status, tc.body, http.Header{"Content-Type": {"application/json"}}
			_, err := upstream.Invoke(context.Background(), p, b, upstream.Request{Protocol: upstream.ChatCompletions, Body: chat})
			ue, ok := upstream.As(err)
			g.Expect(ok).To(BeTrue())
			g.Expect(ue.Status).To(Equal(tc.status))
			g.Expect(ue.Retryable).To(Equal(tc.retryable))
			g.Expect(ue.RetryAfter).To(Equal(tc.retryAfter))
			g.Expect(ue.Message).NotTo(BeEmpty())
			if tc.status == 403 {
				g.Expect(ue.ClientStatus()).To(Equal(http.StatusBadGateway)) // the gateway's key, not the client's
			}
		})
	}
}
