package openai_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/openai"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

func TestCountTokens(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewOpenAI()
	defer f.Close()
	p := openai.New(fakeupstream.Client())
	b := upstream.Backend{Name: "oa", Provider: openai.Name, BaseURL: f.URL + "/v1", APIKey: f.Key(), UpstreamModel: "gpt-up",
		Options: map[string]string{"project": "proj_1"}}
	body := []byte(`{"model":"client-model","system":"be brief","temperature":0.5,"messages":[{"role":"user","content":"how many tokens?"}],` +
		`"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"}}`)

	n, err := upstream.CountTokens(context.Background(), p, b, body, nil, "beta=true")
	g.Expect(err).NotTo(HaveOccurred())
	req := f.Last()
	g.Expect(req.Rejected).To(BeFalse(), string(req.Body))
	g.Expect(n).To(Equal(fakeupstream.TokenCount(req.Body)))
	g.Expect(req.Path).To(Equal("/v1/responses/input_tokens"))
	g.Expect(req.Query).To(BeEmpty(), "a translated call carries no client query")
	g.Expect(req.Header.Get("OpenAI-Project")).To(Equal("proj_1"))
	m := req.JSON()
	g.Expect(m).To(HaveKeyWithValue("model", "gpt-up"))
	g.Expect(m).To(HaveKeyWithValue("instructions", "be brief"))
	g.Expect(m).To(HaveKey("input"))
	g.Expect(m).To(HaveKey("tools"))
	g.Expect(m).To(HaveKeyWithValue("tool_choice", "auto"))
	g.Expect(m).NotTo(HaveKey("temperature"), "the count endpoint takes no sampling")
	g.Expect(m).NotTo(HaveKey("max_output_tokens"))

	f.Enqueue(fakeupstream.Reply{Status: 429})
	_, err = upstream.CountTokens(context.Background(), p, b, body, nil, "")
	ue, ok := upstream.As(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(ue.Status).To(Equal(429))
	g.Expect(ue.Retryable).To(BeTrue())
	g.Expect(string(ue.ClientBody(upstream.Messages))).To(ContainSubstring(`"type":"rate_limit_error"`), "in the client's shape")

	// A body the translation refuses.
	_, err = upstream.CountTokens(context.Background(), p, b, []byte(`{"model":"m","messages":"nope"}`), nil, "")
	ue, ok = upstream.As(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(ue.Status).To(Equal(400))
	g.Expect(ue.Retryable).To(BeFalse())
}
