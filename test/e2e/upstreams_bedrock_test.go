package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

// bedrockBackend is a bedrock backend on the fake with an AWS access key
// Secret as docs/providers.md describes it: the secret key under the
// referenced key, the access key ID beside it.
func bedrockBackend(t testing.TB, name string, fake *fakeupstream.Server, model string) v1.Backend {
	t.Helper()
	return bedrockBackendIn(t, framework.SystemNamespace, name, fake, model)
}

// bedrockBackendIn is bedrockBackend with its Secret in namespace ns (a
// tenant's private route).
func bedrockBackendIn(t testing.TB, ns, name string, fake *fakeupstream.Server, model string) v1.Backend {
	t.Helper()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bedrock-%s-%d", name, time.Now().UnixNano()), Namespace: ns},
		StringData: map[string]string{"AWS_ACCESS_KEY_ID": fakeupstream.BedrockAccessKeyID, "AWS_SECRET_ACCESS_KEY": fake.Key()},
	}
	NewWithT(t).Expect(stack.Client.Create(context.Background(), secret)).To(Succeed())
	t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), secret) })
	b := sim(name, "bedrock")
	b.BaseURL = fake.URL
	b.UpstreamModel = model
	b.Options = map[string]string{"region": fakeupstream.BedrockRegion}
	b.CredentialSecretRef = &v1.SecretKeyRef{Name: secret.Name, Key: "AWS_SECRET_ACCESS_KEY"}
	return b
}

var _ = Describe("The Bedrock upstream", func() {
	// TestBedrockUpstream drives chat completions and responses (openai-go)
	// and messages (anthropic-sdk-go), streaming and not, through a bedrock
	// route against the Converse fake, which checks every request's SigV4
	// signature: the answer, the request Bedrock got, and a usage row that is
	// exactly the fake's TokenUsage, cache reads and cache writes included.
	It("serves every client protocol, streamed and not, billed exactly with cache reads and writes", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := fakeupstream.NewBedrock()
		t.Cleanup(fake.Close)
		upstreamModel := "anthropic.claude-3-5-haiku-20241022-v1:0"
		model := uniqueModel("bedrock")
		textModel(t, framework.SystemNamespace, model, bedrockBackend(t, "aws", fake, upstreamModel))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

		var total int64
		n := 0
		for _, proto := range []string{"chat", "messages", "responses"} {
			for _, stream := range []bool{false, true} {
				n++
				desc := fmt.Sprintf("%s stream=%v", proto, stream)
				text := fmt.Sprintf("Bedrock answer number %d.", n)
				want := fakeupstream.Usage{InputTokens: 20 + int64(n), OutputTokens: 5 + int64(n), CacheRead: fakeupstream.Int64(7), CacheWrite: fakeupstream.Int64(3)}
				fake.Enqueue(fakeupstream.Reply{Text: text, Usage: want})

				v := ask(t, proto, stream, acct.Key, model, "tell me "+desc)
				g.Expect(v.Text).To(Equal(text), desc)
				g.Expect(v.Stop).To(Equal(endTurn[proto]), desc)
				prompt := want.InputTokens + 7 + 3
				g.Expect(v.Prompt).To(Equal(prompt), desc)
				g.Expect(v.CacheRead).To(Equal(int64(7)), desc)
				if proto == "messages" {
					g.Expect(v.CacheWrite).To(Equal(int64(3)), desc)
				}
				g.Expect(v.Output).To(Equal(want.OutputTokens), desc)

				req := fake.Last()
				g.Expect(req.Rejected).To(BeFalse(), desc)
				g.Expect(req.Model()).To(Equal(upstreamModel), desc)
				g.Expect(req.Stream()).To(Equal(stream), desc)
				g.Expect(req.Header.Get("Authorization")).To(HavePrefix("AWS4-HMAC-SHA256 Credential="+fakeupstream.BedrockAccessKeyID+"/"), desc)
				g.Expect(string(req.Body)).NotTo(ContainSubstring(acct.Key), desc)
				g.Expect(req.JSON()["messages"]).To(ConsistOf(HaveKeyWithValue("role", "user")), desc)

				row := usageRows(t, acct, n)[0]
				g.Expect(row.ModelName).To(Equal(model), desc)
				g.Expect(row.BillingPhase).To(Equal("settled"), desc)
				g.Expect(row.PromptTokens).To(Equal(prompt), desc)
				g.Expect(row.CacheTokens).To(HaveValue(Equal(int64(7))), desc)
				g.Expect(row.CacheCreationTokens).To(HaveValue(Equal(int64(3))), desc)
				g.Expect(row.CompletionTokens).To(Equal(want.OutputTokens), desc)
				g.Expect(row.TotalTokens).To(Equal(prompt+want.OutputTokens), desc)
				g.Expect(row.ReportedTotalTokens).To(HaveValue(Equal(prompt+want.OutputTokens)), "totalTokens (%s)", desc)
				q := textQuota(row.PromptTokens, row.CompletionTokens)
				g.Expect(int64(row.Quota)).To(Equal(q), desc)
				total += q
				ledgerUsed(t, acct, total)
			}
		}
		g.Expect(fake.Count()).To(Equal(n), "one upstream call per request")
	})

	// TestBedrockThrottleFailover: Bedrock throttles the first backend
	// (ThrottlingException with a Retry-After); the request is served by the
	// next one and billed once, and within the wait the throttled backend
	// comes last.
	It("moves to the next backend after a throttle", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := fakeupstream.NewBedrock()
		t.Cleanup(fake.Close)
		a := bedrockBackend(t, "a-first", fake, "model-a")
		b := bedrockBackend(t, "b-next", fake, "model-b")
		b.Priority = 5
		model := uniqueModel("bedrock-429")
		textModel(t, framework.SystemNamespace, model, a, b)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

		fake.Enqueue(fakeupstream.Reply{Status: 429, RetryDelay: "30"},
			fakeupstream.Reply{Text: "served after the throttle", Usage: fakeupstream.Usage{InputTokens: 30, OutputTokens: 4}})
		v := ask(t, "messages", true, acct.Key, model, "hello")
		g.Expect(v.Text).To(Equal("served after the throttle"))
		reqs := fake.Requests()
		g.Expect(reqs).To(HaveLen(2))
		g.Expect(reqs[0].Model()).To(Equal("model-a"))
		g.Expect(reqs[1].Model()).To(Equal("model-b"))
		row := usageRows(t, acct, 1)[0]
		g.Expect(row.PromptTokens).To(Equal(int64(30)))
		g.Expect(row.CompletionTokens).To(Equal(int64(4)))
		g.Expect(int64(row.Quota)).To(Equal(textQuota(30, 4)))

		fake.Enqueue(fakeupstream.Reply{Text: "again", Usage: fakeupstream.Usage{InputTokens: 30, OutputTokens: 1}})
		v = ask(t, "chat", false, acct.Key, model, "hello again")
		g.Expect(v.Text).To(Equal("again"))
		g.Expect(fake.Count()).To(Equal(3))
		g.Expect(fake.Last().Model()).To(Equal("model-b"), "the throttled backend waits its Retry-After")
		usageRows(t, acct, 2)
		ledgerUsed(t, acct, textQuota(30, 4)+textQuota(30, 1))
	})

	// TestBedrockToolRoundTrip: a chat-completions client declares a tool;
	// Bedrock answers with a toolUse; the client sends the result back under
	// the toolUseId, and Bedrock receives it as a toolResult beside the
	// toolConfig it requires.
	It("carries a tool round trip", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		fake := fakeupstream.NewBedrock()
		t.Cleanup(fake.Close)
		model := uniqueModel("bedrock-tools")
		textModel(t, framework.SystemNamespace, model, bedrockBackend(t, "aws", fake, "amazon.nova-pro-v1:0"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := openaiClient(acct.Key)
		tools := weatherTools()

		var total int64
		for _, stream := range []bool{false, true} {
			fake.Enqueue(
				fakeupstream.Reply{ToolCall: &fakeupstream.ToolCall{ID: "tooluse_weather1", Name: "get_weather", Arguments: `{"city":"Paris"}`},
					Usage: fakeupstream.Usage{InputTokens: 50, OutputTokens: 12}},
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
			g.Expect(call.ID).To(Equal("tooluse_weather1"))
			g.Expect(call.Function.Name).To(Equal("get_weather"))
			g.Expect(call.Function.Arguments).To(MatchJSON(`{"city":"Paris"}`))
			spec := fake.Last().JSON()["toolConfig"].(map[string]any)["tools"].([]any)[0].(map[string]any)["toolSpec"].(map[string]any)
			g.Expect(spec).To(HaveKeyWithValue("name", "get_weather"))
			g.Expect(spec).To(HaveKeyWithValue("inputSchema", HaveKeyWithValue("json", HaveKeyWithValue("required", ConsistOf("city")))))

			params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage("sunny, 21 C", call.ID))
			second := send()
			g.Expect(second.Choices[0].FinishReason).To(Equal("stop"))
			g.Expect(second.Choices[0].Message.Content).To(Equal("It is sunny in Paris."))
			last := fake.Last()
			g.Expect(last.Rejected).To(BeFalse())
			msgs := last.JSON()["messages"].([]any)
			g.Expect(msgs).To(HaveLen(3))
			g.Expect(msgs[1]).To(HaveKeyWithValue("content", ConsistOf(HaveKeyWithValue("toolUse",
				And(HaveKeyWithValue("toolUseId", "tooluse_weather1"), HaveKeyWithValue("input", HaveKeyWithValue("city", "Paris")))))))
			g.Expect(msgs[2]).To(HaveKeyWithValue("content", ConsistOf(HaveKeyWithValue("toolResult",
				And(HaveKeyWithValue("toolUseId", "tooluse_weather1"), HaveKeyWithValue("content", ConsistOf(HaveKeyWithValue("text", "sunny, 21 C"))))))))
			total += textQuota(50, 12) + textQuota(80, 6)
		}
		used, _ := usedQuota(t, acct, 4)
		g.Expect(int64(used)).To(Equal(total))
	})
})
