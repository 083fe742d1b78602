package anthropic_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/anthropic"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

var countBody = []byte(`{"model":"client-model","system":"be brief","messages":[{"role":"user","content":"how many tokens?"}],` +
	`"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"thinking":{"type":"enabled","budget_tokens":1024}}`)

func TestCountTokens(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewAnthropic()
	defer f.Close()
	p := anthropic.New(fakeupstream.Client())
	b := upstream.Backend{Name: "a", BaseURL: f.URL, APIKey: f.Key(), UpstreamModel: "claude-up",
		Options: map[string]string{"anthropic-beta": "backend-beta"}}
	h := http.Header{"Anthropic-Beta": {"token-counting-2024-11-01"}}

	n, err := upstream.CountTokens(context.Background(), p, b, countBody, h, "beta=true")
	g.Expect(err).NotTo(HaveOccurred())
	req := f.Last()
	g.Expect(req.Rejected).To(BeFalse())
	g.Expect(n).To(Equal(fakeupstream.TokenCount(req.Body)))
	g.Expect(req.Path).To(Equal("/v1/messages/count_tokens"))
	g.Expect(req.Query).To(Equal("beta=true"), "the client's query reaches a same-protocol upstream")
	g.Expect(req.JSON()).To(HaveKeyWithValue("model", "claude-up"))
	g.Expect(req.JSON()).To(HaveKey("thinking"), "passed on as sent")
	g.Expect(req.Header.Get("anthropic-version")).To(Equal(anthropic.DefaultVersion))
	g.Expect(req.Header.Values("anthropic-beta")).To(Equal([]string{"token-counting-2024-11-01", "backend-beta"}))

	h.Set("anthropic-version", "2024-01-01")
	_, err = upstream.CountTokens(context.Background(), p, b, countBody, h, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Last().Header.Get("anthropic-version")).To(Equal("2024-01-01"), "the client's version")
	g.Expect(f.Last().Query).To(BeEmpty())
}

func TestCountTokensErrors(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewAnthropic()
	defer f.Close()
	p := anthropic.New(fakeupstream.Client())
	b := upstream.Backend{Name: "a", BaseURL: f.URL, APIKey: f.Key(), UpstreamModel: "claude-up"}
	ctx := context.Background()

	// The API's own refusal reaches a messages client as written.
	_, err := upstream.CountTokens(ctx, p, b, []byte(`{"model":"m"}`), nil, "")
	ue, ok := upstream.As(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(ue.Status).To(Equal(400))
	g.Expect(ue.Retryable).To(BeFalse())
	g.Expect(string(ue.ClientBody(upstream.Messages))).To(Equal(string(ue.Body)))
	g.Expect(string(ue.Body)).To(ContainSubstring("messages: Field required"))

	f.Enqueue(fakeupstream.Reply{Status: 529})
	_, err = upstream.CountTokens(ctx, p, b, countBody, nil, "")
	ue, _ = upstream.As(err)
	g.Expect(ue.Status).To(Equal(529))
	g.Expect(ue.Retryable).To(BeTrue(), "an overload moves to the next backend")

	f.Enqueue(fakeupstream.Reply{Hang: true})
	b.Timeout = 200 * time.Millisecond
	_, err = upstream.CountTokens(ctx, p, b, countBody, nil, "")
	ue, _ = upstream.As(err)
	g.Expect(ue.Status).To(Equal(504))
	g.Expect(ue.Retryable).To(BeTrue())

	b.BaseURL = fakeupstream.RefusedURL()
	_, err = upstream.CountTokens(ctx, p, b, countBody, nil, "")
	ue, _ = upstream.As(err)
	g.Expect(ue.Status).To(Equal(502))
	g.Expect(ue.Retryable).To(BeTrue())

	b.BaseURL, b.APIKey = f.URL, "wrong"
	_, err = upstream.CountTokens(ctx, p, b, countBody, nil, "")
	ue, _ = upstream.As(err)
	g.Expect(ue.Status).To(Equal(401))
	g.Expect(ue.ClientStatus()).To(Equal(502), "the gateway's credential, not the client's")
}
