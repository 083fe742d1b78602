package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

// startFake starts a fake upstream of the given provider ("anthropic",
// "openai" or "gemini") and stops it with the test.
func startFake(t testing.TB, provider string) *fakeupstream.Server {
	t.Helper()
	var s *fakeupstream.Server
	switch provider {
	case "anthropic":
		s = fakeupstream.NewAnthropic()
	case "openai":
		s = fakeupstream.NewOpenAI()
	case "gemini":
		s = fakeupstream.NewGemini()
	default:
		t.Fatalf("no fake for provider %q", provider)
	}
	t.Cleanup(s.Close)
	return s
}

// fakeBackend is a backend of the given provider pointing at baseURL with
// a credential Secret (created in the system namespace) holding key.
func fakeBackend(t testing.TB, name, provider, baseURL, key, upstreamModel string) v1.Backend {
	t.Helper()
	return fakeBackendIn(t, framework.SystemNamespace, name, provider, baseURL, key, upstreamModel)
}

// fakeBackendIn is fakeBackend with its Secret in namespace ns (a tenant's
// private route reads its credential from its own namespace).
func fakeBackendIn(t testing.TB, ns, name, provider, baseURL, key, upstreamModel string) v1.Backend {
	t.Helper()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("upstream-%s-%d", name, time.Now().UnixNano()), Namespace: ns},
		StringData: map[string]string{"apiKey": key},
	}
	NewWithT(t).Expect(stack.Client.Create(context.Background(), secret)).To(Succeed())
	t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), secret) })
	b := sim(name, provider)
	b.BaseURL = baseURL
	b.UpstreamModel = upstreamModel
	b.CredentialSecretRef = &v1.SecretKeyRef{Name: secret.Name, Key: "apiKey"}
	return b
}

// gatewayBatches sets b to run batch lines through the gateway, one
// request each, although its upstream has a batch API of its own: the
// specs of the gateway's execution watch the lines as they run.
func gatewayBatches(b v1.Backend) v1.Backend {
	b.Options = maps.Clone(b.Options)
	if b.Options == nil {
		b.Options = map[string]string{}
	}
	b.Options["batch"] = "gateway"
	return b
}

// textQuota is the quota of a request under textModel's price: 3 USD per 1M
// input tokens (cache reads and writes included, as the rule has no cache
// prices), 15 USD per 1M output tokens, 500 000 quota per USD, half up.
func textQuota(prompt, completion int64) int64 {
	return (prompt*3 + completion*15 + 1) / 2
}

// usageRows waits until the account has n usage rows and returns them,
// newest first.
func usageRows(t testing.TB, a *framework.Account, n int) []store.UsageRecord {
	t.Helper()
	var rows []store.UsageRecord
	NewWithT(t).Eventually(func(g Gomega) {
		p, err := stack.Ledger.ListUsage(context.Background(), usageWindow(a))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Rows).To(HaveLen(n))
		rows = p.Rows
	}, 10*time.Second, 20*time.Millisecond).Should(Succeed())
	return rows
}

// ledgerUsed waits until the token's used quota is want.
func ledgerUsed(t testing.TB, a *framework.Account, want int64) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		b, err := stack.Ledger.TokenUsage(context.Background(), a.Token.Status.TokenID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(b.Used).To(Equal(billing.Quota(want)))
	}, 10*time.Second, 20*time.Millisecond).Should(Succeed())
}

// clientView is an answer as the client saw it, in neutral terms.
type clientView struct {
	Text string
	// Stop is the protocol's own stop signal: messages stop_reason, chat
	// finish_reason, responses status.
	Stop string
	// Prompt is all input tokens (messages: input + cache read + cache
	// write); CacheRead the cached ones; CacheWrite only messages reports.
	Prompt, CacheRead, CacheWrite, Output int64
}

// endTurn is the stop signal of a normal end in each protocol.
var endTurn = map[string]string{"messages": "end_turn", "chat": "stop", "responses": "completed"}

// ask sends one user prompt with the official SDK of the protocol.
func ask(t testing.TB, proto string, stream bool, key, model, prompt string) clientView {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	var v clientView
	switch proto {
	case "messages":
		c := anthropicClient(key)
		params := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 1000,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}}
		var msg anthropic.Message
		if stream {
			s := c.Messages.NewStreaming(ctx, params)
			for s.Next() {
				g.Expect(msg.Accumulate(s.Current())).To(Succeed())
			}
			g.Expect(s.Err()).NotTo(HaveOccurred())
		} else {
			m, err := c.Messages.New(ctx, params)
			g.Expect(err).NotTo(HaveOccurred())
			msg = *m
		}
		g.Expect(string(msg.Model)).To(Equal(model))
		for _, b := range msg.Content {
			v.Text += b.Text
		}
		v.Stop = string(msg.StopReason)
		u := msg.Usage
		v.Prompt = u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
		v.CacheRead, v.CacheWrite, v.Output = u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens
	case "chat":
		c := openaiClient(key)
		params := openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}}
		cc := chatCompletion(ctx, g, c, params, stream)
		g.Expect(cc.Model).To(Equal(model))
		g.Expect(cc.Choices).To(HaveLen(1))
		v.Text, v.Stop = cc.Choices[0].Message.Content, cc.Choices[0].FinishReason
		v.Prompt, v.CacheRead, v.Output = cc.Usage.PromptTokens, cc.Usage.PromptTokensDetails.CachedTokens, cc.Usage.CompletionTokens
		g.Expect(cc.Usage.TotalTokens).To(Equal(v.Prompt + v.Output))
	case "responses":
		c := openaiClient(key)
		params := responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)}}
		var r *responses.Response
		if stream {
			s := c.Responses.NewStreaming(ctx, params)
			var text strings.Builder
			for s.Next() {
				ev := s.Current()
				switch ev.Type {
				case "response.output_text.delta":
					text.WriteString(ev.Delta)
				case "response.completed", "response.incomplete":
					resp := ev.Response
					r = &resp
				}
			}
			g.Expect(s.Err()).NotTo(HaveOccurred())
			g.Expect(r).NotTo(BeNil(), "the stream ends with response.completed")
			g.Expect(r.OutputText()).To(Equal(text.String()), "the deltas add up to the final text")
		} else {
			var err error
			r, err = c.Responses.New(ctx, params)
			g.Expect(err).NotTo(HaveOccurred())
		}
		g.Expect(r.Model).To(Equal(model))
		v.Text, v.Stop = r.OutputText(), string(r.Status)
		v.Prompt, v.CacheRead, v.Output = r.Usage.InputTokens, r.Usage.InputTokensDetails.CachedTokens, r.Usage.OutputTokens
		g.Expect(r.Usage.TotalTokens).To(Equal(v.Prompt + v.Output))
	default:
		t.Fatalf("unknown protocol %q", proto)
	}
	return v
}
