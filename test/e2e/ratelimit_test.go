package e2e

import (
	"context"
	"errors"

	"github.com/anthropics/anthropic-sdk-go"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("Rate limits", func() {
	It("key and token rate limits", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		model := uniqueModel("limits")
		textModel(t, framework.SystemNamespace, model, sim("sim", "simulated"))

		// A key limited to 1 request per minute: the second gets 429 in OpenAI's shape.
		rpm := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{RequestsPerMinute: 1})
		oc := openaiClient(rpm.Key)
		params := openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}}
		_, err := oc.Chat.Completions.New(ctx, params)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = oc.Chat.Completions.New(ctx, params)
		var oerr *openai.Error
		g.Expect(errors.As(err, &oerr)).To(BeTrue())
		g.Expect(oerr.StatusCode).To(Equal(429))
		g.Expect(oerr.Type).To(Equal("rate_limit_error"))
		g.Expect(oerr.Response.Header.Get("Retry-After")).NotTo(BeEmpty())
		g.Expect(oerr.Message).To(ContainSubstring("key's requests-per-minute"))

		// An account limited to 100 tokens per minute: a 300-token answer puts
		// it in debt, so the next request waits (429 in Anthropic's shape).
		tpm := newAccount(t, v1.TenantSpec{TokensPerMinute: 100}, v1.ApiTokenSpec{})
		ac := anthropicClient(tpm.Key)
		_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 1000,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("[sim:tokens=300] x"))}})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))}})
		var aerr *anthropic.Error
		g.Expect(errors.As(err, &aerr)).To(BeTrue())
		g.Expect(aerr.StatusCode).To(Equal(429))
		g.Expect(aerr.RawJSON()).To(ContainSubstring("rate_limit_error"))
		g.Expect(aerr.Response.Header.Get("Retry-After")).NotTo(BeEmpty())
	})
})
