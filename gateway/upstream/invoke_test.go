package upstream_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/translate"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/anthropic"
	"github.com/modelgate/modelgate/gateway/upstream/builtin"
	"github.com/modelgate/modelgate/gateway/upstream/openai"
	"github.com/modelgate/modelgate/gateway/upstream/simulated"
)

func drain(t *testing.T, s *upstream.Stream) ([]upstream.Event, error) {
	t.Helper()
	var evs []upstream.Event
	for {
		ev, err := s.Next()
		if err != nil {
			if err == io.EOF {
				return evs, nil
			}
			return evs, err
		}
		evs = append(evs, upstream.Event{Name: ev.Name, Data: append([]byte(nil), ev.Data...)})
	}
}

func names(evs []upstream.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Name != "" {
			out = append(out, e.Name)
		} else {
			out = append(out, "data")
		}
	}
	return out
}

func TestRegistry(t *testing.T) {
	g := NewWithT(t)
	reg := builtin.Registry(upstream.Egress{})
	g.Expect(reg.Names()).To(ContainElements(anthropic.Name, openai.Name, simulated.Name, simulated.NameOpenAI))
	p, ok := reg.Text(anthropic.Name)
	g.Expect(ok).To(BeTrue())
	g.Expect(p.Protocols()).To(Equal([]upstream.Protocol{upstream.Messages}))
	_, ok = reg.Text("nope")
	g.Expect(ok).To(BeFalse())
	g.Expect(reg.Known("nope")).To(BeFalse())
	g.Expect(reg.Known(anthropic.Name)).To(BeTrue())
	g.Expect(func() {
		upstream.NewRegistry(upstream.Entry{Name: "a", Adapter: p}, upstream.Entry{Name: "a", Adapter: p})
	}).To(Panic())
	g.Expect(func() { upstream.NewRegistry(upstream.Entry{Name: "a", Adapter: 42}) }).To(Panic())

	op, _ := reg.Text(openai.Name)
	g.Expect(upstream.UpstreamProtocol(op, upstream.Responses)).To(Equal(upstream.Responses))
	g.Expect(upstream.UpstreamProtocol(op, upstream.Messages)).To(Equal(upstream.ChatCompletions))
}

func TestBackendNeverShowsItsKey(t *testing.T) {
	g := NewWithT(t)
	b := upstream.Backend{Name: "b1", Provider: "openai", APIKey: "sk-secret-123", UpstreamModel: "m"}
	for _, s := range []string{fmt.Sprint(b), fmt.Sprintf("%v %+v %#v %s", b, b, b, b)} {
		g.Expect(s).NotTo(ContainSubstring("sk-secret"))
		g.Expect(s).To(ContainSubstring("[redacted]"))
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "backend", b)
	g.Expect(buf.String()).NotTo(ContainSubstring("sk-secret"))
	g.Expect(buf.String()).To(ContainSubstring(`"name":"b1"`))
}

// The model is rewritten in the forwarded body and in the answer; every
// other byte passes through untouched.
func TestAnthropicPassThroughKeepsBytes(t *testing.T) {
	g := NewWithT(t)
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		writeJSON(w, 200, anthropicMessage)
	})
	clientBody := "{\n  \"max_tokens\": 64,\n  \"model\" :  \"claude-client\",\n  \"messages\": [{\"role\": \"user\", \"content\": \"Hi \\u00e9 \\\"model\\\"\"}],\n  \"metadata\": {\"model\": \"claude-client\"}\n}"
	b := upstream.Backend{Provider: "anthropic", BaseURL: f.URL, APIKey: "ak-1", UpstreamModel: "claude-upstream"}
	res, err := upstream.Invoke(context.Background(), anthropic.New(nil), b, upstream.Request{
		Protocol: upstream.Messages, Body: []byte(clientBody),
		Header: http.Header{"Anthropic-Beta": {"prompt-caching-2024-07-31"}, "X-Other": {"no"}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer res.Close()

	up := f.last()
	g.Expect(up.Path).To(Equal("/v1/messages"))
	g.Expect(string(up.Body)).To(Equal(strings.Replace(clientBody, `"claude-client"`, `"claude-upstream"`, 1)))
	g.Expect(up.Header.Get("x-api-key")).To(Equal("ak-1"))
	g.Expect(up.Header.Get("anthropic-version")).To(Equal("2023-06-01"))
	g.Expect(up.Header.Get("anthropic-beta")).To(Equal("prompt-caching-2024-07-31"))
	g.Expect(up.Header.Get("X-Other")).To(BeEmpty())
	g.Expect(up.Header.Get("Authorization")).To(BeEmpty())

	g.Expect(res.Translated).To(BeFalse())
	g.Expect(string(res.Body)).To(Equal(strings.Replace(anthropicMessage, `"claude-upstream"`, `"claude-client"`, 1)))
	g.Expect(res.UsageReported).To(BeTrue())
	g.Expect(res.Usage).To(Equal(upstream.Usage{InputTokens: 12, OutputTokens: 6, CacheReadTokens: ptr(0), CacheWriteTokens: ptr(100)}))

	// The client's anthropic-version wins over the default; a backend can
	// add a beta header.
	b.Options = map[string]string{"anthropic-beta": "output-128k-2025-02-19"}
	_, err = upstream.Invoke(context.Background(), anthropic.New(nil), b, upstream.Request{
		Protocol: upstream.Messages, Body: []byte(clientBody), Header: http.Header{"Anthropic-Version": {"2024-01-01"}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.last().Header.Get("anthropic-version")).To(Equal("2024-01-01"))
	g.Expect(f.last().Header.Values("anthropic-beta")).To(Equal([]string{"output-128k-2025-02-19"}))
}

func ptr(v int64) *int64 { return &v }

func TestAnthropicStreamPassThrough(t *testing.T) {
	g := NewWithT(t)
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { writeSSE(w, anthropicStream, 0) })
	res, err := upstream.Invoke(context.Background(), anthropic.New(nil), upstream.Backend{BaseURL: f.URL, UpstreamModel: "claude-upstream"},
		upstream.Request{Protocol: upstream.Messages, Stream: true, Body: []byte(`{"model":"claude-client","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)})
	g.Expect(err).NotTo(HaveOccurred())
	defer res.Close()
	g.Expect(f.last().Header.Get("Accept")).To(Equal("text/event-stream"))
	evs, err := drain(t, res.Stream)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(evs).To(HaveLen(len(anthropicStream)))
	for i, e := range evs {
		want := anthropicStream[i]
		if i == 0 {
			want = strings.Replace(want, `"claude-upstream"`, `"claude-client"`, 1)
		}
		g.Expect(e.String()).To(Equal(want))
	}
	g.Expect(res.Stream.Complete()).To(BeTrue())
	g.Expect(res.Stream.UsageReported()).To(BeTrue())
	g.Expect(res.Stream.Usage()).To(Equal(upstream.Usage{InputTokens: 25, OutputTokens: 15, CacheReadTokens: ptr(1000), CacheWriteTokens: ptr(0)}))
}

func TestMessagesClientOnOpenAIUpstream(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if bytes.Contains(body, []byte(`"stream":true`)) {
			writeSSE(w, openAIChatStream, time.Millisecond)
			return
		}
		writeJSON(w, 200, openAIChatCompletion)
	})
	b := upstream.Backend{BaseURL: f.URL + "/v1", APIKey: "sk-up", UpstreamModel: "gpt-upstream",
		Options: map[string]string{"organization": "org-1", "project": "proj-1"}}
	p := openai.New(nil)

	t.Run("non-streaming", func(t *testing.T) {
		g := NewWithT(t)
		res, err := upstream.Invoke(context.Background(), p, b, upstream.Request{Protocol: upstream.Messages,
			Body: []byte(`{"model":"claude-client","max_tokens":100,"system":"Be brief.","messages":[{"role":"user","content":"Hello"}]}`)})
		g.Expect(err).NotTo(HaveOccurred())
		defer res.Close()
		up := f.last()
		g.Expect(up.Path).To(Equal("/v1/chat/completions"))
		g.Expect(up.Header.Get("Authorization")).To(Equal("Bearer sk-up"))
		g.Expect(up.Header.Get("x-api-key")).To(BeEmpty())
		g.Expect(up.Header.Get("OpenAI-Organization")).To(Equal("org-1"))
		g.Expect(up.Header.Get("OpenAI-Project")).To(Equal("proj-1"))
		g.Expect(up.Header.Get("anthropic-version")).To(BeEmpty())
		g.Expect(string(up.Body)).To(MatchJSON(`{"model":"gpt-upstream","max_completion_tokens":100,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello"}]}`))
		g.Expect(res.Translated).To(BeTrue())
		g.Expect(res.Upstream).To(Equal(upstream.ChatCompletions))
		id, _ := translate.FieldString(res.Body, "id")
		g.Expect(id).To(HavePrefix("msg_"))
		g.Expect(string(res.Body)).To(MatchJSON(fmt.Sprintf(`{"id":%q,"type":"message","role":"assistant","model":"claude-client",
			"content":[{"type":"text","text":"Hello! How can I help?"}],"stop_reason":"end_turn","stop_sequence":null,
			"usage":{"input_tokens":19,"output_tokens":10,"cache_read_input_tokens":0}}`, id)))
		g.Expect(res.Usage).To(Equal(upstream.Usage{InputTokens: 19, OutputTokens: 10, CacheReadTokens: ptr(0), ReportedTotalTokens: ptr(29)}))
	})

	t.Run("streaming with a tool call", func(t *testing.T) {
		g := NewWithT(t)
		res, err := upstream.Invoke(context.Background(), p, b, upstream.Request{Protocol: upstream.Messages, Stream: true,
			Body: []byte(`{"model":"claude-client","max_tokens":100,"stream":true,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"Weather?"}]}`)})
		g.Expect(err).NotTo(HaveOccurred())
		defer res.Close()
		g.Expect(string(f.last().Body)).To(ContainSubstring(`"stream_options":{"include_usage":true}`))
		evs, err := drain(t, res.Stream)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(names(evs)).To(Equal([]string{"message_start",
			"content_block_start", "content_block_delta", "content_block_stop",
			"content_block_start", "content_block_delta", "content_block_stop",
			"message_delta", "message_stop"}))
		g.Expect(string(evs[0].Data)).To(ContainSubstring(`"model":"claude-client"`))
		g.Expect(string(evs[4].Data)).To(Equal(`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"call_abc","name":"get_weather","input":{}}}`))
		g.Expect(string(evs[5].Data)).To(Equal(`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\":\"Paris\"}"}}`))
		g.Expect(string(evs[7].Data)).To(Equal(`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":20,"cache_read_input_tokens":10,"output_tokens":9}}`))
		g.Expect(res.Stream.Usage()).To(Equal(upstream.Usage{InputTokens: 20, OutputTokens: 9, CacheReadTokens: ptr(10), ReportedTotalTokens: ptr(39)}))
	})
}

func TestOpenAIResponsesNative(t *testing.T) {
	g := NewWithT(t)
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { writeJSON(w, 200, openAIResponse) })
	body := `{"model":"gpt-client","input":"Tell me a story","reasoning":{"effort":"low"}}`
	res, err := upstream.Invoke(context.Background(), openai.New(nil), upstream.Backend{BaseURL: f.URL, UpstreamModel: "gpt-upstream"},
		upstream.Request{Protocol: upstream.Responses, Body: []byte(body)})
	g.Expect(err).NotTo(HaveOccurred())
	defer res.Close()
	g.Expect(f.last().Path).To(Equal("/v1/responses"))
	g.Expect(string(f.last().Body)).To(Equal(strings.Replace(body, "gpt-client", "gpt-upstream", 1)))
	g.Expect(string(res.Body)).To(Equal(strings.Replace(openAIResponse, `"model":"gpt-upstream"`, `"model":"gpt-client"`, 1)))
	g.Expect(res.Usage).To(Equal(upstream.Usage{InputTokens: 36, OutputTokens: 87, CacheReadTokens: ptr(0), ReportedTotalTokens: ptr(123)}))
}

func TestChatPassThroughAsksForUsageAndHidesIt(t *testing.T) {
	g := NewWithT(t)
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { writeSSE(w, openAIChatStream, 0) })
	body := `{"model":"gpt-client","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	res, err := upstream.Invoke(context.Background(), openai.New(nil), upstream.Backend{BaseURL: f.URL, UpstreamModel: "gpt-upstream"},
		upstream.Request{Protocol: upstream.ChatCompletions, Stream: true, Body: []byte(body)})
	g.Expect(err).NotTo(HaveOccurred())
	defer res.Close()
	g.Expect(string(f.last().Body)).To(Equal(`{"stream_options":{"include_usage":true},"model":"gpt-upstream","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	evs, err := drain(t, res.Stream)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(evs).To(HaveLen(len(openAIChatStream) - 1))
	for i, e := range evs[:len(evs)-1] {
		g.Expect(e.String()).To(Equal(strings.Replace(openAIChatStream[i], "gpt-upstream", "gpt-client", 1)))
	}
	g.Expect(evs[len(evs)-1].String()).To(Equal("data: [DONE]\n\n"))
	g.Expect(res.Stream.Usage().OutputTokens).To(Equal(int64(9)))

	// A client that asked for usage gets the chunk, and its body is kept.
	body = `{"model":"gpt-client","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	res2, err := upstream.Invoke(context.Background(), openai.New(nil), upstream.Backend{BaseURL: f.URL, UpstreamModel: "gpt-upstream"},
		upstream.Request{Protocol: upstream.ChatCompletions, Stream: true, Body: []byte(body)})
	g.Expect(err).NotTo(HaveOccurred())
	defer res2.Close()
	g.Expect(string(f.last().Body)).To(Equal(strings.Replace(body, "gpt-client", "gpt-upstream", 1)))
	evs, _ = drain(t, res2.Stream)
	g.Expect(evs).To(HaveLen(len(openAIChatStream)))
}

func TestUpstreamErrors(t *testing.T) {
	for _, tc := range []struct {
		name         string
		status       int
		body         string
		retryable    bool
		clientStatus int
		message      string
		// The type the client sees on /v1/messages and on the OpenAI-shaped
		// endpoints: apierr's table by the client status, whatever type the
		// upstream's own body carried.
		messagesType, openAIType string
	}{
		{"anthropic invalid request", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}`, false, 400, "max_tokens: Field required",
			"invalid_request_error", "invalid_request_error"},
		{"anthropic bad key", 401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, false, 502, "invalid x-api-key",
			"api_error", "server_error"},
		{"anthropic rate limited", 429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`, true, 429, "Number of request tokens has exceeded your per-minute rate limit",
			"rate_limit_error", "rate_limit_error"},
		{"anthropic overloaded", 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, true, 529, "Overloaded",
			"overloaded_error", "server_error"},
		{"anthropic-shaped 503", 503, `{"type":"error","error":{"type":"overloaded_error","message":"Service Unavailable"}}`, true, 503, "Service Unavailable",
			"api_error", "server_error"},
		{"anthropic timeout", 504, `{"type":"error","error":{"type":"timeout_error","message":"Request timed out"}}`, true, 504, "Request timed out",
			"timeout_error", "server_error"},
		{"openai server error", 500, `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`, true, 500, "The server had an error while processing your request.",
			"api_error", "server_error"},
		{"openai overloaded 503", 503, `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error","param":null,"code":null}}`, true, 503, "The engine is currently overloaded, please try again later",
			"api_error", "server_error"},
		{"openai not found", 404, `{"error":{"message":"The model does not exist","type":"invalid_request_error","param":null,"code":"model_not_found"}}`, false, 404, "The model does not exist",
			"not_found_error", "not_found_error"},
		{"plain text 502", 502, `<html>bad gateway</html>`, true, 502, "Bad Gateway",
			"api_error", "server_error"},
		{"plain text 504", 504, `<html>gateway timeout</html>`, true, 504, "Gateway Timeout",
			"timeout_error", "server_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { writeJSON(w, tc.status, tc.body) })
			res, err := upstream.Invoke(context.Background(), anthropic.New(nil), upstream.Backend{BaseURL: f.URL},
				upstream.Request{Protocol: upstream.Messages, Body: []byte(`{"model":"m","messages":[]}`)})
			g.Expect(res).To(BeNil())
			ue, ok := upstream.As(err)
			g.Expect(ok).To(BeTrue())
			g.Expect(ue.Status).To(Equal(tc.status))
			g.Expect(ue.Retryable).To(Equal(tc.retryable))
			g.Expect(upstream.IsRetryable(err)).To(Equal(tc.retryable))
			g.Expect(ue.Message).To(Equal(tc.message))
			g.Expect(string(ue.Body)).To(Equal(tc.body))
			g.Expect(ue.ClientStatus()).To(Equal(tc.clientStatus))
			for _, p := range []struct {
				proto upstream.Protocol
				want  string
			}{{upstream.Messages, tc.messagesType}, {upstream.ChatCompletions, tc.openAIType}, {upstream.Responses, tc.openAIType}} {
				body := ue.ClientBody(p.proto)
				relayed, _ := translate.FieldString(body, "error", "type")
				if kind, _ := translate.FieldString([]byte(tc.body), "type"); p.proto == upstream.Messages && kind == "error" && tc.clientStatus == tc.status {
					// The upstream spoke the client's protocol: its own error,
					// byte for byte.
					g.Expect(string(body)).To(Equal(tc.body), "%s, relayed as written", p.proto)
					continue
				}
				g.Expect(relayed).To(Equal(p.want), "%s, relayed", p.proto)
				// The gateway's own error of the same status has the same type.
				own, _ := translate.FieldString(upstream.ErrorBody(p.proto, tc.clientStatus, "x"), "error", "type")
				g.Expect(own).To(Equal(relayed), "%s, the gateway's own", p.proto)
			}
		})
	}
}

// A text upstream that redirects is a misconfigured backend: the redirect
// is not followed (the vendor key would go wherever Location points), the
// next backend is tried, and a client would see a 502, not the 3xx.
func TestRedirectIsNotFollowed(t *testing.T) {
	for _, status := range []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			g := NewWithT(t)
			elsewhere := newFake(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { writeJSON(w, 200, `{}`) })
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
				http.Redirect(w, r, elsewhere.URL+r.URL.Path, status)
			})
			for _, p := range []upstream.TextProvider{openai.New(nil), anthropic.New(nil)} {
				res, err := upstream.Invoke(context.Background(), p, upstream.Backend{BaseURL: f.URL, APIKey: "sk-vendor-secret"},
					upstream.Request{Protocol: p.Protocols()[0], Body: []byte(`{"model":"m","messages":[{"role":"user","content":"x"}]}`)})
				g.Expect(res).To(BeNil())
				ue, ok := upstream.As(err)
				g.Expect(ok).To(BeTrue())
				g.Expect(ue.Status).To(Equal(status))
				g.Expect(ue.Class).To(Equal(upstream.Failover))
				g.Expect(upstream.IsRetryable(err)).To(BeTrue(), "the next backend is tried")
				g.Expect(ue.ClientStatus()).To(Equal(http.StatusBadGateway))
				g.Expect(ue.Message).To(ContainSubstring("redirect"))
			}
			g.Expect(f.requests()).To(HaveLen(2))
			g.Expect(elsewhere.requests()).To(BeEmpty(), "the redirect's target never sees the request or its key")
		})
	}
}

func TestTransportFailures(t *testing.T) {
	req := upstream.Request{Protocol: upstream.ChatCompletions, Body: []byte(`{"model":"m","messages":[{"role":"user","content":"x"}]}`)}
	t.Run("timeout", func(t *testing.T) {
		g := NewWithT(t)
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
		})
		start := time.Now()
		_, err := upstream.Invoke(context.Background(), openai.New(nil), upstream.Backend{BaseURL: f.URL, Timeout: 50 * time.Millisecond}, req)
		g.Expect(time.Since(start)).To(BeNumerically("<", time.Second))
		ue, ok := upstream.As(err)
		g.Expect(ok).To(BeTrue())
		g.Expect(ue.Status).To(Equal(http.StatusGatewayTimeout))
		g.Expect(ue.Retryable).To(BeTrue())
		// A timeout the gateway measured reads as an upstream's own 504.
		typ, _ := translate.FieldString(ue.ClientBody(upstream.Messages), "error", "type")
		g.Expect(typ).To(Equal("timeout_error"))
		typ, _ = translate.FieldString(ue.ClientBody(upstream.ChatCompletions), "error", "type")
		g.Expect(typ).To(Equal("server_error"))
	})
	t.Run("timeout before the first event", func(t *testing.T) {
		g := NewWithT(t)
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
		})
		_, err := upstream.Invoke(context.Background(), openai.New(nil), upstream.Backend{BaseURL: f.URL, Timeout: 50 * time.Millisecond},
			upstream.Request{Protocol: upstream.ChatCompletions, Stream: true, Body: []byte(`{"model":"m","stream":true,"messages":[]}`)})
		ue, ok := upstream.As(err)
		g.Expect(ok).To(BeTrue())
		g.Expect(ue.Status).To(Equal(http.StatusGatewayTimeout))
		g.Expect(ue.Retryable).To(BeTrue())
	})
	t.Run("connection refused", func(t *testing.T) {
		g := NewWithT(t)
		f := newFake(t, func(http.ResponseWriter, *http.Request, []byte) {})
		url := f.URL
		f.Close()
		_, err := upstream.Invoke(context.Background(), openai.New(nil), upstream.Backend{BaseURL: url}, req)
		ue, ok := upstream.As(err)
		g.Expect(ok).To(BeTrue())
		g.Expect(ue.Status).To(Equal(http.StatusBadGateway))
		g.Expect(ue.Retryable).To(BeTrue())
		g.Expect(ue.Message).To(Equal("upstream connection failed"))
	})
	t.Run("client went away", func(t *testing.T) {
		g := NewWithT(t)
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { <-r.Context().Done() })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		_, err := upstream.Invoke(ctx, openai.New(nil), upstream.Backend{BaseURL: f.URL}, req)
		g.Expect(errors.Is(err, context.DeadlineExceeded)).To(BeTrue())
		g.Expect(upstream.IsRetryable(err)).To(BeFalse())
	})
	t.Run("error event before content is retryable", func(t *testing.T) {
		g := NewWithT(t)
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			writeSSE(w, []string{sse("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)}, 0)
		})
		_, err := upstream.Invoke(context.Background(), anthropic.New(nil), upstream.Backend{BaseURL: f.URL},
			upstream.Request{Protocol: upstream.Messages, Stream: true, Body: []byte(`{"model":"m","stream":true,"max_tokens":5,"messages":[]}`)})
		ue, ok := upstream.As(err)
		g.Expect(ok).To(BeTrue())
		g.Expect(ue.Status).To(Equal(529))
		g.Expect(ue.Retryable).To(BeTrue())
		g.Expect(ue.Message).To(Equal("Overloaded"))
	})
	t.Run("an error event's status follows its type", func(t *testing.T) {
		for _, c := range []struct {
			event  string
			status int
		}{
			{sse("error", `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`), 429},
			{sse("error", `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`), 500},
			{sse("", `{"error":{"message":"oops","type":"server_error","param":null,"code":null}}`), 500},
			// A client error's type is still retried, as any error event
			// before content is: the status says the upstream failed.
			{sse("error", `{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`), http.StatusBadGateway},
			{sse("error", `{"type":"error","error":{"type":"something_new","message":"?"}}`), http.StatusBadGateway},
		} {
			g := NewWithT(t)
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { writeSSE(w, []string{c.event}, 0) })
			_, err := upstream.Invoke(context.Background(), anthropic.New(nil), upstream.Backend{BaseURL: f.URL},
				upstream.Request{Protocol: upstream.Messages, Stream: true, Body: []byte(`{"model":"m","stream":true,"max_tokens":5,"messages":[]}`)})
			ue, ok := upstream.As(err)
			g.Expect(ok).To(BeTrue(), c.event)
			g.Expect(ue.Status).To(Equal(c.status), c.event)
			g.Expect(ue.Retryable).To(BeTrue())
		}
	})
}

func TestStreamBrokenAfterFirstByte(t *testing.T) {
	g := NewWithT(t)
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		writeSSE(w, openAIChatStream[:2], 0) // role chunk, "Hello", then the connection ends
	})
	res, err := upstream.Invoke(context.Background(), openai.New(nil), upstream.Backend{BaseURL: f.URL},
		upstream.Request{Protocol: upstream.Messages, Stream: true, Body: []byte(`{"model":"c","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"x"}]}`)})
	g.Expect(err).NotTo(HaveOccurred())
	defer res.Close()
	evs, err := drain(t, res.Stream)
	g.Expect(err).To(Equal(io.ErrUnexpectedEOF))
	g.Expect(names(evs)).To(Equal([]string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "error"}))
	g.Expect(res.Stream.Complete()).To(BeFalse())
	g.Expect(res.Stream.UsageReported()).To(BeFalse())
	u := res.Stream.Usage()
	g.Expect(u.OutputTokens).To(Equal(int64(2)), "estimated from what was streamed")
	g.Expect(u.ReportedTotalTokens).To(BeNil())
}

func TestStreamRequestAnsweredWithJSON(t *testing.T) {
	g := NewWithT(t)
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { writeJSON(w, 200, openAIChatCompletion) })
	res, err := upstream.Invoke(context.Background(), openai.New(nil), upstream.Backend{BaseURL: f.URL},
		upstream.Request{Protocol: upstream.Messages, Stream: true, Body: []byte(`{"model":"c","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"x"}]}`)})
	g.Expect(err).NotTo(HaveOccurred())
	defer res.Close()
	evs, err := drain(t, res.Stream)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(evs)).To(Equal([]string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}))
	g.Expect(res.Stream.Usage().OutputTokens).To(Equal(int64(10)))
}

// TestStreamWaitsOnlyWhenNoEventIsBuffered: BeforeWait runs exactly when
// the next event is not already buffered (so a proxy flushes once per burst,
// and never holds an event back while it waits for the upstream).
func TestStreamWaitsOnlyWhenNoEventIsBuffered(t *testing.T) {
	g := NewWithT(t)
	// Each answer: the first three events in one write, the rest once its
	// gate is released. A handler takes its gate on entry, and each request
	// is sent once the previous answer's head is in, so the gates go to the
	// answers in order.
	gates := make(chan chan struct{}, 3)
	gate := func() (release func()) {
		ch := make(chan struct{})
		gates <- ch
		var once sync.Once
		release = func() { once.Do(func() { close(ch) }) }
		t.Cleanup(release)
		return release
	}
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		gate := <-gates
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, strings.Join(openAIChatStream[:3], ""))
		w.(http.Flusher).Flush()
		<-gate
		_, _ = io.WriteString(w, strings.Join(openAIChatStream[3:], ""))
	})
	release := gate()
	res, err := upstream.Invoke(context.Background(), openai.New(nil), upstream.Backend{BaseURL: f.URL},
		upstream.Request{Protocol: upstream.ChatCompletions, Stream: true, Body: []byte(`{"model":"m","stream":true,"messages":[]}`)})
	g.Expect(err).NotTo(HaveOccurred())
	defer res.Close()
	var got int
	var waits []int // events returned when each wait began
	res.Stream.BeforeWait(func() {
		waits = append(waits, got)
		release()
	})
	for {
		_, err := res.Stream.Next()
		if err != nil {
			g.Expect(err).To(Equal(io.EOF))
			break
		}
		got++
	}
	g.Expect(got).To(Equal(len(openAIChatStream) - 1)) // the usage chunk is hidden
	g.Expect(waits).NotTo(BeEmpty())
	g.Expect(waits[0]).To(Equal(3), "no wait while the first burst was buffered")
	g.Expect(waits[len(waits)-1]).To(BeNumerically("<", got), "no wait once the upstream's last burst is in: its end is read without one")
}
