package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("Upstream edge cases", func() {
	// A stream whose first event is an error,
	// or whose upstream sends headers and then nothing past the backend's
	// timeout, has not reached the client yet: the next backend answers.
	Context("stream retry before first event", func() {
		cases := []struct {
			name     string
			provider string
			reply    fakeupstream.Reply
			timeout  int32
		}{
			{name: "anthropic-overloaded-event", provider: "anthropic", reply: fakeupstream.Reply{ErrorEvent: true}},
			{name: "openai-error-chunk", provider: "openai", reply: fakeupstream.Reply{ErrorEvent: true}},
			{name: "anthropic-stall-after-headers", provider: "anthropic", reply: fakeupstream.Reply{Stall: true}, timeout: 1},
		}
		for _, tc := range cases {
			It(tc.name, func() {
				t := GinkgoTB()
				g := NewWithT(t)
				first, next := startFake(t, tc.provider), startFake(t, "anthropic")
				first.SetDefault(tc.reply)
				next.SetDefault(fakeupstream.Reply{Text: "from the next backend", Usage: fakeupstream.Usage{InputTokens: 11, OutputTokens: 4}})
				a := fakeBackend(t, "a-first", tc.provider, first.URL, first.Key(), "up-a")
				a.TimeoutSeconds = tc.timeout
				b := fakeBackend(t, "b-next", "anthropic", next.URL, next.Key(), "up-b")
				b.Priority = 5
				model := uniqueModel("first-event-" + tc.name)
				textModel(t, framework.SystemNamespace, model, a, b)
				acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
				for i, proto := range []string{"messages", "chat"} {
					v := ask(t, proto, true, acct.Key, model, "hi")
					g.Expect(v.Text).To(Equal("from the next backend"), proto)
					g.Expect(first.Count()).To(Equal(i + 1))
					g.Expect(next.Count()).To(Equal(i + 1))
				}
				used, _ := usedQuota(t, acct, 2)
				g.Expect(int64(used)).To(Equal(2 * textQuota(11, 4)))
			})
		}
	})

	// An upstream error event after output began
	// reaches the client as its protocol's error event; the request is not
	// retried and is billed for what was sent.
	It("stream error event mid stream", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		first, next := startFake(t, "anthropic"), startFake(t, "anthropic")
		// message_start, content_block_start, ping, "alpha ", "beta " — then an
		// overloaded_error event.
		first.SetDefault(fakeupstream.Reply{Text: "alpha beta gamma delta", ErrorEvent: true, ErrorEventAfter: 5,
			Usage: fakeupstream.Usage{InputTokens: 40, OutputTokens: 4}})
		a := fakeBackend(t, "a-first", "anthropic", first.URL, first.Key(), "up-a")
		b := fakeBackend(t, "b-next", "anthropic", next.URL, next.Key(), "up-b")
		b.Priority = 5
		model := uniqueModel("midstream-error")
		textModel(t, framework.SystemNamespace, model, a, b)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

		ac, oc := anthropicClient(acct.Key), openaiClient(acct.Key)
		// messages (pass-through): the error event as Anthropic sends it.
		s := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 100,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("go"))}})
		var text string
		for s.Next() {
			if ev := s.Current(); ev.Type == "content_block_delta" {
				text += ev.Delta.Text
			}
		}
		g.Expect(text).To(Equal("alpha beta "))
		g.Expect(s.Err()).To(HaveOccurred())
		g.Expect(s.Err().Error()).To(ContainSubstring("overloaded"))

		// chat (translated): an error chunk, no finish_reason.
		cs := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")}})
		text = ""
		finished := false
		for cs.Next() {
			for _, c := range cs.Current().Choices {
				text += c.Delta.Content
				finished = finished || c.FinishReason != ""
			}
		}
		g.Expect(text).To(Equal("alpha beta "))
		g.Expect(finished).To(BeFalse())
		g.Expect(cs.Err()).To(HaveOccurred())
		// The upstream's overloaded_error (529) reaches the chat client with
		// OpenAI's type for that status, not Anthropic's.
		var serr *ssestream.StreamError
		g.Expect(errors.As(cs.Err(), &serr)).To(BeTrue(), "%v", cs.Err())
		g.Expect(string(serr.Event.Data)).To(ContainSubstring(`"type":"server_error"`))
		g.Expect(string(serr.Event.Data)).NotTo(ContainSubstring("overloaded_error"))

		g.Expect(first.Count()).To(Equal(2))
		g.Expect(next.Count()).To(BeZero(), "output began: no retry")
		rows := usageRows(t, acct, 2)
		var sum int64
		for _, r := range rows {
			g.Expect(r.PromptTokens).To(Equal(int64(40)), "message_start reported the input")
			g.Expect(r.CompletionTokens).To(BeNumerically(">", 0))
			g.Expect(int64(r.Quota)).To(Equal(textQuota(r.PromptTokens, r.CompletionTokens)))
			sum += int64(r.Quota)
		}
		ledgerUsed(t, acct, sum)
	})

	// An upstream 401 is about the
	// gateway's credential, not the client's: the client gets 502 in its
	// protocol's shape and is charged nothing.
	It("upstream rejects gateway credential", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		fa, fo := startFake(t, "anthropic"), startFake(t, "openai")
		ma, mo, ok := uniqueModel("badcred-a"), uniqueModel("badcred-o"), uniqueModel("badcred-ok")
		textModel(t, framework.SystemNamespace, ma, fakeBackend(t, "up", "anthropic", fa.URL, "sk-wrong", "claude"))
		textModel(t, framework.SystemNamespace, mo, fakeBackend(t, "up", "openai", fo.URL, "sk-wrong", "gpt"))
		textModel(t, framework.SystemNamespace, ok, sim("sim", "simulated"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

		ac, oc := anthropicClient(acct.Key), openaiClient(acct.Key)
		for _, model := range []string{ma, mo} {
			_, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 10,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))}})
			var aerr *anthropic.Error
			g.Expect(errors.As(err, &aerr)).To(BeTrue(), "%v", err)
			g.Expect(aerr.StatusCode).To(Equal(http.StatusBadGateway), model)
			g.Expect(aerr.RawJSON()).To(ContainSubstring(`"type":"error"`))
			g.Expect(aerr.RawJSON()).NotTo(ContainSubstring("authentication_error"), "the client's key is fine")

			_, err = oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}})
			var oerr *openai.Error
			g.Expect(errors.As(err, &oerr)).To(BeTrue(), "%v", err)
			g.Expect(oerr.StatusCode).To(Equal(http.StatusBadGateway), model)
		}
		g.Expect(fa.Requests()[0].Header.Get("x-api-key")).To(Equal("sk-wrong"))
		g.Expect(fo.Requests()[0].Header.Get("Authorization")).To(Equal("Bearer sk-wrong"))

		v := ask(t, "messages", false, acct.Key, ok, "fine")
		rows := usageRows(t, acct, 1)
		g.Expect(rows[0].ModelName).To(Equal(ok))
		ledgerUsed(t, acct, textQuota(v.Prompt, v.Output))
	})

	// The client's anthropic-version and anthropic-beta
	// reach an Anthropic upstream with the backend's own beta; an OpenAI
	// backend's organization and project options become headers; the client's
	// key never travels.
	It("upstream headers", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fa, fo := startFake(t, "anthropic"), startFake(t, "openai")
		ma, mo := uniqueModel("hdr-a"), uniqueModel("hdr-o")
		ba := fakeBackend(t, "up", "anthropic", fa.URL, fa.Key(), "claude")
		ba.Options = map[string]string{"anthropic-beta": "backend-beta-2025"}
		bo := fakeBackend(t, "up", "openai", fo.URL+"/v1", fo.Key(), "gpt")
		bo.Options = map[string]string{"organization": "org-fake", "project": "proj_fake"}
		textModel(t, framework.SystemNamespace, ma, ba)
		textModel(t, framework.SystemNamespace, mo, bo)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

		post := func(model string) {
			req, _ := http.NewRequest(http.MethodPost, stack.BaseURL+"/v1/messages",
				strings.NewReader(`{"model":"`+model+`","max_tokens":10,"messages":[{"role":"user","content":"x"}]}`))
			req.Header.Set("x-api-key", acct.Key)
			req.Header.Set("anthropic-version", "2023-01-01")
			req.Header.Set("anthropic-beta", "client-beta-1")
			resp, err := http.DefaultClient.Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			g.Expect(resp.StatusCode).To(Equal(200), string(body))
		}
		post(ma)
		h := fa.Last().Header
		g.Expect(h.Get("anthropic-version")).To(Equal("2023-01-01"))
		g.Expect(h.Values("anthropic-beta")).To(ConsistOf("client-beta-1", "backend-beta-2025"))
		g.Expect(h.Get("x-api-key")).To(Equal(fa.Key()))

		post(mo)
		r := fo.Last()
		g.Expect(r.Path).To(Equal("/v1/chat/completions"), "a base URL ending in /v1 is not doubled")
		g.Expect(r.Header.Get("OpenAI-Organization")).To(Equal("org-fake"))
		g.Expect(r.Header.Get("OpenAI-Project")).To(Equal("proj_fake"))
		g.Expect(r.Header.Get("anthropic-beta")).To(BeEmpty())
		g.Expect(r.Header.Get("Authorization")).To(Equal("Bearer " + fo.Key()))
		usedQuota(t, acct, 2)
	})

	// It reads the raw client streams from a fake upstream:
	// the upstream's model name never reaches the client, a chat stream without
	// include_usage has no usage chunk although the upstream was asked for one
	// (billing needs it), and the stream ends with [DONE].
	It("client streams raw", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		for _, provider := range []string{"anthropic", "openai"} {
			fake := startFake(t, provider)
			fake.SetDefault(fakeupstream.Reply{Text: "raw stream answer", Usage: fakeupstream.Usage{InputTokens: 9, OutputTokens: 3, CacheRead: fakeupstream.Int64(2)}})
			model := uniqueModel("raw-" + provider)
			const upstreamModel = "secret-upstream-model-name"
			textModel(t, framework.SystemNamespace, model, fakeBackend(t, "up", provider, fake.URL, fake.Key(), upstreamModel))
			acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

			var total int64
			for _, ep := range []string{"/v1/messages", "/v1/chat/completions", "/v1/responses"} {
				for _, stream := range []bool{false, true} {
					body := map[string]any{"model": model, "stream": stream, "max_tokens": 50, "messages": []any{map[string]any{"role": "user", "content": "x"}}}
					if ep == "/v1/responses" {
						body = map[string]any{"model": model, "stream": stream, "input": "x"}
					}
					raw, _ := json.Marshal(body)
					req, _ := http.NewRequest(http.MethodPost, stack.BaseURL+ep, strings.NewReader(string(raw)))
					req.Header.Set("Authorization", "Bearer "+acct.Key)
					req.Header.Set("Content-Type", "application/json")
					resp, err := http.DefaultClient.Do(req)
					g.Expect(err).NotTo(HaveOccurred())
					out, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					desc := provider + " " + ep
					g.Expect(resp.StatusCode).To(Equal(200), "%s: %s", desc, out)
					g.Expect(resp.Header.Get("request-id")).To(HavePrefix("req_"))
					g.Expect(string(out)).NotTo(ContainSubstring(upstreamModel), desc)
					g.Expect(string(out)).To(ContainSubstring(model), desc)
					if stream {
						g.Expect(resp.Header.Get("Content-Type")).To(HavePrefix("text/event-stream"), desc)
					}
					if stream && ep == "/v1/chat/completions" {
						var last string
						sc := bufio.NewScanner(strings.NewReader(string(out)))
						for sc.Scan() {
							line := sc.Text()
							if !strings.HasPrefix(line, "data: ") {
								continue
							}
							last = strings.TrimPrefix(line, "data: ")
							if last == "[DONE]" {
								continue
							}
							var chunk map[string]any
							g.Expect(json.Unmarshal([]byte(last), &chunk)).To(Succeed(), last)
							g.Expect(chunk["usage"]).To(BeNil(), "no usage chunk without include_usage: %s", last)
							g.Expect(chunk["choices"]).To(HaveLen(1), last)
						}
						g.Expect(last).To(Equal("[DONE]"))
						if provider == "openai" {
							g.Expect(fake.Last().JSON()["stream_options"]).To(HaveKeyWithValue("include_usage", true))
						}
					}
					total += textQuota(11, 3)
					ledgerUsed(t, acct, total)
				}
			}
			used, _ := usedQuota(t, acct, 6)
			g.Expect(int64(used)).To(Equal(total))
		}
	})

	// An upstream that stopped at its token
	// limit is reported in each client protocol's terms.
	It("stop reasons across protocols", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		for _, provider := range []string{"anthropic", "openai"} {
			fake := startFake(t, provider)
			fake.SetDefault(fakeupstream.Reply{Text: "cut short", StopReason: "max_tokens", Usage: fakeupstream.Usage{InputTokens: 5, OutputTokens: 2}})
			model := uniqueModel("stop-" + provider)
			textModel(t, framework.SystemNamespace, model, fakeBackend(t, "up", provider, fake.URL, fake.Key(), "up"))
			acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
			for _, stream := range []bool{false, true} {
				v := ask(t, "messages", stream, acct.Key, model, "x")
				g.Expect(v.Stop).To(Equal("max_tokens"), provider)
				v = ask(t, "chat", stream, acct.Key, model, "x")
				g.Expect(v.Stop).To(Equal("length"), provider)
			}
			oc := openaiClient(acct.Key)
			r, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: model,
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(r.Status)).To(Equal("incomplete"), provider)
			g.Expect(r.IncompleteDetails.Reason).To(Equal("max_output_tokens"), provider)
			used, _ := usedQuota(t, acct, 5)
			g.Expect(int64(used)).To(Equal(5 * textQuota(5, 2)))
		}
	})

	// An upstream that reports no usage is billed
	// for an estimate of what it produced, never served free, and the row's
	// cache and reported totals are null.
	It("upstream without usage", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := startFake(t, "openai")
		fake.SetDefault(fakeupstream.Reply{Text: "twelve words of output text that nobody counted for the gateway here", NoUsage: true})
		model := uniqueModel("nousage")
		textModel(t, framework.SystemNamespace, model, fakeBackend(t, "up", "openai", fake.URL, fake.Key(), "gpt"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		var total int64
		for i, stream := range []bool{true, false} {
			ask(t, "messages", stream, acct.Key, model, "x")
			row := usageRows(t, acct, i+1)[0]
			g.Expect(row.CompletionTokens).To(BeNumerically(">", 0), "stream=%v: output is estimated, not free", stream)
			g.Expect(row.CacheTokens).To(BeNil())
			g.Expect(row.ReportedTotalTokens).To(BeNil())
			g.Expect(int64(row.Quota)).To(BeNumerically(">", 0), "stream=%v", stream)
			total += int64(row.Quota)
		}
		ledgerUsed(t, acct, total)
	})

	// An upstream that answers a stream
	// request with a complete JSON body is replayed to the client as a stream
	// of its protocol and billed from the body's usage (or, without usage, an
	// estimate: never free).
	It("upstream answers stream with JSON", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		for _, provider := range []string{"anthropic", "openai"} {
			fake := startFake(t, provider)
			model := uniqueModel("json-for-stream-" + provider)
			textModel(t, framework.SystemNamespace, model, fakeBackend(t, "up", provider, fake.URL, fake.Key(), "up"))
			acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
			n := 0
			var total int64
			for _, proto := range []string{"messages", "chat", "responses"} {
				n++
				fake.Enqueue(fakeupstream.Reply{Text: "whole answer at once", IgnoreStream: true, Usage: fakeupstream.Usage{InputTokens: 13, OutputTokens: 4}})
				v := ask(t, proto, true, acct.Key, model, "x")
				g.Expect(v.Text).To(Equal("whole answer at once"), proto)
				g.Expect(v.Output).To(Equal(int64(4)), proto)
				row := usageRows(t, acct, n)[0]
				g.Expect(int64(row.Quota)).To(Equal(textQuota(13, 4)), proto)
				total += textQuota(13, 4)

				n++
				fake.Enqueue(fakeupstream.Reply{Text: "whole answer without any usage", IgnoreStream: true, NoUsage: true})
				v = ask(t, proto, true, acct.Key, model, "x")
				g.Expect(v.Text).To(Equal("whole answer without any usage"), proto)
				row = usageRows(t, acct, n)[0]
				g.Expect(row.CompletionTokens).To(BeNumerically(">", 0), "%s/%s: estimated, not free", provider, proto)
				total += int64(row.Quota)
				ledgerUsed(t, acct, total)
			}
		}
	})

	// A client that goes away in the
	// middle of a stream is billed what the upstream reported: the gateway
	// keeps reading the upstream (bounded) after the client left, for every
	// client protocol and upstream kind. OpenAI-style upstreams report usage
	// only in their last chunk, so without that the prompt would be billed as
	// zero tokens. An upstream that never reports usage is billed the
	// admission's estimate of the prompt and the output the gateway counted.
	Context("client disconnect mid stream is billed", func() {
		words := strings.TrimSpace(strings.Repeat("word ", 200))
		for _, c := range []struct {
			provider string
			noUsage  bool
		}{{"anthropic", false}, {"openai", false}, {"anthropic", true}, {"openai", true}} {
			provider := c.provider
			for _, client := range []struct{ path, body, delta string }{
				{"/v1/messages", `{"model":%q,"max_tokens":1000,"stream":true,"messages":[{"role":"user","content":"talk"}]}`, `"content_block_delta"`},
				{"/v1/chat/completions", `{"model":%q,"max_tokens":1000,"stream":true,"messages":[{"role":"user","content":"talk"}]}`, `"delta":{"content"`},
				{"/v1/responses", `{"model":%q,"max_output_tokens":1000,"stream":true,"input":"talk"}`, `response.output_text.delta`},
			} {
				name := provider + client.path
				if c.noUsage {
					name += "/without-usage"
				}
				It(name, func() {
					t := GinkgoTB()
					g := NewWithT(t)
					fake := startFake(t, provider)
					fake.SetDefault(fakeupstream.Reply{Text: words, Gap: 5 * time.Millisecond, Usage: fakeupstream.Usage{InputTokens: 25, OutputTokens: 200}, NoUsage: c.noUsage})
					model := uniqueModel("disconnect")
					textModel(t, framework.SystemNamespace, model, fakeBackend(t, "up", provider, fake.URL, fake.Key(), "up-model"))
					acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					req, _ := http.NewRequestWithContext(ctx, "POST", stack.BaseURL+client.path, strings.NewReader(fmt.Sprintf(client.body, model)))
					req.Header.Set("Authorization", "Bearer "+acct.Key)
					req.Header.Set("Content-Type", "application/json")
					resp, err := http.DefaultClient.Do(req)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
					sc := bufio.NewScanner(resp.Body)
					deltas := 0
					for deltas < 2 && sc.Scan() {
						if strings.Contains(sc.Text(), client.delta) {
							deltas++
						}
					}
					g.Expect(deltas).To(Equal(2), "two content chunks arrived")
					cancel() // hang up after two content chunks
					_ = resp.Body.Close()

					row := usageRows(t, acct, 1)[0]
					if c.noUsage {
						g.Expect(row.PromptTokens).To(BeNumerically(">", 0), "the admission's estimate of the prompt, never zero")
						g.Expect(row.CompletionTokens).To(BeNumerically(">", 2), "the output the gateway counted, past the two chunks the client saw")
					} else {
						g.Expect(row.PromptTokens).To(Equal(int64(25)), "the upstream's input, never zero")
						g.Expect(row.CompletionTokens).To(Equal(int64(200)), "what the upstream reported producing")
					}
					g.Expect(int64(row.Quota)).To(Equal(textQuota(row.PromptTokens, row.CompletionTokens)))
					used, _ := usedQuota(t, acct, 1)
					g.Expect(used).To(Equal(row.Quota))
				})
			}
		}
	})
})
