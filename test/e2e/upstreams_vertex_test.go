package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

// vertexBackend is a vertex backend of the fake for upstreamModel, its
// service-account key in a Secret of the system namespace under the key
// the Cloud console's download is usually stored as.
func vertexBackend(t testing.TB, name string, fake *fakeupstream.Server, key, upstreamModel string) v1.Backend {
	t.Helper()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("vertex-%s-%d", name, time.Now().UnixNano()), Namespace: framework.SystemNamespace},
		StringData: map[string]string{"service-account.json": key},
	}
	NewWithT(t).Expect(stack.Client.Create(context.Background(), secret)).To(Succeed())
	t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), secret) })
	b := sim(name, "vertex")
	b.BaseURL, b.UpstreamModel = fake.URL, upstreamModel
	b.Options = map[string]string{"region": "us-east5"}
	b.CredentialSecretRef = &v1.SecretKeyRef{Name: secret.Name, Key: "service-account.json"}
	return b
}

// vertexPath is the method path the fake is called on.
func vertexPath(publisher, model, method string) string {
	return "/v1/projects/" + fakeupstream.VertexProject + "/locations/us-east5/publishers/" + publisher + "/models/" + model + ":" + method
}

var _ = Describe("The Vertex AI upstream", func() {
	// TestVertex drives chat completions and responses (openai-go) and
	// messages (anthropic-sdk-go), streaming and not, through a vertex route of
	// a Gemini model and one of a Claude model, and checks the answer, the
	// request Vertex AI got (publisher path, Bearer token from the
	// service-account key, Claude's body without model and with
	// anthropic_version) and that the usage row is exactly what the fake
	// reported: Gemini's usageMetadata (cached, thoughts) and Claude's usage
	// (cache read and write).
	It("serves Gemini and Claude models to every client protocol, streamed and not, billed exactly", func() {
		t := GinkgoTB()
		fake := fakeupstream.NewVertex()
		t.Cleanup(fake.Close)
		sa := fake.ServiceAccountJSON()
		for _, tc := range []struct {
			publisher, upstream string
		}{
			{"google", "gemini-2.5-flash"},
			{"anthropic", "claude-sonnet-4@20250514"},
		} {
			g := NewWithT(t)
			model := uniqueModel("vertex-" + tc.publisher)
			textModel(t, framework.SystemNamespace, model, vertexBackend(t, "vertex", fake, sa, tc.upstream))
			acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

			var total int64
			n := 0
			for _, proto := range []string{"chat", "messages", "responses"} {
				for _, stream := range []bool{false, true} {
					n++
					desc := fmt.Sprintf("%s %s stream=%v", tc.publisher, proto, stream)
					text := fmt.Sprintf("Vertex answer number %d.", n)
					want := fakeupstream.Usage{InputTokens: 20 + int64(n), OutputTokens: 9 + int64(n), CacheRead: fakeupstream.Int64(6)}
					if tc.publisher == "google" {
						want.ReasoningTokens = 4
					} else {
						want.CacheWrite = fakeupstream.Int64(3)
					}
					fake.Enqueue(fakeupstream.Reply{Text: text, Usage: want})

					v := ask(t, proto, stream, acct.Key, model, "tell me "+desc)
					g.Expect(v.Text).To(Equal(text), desc)
					g.Expect(v.Stop).To(Equal(endTurn[proto]), desc)
					prompt := want.InputTokens + 6 + *orZero(want.CacheWrite)
					g.Expect(v.Prompt).To(Equal(prompt), desc)
					g.Expect(v.CacheRead).To(Equal(int64(6)), desc)
					g.Expect(v.Output).To(Equal(want.OutputTokens), desc)
					if proto == "messages" {
						g.Expect(v.CacheWrite).To(Equal(*orZero(want.CacheWrite)), desc)
					}

					req := fake.Last()
					g.Expect(req.Rejected).To(BeFalse(), desc)
					g.Expect(req.Header.Get("Authorization")).To(HavePrefix("Bearer ya29.fake-"), desc)
					for name, vals := range req.Header {
						for _, val := range vals {
							g.Expect(val).NotTo(ContainSubstring(acct.Key), "header %s (%s)", name, desc)
						}
					}
					g.Expect(string(req.Body)).NotTo(ContainSubstring(acct.Key), desc)
					g.Expect(string(req.Body)).NotTo(ContainSubstring("PRIVATE KEY"), desc)
					g.Expect(req.Stream()).To(Equal(stream), desc)
					if tc.publisher == "google" {
						method := "generateContent"
						if stream {
							method = "streamGenerateContent"
							g.Expect(req.Query).To(Equal("alt=sse"), desc)
						}
						g.Expect(req.Path).To(Equal(vertexPath("google", tc.upstream, method)), desc)
						g.Expect(req.JSON()["contents"]).To(ConsistOf(HaveKeyWithValue("role", "user")), desc)
					} else {
						method := "rawPredict"
						if stream {
							method = "streamRawPredict"
						}
						g.Expect(req.Path).To(Equal(vertexPath("anthropic", tc.upstream, method)), desc)
						g.Expect(req.JSON()).NotTo(HaveKey("model"), desc)
						g.Expect(req.JSON()).To(HaveKeyWithValue("anthropic_version", "vertex-2023-10-16"), desc)
					}

					row := usageRows(t, acct, n)[0]
					g.Expect(row.ModelName).To(Equal(model), desc)
					g.Expect(row.BillingPhase).To(Equal("settled"), desc)
					g.Expect(row.PromptTokens).To(Equal(prompt), desc)
					g.Expect(row.CacheTokens).To(HaveValue(Equal(int64(6))), desc)
					if tc.publisher == "google" {
						g.Expect(row.CacheCreationTokens).To(BeNil(), desc)
						g.Expect(row.ReportedTotalTokens).To(HaveValue(Equal(prompt+want.OutputTokens)), "totalTokenCount (%s)", desc)
					} else {
						g.Expect(row.CacheCreationTokens).To(HaveValue(Equal(int64(3))), desc)
					}
					g.Expect(row.CompletionTokens).To(Equal(want.OutputTokens), desc)
					g.Expect(row.TotalTokens).To(Equal(prompt+want.OutputTokens), desc)
					q := textQuota(row.PromptTokens, row.CompletionTokens)
					g.Expect(int64(row.Quota)).To(Equal(q), desc)
					total += q
					ledgerUsed(t, acct, total)
				}
			}
			used, rowSum := usedQuota(t, acct, n)
			g.Expect(int64(used)).To(Equal(total), tc.publisher)
			g.Expect(int64(rowSum)).To(Equal(total), tc.publisher)
		}
		g := NewWithT(t)
		g.Expect(fake.Count()).To(Equal(12), "one upstream call per request")
		g.Expect(fake.TokenExchanges()).To(Equal(1), "both routes share the key's cached access token")
	})

	// TestVertexTokenRefresh: the fake issues 12-second tokens, which the
	// OAuth2 library renews 10 seconds before they expire; a request after
	// that gets a new token from a new exchange, and both are billed.
	It("renews a short-lived access token", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := fakeupstream.NewVertex()
		t.Cleanup(fake.Close)
		fake.SetTokenTTL(12 * time.Second)
		model := uniqueModel("vertex-refresh")
		textModel(t, framework.SystemNamespace, model, vertexBackend(t, "vertex", fake, fake.ServiceAccountJSON(), "claude-haiku-4-5@20251001"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

		fake.Enqueue(fakeupstream.Reply{Text: "first", Usage: fakeupstream.Usage{InputTokens: 10, OutputTokens: 1}})
		g.Expect(ask(t, "messages", false, acct.Key, model, "one").Text).To(Equal("first"))
		first := fake.Last().Header.Get("Authorization")
		g.Expect(fake.TokenExchanges()).To(Equal(1))

		time.Sleep(2500 * time.Millisecond)
		fake.Enqueue(fakeupstream.Reply{Text: "second", Usage: fakeupstream.Usage{InputTokens: 12, OutputTokens: 1}})
		g.Expect(ask(t, "chat", true, acct.Key, model, "two").Text).To(Equal("second"))
		second := fake.Last().Header.Get("Authorization")
		g.Expect(fake.Last().Rejected).To(BeFalse())
		g.Expect(second).NotTo(Equal(first), "a renewed token")
		g.Expect(fake.TokenExchanges()).To(Equal(2))

		rows := usageRows(t, acct, 2)
		g.Expect(rows[0].PromptTokens).To(Equal(int64(12)))
		g.Expect(rows[1].PromptTokens).To(Equal(int64(10)))
		ledgerUsed(t, acct, textQuota(10, 1)+textQuota(12, 1))
	})

	// TestVertexFailover: Vertex AI's quota 429 (RESOURCE_EXHAUSTED) on the
	// first backend moves the request to the next one, billed once; a backend
	// whose Secret holds no service-account key is passed over the same way,
	// without any request to the API.
	It("moves to the next backend after a 429 and past a key that is not a service account's", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := fakeupstream.NewVertex()
		t.Cleanup(fake.Close)
		sa := fake.ServiceAccountJSON()
		a := vertexBackend(t, "a-first", fake, sa, "claude-sonnet-4@20250514")
		b := vertexBackend(t, "b-next", fake, sa, "claude-opus-4-1@20250805")
		b.Priority = 5
		model := uniqueModel("vertex-429")
		textModel(t, framework.SystemNamespace, model, a, b)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

		fake.Enqueue(fakeupstream.Reply{Status: http.StatusTooManyRequests},
			fakeupstream.Reply{Text: "served after the 429", Usage: fakeupstream.Usage{InputTokens: 30, OutputTokens: 4}})
		v := ask(t, "chat", false, acct.Key, model, "hello")
		g.Expect(v.Text).To(Equal("served after the 429"))
		reqs := fake.Requests()
		g.Expect(reqs).To(HaveLen(2))
		g.Expect(reqs[0].Model()).To(Equal("claude-sonnet-4@20250514"))
		g.Expect(reqs[1].Model()).To(Equal("claude-opus-4-1@20250805"))
		row := usageRows(t, acct, 1)[0]
		g.Expect(row.PromptTokens).To(Equal(int64(30)))
		g.Expect(row.CompletionTokens).To(Equal(int64(4)))
		g.Expect(int64(row.Quota)).To(Equal(textQuota(30, 4)))

		By("a key that is not a service account's")
		{
			g := NewWithT(t)
			bad := vertexBackend(t, "a-bad-key", fake, `{"type":"authorized_user","client_id":"x","client_secret":"y","refresh_token":"z"}`, "gemini-2.5-pro")
			good := vertexBackend(t, "b-good", fake, sa, "gemini-2.5-flash")
			good.Priority = 5
			model := uniqueModel("vertex-badkey")
			textModel(t, framework.SystemNamespace, model, bad, good)
			acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
			before := fake.Count()
			fake.Enqueue(fakeupstream.Reply{Text: "from the good backend", Usage: fakeupstream.Usage{InputTokens: 8, OutputTokens: 4}})
			v := ask(t, "messages", true, acct.Key, model, "hello")
			g.Expect(v.Text).To(Equal("from the good backend"))
			g.Expect(fake.Count()).To(Equal(before+1), "the bad backend sent nothing")
			g.Expect(strings.HasSuffix(fake.Last().Path, "/gemini-2.5-flash:streamGenerateContent")).To(BeTrue())
			ledgerUsed(t, acct, textQuota(8, 4))
		}
	})
})
