package fakeupstream_test

import (
	"context"
	"errors"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	brtypes "github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/modelgate/modelgate/test/fakeupstream"
)

// The count endpoints of the fakes against the official SDKs: each SDK's
// request passes the fake's checks and its answer decodes.

func TestAnthropicCountFakeWithTheOfficialSDK(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewAnthropic()
	defer f.Close()
	c := anthropic.NewClient(aoption.WithBaseURL(f.URL), aoption.WithAPIKey(f.Key()), aoption.WithMaxRetries(0))
	params := anthropic.MessageCountTokensParams{Model: "claude-x",
		System:   anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String("be brief")},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("how many tokens?"))}}
	n, err := c.Messages.CountTokens(ctx, params)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.InputTokens).To(Equal(fakeupstream.TokenCount(f.Last().Body)))
	g.Expect(f.Last().Path).To(Equal("/v1/messages/count_tokens"))

	f.Enqueue(fakeupstream.Reply{Usage: fakeupstream.Usage{InputTokens: 1234}})
	n, err = c.Messages.CountTokens(ctx, params)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.InputTokens).To(Equal(int64(1234)), "a scripted count")

	f.Enqueue(fakeupstream.Reply{Status: 529})
	_, err = c.Messages.CountTokens(ctx, params)
	var aerr *anthropic.Error
	g.Expect(errors.As(err, &aerr)).To(BeTrue())
	g.Expect(aerr.StatusCode).To(Equal(529))
	g.Expect(aerr.RawJSON()).To(ContainSubstring("overloaded_error"))

	_, err = c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "claude-x"})
	g.Expect(errors.As(err, &aerr)).To(BeTrue())
	g.Expect(aerr.StatusCode).To(Equal(400))
	g.Expect(aerr.RawJSON()).To(ContainSubstring("messages: Field required"))

	beta, err := c.Beta.Messages.CountTokens(ctx, anthropic.BetaMessageCountTokensParams{Model: "claude-x",
		Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("hi"))},
		Betas:    []anthropic.AnthropicBeta{"token-counting-2024-11-01"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(beta.InputTokens).To(Equal(fakeupstream.TokenCount(f.Last().Body)))
	g.Expect(f.Last().Query).To(Equal("beta=true"))
	g.Expect(f.Last().Header.Get("anthropic-beta")).To(Equal("token-counting-2024-11-01"))
}

func TestOpenAICountFakeWithTheOfficialSDK(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewOpenAI()
	defer f.Close()
	c := openai.NewClient(ooption.WithBaseURL(f.URL+"/v1"), ooption.WithAPIKey(f.Key()), ooption.WithMaxRetries(0))
	n, err := c.Responses.InputTokens.Count(ctx, responses.InputTokenCountParams{Model: openai.String("gpt-x"),
		Instructions: openai.String("be brief"),
		Input:        responses.InputTokenCountParamsInputUnion{OfString: openai.String("how many tokens?")}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.InputTokens).To(Equal(fakeupstream.TokenCount(f.Last().Body)))
	g.Expect(f.Last().Path).To(Equal("/v1/responses/input_tokens"))

	_, err = c.Responses.InputTokens.Count(ctx, responses.InputTokenCountParams{Model: openai.String("gpt-x")},
		ooption.WithJSONSet("max_output_tokens", 10))
	var oerr *openai.Error
	g.Expect(errors.As(err, &oerr)).To(BeTrue())
	g.Expect(oerr.StatusCode).To(Equal(400))
	g.Expect(oerr.Code).To(Equal("unknown_parameter"))
	g.Expect(oerr.Message).To(ContainSubstring("max_output_tokens"))
}

func TestBedrockCountFakeWithTheOfficialSDK(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewBedrock()
	defer f.Close()
	c := bedrockSDKClient(f, f.Key(), fakeupstream.BedrockRegion, nil)
	in := &bedrockruntime.CountTokensInput{ModelId: aws.String("anthropic.claude-x-v1:0"),
		Input: &brtypes.CountTokensInputMemberConverse{Value: brtypes.ConverseTokensRequest{
			System: []brtypes.SystemContentBlock{&brtypes.SystemContentBlockMemberText{Value: "be brief"}},
			Messages: []brtypes.Message{{Role: brtypes.ConversationRoleUser,
				Content: []brtypes.ContentBlock{&brtypes.ContentBlockMemberText{Value: "how many tokens?"}}}}}}}
	out, err := c.CountTokens(ctx, in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(int64(aws.ToInt32(out.InputTokens))).To(Equal(fakeupstream.TokenCount(f.Last().Body)))
	g.Expect(f.Last().Path).To(Equal("/model/anthropic.claude-x-v1:0/count-tokens"))

	// A wrong secret fails the signature, as on Converse.
	bad := bedrockSDKClient(f, "wrong-secret", fakeupstream.BedrockRegion, nil)
	_, err = bad.CountTokens(ctx, in)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("InvalidSignatureException"))

	// A conversation that does not start with a user message.
	in.Input = &brtypes.CountTokensInputMemberConverse{Value: brtypes.ConverseTokensRequest{Messages: []brtypes.Message{{
		Role: brtypes.ConversationRoleAssistant, Content: []brtypes.ContentBlock{&brtypes.ContentBlockMemberText{Value: "x"}}}}}}
	_, err = c.CountTokens(ctx, in)
	var ve *brtypes.ValidationException
	g.Expect(errors.As(err, &ve)).To(BeTrue(), "%v", err)
}
