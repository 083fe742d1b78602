package gemini

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

var countBody = []byte(`{"model":"client-model","system":"be brief","messages":[{"role":"user","content":"how many tokens?"}],` +
	`"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]}`)

func TestCountTokens(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewGemini()
	defer f.Close()
	p := New(fakeupstream.Client(), nil)
	b := upstream.Backend{Name: "gem", Provider: Name, BaseURL: f.URL, APIKey: f.Key(), UpstreamModel: "gemini-2.5-flash"}

	n, err := upstream.CountTokens(context.Background(), p, b, countBody, nil, "beta=true")
	g.Expect(err).NotTo(HaveOccurred())
	req := f.Last()
	g.Expect(req.Rejected).To(BeFalse(), string(req.Body))
	g.Expect(n).To(Equal(fakeupstream.TokenCount(req.Body)))
	g.Expect(req.Path).To(Equal("/v1beta/models/gemini-2.5-flash:countTokens"))
	g.Expect(req.Query).To(BeEmpty())
	g.Expect(req.Header.Get("x-goog-api-key")).To(Equal(f.Key()))
	gcr, _ := req.JSON()["generateContentRequest"].(map[string]any)
	g.Expect(gcr).To(HaveKeyWithValue("model", "models/gemini-2.5-flash"))
	g.Expect(gcr).To(HaveKey("contents"))
	g.Expect(gcr).To(HaveKey("systemInstruction"), "the system prompt is counted too")
	g.Expect(gcr).To(HaveKey("tools"))

	f.Enqueue(fakeupstream.Reply{Status: 429, RetryDelay: "7s"})
	_, err = upstream.CountTokens(context.Background(), p, b, countBody, nil, "")
	ue, ok := upstream.As(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(ue.Status).To(Equal(429))
	g.Expect(ue.Retryable).To(BeTrue())
	g.Expect(ue.RetryAfter).To(Equal(7*time.Second), "RetryInfo's delay")

	b.APIKey = "wrong"
	_, err = upstream.CountTokens(context.Background(), p, b, countBody, nil, "")
	ue, _ = upstream.As(err)
	g.Expect(ue.Status).To(Equal(400))
	g.Expect(ue.Message).To(ContainSubstring("API key not valid"))
}
