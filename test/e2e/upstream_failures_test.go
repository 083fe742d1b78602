package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("Upstream failures", func() {
	// The first backend (priority 0) fails before any
	// byte reached the client; the answer comes from the next one (priority 5),
	// for non-streaming and streaming calls, and only one usage row is written
	// per request.
	Context("retry on next backend", func() {
		cases := []struct {
			name     string
			provider string
			reply    fakeupstream.Reply
			refused  bool
			timeout  int32
		}{
			{name: "500", provider: "anthropic", reply: fakeupstream.Reply{Status: 500}},
			{name: "529-overloaded", provider: "anthropic", reply: fakeupstream.Reply{Status: 529}},
			{name: "429", provider: "openai", reply: fakeupstream.Reply{Status: 429}},
			{name: "503", provider: "openai", reply: fakeupstream.Reply{Status: 503}},
			{name: "hang-past-timeout", provider: "anthropic", reply: fakeupstream.Reply{Hang: true}, timeout: 1},
			{name: "connection-reset", provider: "openai", reply: fakeupstream.Reply{Reset: true}},
			{name: "connection-refused", provider: "anthropic", refused: true},
		}
		for _, tc := range cases {
			It(tc.name, func() {
				t := GinkgoTB()
				g := NewWithT(t)
				first, next := startFake(t, tc.provider), startFake(t, "openai")
				first.SetDefault(tc.reply)
				url := first.URL
				if tc.refused {
					url = fakeupstream.RefusedURL()
				}
				a := fakeBackend(t, "a-first", tc.provider, url, first.Key(), "up-first")
				a.TimeoutSeconds = tc.timeout
				b := fakeBackend(t, "b-next", "openai", next.URL, next.Key(), "up-next")
				b.Priority = 5
				model := uniqueModel("retry-" + tc.name)
				textModel(t, framework.SystemNamespace, model, a, b)
				acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

				var total int64
				for i, stream := range []bool{false, true} {
					next.Enqueue(fakeupstream.Reply{Text: "from the next backend", Usage: fakeupstream.Usage{InputTokens: 30, OutputTokens: 4}})
					v := ask(t, "messages", stream, acct.Key, model, "hello")
					g.Expect(v.Text).To(Equal("from the next backend"))
					g.Expect(v.Output).To(Equal(int64(4)))
					if !tc.refused {
						g.Expect(first.Count()).To(Equal(i+1), "the first backend was tried first")
					}
					g.Expect(next.Count()).To(Equal(i + 1))
					g.Expect(next.Last().Model()).To(Equal("up-next"))
					total += textQuota(30, 4)
					rows := usageRows(t, acct, i+1)
					g.Expect(rows[0].PromptTokens).To(Equal(int64(30)))
					g.Expect(int64(rows[0].Quota)).To(Equal(textQuota(30, 4)))
					ledgerUsed(t, acct, total)
				}
			})
		}
	})

	// An upstream 400 is the client's fault: it
	// is answered in the client's protocol's shape, the next backend is not
	// tried and nothing is charged.
	It("non retryable upstream error", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		first, next := startFake(t, "anthropic"), startFake(t, "anthropic")
		first.SetDefault(fakeupstream.Reply{Status: 400, ErrorMessage: "messages.0.content.0.image.source: image exceeds 5 MB maximum"})
		a := fakeBackend(t, "a-first", "anthropic", first.URL, first.Key(), "claude-a")
		b := fakeBackend(t, "b-next", "anthropic", next.URL, next.Key(), "claude-b")
		b.Priority = 5
		model, ok := uniqueModel("nonretry"), uniqueModel("nonretry-ok")
		textModel(t, framework.SystemNamespace, model, a, b)
		textModel(t, framework.SystemNamespace, ok, sim("sim", "simulated"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

		ac, oc := anthropicClient(acct.Key), openaiClient(acct.Key)
		for _, stream := range []bool{false, true} {
			// messages: the upstream's error, in Anthropic's shape.
			params := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 100,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("look at this"))}}
			var err error
			if stream {
				s := ac.Messages.NewStreaming(ctx, params)
				for s.Next() {
				}
				err = s.Err()
			} else {
				_, err = ac.Messages.New(ctx, params)
			}
			var aerr *anthropic.Error
			g.Expect(errors.As(err, &aerr)).To(BeTrue(), "%v", err)
			g.Expect(aerr.StatusCode).To(Equal(400))
			var body map[string]any
			g.Expect(json.Unmarshal([]byte(aerr.RawJSON()), &body)).To(Succeed())
			g.Expect(body).To(HaveKeyWithValue("type", "error"))
			g.Expect(body["error"]).To(HaveKeyWithValue("type", "invalid_request_error"))
			g.Expect(body["error"]).To(HaveKeyWithValue("message", ContainSubstring("image exceeds 5 MB maximum")))

			// chat completions: the same error, in OpenAI's shape.
			cp := openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("look")}}
			if stream {
				s := oc.Chat.Completions.NewStreaming(ctx, cp)
				for s.Next() {
				}
				err = s.Err()
			} else {
				_, err = oc.Chat.Completions.New(ctx, cp)
			}
			var oerr *openai.Error
			g.Expect(errors.As(err, &oerr)).To(BeTrue(), "%v", err)
			g.Expect(oerr.StatusCode).To(Equal(400))
			g.Expect(oerr.Type).To(Equal("invalid_request_error"))
			g.Expect(oerr.Message).To(ContainSubstring("image exceeds 5 MB maximum"))
		}
		g.Expect(first.Count()).To(Equal(4))
		g.Expect(next.Count()).To(BeZero(), "a 4xx is not retried")

		// A good request afterwards is the only row: the failures charged nothing.
		v := ask(t, "messages", false, acct.Key, ok, "fine")
		rows := usageRows(t, acct, 1)
		g.Expect(rows[0].ModelName).To(Equal(ok))
		want := textQuota(v.Prompt, v.Output)
		g.Expect(int64(rows[0].Quota)).To(Equal(want))
		ledgerUsed(t, acct, want)
	})

	// An upstream stream that dies
	// after output began is not retried on the next backend (bytes already
	// reached the client), and the request is billed for what was sent.
	Context("stream cut after first byte is billed not retried", func() {
		const full = "one two three four five six seven eight nine ten"
		cases := []struct {
			name, provider, proto string
			cutAfter              int
		}{
			// message_start, content_block_start, ping, "one ", "two ", "three " — cut.
			{name: "messages-from-anthropic", provider: "anthropic", proto: "messages", cutAfter: 6},
			// role chunk, "one ", "two ", "three " — cut.
			{name: "chat-from-openai", provider: "openai", proto: "chat", cutAfter: 4},
			{name: "chat-from-anthropic", provider: "anthropic", proto: "chat", cutAfter: 6},
			{name: "messages-from-openai", provider: "openai", proto: "messages", cutAfter: 4},
		}
		for _, tc := range cases {
			It(tc.name, func() {
				t := GinkgoTB()
				g := NewWithT(t)
				first, next := startFake(t, tc.provider), startFake(t, tc.provider)
				first.SetDefault(fakeupstream.Reply{Text: full, CutAfter: tc.cutAfter,
					Usage: fakeupstream.Usage{InputTokens: 40, OutputTokens: 10}})
				next.SetDefault(fakeupstream.Reply{Text: "must not be used"})
				a := fakeBackend(t, "a-first", tc.provider, first.URL, first.Key(), "up-a")
				b := fakeBackend(t, "b-next", tc.provider, next.URL, next.Key(), "up-b")
				b.Priority = 5
				model := uniqueModel("cut-" + tc.name)
				textModel(t, framework.SystemNamespace, model, a, b)
				acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

				var text string
				ended := false
				ac, oc := anthropicClient(acct.Key), openaiClient(acct.Key)
				switch tc.proto {
				case "messages":
					s := ac.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
						Model: anthropic.Model(model), MaxTokens: 100,
						Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("count"))}})
					for s.Next() {
						ev := s.Current()
						if ev.Type == "content_block_delta" {
							text += ev.Delta.Text
						}
						ended = ended || ev.Type == "message_stop"
					}
				case "chat":
					s := oc.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
						Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("count")}})
					for s.Next() {
						for _, c := range s.Current().Choices {
							text += c.Delta.Content
							ended = ended || c.FinishReason != ""
						}
					}
				}
				g.Expect(ended).To(BeFalse(), "the client does not see a normal end")
				g.Expect(text).To(Equal("one two three "), "the client got what was sent before the cut")
				g.Expect(first.Count()).To(Equal(1))
				g.Expect(next.Count()).To(BeZero(), "output began: no retry")

				row := usageRows(t, acct, 1)[0]
				g.Expect(row.CompletionTokens).To(BeNumerically(">", 0))
				g.Expect(row.CompletionTokens).To(BeNumerically("<", 10), "billed for what was sent, not the full answer")
				g.Expect(int64(row.Quota)).To(BeNumerically(">", 0))
				g.Expect(int64(row.Quota)).To(Equal(textQuota(row.PromptTokens, row.CompletionTokens)))
				if tc.provider == "anthropic" {
					g.Expect(row.PromptTokens).To(Equal(int64(40)), "message_start reported the input")
				}
				used, _ := usedQuota(t, acct, 1)
				g.Expect(used).To(Equal(row.Quota))
			})
		}
	})

	// Every rule of the contract for
	// /v1/messages, as status 400 and Anthropic's error body naming the field;
	// none is charged.
	It("messages validation errors", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		model := uniqueModel("validate")
		textModel(t, framework.SystemNamespace, model, sim("sim", "simulated"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		m := `"model":"` + model + `"`
		user := `"messages":[{"role":"user","content":"hi"}]`
		img := func(source string) string {
			return `{` + m + `,"max_tokens":10,"messages":[{"role":"user","content":[{"type":"image"` + source + `}]}]}`
		}
		cases := []struct {
			name, body, mentions string
		}{
			{"missing model", `{"max_tokens":10,` + user + `}`, "model"},
			{"empty model", `{"model":"","max_tokens":10,` + user + `}`, "model"},
			{"missing messages", `{` + m + `,"max_tokens":10}`, "messages"},
			{"empty messages", `{` + m + `,"max_tokens":10,"messages":[]}`, "messages"},
			{"messages not an array", `{` + m + `,"max_tokens":10,"messages":"hi"}`, "messages"},
			{"role system in messages", `{` + m + `,"max_tokens":10,"messages":[{"role":"system","content":"be nice"}]}`, "role"},
			{"unknown role", `{` + m + `,"max_tokens":10,"messages":[{"role":"tool","content":"x"}]}`, "role"},
			{"missing role", `{` + m + `,"max_tokens":10,"messages":[{"content":"x"}]}`, "role"},
			{"missing content", `{` + m + `,"max_tokens":10,"messages":[{"role":"user"}]}`, "content"},
			{"content a number", `{` + m + `,"max_tokens":10,"messages":[{"role":"user","content":42}]}`, "content"},
			{"content an object", `{` + m + `,"max_tokens":10,"messages":[{"role":"user","content":{"type":"text","text":"x"}}]}`, "content"},
			{"block without type", `{` + m + `,"max_tokens":10,"messages":[{"role":"user","content":[{"text":"x"}]}]}`, "type"},
			{"text block without text", `{` + m + `,"max_tokens":10,"messages":[{"role":"user","content":[{"type":"text"}]}]}`, "text"},
			{"text block with non-string text", `{` + m + `,"max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":5}]}]}`, "text"},
			{"image without source", img(``), "source"},
			{"image with bad source type", img(`,"source":{"type":"file","file_id":"f"}`), "source.type"},
			{"base64 image without media_type", img(`,"source":{"type":"base64","data":"aGk="}`), "media_type"},
			{"base64 image without data", img(`,"source":{"type":"base64","media_type":"image/png"}`), "data"},
			{"url image without url", img(`,"source":{"type":"url"}`), "url"},
			{"missing max_tokens", `{` + m + `,` + user + `}`, "max_tokens"},
			{"negative max_tokens", `{` + m + `,"max_tokens":-1,` + user + `}`, "max_tokens"},
			{"max_tokens not an integer", `{` + m + `,"max_tokens":"ten",` + user + `}`, "max_tokens"},
			{"max_tokens over the route's maxOutputTokens", `{` + m + `,"max_tokens":64001,` + user + `}`, "max_tokens"},
			{"temperature 1.5", `{` + m + `,"max_tokens":10,"temperature":1.5,` + user + `}`, "temperature"},
			{"temperature negative", `{` + m + `,"max_tokens":10,"temperature":-0.5,` + user + `}`, "temperature"},
			{"top_p -0.1", `{` + m + `,"max_tokens":10,"top_p":-0.1,` + user + `}`, "top_p"},
			{"top_p 1.1", `{` + m + `,"max_tokens":10,"top_p":1.1,` + user + `}`, "top_p"},
			{"stop_sequences not strings", `{` + m + `,"max_tokens":10,"stop_sequences":[1,2],` + user + `}`, "stop_sequences"},
			{"stop_sequences a string", `{` + m + `,"max_tokens":10,"stop_sequences":"END",` + user + `}`, "stop_sequences"},
			{"system of the wrong type", `{` + m + `,"max_tokens":10,"system":7,` + user + `}`, "system"},
			{"stream not a boolean", `{` + m + `,"max_tokens":10,"stream":"yes",` + user + `}`, "stream"},
			{"body not JSON", `{"model": "` + model + `", max_tokens: 10`, "JSON"},
			{"body a JSON array", `[` + user[len(`"messages":`):] + `]`, "JSON object"},
			{"empty body", ``, "JSON"},
		}
		for _, tc := range cases {
			req, err := http.NewRequest(http.MethodPost, stack.BaseURL+"/v1/messages", strings.NewReader(tc.body))
			g.Expect(err).NotTo(HaveOccurred())
			req.Header.Set("x-api-key", acct.Key)
			req.Header.Set("anthropic-version", "2023-06-01")
			req.Header.Set("content-type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest), "%s: %s", tc.name, raw)
			g.Expect(resp.Header.Get("Content-Type")).To(HavePrefix("application/json"), tc.name)
			var body struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			g.Expect(json.Unmarshal(raw, &body)).To(Succeed(), "%s: %s", tc.name, raw)
			g.Expect(body.Type).To(Equal("error"), tc.name)
			g.Expect(body.Error.Type).To(Equal("invalid_request_error"), tc.name)
			g.Expect(body.Error.Message).To(ContainSubstring(tc.mentions), tc.name)
		}

		// Nothing was charged: a valid request afterwards is the only row.
		v := ask(t, "messages", false, acct.Key, model, "valid")
		rows := usageRows(t, acct, 1)
		want := textQuota(v.Prompt, v.Output)
		g.Expect(int64(rows[0].Quota)).To(Equal(want))
		ledgerUsed(t, acct, want)
	})

	// At most three backends are tried; when all fail the
	// client gets 502 in its protocol's shape and nothing is charged.
	It("retry is bounded", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		var fakes []*fakeupstream.Server
		var backends []v1.Backend
		for i, name := range []string{"a", "b", "c", "d"} {
			f := startFake(t, "anthropic")
			f.SetDefault(fakeupstream.Reply{Status: 503})
			fakes = append(fakes, f)
			b := fakeBackend(t, name, "anthropic", f.URL, f.Key(), "claude-"+name)
			b.Priority = int32(i)
			backends = append(backends, b)
		}
		model, ok := uniqueModel("bounded"), uniqueModel("bounded-ok")
		textModel(t, framework.SystemNamespace, model, backends...)
		textModel(t, framework.SystemNamespace, ok, sim("sim", "simulated"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

		ac := anthropicClient(acct.Key)
		_, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))}})
		var aerr *anthropic.Error
		g.Expect(errors.As(err, &aerr)).To(BeTrue(), "%v", err)
		g.Expect(aerr.StatusCode).To(Equal(http.StatusBadGateway))
		g.Expect(aerr.RawJSON()).To(ContainSubstring(`"type":"error"`))
		g.Expect([]int{fakes[0].Count(), fakes[1].Count(), fakes[2].Count(), fakes[3].Count()}).To(Equal([]int{1, 1, 1, 0}),
			"three attempts, in priority order")

		v := ask(t, "messages", false, acct.Key, ok, "fine")
		rows := usageRows(t, acct, 1)
		g.Expect(rows[0].ModelName).To(Equal(ok))
		ledgerUsed(t, acct, textQuota(v.Prompt, v.Output))
	})

	// One status → type table per
	// family (docs/api-choices.md, "Error types by status"). The gateway's own
	// 503 and an upstream's 503 or 504 (the upstream's answer, or a timeout the
	// gateway measured) carry the same error type on /v1/messages (api_error)
	// and on /v1/chat/completions (server_error). An upstream 5xx is retried, so
	// when no backend is left the client gets 502 upstream_unavailable; 504
	// timeout_error and 529 overloaded_error are for an error relayed with its
	// own status.
	It("upstream 5xx has the type of the gateway's own", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		unserved := uniqueModel("errtype-own")
		own := sim("sim", "simulated")
		own.Groups = []v1.GroupName{"elsewhere"} // the key's group has no backend: the gateway's own 503
		textModel(t, framework.SystemNamespace, unserved, own)

		type upstream struct {
			name, provider string
			reply          fakeupstream.Reply
			timeout        int32
		}
		var models []string
		for _, u := range []upstream{
			{name: "anthropic-503", provider: "anthropic", reply: fakeupstream.Reply{Status: 503}},
			{name: "anthropic-504", provider: "anthropic", reply: fakeupstream.Reply{Status: 504}},
			{name: "openai-503", provider: "openai", reply: fakeupstream.Reply{Status: 503}},
			{name: "openai-504", provider: "openai", reply: fakeupstream.Reply{Status: 504}},
			{name: "timeout", provider: "openai", reply: fakeupstream.Reply{Hang: true}, timeout: 1},
		} {
			f := startFake(t, u.provider)
			f.SetDefault(u.reply)
			b := fakeBackend(t, "up", u.provider, f.URL, f.Key(), "up-"+u.name)
			b.TimeoutSeconds = u.timeout
			m := uniqueModel("errtype-" + u.name)
			textModel(t, framework.SystemNamespace, m, b)
			models = append(models, m)
		}
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		ac, oc := anthropicClient(acct.Key), openaiClient(acct.Key)

		messages := func(model string) *anthropic.Error {
			_, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 10,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))}})
			var aerr *anthropic.Error
			g.Expect(errors.As(err, &aerr)).To(BeTrue(), "%s: %v", model, err)
			return aerr
		}
		chat := func(model string) *openai.Error {
			_, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}})
			var oerr *openai.Error
			g.Expect(errors.As(err, &oerr)).To(BeTrue(), "%s: %v", model, err)
			return oerr
		}

		aerr := messages(unserved)
		g.Expect(aerr.StatusCode).To(Equal(http.StatusServiceUnavailable), aerr.RawJSON())
		g.Expect(aerr.Type()).To(BeEquivalentTo("api_error"), aerr.RawJSON())
		oerr := chat(unserved)
		g.Expect(oerr.StatusCode).To(Equal(http.StatusServiceUnavailable), oerr.RawJSON())
		g.Expect(oerr.Type).To(Equal("server_error"), oerr.RawJSON())

		for _, m := range models {
			a := messages(m)
			g.Expect(a.StatusCode).To(Equal(http.StatusBadGateway), "%s: %s", m, a.RawJSON())
			g.Expect(a.Type()).To(Equal(aerr.Type()), "%s: %s", m, a.RawJSON())
			o := chat(m)
			g.Expect(o.StatusCode).To(Equal(http.StatusBadGateway), "%s: %s", m, o.RawJSON())
			g.Expect(o.Type).To(Equal(oerr.Type), "%s: %s", m, o.RawJSON())
		}
	})

	// After three failures in a row the first
	// backend is cooled down: the next request goes straight to the healthy
	// one.
	It("breaker skips a failing backend", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		broken, healthy := startFake(t, "openai"), startFake(t, "openai")
		broken.SetDefault(fakeupstream.Reply{Status: 500})
		healthy.SetDefault(fakeupstream.Reply{Text: "healthy", Usage: fakeupstream.Usage{InputTokens: 3, OutputTokens: 1}})
		a := fakeBackend(t, "a-broken", "openai", broken.URL, broken.Key(), "gpt")
		b := fakeBackend(t, "b-healthy", "openai", healthy.URL, healthy.Key(), "gpt")
		b.Priority = 5
		model := uniqueModel("breaker")
		textModel(t, framework.SystemNamespace, model, a, b)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		for i := range 5 {
			v := ask(t, "chat", false, acct.Key, model, "x")
			g.Expect(v.Text).To(Equal("healthy"))
			g.Expect(broken.Count()).To(Equal(min(i+1, 3)), "request %d", i)
		}
		g.Expect(healthy.Count()).To(Equal(5))
		used, _ := usedQuota(t, acct, 5)
		g.Expect(int64(used)).To(Equal(5 * textQuota(3, 1)))
	})
})
