package fakeupstream_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/modelgate/modelgate/test/fakeupstream"
)

// The fakes are checked against the official SDKs directly: what the SDKs
// parse, the gateway will have to handle.

func TestAnthropicFakeWithTheOfficialSDK(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewAnthropic()
	defer f.Close()
	c := anthropic.NewClient(aoption.WithBaseURL(f.URL), aoption.WithAPIKey(f.Key()), aoption.WithMaxRetries(0))
	params := anthropic.MessageNewParams{Model: "claude-x", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}

	f.Enqueue(fakeupstream.Reply{Text: "Hello there friend", Usage: fakeupstream.Usage{InputTokens: 12, OutputTokens: 3,
		CacheRead: fakeupstream.Int64(5), CacheWrite: fakeupstream.Int64(2)}})
	m, err := c.Messages.New(ctx, params)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.Content[0].Text).To(Equal("Hello there friend"))
	g.Expect(string(m.Model)).To(Equal("claude-x"))
	g.Expect(m.Usage.CacheReadInputTokens).To(Equal(int64(5)))
	g.Expect(m.Usage.CacheCreationInputTokens).To(Equal(int64(2)))
	g.Expect(f.Last().Header.Get("anthropic-version")).To(Equal("2023-06-01"))

	f.Enqueue(fakeupstream.Reply{Text: "Checking.", ToolCall: &fakeupstream.ToolCall{Name: "get_weather", Arguments: `{"city":"Paris"}`},
		Usage: fakeupstream.Usage{InputTokens: 12, OutputTokens: 9}})
	s := c.Messages.NewStreaming(ctx, params)
	var acc anthropic.Message
	var types []string
	for s.Next() {
		ev := s.Current()
		types = append(types, ev.Type)
		g.Expect(acc.Accumulate(ev)).To(Succeed())
	}
	g.Expect(s.Err()).NotTo(HaveOccurred())
	g.Expect(types[0]).To(Equal("message_start"))
	g.Expect(types[len(types)-2:]).To(Equal([]string{"message_delta", "message_stop"}))
	g.Expect(acc.Content).To(HaveLen(2))
	g.Expect(acc.Content[0].Text).To(Equal("Checking."))
	g.Expect(acc.Content[1].Name).To(Equal("get_weather"))
	g.Expect(string(acc.Content[1].Input)).To(MatchJSON(`{"city":"Paris"}`))
	g.Expect(string(acc.StopReason)).To(Equal("tool_use"))
	g.Expect(acc.Usage.OutputTokens).To(Equal(int64(9)))
	g.Expect(acc.Usage.InputTokens).To(Equal(int64(12)))

	f.Enqueue(fakeupstream.Reply{Status: 529})
	_, err = c.Messages.New(ctx, params)
	var aerr *anthropic.Error
	g.Expect(errors.As(err, &aerr)).To(BeTrue())
	g.Expect(aerr.StatusCode).To(Equal(529))
	g.Expect(aerr.RawJSON()).To(ContainSubstring("overloaded_error"))

	bad := anthropic.NewClient(aoption.WithBaseURL(f.URL), aoption.WithAPIKey("nope"), aoption.WithMaxRetries(0))
	_, err = bad.Messages.New(ctx, params)
	g.Expect(errors.As(err, &aerr)).To(BeTrue())
	g.Expect(aerr.StatusCode).To(Equal(401))
	g.Expect(f.Last().Rejected).To(BeTrue())

	f.Enqueue(fakeupstream.Reply{Text: "one two three four", CutAfter: 4})
	s = c.Messages.NewStreaming(ctx, params)
	for s.Next() {
	}
	g.Expect(s.Err()).To(HaveOccurred(), "a cut stream is an error")
}

func TestOpenAIFakeWithTheOfficialSDK(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewOpenAI()
	defer f.Close()
	c := openai.NewClient(ooption.WithBaseURL(f.URL+"/v1"), ooption.WithAPIKey(f.Key()), ooption.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{Model: "gpt-x", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}

	f.Enqueue(fakeupstream.Reply{Text: "Hello there", Usage: fakeupstream.Usage{InputTokens: 10, OutputTokens: 2, CacheRead: fakeupstream.Int64(4)}})
	cc, err := c.Chat.Completions.New(ctx, params)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cc.Choices[0].Message.Content).To(Equal("Hello there"))
	g.Expect(cc.Usage.PromptTokens).To(Equal(int64(14)))
	g.Expect(cc.Usage.PromptTokensDetails.CachedTokens).To(Equal(int64(4)))

	f.Enqueue(fakeupstream.Reply{ToolCall: &fakeupstream.ToolCall{Name: "get_weather", Arguments: `{"city":"Paris"}`},
		Usage: fakeupstream.Usage{InputTokens: 10, OutputTokens: 7}})
	sp := params
	sp.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := c.Chat.Completions.NewStreaming(ctx, sp)
	acc := openai.ChatCompletionAccumulator{}
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	g.Expect(s.Err()).NotTo(HaveOccurred())
	g.Expect(acc.Choices[0].FinishReason).To(Equal("tool_calls"))
	g.Expect(acc.Choices[0].Message.ToolCalls).To(HaveLen(1))
	g.Expect(acc.Choices[0].Message.ToolCalls[0].ID).To(HavePrefix("call_"))
	g.Expect(acc.Choices[0].Message.ToolCalls[0].Function.Arguments).To(MatchJSON(`{"city":"Paris"}`))
	g.Expect(acc.Usage.CompletionTokens).To(Equal(int64(7)))

	f.Enqueue(fakeupstream.Reply{Text: "In a grove", Usage: fakeupstream.Usage{InputTokens: 8, OutputTokens: 3}})
	r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-x", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.OutputText()).To(Equal("In a grove"))
	g.Expect(r.Usage.OutputTokens).To(Equal(int64(3)))
	g.Expect(f.Last().Path).To(Equal("/v1/responses"))

	f.Enqueue(fakeupstream.Reply{Text: "streamed words here", ToolCall: &fakeupstream.ToolCall{Name: "f", Arguments: `{"a":1}`}})
	rs := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "gpt-x", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	var text strings.Builder
	var done *responses.Response
	for rs.Next() {
		ev := rs.Current()
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			resp := ev.Response
			done = &resp
		}
	}
	g.Expect(rs.Err()).NotTo(HaveOccurred())
	g.Expect(text.String()).To(Equal("streamed words here"))
	g.Expect(done).NotTo(BeNil())
	g.Expect(done.Output).To(HaveLen(2))
	g.Expect(done.Output[1].Type).To(Equal("function_call"))

	f.Enqueue(fakeupstream.Reply{Status: 429})
	_, err = c.Chat.Completions.New(ctx, params)
	var oerr *openai.Error
	g.Expect(errors.As(err, &oerr)).To(BeTrue())
	g.Expect(oerr.StatusCode).To(Equal(429))
	g.Expect(oerr.Type).To(Equal("rate_limit_error"))

	bad := openai.NewClient(ooption.WithBaseURL(f.URL+"/v1"), ooption.WithAPIKey("nope"), ooption.WithMaxRetries(0))
	_, err = bad.Chat.Completions.New(ctx, params)
	g.Expect(errors.As(err, &oerr)).To(BeTrue())
	g.Expect(oerr.StatusCode).To(Equal(401))
	g.Expect(oerr.Code).To(Equal("invalid_api_key"))
}

func TestHangIsReleasedByTheClient(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewAnthropic()
	defer f.Close()
	f.SetDefault(fakeupstream.Reply{Hang: true})
	ctx, cancel := context.WithCancel(context.Background())
	c := anthropic.NewClient(aoption.WithBaseURL(f.URL), aoption.WithAPIKey(f.Key()), aoption.WithMaxRetries(0))
	errc := make(chan error, 1)
	go func() {
		_, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: "m", MaxTokens: 1,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		errc <- err
	}()
	g.Eventually(f.Count).Should(Equal(1))
	cancel()
	g.Eventually(errc).Should(Receive(MatchError(context.Canceled)))
}
