package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/upstream/azureopenai"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("The Azure OpenAI upstream", func() {
	// It drives /v1/chat/completions (openai-go) and /v1/messages
	// (anthropic-sdk-go), streaming and not, through an azure-openai backend on
	// each of Azure's URL schemes, against the Azure fake: the upstream gets
	// the deployment in the URL and the Secret's key in api-key, the client
	// sees its own model, and the usage row is the fake's reported usage.
	Context("Azure OpenAI", func() {
		for _, version := range []string{"2024-10-21", "v1"} {
			It(version, func() {
				t := GinkgoTB()
				g := NewWithT(t)
				fake := fakeupstream.NewAzureOpenAI()
				t.Cleanup(fake.Close)
				deployment := "chat-" + uniqueModel("dep")
				fake.SetDeployments(deployment)
				model := uniqueModel("azure")
				backend := fakeBackend(t, "azure", azureopenai.Name, fake.URL, fake.Key(), deployment)
				backend.Options = map[string]string{azureopenai.OptionAPIVersion: version}
				textModel(t, framework.SystemNamespace, model, backend)
				acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

				var total int64
				n := 0
				for _, proto := range []string{"chat", "messages"} {
					for _, stream := range []bool{false, true} {
						n++
						desc := fmt.Sprintf("%s stream=%v", proto, stream)
						text := fmt.Sprintf("Azure answer %d.", n)
						want := fakeupstream.Usage{InputTokens: 30 + int64(n), OutputTokens: 4 + int64(n), CacheRead: fakeupstream.Int64(2)}
						fake.Enqueue(fakeupstream.Reply{Text: text, Usage: want})

						v := ask(t, proto, stream, acct.Key, model, "hello "+desc)
						g.Expect(v.Text).To(Equal(text), desc)
						g.Expect(v.Stop).To(Equal(endTurn[proto]), desc)

						req := fake.Last()
						g.Expect(req.Rejected).To(BeFalse(), desc)
						g.Expect(req.Header.Get("api-key")).To(Equal(fake.Key()), desc)
						g.Expect(req.Header.Get("Authorization")).To(BeEmpty(), desc)
						g.Expect(string(req.Body)).NotTo(ContainSubstring(acct.Key), desc)
						g.Expect(req.Stream()).To(Equal(stream), desc)
						if version == "v1" {
							g.Expect(req.Path).To(Equal("/openai/v1/chat/completions"), desc)
							g.Expect(req.Query).To(BeEmpty(), desc)
						} else {
							g.Expect(req.Path).To(Equal("/openai/deployments/"+deployment+"/chat/completions"), desc)
							g.Expect(req.Query).To(Equal("api-version="+version), desc)
						}
						g.Expect(req.Model()).To(Equal(deployment), desc)
						if stream {
							g.Expect(req.JSON()["stream_options"]).To(HaveKeyWithValue("include_usage", true), desc)
						}

						prompt := want.InputTokens + *want.CacheRead
						g.Expect(v.Prompt).To(Equal(prompt), desc)
						g.Expect(v.Output).To(Equal(want.OutputTokens), desc)
						row := usageRows(t, acct, n)[0]
						g.Expect(row.ModelName).To(Equal(model), desc)
						g.Expect(row.BillingPhase).To(Equal("settled"), desc)
						g.Expect(row.PromptTokens).To(Equal(prompt), desc)
						g.Expect(row.CompletionTokens).To(Equal(want.OutputTokens), desc)
						g.Expect(row.TotalTokens).To(Equal(prompt+want.OutputTokens), desc)
						g.Expect(row.CacheTokens).To(HaveValue(Equal(*want.CacheRead)), desc)
						q := textQuota(row.PromptTokens, row.CompletionTokens)
						g.Expect(int64(row.Quota)).To(Equal(q), desc)
						total += q
						ledgerUsed(t, acct, total)
					}
				}
				g.Expect(fake.Count()).To(Equal(n), "one upstream call per request")
			})
		}
	})

	// Azure's 401 for the backend's key is the
	// gateway's problem, not the client's: 502, and nothing is billed.
	It("Azure OpenAI wrong key", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := fakeupstream.NewAzureOpenAI()
		t.Cleanup(fake.Close)
		model := uniqueModel("azure-key")
		textModel(t, framework.SystemNamespace, model, fakeBackend(t, "azure", azureopenai.Name, fake.URL, "not-the-key", "dep"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		oc := openaiClient(acct.Key)
		_, err := oc.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}})
		var oerr *openai.Error
		g.Expect(errors.As(err, &oerr)).To(BeTrue(), "%v", err)
		g.Expect(oerr.StatusCode).To(Equal(http.StatusBadGateway))
		reqs := fake.Requests()
		g.Expect(reqs).NotTo(BeEmpty())
		for _, r := range reqs {
			g.Expect(r.Rejected).To(BeTrue())
			g.Expect(r.Header.Get("api-key")).To(Equal("not-the-key"))
		}
		ledgerUsed(t, acct, 0)
	})

	// An azure-openai backend authenticated with Microsoft Entra ID: its
	// Secret holds a service principal (tenantId, clientId and the client
	// secret), the gateway asks the fake authority for a token once and sends
	// it as Bearer, streaming and not, through the OpenAI SDK; the usage rows
	// are the fake's reported usage.
	It("Azure OpenAI Entra ID", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		idp := fakeupstream.NewEntraID()
		t.Cleanup(idp.Close)
		fake := fakeupstream.NewAzureOpenAI()
		t.Cleanup(fake.Close)
		fake.AcceptEntraID(idp)
		// The fake authority's certificate is trusted by the token client of
		// this process's azure-openai provider only.
		tp, ok := stack.Upstreams.Text(azureopenai.Name)
		g.Expect(ok).To(BeTrue())
		az := tp.(*azureopenai.Provider)
		az.SetIdentityClient(idp.Client())
		t.Cleanup(func() { az.SetIdentityClient(nil) })

		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: uniqueModel("azure-sp"), Namespace: framework.SystemNamespace},
			StringData: map[string]string{azureopenai.KeyTenantID: fakeupstream.EntraTenant, azureopenai.KeyClientID: fakeupstream.EntraClientID,
				"clientSecret": fakeupstream.EntraClientSecret}}
		g.Expect(stack.Client.Create(ctx, secret)).To(Succeed())
		t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), secret) })
		deployment := "chat-" + uniqueModel("dep")
		fake.SetDeployments(deployment)
		backend := sim("azure-entra", azureopenai.Name)
		backend.BaseURL, backend.UpstreamModel = fake.URL, deployment
		backend.CredentialSecretRef = &v1.SecretKeyRef{Name: secret.Name, Key: "clientSecret"}
		backend.Options = map[string]string{azureopenai.OptionAPIVersion: "2024-10-21",
			azureopenai.OptionAuth: azureopenai.AuthEntraID, azureopenai.OptionAuthorityHost: idp.URL}
		model := uniqueModel("azure-entra")
		textModel(t, framework.SystemNamespace, model, backend)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

		var total int64
		for n, stream := range []bool{false, true} {
			desc := fmt.Sprintf("stream=%v", stream)
			text := fmt.Sprintf("Entra answer %d.", n)
			want := fakeupstream.Usage{InputTokens: 40 + int64(n), OutputTokens: 6 + int64(n)}
			fake.Enqueue(fakeupstream.Reply{Text: text, Usage: want})

			v := ask(t, "chat", stream, acct.Key, model, "hello "+desc)
			g.Expect(v.Text).To(Equal(text), desc)

			req := fake.Last()
			g.Expect(req.Rejected).To(BeFalse(), desc)
			g.Expect(req.Header.Get("api-key")).To(BeEmpty(), desc)
			token, bearer := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
			g.Expect(bearer).To(BeTrue(), desc)
			g.Expect(idp.Valid(token)).To(BeTrue(), desc)
			g.Expect(req.Path).To(Equal("/openai/deployments/"+deployment+"/chat/completions"), desc)
			g.Expect(req.Stream()).To(Equal(stream), desc)

			g.Expect(v.Prompt).To(Equal(want.InputTokens), desc)
			g.Expect(v.Output).To(Equal(want.OutputTokens), desc)
			row := usageRows(t, acct, n+1)[0]
			g.Expect(row.ModelName).To(Equal(model), desc)
			g.Expect(row.BillingPhase).To(Equal("settled"), desc)
			g.Expect(row.PromptTokens).To(Equal(want.InputTokens), desc)
			g.Expect(row.CompletionTokens).To(Equal(want.OutputTokens), desc)
			g.Expect(row.TotalTokens).To(Equal(want.InputTokens+want.OutputTokens), desc)
			q := textQuota(row.PromptTokens, row.CompletionTokens)
			g.Expect(int64(row.Quota)).To(Equal(q), desc)
			total += q
			ledgerUsed(t, acct, total)
		}
		g.Expect(fake.Count()).To(Equal(2), "one upstream call per request")
		g.Expect(idp.Issued()).To(Equal(1), "one token, cached for both calls")
	})
})
