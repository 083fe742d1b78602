package e2e

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

var weatherSchema = map[string]any{
	"type":       "object",
	"properties": map[string]any{"city": map[string]any{"type": "string"}},
	"required":   []string{"city"},
}

// weatherTools is the one function tool the tool specs offer.
func weatherTools() []openai.ChatCompletionToolUnionParam {
	return []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
		Name: "get_weather", Description: openai.String("Current weather of a city"), Parameters: weatherSchema,
	})}
}

// chatCompletion sends params through the official OpenAI SDK: one answer,
// or a stream (with its usage chunk) accumulated into one.
func chatCompletion(ctx context.Context, g Gomega, c openai.Client, params openai.ChatCompletionNewParams, stream bool) openai.ChatCompletion {
	if !stream {
		cc, err := c.Chat.Completions.New(ctx, params)
		g.Expect(err).NotTo(HaveOccurred())
		return *cc
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := c.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	g.Expect(s.Err()).NotTo(HaveOccurred())
	return acc.ChatCompletion
}

var _ = Describe("Tool round trips across protocols", func() {
	// A messages client declares a tool; the
	// OpenAI upstream (reached through chat completions) answers with a tool
	// call; the client sends the tool result; the upstream answers text.
	It("tool round trip messages to OpenAI", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		fake := startFake(t, "openai")
		model := uniqueModel("tools-m2o")
		textModel(t, framework.SystemNamespace, model, fakeBackend(t, "up", "openai", fake.URL, fake.Key(), "gpt-upstream"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := anthropicClient(acct.Key)
		tools := []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name: "get_weather", Description: anthropic.String("Current weather of a city"),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: weatherSchema["properties"], Required: []string{"city"}},
		}}}

		var total int64
		for i, stream := range []bool{false, true} {
			callID := fmt.Sprintf("call_m2o_%d", i)
			fake.Enqueue(
				fakeupstream.Reply{ToolCall: &fakeupstream.ToolCall{ID: callID, Name: "get_weather", Arguments: `{"city":"Paris"}`},
					Usage: fakeupstream.Usage{InputTokens: 50, OutputTokens: 12}},
				fakeupstream.Reply{Text: "It is sunny in Paris.", Usage: fakeupstream.Usage{InputTokens: 80, OutputTokens: 6}},
			)
			user := anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?"))
			params := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 500, Tools: tools,
				Messages: []anthropic.MessageParam{user}}
			send := func() anthropic.Message {
				if !stream {
					m, err := c.Messages.New(ctx, params)
					g.Expect(err).NotTo(HaveOccurred())
					return *m
				}
				var m anthropic.Message
				s := c.Messages.NewStreaming(ctx, params)
				for s.Next() {
					g.Expect(m.Accumulate(s.Current())).To(Succeed())
				}
				g.Expect(s.Err()).NotTo(HaveOccurred())
				return m
			}

			first := send()
			g.Expect(string(first.StopReason)).To(Equal("tool_use"))
			var use anthropic.ToolUseBlock
			for _, b := range first.Content {
				if b.Type == "tool_use" {
					use = b.AsToolUse()
				}
			}
			g.Expect(use.ID).To(Equal(callID), "the upstream's call ID reaches the client unchanged")
			g.Expect(use.Name).To(Equal("get_weather"))
			g.Expect(string(use.Input)).To(MatchJSON(`{"city":"Paris"}`))
			g.Expect(first.Usage.InputTokens).To(Equal(int64(50)))
			g.Expect(first.Usage.OutputTokens).To(Equal(int64(12)))

			// The upstream got the tool in OpenAI's shape.
			req := fake.Last().JSON()
			g.Expect(fake.Last().Path).To(Equal("/v1/chat/completions"))
			g.Expect(req["tools"]).To(HaveLen(1))
			tool := req["tools"].([]any)[0].(map[string]any)
			g.Expect(tool).To(HaveKeyWithValue("type", "function"))
			g.Expect(tool["function"]).To(HaveKeyWithValue("name", "get_weather"))
			g.Expect(tool["function"]).To(HaveKeyWithValue("parameters", HaveKeyWithValue("required", ConsistOf("city"))))

			params.Messages = append(params.Messages, first.ToParam(),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "sunny, 21 C", false)))
			second := send()
			g.Expect(string(second.StopReason)).To(Equal("end_turn"))
			g.Expect(second.Content).To(HaveLen(1))
			g.Expect(second.Content[0].Text).To(Equal("It is sunny in Paris."))

			// The second upstream request carries the call and its result.
			msgs := fake.Last().JSON()["messages"].([]any)
			var sawCall, sawResult bool
			for _, m := range msgs {
				m := m.(map[string]any)
				switch m["role"] {
				case "assistant":
					calls, _ := m["tool_calls"].([]any)
					g.Expect(calls).To(HaveLen(1))
					call := calls[0].(map[string]any)
					g.Expect(call).To(HaveKeyWithValue("id", callID))
					g.Expect(call["function"]).To(HaveKeyWithValue("name", "get_weather"))
					g.Expect(call["function"].(map[string]any)["arguments"]).To(MatchJSON(`{"city":"Paris"}`))
					sawCall = true
				case "tool":
					g.Expect(m).To(HaveKeyWithValue("tool_call_id", callID))
					content, _ := json.Marshal(m["content"])
					g.Expect(string(content)).To(ContainSubstring("sunny, 21 C"))
					sawResult = true
				}
			}
			g.Expect(sawCall).To(BeTrue())
			g.Expect(sawResult).To(BeTrue())
			total += textQuota(50, 12) + textQuota(80, 6)
		}
		used, _ := usedQuota(t, acct, 4)
		g.Expect(int64(used)).To(Equal(total))
	})

	// A chat-completions client declares a
	// tool; the Anthropic upstream answers with a tool_use block (streamed as
	// input_json_delta); the client sends the tool result; the upstream answers
	// text.
	It("tool round trip chat to Anthropic", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		fake := startFake(t, "anthropic")
		model := uniqueModel("tools-c2a")
		textModel(t, framework.SystemNamespace, model, fakeBackend(t, "up", "anthropic", fake.URL, fake.Key(), "claude-upstream"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := openaiClient(acct.Key)
		tools := weatherTools()

		var total int64
		for i, stream := range []bool{false, true} {
			toolID := fmt.Sprintf("toolu_c2a_%d", i)
			fake.Enqueue(
				fakeupstream.Reply{Text: "Let me check.", ToolCall: &fakeupstream.ToolCall{ID: toolID, Name: "get_weather", Arguments: `{"city":"Paris"}`},
					Usage: fakeupstream.Usage{InputTokens: 60, OutputTokens: 20}},
				fakeupstream.Reply{Text: "It is sunny in Paris.", Usage: fakeupstream.Usage{InputTokens: 90, OutputTokens: 7}},
			)
			params := openai.ChatCompletionNewParams{Model: model, Tools: tools,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")}}
			send := func() openai.ChatCompletion { return chatCompletion(ctx, g, c, params, stream) }

			first := send()
			g.Expect(first.Choices).To(HaveLen(1))
			g.Expect(first.Choices[0].FinishReason).To(Equal("tool_calls"))
			msg := first.Choices[0].Message
			g.Expect(msg.Content).To(Equal("Let me check."))
			g.Expect(msg.ToolCalls).To(HaveLen(1))
			call := msg.ToolCalls[0]
			g.Expect(call.ID).To(Equal(toolID))
			g.Expect(call.Function.Name).To(Equal("get_weather"))
			g.Expect(call.Function.Arguments).To(MatchJSON(`{"city":"Paris"}`))
			g.Expect(first.Usage.PromptTokens).To(Equal(int64(60)))
			g.Expect(first.Usage.CompletionTokens).To(Equal(int64(20)))

			req := fake.Last().JSON()
			g.Expect(req["max_tokens"]).To(BeNumerically(">", 0), "messages requires max_tokens")
			g.Expect(req["tools"]).To(HaveLen(1))
			tool := req["tools"].([]any)[0].(map[string]any)
			g.Expect(tool).To(HaveKeyWithValue("name", "get_weather"))
			g.Expect(tool).To(HaveKeyWithValue("input_schema", HaveKeyWithValue("required", ConsistOf("city"))))

			params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage("sunny, 21 C", call.ID))
			second := send()
			g.Expect(second.Choices[0].FinishReason).To(Equal("stop"))
			g.Expect(second.Choices[0].Message.Content).To(Equal("It is sunny in Paris."))

			msgs := fake.Last().JSON()["messages"].([]any)
			g.Expect(msgs).To(HaveLen(3))
			assistant := msgs[1].(map[string]any)
			g.Expect(assistant).To(HaveKeyWithValue("role", "assistant"))
			var sawUse bool
			for _, b := range assistant["content"].([]any) {
				if b := b.(map[string]any); b["type"] == "tool_use" {
					g.Expect(b).To(HaveKeyWithValue("id", toolID))
					g.Expect(b).To(HaveKeyWithValue("name", "get_weather"))
					g.Expect(b).To(HaveKeyWithValue("input", HaveKeyWithValue("city", "Paris")))
					sawUse = true
				}
			}
			g.Expect(sawUse).To(BeTrue())
			result := msgs[2].(map[string]any)
			g.Expect(result).To(HaveKeyWithValue("role", "user"))
			blocks := result["content"].([]any)
			g.Expect(blocks[0]).To(HaveKeyWithValue("type", "tool_result"))
			g.Expect(blocks[0]).To(HaveKeyWithValue("tool_use_id", toolID))
			content, _ := json.Marshal(blocks[0].(map[string]any)["content"])
			g.Expect(string(content)).To(ContainSubstring("sunny, 21 C"))
			total += textQuota(60, 20) + textQuota(90, 7)
		}
		used, _ := usedQuota(t, acct, 4)
		g.Expect(int64(used)).To(Equal(total))
	})

	// A responses client declares a
	// function tool; the Anthropic upstream answers with tool_use; the client
	// sends function_call_output; the upstream gets tool_result and answers.
	// The second turn also names the first by previous_response_id: the
	// upstream receives the whole conversation.
	It("tool round trip responses to Anthropic", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		fake := startFake(t, "anthropic")
		model := uniqueModel("tools-r2a")
		textModel(t, framework.SystemNamespace, model, fakeBackend(t, "up", "anthropic", fake.URL, fake.Key(), "claude-upstream"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := openaiClient(acct.Key)
		tools := []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
			Name: "get_weather", Parameters: weatherSchema, Strict: openai.Bool(false)}}}

		fake.Enqueue(
			fakeupstream.Reply{ToolCall: &fakeupstream.ToolCall{ID: "toolu_r2a", Name: "get_weather", Arguments: `{"city":"Oslo"}`},
				Usage: fakeupstream.Usage{InputTokens: 40, OutputTokens: 10}},
			fakeupstream.Reply{Text: "Cold in Oslo.", Usage: fakeupstream.Usage{InputTokens: 70, OutputTokens: 4}},
		)
		first, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: model, Tools: tools,
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Oslo?")}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(first.Status)).To(Equal("completed"))
		var call responses.ResponseFunctionToolCall
		for _, item := range first.Output {
			if item.Type == "function_call" {
				call = item.AsFunctionCall()
			}
		}
		g.Expect(call.CallID).To(Equal("toolu_r2a"))
		g.Expect(call.Name).To(Equal("get_weather"))
		g.Expect(call.Arguments).To(MatchJSON(`{"city":"Oslo"}`))
		g.Expect(fake.Last().JSON()["tools"]).To(ConsistOf(HaveKeyWithValue("name", "get_weather")))

		output := responses.ResponseInputItemParamOfFunctionCallOutput("minus 5 C")
		output.OfFunctionCallOutput.CallID = openai.String(call.CallID)
		second, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: model, Tools: tools,
			PreviousResponseID: openai.String(first.ID),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				output,
			}}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(second.OutputText()).To(Equal("Cold in Oslo."))

		msgs := fake.Last().JSON()["messages"].([]any)
		g.Expect(msgs).To(HaveLen(3), "question, tool call, tool result")
		g.Expect(msgs[0]).To(HaveKeyWithValue("role", "user"))
		g.Expect(msgs[1]).To(HaveKeyWithValue("role", "assistant"))
		g.Expect(msgs[1].(map[string]any)["content"]).To(ContainElement(And(HaveKeyWithValue("type", "tool_use"), HaveKeyWithValue("id", "toolu_r2a"))))
		g.Expect(msgs[2].(map[string]any)["content"]).To(ContainElement(And(HaveKeyWithValue("type", "tool_result"), HaveKeyWithValue("tool_use_id", "toolu_r2a"))))
		used, _ := usedQuota(t, acct, 2)
		g.Expect(int64(used)).To(Equal(textQuota(40, 10) + textQuota(70, 4)))
	})
})
