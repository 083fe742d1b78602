package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

// countParams is a token count of a conversation with a system prompt and
// a tool, as Claude Code sends one.
func countParams(model string) anthropic.MessageCountTokensParams {
	return anthropic.MessageCountTokensParams{
		Model:  anthropic.Model(model),
		System: anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String("You are terse.")},
		Tools: []anthropic.MessageCountTokensToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather",
			Description: anthropic.String("The weather of a city"),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}},
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("hello there")),
			anthropic.NewAssistantMessage(anthropic.NewTextBlock("hi")),
			anthropic.NewUserMessage(anthropic.NewTextBlock("how many tokens is this?")),
		},
	}
}

// expectNotBilled checks that the account has no usage row and nothing
// used: a count is never billed.
func expectNotBilled(t testing.TB, a *framework.Account) {
	t.Helper()
	g := NewWithT(t)
	p, err := stack.Ledger.ListUsage(context.Background(), usageWindow(a))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Rows).To(BeEmpty(), "a token count writes no usage row")
	b, err := stack.Ledger.TokenUsage(context.Background(), a.Token.Status.TokenID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Used).To(BeZero(), "and uses no quota")
}

// countError is the Anthropic error of a failed count.
func countError(t testing.TB, err error) *anthropic.Error {
	t.Helper()
	var aerr *anthropic.Error
	NewWithT(t).Expect(errors.As(err, &aerr)).To(BeTrue(), "%v", err)
	return aerr
}

// errorType is the error.type of an Anthropic error body.
func errorType(t testing.TB, e *anthropic.Error) string {
	t.Helper()
	var body struct {
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	NewWithT(t).Expect(json.Unmarshal([]byte(e.RawJSON()), &body)).To(Succeed())
	return body.Error.Type
}

var _ = Describe("count_tokens: POST /v1/messages/count_tokens", func() {
	It("count_tokens on an anthropic upstream: the upstream's exact count, headers and the beta query forwarded", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		fake := startFake(t, "anthropic")
		model := uniqueModel("count-anthropic")
		textModel(t, framework.SystemNamespace, model, fakeBackend(t, "anthropic", "anthropic", fake.URL, fake.Key(), "claude-up"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := anthropicClient(acct.Key)

		var resp *http.Response
		n, err := c.Messages.CountTokens(ctx, countParams(model), aoption.WithResponseInto(&resp))
		g.Expect(err).NotTo(HaveOccurred())
		got := fake.Last()
		g.Expect(n.InputTokens).To(Equal(fakeupstream.TokenCount(got.Body)), "the upstream's count")
		g.Expect(got.Path).To(Equal("/v1/messages/count_tokens"))
		g.Expect(got.JSON()).To(HaveKeyWithValue("model", "claude-up"))
		g.Expect(got.JSON()).To(HaveKey("tools"))
		g.Expect(got.JSON()).To(HaveKey("system"))
		g.Expect(got.Header.Get("anthropic-version")).To(Equal("2023-06-01"), "the SDK's version")
		g.Expect(resp.Header.Get("request-id")).NotTo(BeEmpty())
		g.Expect(resp.Header.Get("x-request-id")).To(Equal(resp.Header.Get("request-id")))

		beta, err := c.Beta.Messages.CountTokens(ctx, anthropic.BetaMessageCountTokensParams{Model: anthropic.Model(model),
			Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("hello"))},
			Betas:    []anthropic.AnthropicBeta{"context-1m-2025-08-07"}})
		g.Expect(err).NotTo(HaveOccurred())
		got = fake.Last()
		g.Expect(beta.InputTokens).To(Equal(fakeupstream.TokenCount(got.Body)))
		g.Expect(got.Query).To(Equal("beta=true"), "the client's query reaches a same-protocol upstream")
		g.Expect(got.Header.Get("anthropic-beta")).To(Equal("context-1m-2025-08-07"))

		// The upstream's own refusal reaches the client as written.
		fake.Enqueue(fakeupstream.Reply{Status: 400, ErrorMessage: "prompt is too long: 300000 tokens > 200000 maximum"})
		_, err = c.Messages.CountTokens(ctx, countParams(model))
		aerr := countError(t, err)
		g.Expect(aerr.StatusCode).To(Equal(400))
		g.Expect(aerr.RawJSON()).To(ContainSubstring("prompt is too long"))
		expectNotBilled(t, acct)
	})

	It("count_tokens on gemini, bedrock and openai upstreams: each vendor's count endpoint", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		gem, oa, aws := startFake(t, "gemini"), startFake(t, "openai"), fakeupstream.NewBedrock()
		t.Cleanup(aws.Close)
		for _, tc := range []struct {
			name    string
			fake    *fakeupstream.Server
			backend v1.Backend
			path    string
		}{
			{"gemini", gem, fakeBackend(t, "gemini", "gemini", gem.URL, gem.Key(), "gemini-2.5-flash"), "/v1beta/models/gemini-2.5-flash:countTokens"},
			{"bedrock", aws, bedrockBackend(t, "bedrock", aws, "anthropic.claude-3-5-haiku-20241022-v1:0"), "/model/anthropic.claude-3-5-haiku-20241022-v1:0/count-tokens"},
			{"openai", oa, fakeBackend(t, "openai", "openai", oa.URL, oa.Key(), "gpt-up"), "/v1/responses/input_tokens"},
		} {
			model := uniqueModel("count-" + tc.name)
			textModel(t, framework.SystemNamespace, model, tc.backend)
			acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
			c := anthropicClient(acct.Key)
			n, err := c.Messages.CountTokens(ctx, countParams(model))
			g.Expect(err).NotTo(HaveOccurred(), tc.name)
			got := tc.fake.Last()
			g.Expect(got.Rejected).To(BeFalse(), tc.name)
			g.Expect(got.Path).To(Equal(tc.path), tc.name)
			g.Expect(n.InputTokens).To(Equal(fakeupstream.TokenCount(got.Body)), tc.name)
			g.Expect(string(got.Body)).To(ContainSubstring("how many tokens is this?"), tc.name)
			g.Expect(string(got.Body)).To(ContainSubstring("get_weather"), "%s: the tools are counted", tc.name)
			expectNotBilled(t, acct)
		}
	})

	It("count_tokens on the simulated provider: the input a generation of the same body reports", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		model := uniqueModel("count-sim")
		textModel(t, framework.SystemNamespace, model, sim("sim", "simulated"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := anthropicClient(acct.Key)
		params := countParams(model)
		n, err := c.Messages.CountTokens(ctx, params)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n.InputTokens).To(BeNumerically(">", 0))
		expectNotBilled(t, acct)

		tools := []anthropic.ToolUnionParam{{OfTool: params.Tools[0].OfTool}}
		msg, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 100,
			System: []anthropic.TextBlockParam{{Text: "You are terse."}}, Tools: tools, Messages: params.Messages})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(msg.Usage.InputTokens).To(Equal(n.InputTokens))
		g.Expect(usageRows(t, acct, 1)).To(HaveLen(1), "the generation's row only")
	})

	It("count_tokens on a route whose upstreams cannot count: 400 invalid_request_error, count locally", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		model := uniqueModel("count-none")
		// Azure OpenAI has no token count; the backend is never called.
		textModel(t, framework.SystemNamespace, model, fakeBackend(t, "azure", "azure-openai", fakeupstream.RefusedURL(), "k", "dep"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := anthropicClient(acct.Key)
		_, err := c.Messages.CountTokens(context.Background(), countParams(model))
		aerr := countError(t, err)
		g.Expect(aerr.StatusCode).To(Equal(400), "never a fake 0, never a 5xx that SDKs retry")
		g.Expect(aerr.RawJSON()).To(ContainSubstring(`"invalid_request_error"`))
		g.Expect(aerr.RawJSON()).To(ContainSubstring("count locally"))
		g.Expect(aerr.RawJSON()).To(ContainSubstring(model))
		expectNotBilled(t, acct)
	})

	It("count_tokens refusals: a model outside the key's list, an unknown model, a rate-limited key", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		model, other := uniqueModel("count-refused"), uniqueModel("count-other")
		textModel(t, framework.SystemNamespace, model, sim("sim", "simulated"))
		textModel(t, framework.SystemNamespace, other, sim("sim", "simulated"))

		limited := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{ModelLimitsEnabled: true, ModelLimits: []v1.ModelID{v1.ModelID(model)}})
		c := anthropicClient(limited.Key)
		_, err := c.Messages.CountTokens(ctx, countParams(other))
		counted := countError(t, err)
		_, err = c.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(other), MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))}})
		generated := countError(t, err)
		g.Expect(counted.StatusCode).To(Equal(http.StatusForbidden))
		g.Expect(counted.StatusCode).To(Equal(generated.StatusCode), "refused like messages")
		g.Expect(errorType(t, counted)).To(Equal("permission_error"))
		g.Expect(errorType(t, counted)).To(Equal(errorType(t, generated)))

		expectNotBilled(t, limited)

		open := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		oc := anthropicClient(open.Key)
		_, err = oc.Messages.CountTokens(ctx, countParams("no-such-model"))
		unknown := countError(t, err)
		g.Expect(unknown.StatusCode).To(Equal(http.StatusNotFound))
		g.Expect(errorType(t, unknown)).To(Equal("not_found_error"))
		expectNotBilled(t, open)

		rpm := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{RequestsPerMinute: 1})
		rc := anthropicClient(rpm.Key)
		_, err = rc.Messages.CountTokens(ctx, countParams(model))
		g.Expect(err).NotTo(HaveOccurred())
		_, err = rc.Messages.CountTokens(ctx, countParams(model))
		limitedErr := countError(t, err)
		g.Expect(limitedErr.StatusCode).To(Equal(http.StatusTooManyRequests))
		g.Expect(limitedErr.RawJSON()).To(ContainSubstring(`"rate_limit_error"`))
		g.Expect(limitedErr.Response.Header.Get("Retry-After")).NotTo(BeEmpty())
		g.Expect(strings.ToLower(limitedErr.RawJSON())).To(ContainSubstring("requests-per-minute"))
		expectNotBilled(t, rpm)
	})
})
