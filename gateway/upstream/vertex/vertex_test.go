package vertex

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

func TestURL(t *testing.T) {
	for _, tc := range []struct {
		name, base, region, publisher, model string
		stream                               bool
		want                                 string
	}{
		{"global gemini", "", "", "", "gemini-2.5-flash", false,
			"https://aiplatform.googleapis.com/v1/projects/p1/locations/global/publishers/google/models/gemini-2.5-flash:generateContent"},
		{"regional gemini stream", "", "us-central1", "", "gemini-2.5-pro", true,
			"https://us-central1-aiplatform.googleapis.com/v1/projects/p1/locations/us-central1/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse"},
		{"claude by its name", "", "us-east5", "", "claude-sonnet-4@20250514", false,
			"https://us-east5-aiplatform.googleapis.com/v1/projects/p1/locations/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict"},
		{"claude stream through a base URL", "http://127.0.0.1:9/", "europe-west1", "", "claude-opus-4-1@20250805", true,
			"http://127.0.0.1:9/v1/projects/p1/locations/europe-west1/publishers/anthropic/models/claude-opus-4-1@20250805:streamRawPredict"},
		{"publisher option wins", "", "", "anthropic", "my-tuned-model", false,
			"https://aiplatform.googleapis.com/v1/projects/p1/locations/global/publishers/anthropic/models/my-tuned-model:rawPredict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := upstream.Backend{BaseURL: tc.base, UpstreamModel: tc.model,
				Options: map[string]string{OptionRegion: tc.region, OptionPublisher: tc.publisher}}
			u, err := URL(b, "p1", tc.stream)
			g := NewWithT(t)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(u).To(Equal(tc.want))
		})
	}

	t.Run("refused configurations", func(t *testing.T) {
		g := NewWithT(t)
		for _, tc := range []struct {
			b       upstream.Backend
			project string
			msg     string
		}{
			{upstream.Backend{UpstreamModel: "gemini-x", Options: map[string]string{OptionRegion: "evil.example.com/x"}}, "p", "not a Google Cloud location"},
			{upstream.Backend{UpstreamModel: "gemini-x"}, "", "no project"},
			{upstream.Backend{}, "p", "no upstream model"},
		} {
			_, err := URL(tc.b, tc.project, false)
			ue, ok := upstream.As(err)
			g.Expect(ok).To(BeTrue())
			g.Expect(ue.Class).To(Equal(upstream.Failover))
			g.Expect(ue.Retryable).To(BeTrue(), "another backend may be configured right")
			g.Expect(ue.Message).To(ContainSubstring(tc.msg))
		}
	})
}

func TestProtocolsFollowThePublisher(t *testing.T) {
	g := NewWithT(t)
	p := New(fakeupstream.Client())
	gem := upstream.Backend{UpstreamModel: "gemini-2.5-flash"}
	claude := upstream.Backend{UpstreamModel: "claude-sonnet-4@20250514"}
	g.Expect(upstream.UpstreamProtocolFor(p, gem, upstream.Messages)).To(Equal(upstream.Gemini))
	g.Expect(upstream.UpstreamProtocolFor(p, claude, upstream.Messages)).To(Equal(upstream.Messages))
	g.Expect(upstream.UpstreamProtocolFor(p, claude, upstream.ChatCompletions)).To(Equal(upstream.Messages))
	g.Expect(upstream.UpstreamProtocolFor(p, gem, upstream.Responses)).To(Equal(upstream.Gemini))
}

// setup is a provider and a backend of each publisher against a fresh fake.
func setup(t *testing.T) (*fakeupstream.Server, *Provider, upstream.Backend, upstream.Backend) {
	t.Helper()
	fake := fakeupstream.NewVertex()
	t.Cleanup(fake.Close)
	sa := fake.ServiceAccountJSON()
	opts := map[string]string{OptionRegion: "us-east5"}
	gem := upstream.Backend{Name: "gem", Provider: Name, BaseURL: fake.URL, APIKey: sa, UpstreamModel: "gemini-2.5-flash", Options: opts}
	claude := upstream.Backend{Name: "claude", Provider: Name, BaseURL: fake.URL, APIKey: sa, UpstreamModel: "claude-sonnet-4@20250514", Options: opts}
	return fake, New(fakeupstream.Client()), gem, claude
}

var chatBody = []byte(`{"model":"client-model","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`)

func TestGemini(t *testing.T) {
	g := NewWithT(t)
	fake, p, gem, _ := setup(t)
	fake.Enqueue(fakeupstream.Reply{Text: "hello there", Usage: fakeupstream.Usage{InputTokens: 12, OutputTokens: 9, ReasoningTokens: 4, CacheRead: fakeupstream.Int64(5)}})

	res, err := upstream.Invoke(context.Background(), p, gem, upstream.Request{Protocol: upstream.ChatCompletions, Body: chatBody})
	g.Expect(err).NotTo(HaveOccurred())
	defer res.Close()
	req := fake.Last()
	g.Expect(req.Rejected).To(BeFalse())
	g.Expect(req.Path).To(Equal("/v1/projects/" + fakeupstream.VertexProject + "/locations/us-east5/publishers/google/models/gemini-2.5-flash:generateContent"))
	g.Expect(req.Header.Get("Authorization")).To(HavePrefix("Bearer ya29.fake-"))
	g.Expect(req.Header.Get("x-goog-api-key")).To(BeEmpty())
	g.Expect(string(req.Body)).NotTo(ContainSubstring("PRIVATE KEY"))
	g.Expect(res.Translated).To(BeTrue())
	g.Expect(res.UsageReported).To(BeTrue())
	// usageMetadata: prompt 17 of which 5 cached, candidates 5 + thoughts 4.
	g.Expect(res.Usage.InputTokens).To(Equal(int64(12)))
	g.Expect(res.Usage.CacheReadTokens).To(HaveValue(Equal(int64(5))))
	g.Expect(res.Usage.OutputTokens).To(Equal(int64(9)))
	g.Expect(res.Usage.ReasoningTokens).To(Equal(int64(4)))
	g.Expect(res.Usage.ReportedTotalTokens).To(HaveValue(Equal(int64(26))))
	g.Expect(string(res.Body)).To(ContainSubstring(`"content":"hello there"`))
	g.Expect(string(res.Body)).To(ContainSubstring(`"model":"client-model"`))

	t.Run("stream", func(t *testing.T) {
		g := NewWithT(t)
		fake.Enqueue(fakeupstream.Reply{Text: "one two three", Usage: fakeupstream.Usage{InputTokens: 7, OutputTokens: 3}})
		res, err := upstream.Invoke(context.Background(), p, gem, upstream.Request{Protocol: upstream.Messages, Stream: true,
			Body: []byte(`{"model":"client-model","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)})
		g.Expect(err).NotTo(HaveOccurred())
		defer res.Close()
		text := drain(g, res.Stream)
		g.Expect(text).To(Equal("one two three"))
		g.Expect(fake.Last().Path).To(HaveSuffix("/publishers/google/models/gemini-2.5-flash:streamGenerateContent"))
		g.Expect(fake.Last().Query).To(Equal("alt=sse"))
		g.Expect(res.Stream.Complete()).To(BeTrue())
		g.Expect(res.Stream.Usage().InputTokens).To(Equal(int64(7)))
		g.Expect(res.Stream.Usage().OutputTokens).To(Equal(int64(3)))
	})

	t.Run("safety block is a content filter", func(t *testing.T) {
		g := NewWithT(t)
		fake.Enqueue(fakeupstream.Reply{Text: "", StopReason: "SAFETY", Usage: fakeupstream.Usage{InputTokens: 7, OutputTokens: 0}})
		res, err := upstream.Invoke(context.Background(), p, gem, upstream.Request{Protocol: upstream.ChatCompletions, Body: chatBody})
		g.Expect(err).NotTo(HaveOccurred())
		defer res.Close()
		g.Expect(string(res.Body)).To(ContainSubstring(`"finish_reason":"content_filter"`))
		g.Expect(res.Usage.InputTokens).To(Equal(int64(7)), "the refused prompt is still billed as Google bills it")
	})
	g.Expect(fake.TokenExchanges()).To(Equal(1), "one token for every call")
}

func TestClaude(t *testing.T) {
	g := NewWithT(t)
	fake, p, _, claude := setup(t)
	want := fakeupstream.Usage{InputTokens: 20, OutputTokens: 6, CacheRead: fakeupstream.Int64(8), CacheWrite: fakeupstream.Int64(3)}
	fake.Enqueue(fakeupstream.Reply{Text: "from claude", Usage: want})

	body := []byte(`{"model":"client-model","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`)
	res, err := upstream.Invoke(context.Background(), p, claude, upstream.Request{Protocol: upstream.Messages, Body: body,
		Header: http.Header{"Anthropic-Version": {"2023-06-01"}, "Anthropic-Beta": {"context-1m-2025-08-07"}}})
	g.Expect(err).NotTo(HaveOccurred())
	defer res.Close()
	req := fake.Last()
	g.Expect(req.Rejected).To(BeFalse())
	g.Expect(req.Path).To(Equal("/v1/projects/" + fakeupstream.VertexProject + "/locations/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict"))
	g.Expect(req.JSON()).NotTo(HaveKey("model"))
	g.Expect(req.JSON()).To(HaveKeyWithValue("anthropic_version", "vertex-2023-10-16"))
	g.Expect(req.Header.Get("anthropic-version")).To(BeEmpty(), "Vertex AI reads the version from the body")
	g.Expect(req.Header.Get("anthropic-beta")).To(Equal("context-1m-2025-08-07"))
	g.Expect(req.Header.Get("x-api-key")).To(BeEmpty())
	g.Expect(res.Translated).To(BeFalse())
	g.Expect(res.Usage.InputTokens).To(Equal(int64(20)))
	g.Expect(res.Usage.CacheReadTokens).To(HaveValue(Equal(int64(8))))
	g.Expect(res.Usage.CacheWriteTokens).To(HaveValue(Equal(int64(3))))
	g.Expect(res.Usage.OutputTokens).To(Equal(int64(6)))
	var msg struct{ Model string }
	g.Expect(json.Unmarshal(res.Body, &msg)).To(Succeed())
	g.Expect(msg.Model).To(Equal("client-model"))

	t.Run("chat client, streamed", func(t *testing.T) {
		g := NewWithT(t)
		fake.Enqueue(fakeupstream.Reply{Text: "a streamed answer", Usage: want})
		res, err := upstream.Invoke(context.Background(), p, claude, upstream.Request{Protocol: upstream.ChatCompletions, Stream: true,
			Body: []byte(`{"model":"client-model","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)})
		g.Expect(err).NotTo(HaveOccurred())
		defer res.Close()
		g.Expect(drain(g, res.Stream)).To(ContainSubstring("streamed"))
		req := fake.Last()
		g.Expect(req.Path).To(HaveSuffix(":streamRawPredict"))
		g.Expect(req.JSON()).To(HaveKeyWithValue("stream", true))
		g.Expect(req.JSON()).NotTo(HaveKey("model"))
		u := res.Stream.Usage()
		g.Expect(u.InputTokens).To(Equal(int64(20)))
		g.Expect(u.CacheReadTokens).To(HaveValue(Equal(int64(8))))
		g.Expect(u.CacheWriteTokens).To(HaveValue(Equal(int64(3))))
		g.Expect(u.OutputTokens).To(Equal(int64(6)))
	})
}

func TestTokensAreCachedAndRefreshed(t *testing.T) {
	g := NewWithT(t)
	fake, p, gem, claude := setup(t)
	// The library renews a token 10 s before it expires: 12 s tokens are
	// used for 2 s.
	fake.SetTokenTTL(12 * time.Second)
	call := func(b upstream.Backend) string {
		res, err := upstream.Invoke(context.Background(), p, b, upstream.Request{Protocol: upstream.ChatCompletions, Body: chatBody})
		g.Expect(err).NotTo(HaveOccurred())
		res.Close()
		return fake.Last().Header.Get("Authorization")
	}
	first := call(gem)
	g.Expect(call(claude)).To(Equal(first), "one key, one token, whatever the publisher")
	g.Expect(fake.TokenExchanges()).To(Equal(1))

	time.Sleep(2500 * time.Millisecond)
	second := call(gem)
	g.Expect(second).NotTo(Equal(first))
	g.Expect(fake.TokenExchanges()).To(Equal(2))

	// A token the upstream no longer accepts: that call fails (the request
	// did reach the upstream), the next one gets a fresh token.
	fake.SetTokenTTL(time.Hour)
	fake.RevokeTokens()
	_, err := upstream.Invoke(context.Background(), p, gem, upstream.Request{Protocol: upstream.ChatCompletions, Body: chatBody})
	ue, ok := upstream.As(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(ue.Status).To(Equal(http.StatusUnauthorized))
	g.Expect(ue.ClientStatus()).To(Equal(http.StatusBadGateway))
	third := call(gem)
	g.Expect(third).NotTo(Equal(second))
	g.Expect(fake.TokenExchanges()).To(Equal(3))
}

func TestCredentialFailures(t *testing.T) {
	fake, p, gem, _ := setup(t)
	other := fakeupstream.NewVertex()
	defer other.Close()
	// Another key whose token_uri is this fake: its assertion's signature
	// does not verify.
	var foreign map[string]any
	NewWithT(t).Expect(json.Unmarshal([]byte(other.ServiceAccountJSON()), &foreign)).To(Succeed())
	foreign["token_uri"] = fake.URL + "/token"
	foreignJSON, _ := json.Marshal(foreign)

	for _, tc := range []struct {
		name, key, msg string
	}{
		{"none", "", "has no credential"},
		{"not JSON", "AIzaSy-an-api-key", "is not a usable service-account key"},
		{"another type", `{"type":"external_account","audience":"x","token_url":"http://127.0.0.1:9"}`, "is not a usable service-account key"},
		{"key not registered", string(foreignJSON), "was refused by the OAuth2 token endpoint (invalid_grant: Invalid JWT Signature.)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b := gem
			b.APIKey = tc.key
			before := fake.Count()
			_, err := upstream.Invoke(context.Background(), p, b, upstream.Request{Protocol: upstream.ChatCompletions, Body: chatBody})
			ue, ok := upstream.As(err)
			g.Expect(ok).To(BeTrue(), "%v", err)
			g.Expect(ue.Class).To(Equal(upstream.Failover))
			g.Expect(ue.Retryable).To(BeTrue(), "the next backend is tried")
			g.Expect(ue.ClientStatus()).To(Equal(http.StatusBadGateway))
			g.Expect(ue.Message).To(ContainSubstring(tc.msg))
			g.Expect(ue.Message).NotTo(ContainSubstring("PRIVATE KEY"))
			g.Expect(fake.Count()).To(Equal(before), "nothing reached the API")
		})
	}
	NewWithT(t).Expect(fake.TokenRefusals()).To(Equal(1))

	t.Run("unreachable token endpoint", func(t *testing.T) {
		g := NewWithT(t)
		var sa map[string]any
		g.Expect(json.Unmarshal([]byte(gem.APIKey), &sa)).To(Succeed())
		sa["token_uri"] = fakeupstream.RefusedURL() + "/token"
		raw, _ := json.Marshal(sa)
		b := gem
		b.APIKey = string(raw)
		_, err := upstream.Invoke(context.Background(), p, b, upstream.Request{Protocol: upstream.ChatCompletions, Body: chatBody})
		ue, ok := upstream.As(err)
		g.Expect(ok).To(BeTrue(), "%v", err)
		g.Expect(ue.Retryable).To(BeTrue())
		g.Expect(ue.Message).To(ContainSubstring("could not be reached"))
	})
}

func TestErrors(t *testing.T) {
	fake, p, gem, claude := setup(t)
	for _, tc := range []struct {
		name       string
		b          upstream.Backend
		reply      fakeupstream.Reply
		status     int
		retryable  bool
		retryAfter time.Duration
	}{
		{"gemini quota with a retry delay", gem, fakeupstream.Reply{Status: 429, RetryDelay: "7s"}, 429, true, 7 * time.Second},
		{"claude quota", claude, fakeupstream.Reply{Status: 429}, 429, true, 0},
		{"claude overloaded", claude, fakeupstream.Reply{Status: 529}, 529, true, 0},
		{"gemini bad request", gem, fakeupstream.Reply{Status: 400, ErrorMessage: "bad field"}, 400, false, 0},
		{"claude bad request", claude, fakeupstream.Reply{Status: 400, ErrorMessage: "messages: too long"}, 400, false, 0},
		{"permission denied", gem, fakeupstream.Reply{Status: 403}, 403, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			fake.Enqueue(tc.reply)
			_, err := upstream.Invoke(context.Background(), p, tc.b, upstream.Request{Protocol: upstream.ChatCompletions, Body: chatBody})
			ue, ok := upstream.As(err)
			g.Expect(ok).To(BeTrue(), "%v", err)
			g.Expect(ue.Status).To(Equal(tc.status))
			g.Expect(ue.Retryable).To(Equal(tc.retryable))
			g.Expect(ue.RetryAfter).To(Equal(tc.retryAfter))
			if tc.reply.ErrorMessage != "" {
				g.Expect(ue.Message).To(Equal(tc.reply.ErrorMessage))
			}
		})
	}

	t.Run("another project", func(t *testing.T) {
		g := NewWithT(t)
		b := gem
		b.Options = map[string]string{OptionProject: "someone-else"}
		_, err := upstream.Invoke(context.Background(), p, b, upstream.Request{Protocol: upstream.ChatCompletions, Body: chatBody})
		ue, ok := upstream.As(err)
		g.Expect(ok).To(BeTrue(), "%v", err)
		g.Expect(ue.Status).To(Equal(http.StatusForbidden))
		g.Expect(ue.ClientStatus()).To(Equal(http.StatusBadGateway), "the gateway's credential, not the client's")
		g.Expect(fake.Last().Path).To(ContainSubstring("/projects/someone-else/locations/global/"))
	})
}

func drain(g Gomega, s *upstream.Stream) string {
	var text string
	for {
		ev, err := s.Next()
		if err == io.EOF {
			return text
		}
		g.Expect(err).NotTo(HaveOccurred())
		var d struct {
			Delta struct {
				Text string `json:"text"`
			} `json:"delta"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		text += d.Delta.Text
		for _, c := range d.Choices {
			text += c.Delta.Content
		}
	}
}
