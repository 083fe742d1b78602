package e2e

import (
	"context"
	"errors"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("Conversations over the Responses API", func() {
	// The second turn names the
	// first by ID and the upstream receives the whole conversation (seen in its
	// input token count), on a native and on a translated upstream.
	It("previous response ID continues the conversation", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		native, translated := uniqueModel("conv"), uniqueModel("conv-via-messages")
		textModel(t, framework.SystemNamespace, native, sim("sim", "simulated-openai"))
		textModel(t, framework.SystemNamespace, translated, sim("sim", "simulated"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := openaiClient(acct.Key)
		long := strings.Repeat("remember this sentence please ", 40)

		for _, model := range []string{native, translated} {
			first, err := c.Responses.New(ctx, responses.ResponseNewParams{
				Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(long)}})
			g.Expect(err).NotTo(HaveOccurred())
			alone, err := c.Responses.New(ctx, responses.ResponseNewParams{
				Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("and now?")}})
			g.Expect(err).NotTo(HaveOccurred())
			second, err := c.Responses.New(ctx, responses.ResponseNewParams{
				Model: model, PreviousResponseID: openai.String(first.ID),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("and now?")}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(second.OutputText()).To(Equal("and now?"))
			// The first turn (and its answer) travelled with the second.
			g.Expect(second.Usage.InputTokens).To(BeNumerically(">", alone.Usage.InputTokens+first.Usage.InputTokens/2))

			// Streaming turns are saved too.
			stream := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
				Model: model, PreviousResponseID: openai.String(second.ID),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("third")}})
			var streamedID string
			for stream.Next() {
				if ev := stream.Current(); ev.Type == "response.completed" {
					streamedID = ev.Response.ID
				}
			}
			g.Expect(stream.Err()).NotTo(HaveOccurred())
			fourth, err := c.Responses.New(ctx, responses.ResponseNewParams{
				Model: model, PreviousResponseID: openai.String(streamedID),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("fourth")}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(fourth.Usage.InputTokens).To(BeNumerically(">", second.Usage.InputTokens))
		}

		var oerr *openai.Error
		_, err := c.Responses.New(ctx, responses.ResponseNewParams{
			Model: native, PreviousResponseID: openai.String("resp_unknown"),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}})
		g.Expect(errors.As(err, &oerr)).To(BeTrue())
		g.Expect(oerr.StatusCode).To(Equal(400))
		g.Expect(oerr.Message).To(ContainSubstring("resp_unknown"))

		// Another account cannot continue this account's conversation.
		first, err := c.Responses.New(ctx, responses.ResponseNewParams{
			Model: native, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("mine")}})
		g.Expect(err).NotTo(HaveOccurred())
		other := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		oc := openaiClient(other.Key)
		_, err = oc.Responses.New(ctx, responses.ResponseNewParams{
			Model: native, PreviousResponseID: openai.String(first.ID),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}})
		g.Expect(errors.As(err, &oerr)).To(BeTrue())
		g.Expect(oerr.StatusCode).To(Equal(400))
	})
})
