package simulated_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/translate"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/simulated"
)

func invoke(t *testing.T, p upstream.TextProvider, b upstream.Backend, proto upstream.Protocol, body string, stream bool) (*upstream.Result, error) {
	t.Helper()
	return upstream.Invoke(context.Background(), p, b, upstream.Request{Protocol: proto, Body: []byte(body), Stream: stream})
}

func text(t *testing.T, proto upstream.Protocol, body []byte) string {
	t.Helper()
	r, err := translate.DecodeResponse(proto, body)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var b strings.Builder
	for _, p := range r.Parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func TestEchoAndUsage(t *testing.T) {
	g := NewWithT(t)
	res, err := invoke(t, simulated.New(upstream.Messages), upstream.Backend{UpstreamModel: "sim-1"}, upstream.Messages,
		`{"model":"client","max_tokens":50,"system":"sys prompt","messages":[{"role":"user","content":"Hello  there, world"}]}`, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(text(t, upstream.Messages, res.Body)).To(Equal("Hello  there, world"))
	m, _ := translate.FieldString(res.Body, "model")
	g.Expect(m).To(Equal("client"))
	g.Expect(res.Usage).To(Equal(upstream.Usage{InputTokens: 8, OutputTokens: 3, CacheReadTokens: ptr(0), CacheWriteTokens: ptr(0)}))
}

func ptr(v int64) *int64 { return &v }

func TestDirectives(t *testing.T) {
	p := simulated.New(upstream.Messages)
	msg := func(content string, extra string) string {
		return `{"model":"m","max_tokens":1000` + extra + `,"messages":[{"role":"user","content":"` + content + `"}]}`
	}
	t.Run("tokens", func(t *testing.T) {
		g := NewWithT(t)
		res, err := invoke(t, p, upstream.Backend{}, upstream.Messages, msg("go [sim:tokens=25]", ""), false)
		g.Expect(err).NotTo(HaveOccurred())
		out := text(t, upstream.Messages, res.Body)
		g.Expect(strings.Fields(out)).To(HaveLen(25))
		g.Expect(out).To(HavePrefix("lorem ipsum dolor"))
		g.Expect(res.Usage.OutputTokens).To(Equal(int64(25)))
	})
	t.Run("max_tokens truncates", func(t *testing.T) {
		g := NewWithT(t)
		res, err := invoke(t, p, upstream.Backend{}, upstream.Messages, `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":"[sim:tokens=10]"}]}`, false)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(text(t, upstream.Messages, res.Body)).To(Equal("lorem ipsum dolor sit"))
		s, _ := translate.FieldString(res.Body, "stop_reason")
		g.Expect(s).To(Equal("max_tokens"))
	})
	t.Run("stop sequence", func(t *testing.T) {
		g := NewWithT(t)
		res, err := invoke(t, p, upstream.Backend{}, upstream.Messages, msg("one two STOP three", `,"stop_sequences":["STOP"]`), false)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(text(t, upstream.Messages, res.Body)).To(Equal("one two "))
		s, _ := translate.FieldString(res.Body, "stop_sequence")
		g.Expect(s).To(Equal("STOP"))
	})
	t.Run("fail", func(t *testing.T) {
		g := NewWithT(t)
		_, err := invoke(t, p, upstream.Backend{}, upstream.Messages, msg("x [sim:fail=429]", ""), false)
		ue, ok := upstream.As(err)
		g.Expect(ok).To(BeTrue())
		g.Expect(ue.Status).To(Equal(429))
		g.Expect(ue.Retryable).To(BeTrue())
		g.Expect(string(ue.Body)).To(Equal(`{"type":"error","error":{"type":"rate_limit_error","message":"simulated failure"}}`))
		_, err = invoke(t, p, upstream.Backend{}, upstream.Messages, msg("x [sim:fail=400]", ""), false)
		g.Expect(upstream.IsRetryable(err)).To(BeFalse())
	})
	t.Run("cache directives", func(t *testing.T) {
		g := NewWithT(t)
		res, err := invoke(t, p, upstream.Backend{}, upstream.Messages, msg("x [sim:cache_read=100,cache_write=7]", ""), false)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Usage.CacheReadTokens).To(Equal(ptr(100)))
		g.Expect(res.Usage.CacheWriteTokens).To(Equal(ptr(7)))
	})
	t.Run("cache_control makes the prefix a cache read", func(t *testing.T) {
		g := NewWithT(t)
		res, err := invoke(t, p, upstream.Backend{}, upstream.Messages, `{"model":"m","max_tokens":10,
			"system":[{"type":"text","text":"`+strings.Repeat("s", 400)+`","cache_control":{"type":"ephemeral"}}],
			"messages":[{"role":"user","content":"abcdefgh"}]}`, false)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Usage).To(Equal(upstream.Usage{InputTokens: 2, OutputTokens: 1, CacheReadTokens: ptr(100), CacheWriteTokens: ptr(0)}))
	})
	t.Run("latency", func(t *testing.T) {
		g := NewWithT(t)
		start := time.Now()
		_, err := invoke(t, p, upstream.Backend{}, upstream.Messages, msg("x [sim:latency=30ms]", ""), false)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(time.Since(start)).To(BeNumerically(">=", 30*time.Millisecond))
	})
}

func TestFailRateIsDeterministic(t *testing.T) {
	g := NewWithT(t)
	p := simulated.New(upstream.ChatCompletions)
	b := upstream.Backend{Name: "flaky", Options: map[string]string{"failRate": "0.25", "failStatus": "500"}}
	var pattern []bool
	for range 8 {
		_, err := invoke(t, p, b, upstream.ChatCompletions, `{"model":"m","messages":[{"role":"user","content":"x"}]}`, false)
		pattern = append(pattern, err != nil)
		if err != nil {
			ue, _ := upstream.As(err)
			g.Expect(ue.Status).To(Equal(500))
		}
	}
	g.Expect(pattern).To(Equal([]bool{false, false, false, true, false, false, false, true}))
}

func TestStreamingWithChunkDelay(t *testing.T) {
	g := NewWithT(t)
	b := upstream.Backend{Options: map[string]string{"chunkDelay": "5ms", "chunkTokens": "2"}}
	start := time.Now()
	res, err := invoke(t, simulated.New(upstream.Messages), b, upstream.Messages,
		`{"model":"m","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"[sim:tokens=10]"}]}`, true)
	g.Expect(err).NotTo(HaveOccurred())
	defer res.Close()
	var deltas []string
	for {
		ev, err := res.Stream.Next()
		if err == io.EOF {
			break
		}
		g.Expect(err).NotTo(HaveOccurred())
		if ev.Name == "content_block_delta" {
			s, _ := translate.FieldString(ev.Data, "delta", "text")
			deltas = append(deltas, s)
		}
	}
	g.Expect(deltas).To(Equal([]string{"lorem ipsum ", "dolor sit ", "amet consectetur ", "adipiscing elit ", "sed do"}))
	g.Expect(time.Since(start)).To(BeNumerically(">=", 20*time.Millisecond), "4 delays between 5 chunks")
	g.Expect(res.Stream.Usage().OutputTokens).To(Equal(int64(10)))
	g.Expect(res.Stream.Complete()).To(BeTrue())
}

// A messages client drives a tool round trip through the OpenAI-speaking
// simulator: the request and both answers are translated.
func TestToolRoundTripThroughTranslation(t *testing.T) {
	g := NewWithT(t)
	p := simulated.New(upstream.ChatCompletions)
	tools := `"tools":[{"name":"lookup","description":"d","input_schema":{"type":"object","properties":{"input":{"type":"string"}}}}]`
	res, err := invoke(t, p, upstream.Backend{}, upstream.Messages,
		`{"model":"m","max_tokens":100,`+tools+`,"messages":[{"role":"user","content":"find cats [sim:tool]"}]}`, false)
	g.Expect(err).NotTo(HaveOccurred())
	r, err := translate.DecodeResponse(upstream.Messages, res.Body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Stop).To(Equal(translate.StopToolUse))
	g.Expect(r.Parts).To(HaveLen(1))
	call := r.Parts[0]
	g.Expect(call.Type).To(Equal(translate.PartToolCall))
	g.Expect(call.Name).To(Equal("lookup"))
	g.Expect(call.Arguments).To(MatchJSON(`{"input":"find cats"}`))

	second := `{"model":"m","max_tokens":100,` + tools + `,"messages":[
		{"role":"user","content":"find cats [sim:tool]"},
		{"role":"assistant","content":[{"type":"tool_use","id":"` + call.ID + `","name":"lookup","input":{"input":"find cats"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + call.ID + `","content":"3 cats found"}]}]}`
	res, err = invoke(t, p, upstream.Backend{}, upstream.Messages, second, true)
	g.Expect(err).NotTo(HaveOccurred())
	defer res.Close()
	var out strings.Builder
	var last upstream.Event
	for {
		ev, err := res.Stream.Next()
		if err == io.EOF {
			break
		}
		g.Expect(err).NotTo(HaveOccurred())
		if ev.Name == "content_block_delta" {
			s, _ := translate.FieldString(ev.Data, "delta", "text")
			out.WriteString(s)
		}
		last = ev
	}
	g.Expect(out.String()).To(Equal("3 cats found"))
	g.Expect(last.Name).To(Equal("message_stop"))
}

func TestNoUsageIsEstimated(t *testing.T) {
	g := NewWithT(t)
	res, err := invoke(t, simulated.New(upstream.ChatCompletions), upstream.Backend{}, upstream.Messages,
		`{"model":"m","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"[sim:tokens=12,usage=none]"}]}`, true)
	g.Expect(err).NotTo(HaveOccurred())
	defer res.Close()
	for {
		if _, err := res.Stream.Next(); err != nil {
			g.Expect(err).To(Equal(io.EOF))
			break
		}
	}
	g.Expect(res.Stream.UsageReported()).To(BeFalse())
	// 76 bytes of text: ceil(76/4) = 19, more than the 12 chunks.
	g.Expect(res.Stream.Usage().OutputTokens).To(Equal(int64(19)))
	g.Expect(res.Stream.Usage().ReportedTotalTokens).To(BeNil())
}

func TestEveryProtocolBothWays(t *testing.T) {
	bodies := map[upstream.Protocol]string{
		upstream.Messages:        `{"model":"c","max_tokens":100,"messages":[{"role":"user","content":"ping pong"}]`,
		upstream.ChatCompletions: `{"model":"c","messages":[{"role":"user","content":"ping pong"}]`,
		upstream.Responses:       `{"model":"c","input":"ping pong"`,
	}
	for _, up := range []upstream.Protocol{upstream.Messages, upstream.ChatCompletions, upstream.Responses} {
		p := simulated.New(up)
		for client, body := range bodies {
			for _, stream := range []bool{false, true} {
				t.Run(string(client)+"_via_"+string(up), func(t *testing.T) {
					g := NewWithT(t)
					b := body + "}"
					if stream {
						b = body + `,"stream":true}`
					}
					res, err := invoke(t, p, upstream.Backend{UpstreamModel: "u"}, client, b, stream)
					g.Expect(err).NotTo(HaveOccurred())
					defer res.Close()
					if !stream {
						g.Expect(text(t, client, res.Body)).To(Equal("ping pong"))
						g.Expect(res.Usage.OutputTokens).To(Equal(int64(2)))
						return
					}
					n := 0
					for {
						_, err := res.Stream.Next()
						if err != nil {
							g.Expect(err).To(Equal(io.EOF))
							break
						}
						n++
					}
					g.Expect(n).To(BeNumerically(">", 3))
					g.Expect(res.Stream.Usage().OutputTokens).To(Equal(int64(2)))
				})
			}
		}
	}
}
