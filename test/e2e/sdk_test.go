package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/framework"
)

func anthropicClient(key string) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(stack.BaseURL), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
}

func openaiClient(key string) openai.Client {
	return openai.NewClient(ooption.WithBaseURL(stack.BaseURL+"/v1"), ooption.WithAPIKey(key), ooption.WithMaxRetries(0))
}

var _ = Describe("The official SDKs", func() {
	It("Anthropic SDK messages", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		direct, translated := uniqueModel("chat"), uniqueModel("chat-via-openai")
		textModel(t, framework.SystemNamespace, direct, sim("sim", "simulated"))
		textModel(t, framework.SystemNamespace, translated, sim("sim", "simulated-openai"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := anthropicClient(acct.Key)

		for _, model := range []string{direct, translated} {
			msg, err := c.Messages.New(ctx, anthropic.MessageNewParams{
				Model:     anthropic.Model(model),
				MaxTokens: 1024,
				System:    []anthropic.TextBlockParam{{Text: "You are terse."}},
				Messages: []anthropic.MessageParam{
					anthropic.NewUserMessage(anthropic.NewTextBlock("hello there")),
					anthropic.NewAssistantMessage(anthropic.NewTextBlock("hi")),
					anthropic.NewUserMessage(anthropic.NewTextBlock("say the magic words")),
				},
			})
			g.Expect(err).NotTo(HaveOccurred(), model)
			g.Expect(msg.ID).To(HavePrefix("msg_"))
			g.Expect(string(msg.Role)).To(Equal("assistant"))
			g.Expect(string(msg.Model)).To(Equal(model))
			g.Expect(msg.Content).To(HaveLen(1))
			g.Expect(msg.Content[0].Text).To(Equal("say the magic words"))
			g.Expect(string(msg.StopReason)).To(Equal("end_turn"))
			g.Expect(msg.Usage.InputTokens).To(BeNumerically(">", 0))
			g.Expect(msg.Usage.OutputTokens).To(Equal(int64(4)))

			stream := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
				Model: anthropic.Model(model), MaxTokens: 1024,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("[sim:tokens=25] go"))},
			})
			acc := anthropic.Message{}
			for stream.Next() {
				g.Expect(acc.Accumulate(stream.Current())).To(Succeed())
			}
			g.Expect(stream.Err()).NotTo(HaveOccurred())
			g.Expect(strings.Fields(acc.Content[0].Text)).To(HaveLen(25))
			g.Expect(string(acc.StopReason)).To(Equal("end_turn"))
			g.Expect(acc.Usage.OutputTokens).To(Equal(int64(25)))
		}
		used, _ := usedQuota(t, acct, 4)
		g.Expect(used).To(BeNumerically(">", 0))
	})

	// It reads the raw SSE stream and checks the
	// contract's event order exactly.
	It("messages stream event order", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		model := uniqueModel("order")
		textModel(t, framework.SystemNamespace, model, sim("sim", "simulated-openai"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

		body := `{"model":"` + model + `","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"[sim:tokens=5] x"}]}`
		req, _ := http.NewRequest("POST", stack.BaseURL+"/v1/messages", strings.NewReader(body))
		req.Header.Set("x-api-key", acct.Key)
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Set("content-type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(200))
		g.Expect(resp.Header.Get("Content-Type")).To(HavePrefix("text/event-stream"))

		var types []string
		var start, delta map[string]any
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "data: ") {
				continue
			}
			var ev map[string]any
			g.Expect(json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev)).To(Succeed())
			typ := ev["type"].(string)
			if len(types) == 0 || types[len(types)-1] != typ || typ != "content_block_delta" {
				types = append(types, typ)
			}
			switch typ {
			case "message_start":
				start = ev["message"].(map[string]any)
			case "message_delta":
				delta = ev
			}
		}
		g.Expect(types).To(Equal([]string{"message_start", "content_block_start", "content_block_delta",
			"content_block_stop", "message_delta", "message_stop"}))
		g.Expect(start["content"]).To(BeEmpty())
		g.Expect(start["stop_reason"]).To(BeNil())
		g.Expect(start["usage"]).To(HaveKeyWithValue("output_tokens", BeNumerically("==", 0)))
		g.Expect(delta["delta"]).To(HaveKeyWithValue("stop_reason", "end_turn"))
		g.Expect(delta["usage"]).To(HaveKeyWithValue("output_tokens", BeNumerically("==", 5)))
	})

	It("OpenAI SDK chat completions", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		direct, translated := uniqueModel("oa-chat"), uniqueModel("oa-chat-via-messages")
		textModel(t, framework.SystemNamespace, direct, sim("sim", "simulated-openai"))
		textModel(t, framework.SystemNamespace, translated, sim("sim", "simulated"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := openaiClient(acct.Key)

		for _, model := range []string{direct, translated} {
			cc, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
				Model: model,
				Messages: []openai.ChatCompletionMessageParamUnion{
					openai.SystemMessage("be brief"),
					openai.UserMessage("echo me back"),
				},
			})
			g.Expect(err).NotTo(HaveOccurred(), model)
			g.Expect(cc.Model).To(Equal(model))
			g.Expect(cc.Choices).To(HaveLen(1))
			g.Expect(cc.Choices[0].Message.Content).To(Equal("echo me back"))
			g.Expect(cc.Choices[0].FinishReason).To(Equal("stop"))
			g.Expect(cc.Usage.CompletionTokens).To(Equal(int64(3)))

			stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
				Model:         model,
				Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("[sim:tokens=12] go")},
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
			})
			acc := openai.ChatCompletionAccumulator{}
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			g.Expect(stream.Err()).NotTo(HaveOccurred())
			g.Expect(strings.Fields(acc.Choices[0].Message.Content)).To(HaveLen(12))
			g.Expect(acc.Usage.CompletionTokens).To(Equal(int64(12)))
		}
		usedQuota(t, acct, 4)
	})

	It("OpenAI SDK responses", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		direct, translated := uniqueModel("resp"), uniqueModel("resp-via-messages")
		textModel(t, framework.SystemNamespace, direct, sim("sim", "simulated-openai"))
		textModel(t, framework.SystemNamespace, translated, sim("sim", "simulated"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := openaiClient(acct.Key)

		for _, model := range []string{direct, translated} {
			r, err := c.Responses.New(ctx, responses.ResponseNewParams{
				Model:        model,
				Instructions: openai.String("answer plainly"),
				Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("respond with this")},
			})
			g.Expect(err).NotTo(HaveOccurred(), model)
			g.Expect(string(r.Status)).To(Equal("completed"))
			g.Expect(r.OutputText()).To(Equal("respond with this"))
			g.Expect(r.Usage.OutputTokens).To(Equal(int64(3)))

			stream := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
				Model: model,
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("[sim:tokens=7] go")},
			})
			var text strings.Builder
			var completed bool
			for stream.Next() {
				ev := stream.Current()
				switch ev.Type {
				case "response.output_text.delta":
					text.WriteString(ev.Delta)
				case "response.completed":
					completed = true
					g.Expect(ev.Response.Usage.OutputTokens).To(Equal(int64(7)))
				}
			}
			g.Expect(stream.Err()).NotTo(HaveOccurred())
			g.Expect(completed).To(BeTrue())
			g.Expect(strings.Fields(text.String())).To(HaveLen(7))
		}
		usedQuota(t, acct, 4)
	})

	It("text errors in each protocol's shape", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		model := uniqueModel("errs")
		textModel(t, framework.SystemNamespace, model, sim("sim", "simulated"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{ModelLimitsEnabled: true, ModelLimits: []v1.ModelID{v1.ModelID(model)}})

		good, goodOA := anthropicClient(acct.Key), openaiClient(acct.Key)
		var aerr *anthropic.Error
		bad := anthropicClient("sk-" + strings.Repeat("x", 48))
		_, err := bad.Messages.New(ctx, anthropic.MessageNewParams{
			Model: anthropic.Model(model), MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))}})
		g.Expect(errors.As(err, &aerr)).To(BeTrue())
		g.Expect(aerr.StatusCode).To(Equal(401))
		g.Expect(aerr.RawJSON()).To(ContainSubstring(`"authentication_error"`))

		_, err = good.Messages.New(ctx, anthropic.MessageNewParams{
			Model: "not-offered", MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))}})
		g.Expect(errors.As(err, &aerr)).To(BeTrue())
		g.Expect(aerr.StatusCode).To(Equal(403), "not on the key's allow-list")

		// A body without max_tokens: 400 invalid_request_error in Anthropic's shape.
		req, _ := http.NewRequest("POST", stack.BaseURL+"/v1/messages",
			strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"x"}]}`))
		req.Header.Set("Authorization", "Bearer "+acct.Key)
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		var body map[string]any
		g.Expect(json.NewDecoder(resp.Body).Decode(&body)).To(Succeed())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(400))
		g.Expect(body).To(HaveKeyWithValue("type", "error"))
		g.Expect(body["error"]).To(HaveKeyWithValue("type", "invalid_request_error"))
		g.Expect(body["error"]).To(HaveKeyWithValue("message", ContainSubstring("max_tokens")))

		// A role the protocol does not have.
		_, err = good.Messages.New(ctx, anthropic.MessageNewParams{
			Model: anthropic.Model(model), MaxTokens: 10,
			Messages: []anthropic.MessageParam{{Role: "system", Content: []anthropic.ContentBlockParamUnion{anthropic.NewTextBlock("x")}}}})
		g.Expect(errors.As(err, &aerr)).To(BeTrue())
		g.Expect(aerr.StatusCode).To(Equal(400))

		var oerr *openai.Error
		_, err = goodOA.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}, Temperature: openai.Float(3)})
		g.Expect(errors.As(err, &oerr)).To(BeTrue())
		g.Expect(oerr.StatusCode).To(Equal(400))
		g.Expect(oerr.Type).To(Equal("invalid_request_error"))
		g.Expect(oerr.Message).To(ContainSubstring("temperature"))

		nope := openaiClient("sk-nope")
		_, err = nope.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}})
		g.Expect(errors.As(err, &oerr)).To(BeTrue())
		g.Expect(oerr.StatusCode).To(Equal(401))
	})

	It("quota is reserved settled and refused", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		model := uniqueModel("quota")
		textModel(t, framework.SystemNamespace, model, sim("sim", "simulated"))
		// 30 quota units = 0.00006 USD: too little for a 1000-token reservation.
		q := int64(30)
		poor := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{Quota: &q})

		var aerr *anthropic.Error
		pc := anthropicClient(poor.Key)
		_, err := pc.Messages.New(ctx, anthropic.MessageNewParams{
			Model: anthropic.Model(model), MaxTokens: 1000,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))}})
		g.Expect(errors.As(err, &aerr)).To(BeTrue())
		g.Expect(aerr.StatusCode).To(Equal(400))
		g.Expect(aerr.RawJSON()).To(ContainSubstring("insufficient quota"))

		var oerr *openai.Error
		po := openaiClient(poor.Key)
		_, err = po.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: model, MaxTokens: openai.Int(1000), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}})
		g.Expect(errors.As(err, &oerr)).To(BeTrue())
		g.Expect(oerr.StatusCode).To(Equal(429))
		g.Expect(oerr.Code).To(Equal("insufficient_quota"))

		b, err := stack.Ledger.TokenUsage(ctx, poor.Token.Status.TokenID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(int64(b.Used)).To(BeZero(), "a refused request charges nothing")

		// A rich account: the charge follows the price exactly.
		rich := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		rc := anthropicClient(rich.Key)
		msg, err := rc.Messages.New(ctx, anthropic.MessageNewParams{
			Model: anthropic.Model(model), MaxTokens: 1000,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("[sim:tokens=1000] x"))}})
		g.Expect(err).NotTo(HaveOccurred())
		used, _ := usedQuota(t, rich, 1)
		// 3 USD per 1M input, 15 USD per 1M output; 500000 quota per USD, half up.
		wantMicroUSD := msg.Usage.InputTokens*3 + msg.Usage.OutputTokens*15
		g.Expect(int64(used)).To(Equal((wantMicroUSD + 1) / 2))
	})

	It("failover to another backend", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		model := uniqueModel("failover")
		broken := sim("a-broken", "simulated")
		broken.Options = map[string]string{"failRate": "1", "failStatus": "503"}
		broken.Priority = 0
		healthy := sim("b-healthy", "simulated")
		healthy.Priority = 5
		textModel(t, framework.SystemNamespace, model, broken, healthy)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		ac := anthropicClient(acct.Key)
		for range 3 {
			msg, err := ac.Messages.New(ctx, anthropic.MessageNewParams{
				Model: anthropic.Model(model), MaxTokens: 100,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("still here"))}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(msg.Content[0].Text).To(Equal("still here"))
		}
		usedQuota(t, acct, 3)
	})

	It("rate limit answers 429 with retry after", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		model := uniqueModel("rl")
		textModel(t, framework.SystemNamespace, model, sim("sim", "simulated"))
		acct := newAccount(t, v1.TenantSpec{RequestsPerMinute: 2}, v1.ApiTokenSpec{})
		body := `{"model":"` + model + `","max_tokens":10,"messages":[{"role":"user","content":"x"}]}`
		var codes []int
		var retryAfter string
		for range 3 {
			req, _ := http.NewRequest("POST", stack.BaseURL+"/v1/messages", strings.NewReader(body))
			req.Header.Set("x-api-key", acct.Key)
			resp, err := http.DefaultClient.Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			resp.Body.Close()
			codes = append(codes, resp.StatusCode)
			retryAfter = resp.Header.Get("Retry-After")
		}
		g.Expect(codes).To(Equal([]int{200, 200, 429}))
		g.Expect(retryAfter).NotTo(BeEmpty())
	})
})
