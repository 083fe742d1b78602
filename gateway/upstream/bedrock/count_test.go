package bedrock_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/bedrock"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

func TestCountTokens(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewBedrock()
	defer f.Close()
	p := bedrock.New(fakeupstream.Client())
	b := fakeBackend(f, "anthropic.claude-3-5-sonnet-20240620-v1:0")
	body := []byte(`{"model":"client-model","system":"be brief","temperature":0.2,"messages":[{"role":"user","content":"how many tokens?"}],` +
		`"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]}`)

	n, err := upstream.CountTokens(ctx, p, b, body, nil, "")
	g.Expect(err).NotTo(HaveOccurred())
	req := f.Last()
	g.Expect(req.Rejected).To(BeFalse(), string(req.Body))
	g.Expect(n).To(Equal(fakeupstream.TokenCount(req.Body)))
	g.Expect(req.Path).To(Equal("/model/anthropic.claude-3-5-sonnet-20240620-v1:0/count-tokens"))
	g.Expect(req.Header.Get("Authorization")).To(HavePrefix("AWS4-HMAC-SHA256 Credential=" + fakeupstream.BedrockAccessKeyID + "/"))
	in, _ := req.JSON()["input"].(map[string]any)
	converse, _ := in["converse"].(map[string]any)
	g.Expect(converse).To(HaveKey("messages"))
	g.Expect(converse).To(HaveKey("system"))
	g.Expect(converse).To(HaveKey("toolConfig"))
	g.Expect(converse).NotTo(HaveKey("inferenceConfig"), "not a ConverseTokensRequest member")

	f.Enqueue(fakeupstream.Reply{Status: 429})
	_, err = upstream.CountTokens(ctx, p, b, body, nil, "")
	ue, ok := upstream.As(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(ue.Status).To(Equal(429))
	g.Expect(ue.Retryable).To(BeTrue())
	g.Expect(ue.Message).To(ContainSubstring("ThrottlingException"))

	f.Enqueue(fakeupstream.Reply{Status: 400, ErrorMessage: "The provided model doesn't support counting tokens."})
	_, err = upstream.CountTokens(ctx, p, b, body, nil, "")
	ue, _ = upstream.As(err)
	g.Expect(ue.Status).To(Equal(400))
	g.Expect(ue.Retryable).To(BeFalse())
	g.Expect(ue.Message).To(Equal("ValidationException: The provided model doesn't support counting tokens."))

	bad := fakeBackend(f, "m")
	bad.APIKey = "wrong"
	_, err = upstream.CountTokens(ctx, p, bad, body, nil, "")
	ue, _ = upstream.As(err)
	g.Expect(ue.Status).To(Equal(403), "the fake checks the signature as on Converse")
}
