package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("The Gemini upstream", func() {
	// It drives chat completions and responses (openai-go) and
	// messages (anthropic-sdk-go), streaming and not, through a Gemini backend,
	// and checks
	// the answer, the request Gemini got, and that the usage row is exactly the
	// usageMetadata the fake reported: prompt (cached included), cached, and
	// output = candidates + thoughts, whose total is Google's totalTokenCount.
	It("Gemini upstream", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := startFake(t, "gemini")
		model := uniqueModel("gemini")
		textModel(t, framework.SystemNamespace, model, fakeBackend(t, "up", "gemini", fake.URL, fake.Key(), "gemini-2.5-flash"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

		var total int64
		n := 0
		for _, proto := range []string{"chat", "messages", "responses"} {
			for _, stream := range []bool{false, true} {
				n++
				desc := fmt.Sprintf("%s stream=%v", proto, stream)
				text := fmt.Sprintf("Gemini answer number %d.", n)
				want := fakeupstream.Usage{InputTokens: 20 + int64(n), OutputTokens: 9 + int64(n), ReasoningTokens: 4, CacheRead: fakeupstream.Int64(6)}
				fake.Enqueue(fakeupstream.Reply{Text: text, Usage: want})

				v := ask(t, proto, stream, acct.Key, model, "tell me "+desc)
				g.Expect(v.Text).To(Equal(text), desc)
				g.Expect(v.Stop).To(Equal(endTurn[proto]), desc)
				prompt := want.InputTokens + 6
				g.Expect(v.Prompt).To(Equal(prompt), desc)
				g.Expect(v.CacheRead).To(Equal(int64(6)), desc)
				g.Expect(v.Output).To(Equal(want.OutputTokens), desc)

				req := fake.Last()
				g.Expect(req.Rejected).To(BeFalse(), desc)
				if stream {
					g.Expect(req.Path).To(Equal("/v1beta/models/gemini-2.5-flash:streamGenerateContent"), desc)
					g.Expect(req.Query).To(Equal("alt=sse"), desc)
				} else {
					g.Expect(req.Path).To(Equal("/v1beta/models/gemini-2.5-flash:generateContent"), desc)
					g.Expect(req.Query).To(BeEmpty(), desc)
				}
				g.Expect(req.Header.Get("x-goog-api-key")).To(Equal(fake.Key()), desc)
				g.Expect(req.Header.Get("Authorization")).To(BeEmpty(), desc)
				g.Expect(string(req.Body)).NotTo(ContainSubstring(acct.Key), desc)
				g.Expect(req.JSON()["contents"]).To(ConsistOf(HaveKeyWithValue("role", "user")), desc)

				row := usageRows(t, acct, n)[0]
				g.Expect(row.ModelName).To(Equal(model), desc)
				g.Expect(row.BillingPhase).To(Equal("settled"), desc)
				g.Expect(row.PromptTokens).To(Equal(prompt), desc)
				g.Expect(row.CacheTokens).To(HaveValue(Equal(int64(6))), desc)
				g.Expect(row.CacheCreationTokens).To(BeNil(), desc)
				g.Expect(row.CompletionTokens).To(Equal(want.OutputTokens), desc)
				g.Expect(row.TotalTokens).To(Equal(prompt+want.OutputTokens), desc)
				g.Expect(row.ReportedTotalTokens).To(HaveValue(Equal(prompt+want.OutputTokens)), "totalTokenCount (%s)", desc)
				q := textQuota(row.PromptTokens, row.CompletionTokens)
				g.Expect(int64(row.Quota)).To(Equal(q), desc)
				total += q
				ledgerUsed(t, acct, total)
			}
		}
		g.Expect(fake.Count()).To(Equal(n), "one upstream call per request")
	})

	// A chat-completions client declares a tool; Gemini
	// answers with a functionCall (no id, as the API sends it); the client gets a
	// tool call with an ID, sends the result under that ID, and Gemini receives
	// it as a functionResponse named after the function.
	It("Gemini tool round trip", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		fake := startFake(t, "gemini")
		model := uniqueModel("gemini-tools")
		textModel(t, framework.SystemNamespace, model, fakeBackend(t, "up", "gemini", fake.URL, fake.Key(), "gemini-2.5-pro"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := openaiClient(acct.Key)
		tools := weatherTools()

		var total int64
		for _, stream := range []bool{false, true} {
			fake.Enqueue(
				fakeupstream.Reply{ToolCall: &fakeupstream.ToolCall{Name: "get_weather", Arguments: `{"city":"Paris"}`},
					Usage: fakeupstream.Usage{InputTokens: 50, OutputTokens: 12, ReasoningTokens: 5}},
				fakeupstream.Reply{Text: "It is sunny in Paris.", Usage: fakeupstream.Usage{InputTokens: 80, OutputTokens: 6}},
			)
			params := openai.ChatCompletionNewParams{Model: model, Tools: tools,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")}}
			send := func() openai.ChatCompletion { return chatCompletion(ctx, g, c, params, stream) }

			first := send()
			g.Expect(first.Choices).To(HaveLen(1))
			g.Expect(first.Choices[0].FinishReason).To(Equal("tool_calls"))
			msg := first.Choices[0].Message
			g.Expect(msg.ToolCalls).To(HaveLen(1))
			call := msg.ToolCalls[0]
			g.Expect(call.ID).NotTo(BeEmpty())
			g.Expect(call.Function.Name).To(Equal("get_weather"))
			g.Expect(call.Function.Arguments).To(MatchJSON(`{"city":"Paris"}`))
			g.Expect(first.Usage.PromptTokens).To(Equal(int64(50)))
			g.Expect(first.Usage.CompletionTokens).To(Equal(int64(12)), "thoughts are output")

			decl := fake.Last().JSON()["tools"].([]any)[0].(map[string]any)["functionDeclarations"].([]any)[0].(map[string]any)
			g.Expect(decl).To(HaveKeyWithValue("name", "get_weather"))
			g.Expect(decl).To(HaveKeyWithValue("parametersJsonSchema", HaveKeyWithValue("required", ConsistOf("city"))))

			params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage("sunny, 21 C", call.ID))
			second := send()
			g.Expect(second.Choices[0].FinishReason).To(Equal("stop"))
			g.Expect(second.Choices[0].Message.Content).To(Equal("It is sunny in Paris."))

			contents := fake.Last().JSON()["contents"].([]any)
			g.Expect(contents).To(HaveLen(3))
			g.Expect(contents[1]).To(HaveKeyWithValue("role", "model"))
			g.Expect(contents[1].(map[string]any)["parts"]).To(ConsistOf(And(
				HaveKeyWithValue("functionCall", And(HaveKeyWithValue("name", "get_weather"), HaveKeyWithValue("args", HaveKeyWithValue("city", "Paris")))),
				HaveKeyWithValue("thoughtSignature", "skip_thought_signature_validator"))))
			g.Expect(contents[2]).To(HaveKeyWithValue("role", "user"))
			g.Expect(contents[2].(map[string]any)["parts"]).To(ConsistOf(HaveKeyWithValue("functionResponse",
				And(HaveKeyWithValue("name", "get_weather"), HaveKeyWithValue("response", HaveKeyWithValue("output", "sunny, 21 C"))))))
			total += textQuota(50, 12) + textQuota(80, 6)
		}
		used, _ := usedQuota(t, acct, 4)
		g.Expect(int64(used)).To(Equal(total))
	})

	// Gemini answers 429 RESOURCE_EXHAUSTED with a
	// RetryInfo delay; the request is served by the next backend and billed
	// once, the limited backend goes behind the other for the delay, and when
	// every backend is limited the client is told the wait.
	It("Gemini rate limit retry", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := startFake(t, "gemini")
		a := fakeBackend(t, "a-first", "gemini", fake.URL, fake.Key(), "gemini-a")
		b := fakeBackend(t, "b-next", "gemini", fake.URL, fake.Key(), "gemini-b")
		b.Priority = 5
		model := uniqueModel("gemini-429")
		textModel(t, framework.SystemNamespace, model, a, b)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

		fake.Enqueue(fakeupstream.Reply{Status: http.StatusTooManyRequests, ErrorMessage: "You exceeded your current quota.", RetryDelay: "30s"},
			fakeupstream.Reply{Text: "served after the 429", Usage: fakeupstream.Usage{InputTokens: 30, OutputTokens: 4}})
		v := ask(t, "chat", false, acct.Key, model, "hello")
		g.Expect(v.Text).To(Equal("served after the 429"))
		reqs := fake.Requests()
		g.Expect(reqs).To(HaveLen(2))
		g.Expect(reqs[0].Model()).To(Equal("gemini-a"))
		g.Expect(reqs[1].Model()).To(Equal("gemini-b"))
		row := usageRows(t, acct, 1)[0]
		g.Expect(row.PromptTokens).To(Equal(int64(30)))
		g.Expect(row.CompletionTokens).To(Equal(int64(4)))
		g.Expect(int64(row.Quota)).To(Equal(textQuota(30, 4)))

		// Within the 30 s the limited backend comes last: the next request goes
		// straight to the other one.
		fake.Enqueue(fakeupstream.Reply{Text: "again", Usage: fakeupstream.Usage{InputTokens: 30, OutputTokens: 1}})
		v = ask(t, "messages", true, acct.Key, model, "hello again")
		g.Expect(v.Text).To(Equal("again"))
		g.Expect(fake.Count()).To(Equal(3))
		g.Expect(fake.Last().Model()).To(Equal("gemini-b"))
		usageRows(t, acct, 2)

		// Both limited: the client gets the upstream's wait.
		fake.Enqueue(fakeupstream.Reply{Status: http.StatusTooManyRequests, RetryDelay: "12s"},
			fakeupstream.Reply{Status: http.StatusTooManyRequests, RetryDelay: "12s"})
		oc := openaiClient(acct.Key)
		_, err := oc.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("once more")}})
		var apiErr *openai.Error
		g.Expect(errors.As(err, &apiErr)).To(BeTrue())
		g.Expect(apiErr.StatusCode).To(Equal(http.StatusBadGateway))
		g.Expect(apiErr.Response.Header.Get("Retry-After")).To(Equal("12"))
		g.Expect(fake.Count()).To(Equal(5))
	})
})
