package vertex

import (
	"context"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

var countBody = []byte(`{"model":"client-model","system":"be brief","messages":[{"role":"user","content":"how many tokens?"}],` +
	`"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"}}`)

func TestCountTokensGemini(t *testing.T) {
	g := NewWithT(t)
	fake, p, gem, _ := setup(t)
	n, err := upstream.CountTokens(context.Background(), p, gem, countBody, nil, "")
	g.Expect(err).NotTo(HaveOccurred())
	req := fake.Last()
	g.Expect(req.Rejected).To(BeFalse(), string(req.Body))
	g.Expect(n).To(Equal(fakeupstream.TokenCount(req.Body)))
	g.Expect(req.Path).To(Equal("/v1/projects/" + fakeupstream.VertexProject + "/locations/us-east5/publishers/google/models/gemini-2.5-flash:countTokens"))
	g.Expect(req.Header.Get("Authorization")).To(HavePrefix("Bearer ya29.fake-"))
	m := req.JSON()
	g.Expect(m).To(HaveKey("contents"))
	g.Expect(m).To(HaveKey("systemInstruction"))
	g.Expect(m).To(HaveKey("tools"))
	g.Expect(m).NotTo(HaveKey("toolConfig"), "not a countTokens member")

	fake.Enqueue(fakeupstream.Reply{Status: 429})
	_, err = upstream.CountTokens(context.Background(), p, gem, countBody, nil, "")
	ue, ok := upstream.As(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(ue.Status).To(Equal(429))
	g.Expect(ue.Retryable).To(BeTrue())
}

func TestCountTokensClaude(t *testing.T) {
	g := NewWithT(t)
	fake, p, _, claude := setup(t)
	h := http.Header{"Anthropic-Beta": {"token-counting-2024-11-01"}}
	n, err := upstream.CountTokens(context.Background(), p, claude, countBody, h, "beta=true")
	g.Expect(err).NotTo(HaveOccurred())
	req := fake.Last()
	g.Expect(req.Rejected).To(BeFalse(), string(req.Body))
	g.Expect(n).To(Equal(fakeupstream.TokenCount(req.Body)))
	g.Expect(req.Path).To(Equal("/v1/projects/" + fakeupstream.VertexProject + "/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict"))
	g.Expect(req.Query).To(BeEmpty())
	g.Expect(req.JSON()).To(HaveKeyWithValue("model", "claude-sonnet-4@20250514"), "count-tokens reads the model from the body")
	g.Expect(req.JSON()).To(HaveKeyWithValue("anthropic_version", AnthropicVersion))
	g.Expect(req.Header.Get("anthropic-beta")).To(Equal("token-counting-2024-11-01"))

	// Claude's own refusal keeps Anthropic's shape for a messages client.
	_, err = upstream.CountTokens(context.Background(), p, claude, []byte(`{"model":"m"}`), nil, "")
	ue, ok := upstream.As(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(ue.Status).To(Equal(400))
	g.Expect(string(ue.ClientBody(upstream.Messages))).To(Equal(string(ue.Body)))
	g.Expect(string(ue.Body)).To(ContainSubstring("messages: Field required"))

	claude.Options = map[string]string{OptionPublisher: "meta"}
	_, err = upstream.CountTokens(context.Background(), p, claude, countBody, nil, "")
	ue, _ = upstream.As(err)
	g.Expect(ue.Retryable).To(BeTrue(), "a publisher this provider cannot call: another backend may")
}
