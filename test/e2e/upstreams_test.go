package e2e

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("The upstream matrix", func() {
	// It drives every client protocol (messages, chat
	// completions, responses; non-streaming and streaming) through the official
	// SDKs against each upstream kind (a fake Anthropic API, a fake OpenAI API,
	// the simulated provider), with and without cache fields reported, and
	// checks the answer, the stop reason and the usage the client sees, the
	// request the upstream got, the usage row and the ledger, exactly.
	Context("every protocol, bills exactly, against the upstream kind", func() {
		for _, kind := range []string{"anthropic", "openai", "simulated"} {
			It(kind, func() {
				t := GinkgoTB()
				g := NewWithT(t)
				model := uniqueModel("matrix-" + kind)
				upstreamModel := "upstream-" + model
				var fake *fakeupstream.Server
				var backend v1.Backend
				if kind == "simulated" {
					backend = sim("sim", "simulated")
				} else {
					fake = startFake(t, kind)
					backend = fakeBackend(t, "up", kind, fake.URL, fake.Key(), upstreamModel)
				}
				textModel(t, framework.SystemNamespace, model, backend)
				acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

				var total int64
				n := 0
				for _, proto := range []string{"messages", "chat", "responses"} {
					for _, stream := range []bool{false, true} {
						for _, cached := range []bool{true, false} {
							n++
							desc := fmt.Sprintf("%s stream=%v cache=%v", proto, stream, cached)
							text := fmt.Sprintf("Answer number %d for %s.", n, proto)
							prompt := "tell me " + desc
							var want fakeupstream.Usage
							if fake != nil {
								want = fakeupstream.Usage{InputTokens: 20 + int64(n), OutputTokens: 5 + int64(n)}
								if cached {
									want.CacheRead = fakeupstream.Int64(7)
									if kind == "anthropic" {
										want.CacheWrite = fakeupstream.Int64(3)
									}
								}
								fake.Enqueue(fakeupstream.Reply{Text: text, Usage: want})
							} else {
								text = "tell me " + desc
								if cached {
									prompt = "[sim:cache_read=7,cache_write=3] " + prompt
								}
							}

							v := ask(t, proto, stream, acct.Key, model, prompt)
							g.Expect(v.Text).To(Equal(text), desc)
							g.Expect(v.Stop).To(Equal(endTurn[proto]), desc)

							// The usage as the client sees it.
							if fake != nil {
								prompt := want.InputTokens + *orZero(want.CacheRead) + *orZero(want.CacheWrite)
								g.Expect(v.Prompt).To(Equal(prompt), desc)
								g.Expect(v.Output).To(Equal(want.OutputTokens), desc)
								g.Expect(v.CacheRead).To(Equal(*orZero(want.CacheRead)), desc)
								if proto == "messages" {
									g.Expect(v.CacheWrite).To(Equal(*orZero(want.CacheWrite)), desc)
								}
							} else {
								g.Expect(v.Output).To(Equal(int64(len(strings.Fields(text)))), desc)
								if cached {
									g.Expect(v.CacheRead).To(Equal(int64(7)), desc)
								}
							}

							// What the upstream got: the backend's model, the
							// Secret's credential, never the client's key.
							if fake != nil {
								req := fake.Last()
								g.Expect(req.Rejected).To(BeFalse(), desc)
								g.Expect(req.Model()).To(Equal(upstreamModel), desc)
								g.Expect(req.Stream()).To(Equal(stream), desc)
								for name, vals := range req.Header {
									for _, val := range vals {
										g.Expect(val).NotTo(ContainSubstring(acct.Key), "header %s leaks the client's key (%s)", name, desc)
									}
								}
								g.Expect(string(req.Body)).NotTo(ContainSubstring(acct.Key), desc)
								g.Expect(string(req.Body)).To(ContainSubstring(prompt), desc)
								switch kind {
								case "anthropic":
									g.Expect(req.Path).To(Equal("/v1/messages"), desc)
									g.Expect(req.Header.Get("x-api-key")).To(Equal(fake.Key()), desc)
									g.Expect(req.Header.Get("anthropic-version")).To(Equal("2023-06-01"), desc)
									g.Expect(req.Header.Get("Authorization")).To(BeEmpty(), desc)
									g.Expect(req.JSON()["max_tokens"]).To(BeNumerically(">", 0), desc)
								case "openai":
									path := "/v1/chat/completions"
									if proto == "responses" {
										path = "/v1/responses"
									}
									g.Expect(req.Path).To(Equal(path), desc)
									g.Expect(req.Header.Get("Authorization")).To(Equal("Bearer "+fake.Key()), desc)
									g.Expect(req.Header.Get("x-api-key")).To(BeEmpty(), desc)
									if stream && path == "/v1/chat/completions" {
										g.Expect(req.JSON()["stream_options"]).To(HaveKeyWithValue("include_usage", true), desc)
									}
								}
							}

							// The usage row and the ledger.
							row := usageRows(t, acct, n)[0]
							g.Expect(row.ModelName).To(Equal(model), desc)
							g.Expect(row.BillingPhase).To(Equal("settled"), desc)
							g.Expect(row.CompletionTokens).To(Equal(v.Output), desc)
							g.Expect(row.PromptTokens).To(Equal(v.Prompt), desc)
							g.Expect(row.TotalTokens).To(Equal(v.Prompt+v.Output), desc)
							switch {
							case cached:
								g.Expect(row.CacheTokens).To(HaveValue(Equal(int64(7))), desc)
							case kind == "simulated":
								// The simulated upstream, like the real Messages API,
								// always reports its cache fields (0 here).
								g.Expect(row.CacheTokens).To(HaveValue(BeZero()), desc)
								g.Expect(row.CacheCreationTokens).To(HaveValue(BeZero()), desc)
							default:
								g.Expect(row.CacheTokens).To(BeNil(), "cache_tokens is null when the upstream reported no cache fields (%s)", desc)
							}
							switch {
							case cached && (kind == "anthropic" || kind == "simulated"):
								g.Expect(row.CacheCreationTokens).To(HaveValue(Equal(int64(3))), desc)
							case kind == "simulated":
							default:
								g.Expect(row.CacheCreationTokens).To(BeNil(), desc)
							}
							q := textQuota(row.PromptTokens, row.CompletionTokens)
							g.Expect(int64(row.Quota)).To(Equal(q), desc)
							total += q
							ledgerUsed(t, acct, total)
						}
					}
				}
				if fake != nil {
					g.Expect(fake.Count()).To(Equal(n), "one upstream call per request")
				}
				used, rowSum := usedQuota(t, acct, n)
				g.Expect(int64(used)).To(Equal(total))
				g.Expect(int64(rowSum)).To(Equal(total))
			})
		}
	})
})

func orZero(p *int64) *int64 {
	if p == nil {
		return new(int64)
	}
	return p
}
