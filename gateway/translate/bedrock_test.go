package translate

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestBedrockRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		from Protocol
		body string
		want string
	}{
		{
			name: "chat: system, turns, image, inference config",
			from: ChatCompletions,
			body: `{"model":"m","max_tokens":100,"temperature":0.5,"top_p":0.9,"stop":["END"],
				"messages":[{"role":"system","content":"be terse"},{"role":"user","content":"hi"},
				{"role":"assistant","content":"hello"},{"role":"user","content":[{"type":"text","text":"see"},
				{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`,
			want: `{"messages":[{"role":"user","content":[{"text":"hi"}]},{"role":"assistant","content":[{"text":"hello"}]},
				{"role":"user","content":[{"text":"see"},{"image":{"format":"png","source":{"bytes":"AAAA"}}}]}],
				"system":[{"text":"be terse"}],
				"inferenceConfig":{"maxTokens":100,"temperature":0.5,"topP":0.9,"stopSequences":["END"]}}`,
		},
		{
			name: "chat: tools, forced tool, calls and results merged into one turn",
			from: ChatCompletions,
			body: `{"model":"m","tools":[{"type":"function","function":{"name":"get_weather","description":"weather",
				"parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
				"tool_choice":{"type":"function","function":{"name":"get_weather"}},
				"messages":[{"role":"user","content":"weather?"},
				{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
				{"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]},
				{"role":"tool","tool_call_id":"call_1","content":"sunny"},
				{"role":"tool","tool_call_id":"call_2","content":"{\"sky\":\"rain\"}"}]}`,
			want: `{"messages":[{"role":"user","content":[{"text":"weather?"}]},
				{"role":"assistant","content":[{"toolUse":{"toolUseId":"call_1","name":"get_weather","input":{"city":"Paris"}}},{"toolUse":{"toolUseId":"call_2","name":"get_weather","input":{"city":"Rome"}}}]},
				{"role":"user","content":[{"toolResult":{"toolUseId":"call_1","content":[{"text":"sunny"}],"status":"success"}},{"toolResult":{"toolUseId":"call_2","content":[{"json":{"sky":"rain"}}],"status":"success"}}]}],
				"toolConfig":{"tools":[{"toolSpec":{"name":"get_weather","description":"weather","inputSchema":{"json":{"type":"object","properties":{"city":{"type":"string"}}}}}}],
				"toolChoice":{"tool":{"name":"get_weather"}}}}`,
		},
		{
			name: "messages: failed tool result, any tool, thinking dropped",
			from: Messages,
			body: `{"model":"m","max_tokens":2048,"system":"sys",
				"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},
				"messages":[{"role":"user","content":"go"},
				{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"sig"},{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"content":"boom"}]}]}`,
			want: `{"messages":[{"role":"user","content":[{"text":"go"}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":"toolu_1","name":"f","input":{}}}]},
				{"role":"user","content":[{"toolResult":{"toolUseId":"toolu_1","content":[{"text":"boom"}],"status":"error"}}]}],
				"system":[{"text":"sys"}],
				"toolConfig":{"tools":[{"toolSpec":{"name":"f","inputSchema":{"json":{"type":"object"}}}}],"toolChoice":{"any":{}}},
				"inferenceConfig":{"maxTokens":2048}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out, _, err := TranslateRequest(tc.from, Bedrock, []byte(tc.body), "anthropic.claude-x")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(MatchJSON(tc.want))
		})
	}

	g := NewWithT(t)
	_, _, err := TranslateRequest(ChatCompletions, Bedrock, []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`), "b")
	g.Expect(err).To(MatchError(errBedrockImageURL))
	_, _, err = TranslateRequest(ChatCompletions, Bedrock, []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/tiff;base64,AAAA"}}]}]}`), "b")
	g.Expect(err).To(MatchError(errBedrockImageFormat))
	_, err = DecodeRequest(Bedrock, []byte(`{}`))
	g.Expect(err).To(MatchError(errUpstreamOnly))
}

// TestBedrockResponse: a Converse answer in each client protocol, with
// inputTokens as the uncached input and both cache counts kept apart.
func TestBedrockResponse(t *testing.T) {
	g := NewWithT(t)
	body := `{"output":{"message":{"role":"assistant","content":[
		{"reasoningContent":{"reasoningText":{"text":"think","signature":"s1"}}},
		{"text":"Let me check."},
		{"toolUse":{"toolUseId":"tooluse_abc","name":"get_weather","input":{"city":"Paris"}}}]}},
		"stopReason":"tool_use","usage":{"inputTokens":12,"outputTokens":30,"totalTokens":142,"cacheReadInputTokens":100,"cacheWriteInputTokens":0},
		"metrics":{"latencyMs":321}}`
	u, ok := ResponseUsage(Bedrock, []byte(body))
	g.Expect(ok).To(BeTrue())
	g.Expect(u.InputTokens).To(Equal(int64(12)))
	g.Expect(u.CacheReadTokens).To(HaveValue(Equal(int64(100))))
	g.Expect(u.CacheWriteTokens).To(HaveValue(Equal(int64(0))))
	g.Expect(u.TotalTokens()).To(Equal(int64(142)))
	g.Expect(u.ReportedTotalTokens).To(HaveValue(Equal(int64(142))))

	out, _, err := TranslateResponse(Bedrock, Messages, []byte(body), "client-model", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(ContainSubstring(`"stop_reason":"tool_use"`))
	g.Expect(string(out)).To(ContainSubstring(`"cache_read_input_tokens":100`))
	g.Expect(string(out)).To(ContainSubstring(`"id":"tooluse_abc"`))
	g.Expect(string(out)).To(ContainSubstring(`"thinking":"think"`))

	out, _, err = TranslateResponse(Bedrock, ChatCompletions, []byte(body), "client-model", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(ContainSubstring(`"finish_reason":"tool_calls"`))
	g.Expect(string(out)).To(ContainSubstring(`"prompt_tokens":112`))

	for reason, want := range map[string]StopReason{"end_turn": StopEndTurn, "max_tokens": StopMaxTokens, "stop_sequence": StopSequence,
		"guardrail_intervened": StopContentFilter, "content_filtered": StopContentFilter, "model_context_window_exceeded": StopMaxTokens} {
		r, err := DecodeResponse(Bedrock, []byte(`{"output":{"message":{"role":"assistant","content":[{"text":"x"}]}},"stopReason":"`+reason+`"}`))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Stop).To(Equal(want), reason)
	}
}

func bedrockEvents(evs ...string) []Event {
	out := make([]Event, 0, len(evs)/2)
	for i := 0; i+1 < len(evs); i += 2 {
		out = append(out, Event{Name: evs[i], Data: []byte(evs[i+1])})
	}
	return out
}

// TestBedrockStream: a ConverseStream (text without contentBlockStart, a
// tool use with one, usage in the metadata after messageStop) to messages
// and chat clients.
func TestBedrockStream(t *testing.T) {
	g := NewWithT(t)
	evs := bedrockEvents(
		"messageStart", `{"role":"assistant"}`,
		"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hel"}}`,
		"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"lo"}}`,
		"contentBlockStop", `{"contentBlockIndex":0}`,
		"contentBlockStart", `{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"tooluse_1","name":"f"}}}`,
		"contentBlockDelta", `{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{\"a\":"}}}`,
		"contentBlockDelta", `{"contentBlockIndex":1,"delta":{"toolUse":{"input":"1}"}}}`,
		"contentBlockStop", `{"contentBlockIndex":1}`,
		"messageStop", `{"stopReason":"tool_use"}`,
		"metadata", `{"usage":{"inputTokens":5,"outputTokens":7,"totalTokens":32,"cacheWriteInputTokens":20},"metrics":{"latencyMs":10}}`,
	)
	tr := NewStreamTranslator(Bedrock, Messages, "m", StreamOptions{})
	var wire strings.Builder
	for i, ev := range evs {
		out, err := tr.Translate(ev)
		g.Expect(err).NotTo(HaveOccurred())
		if i < len(evs)-1 {
			g.Expect(tr.Done()).To(BeFalse(), "the stream ends with the metadata")
		}
		for _, o := range out {
			wire.WriteString(o.String())
		}
	}
	g.Expect(tr.Done()).To(BeTrue())
	g.Expect(tr.Reported()).To(BeTrue())
	u := tr.Usage()
	g.Expect(u.InputTokens).To(Equal(int64(5)))
	g.Expect(u.CacheWriteTokens).To(HaveValue(Equal(int64(20))))
	g.Expect(u.OutputTokens).To(Equal(int64(7)))
	s := wire.String()
	g.Expect(s).To(ContainSubstring(`"text":"Hel"`))
	g.Expect(s).To(ContainSubstring(`"id":"tooluse_1"`))
	g.Expect(s).To(ContainSubstring(`"partial_json":"{\"a\":"`))
	g.Expect(s).To(ContainSubstring(`"stop_reason":"tool_use"`))
	g.Expect(s).To(ContainSubstring(`"cache_creation_input_tokens":20`))
	g.Expect(s).To(HaveSuffix("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))

	// An exception frame mid-stream ends the client's stream with an error.
	tr = NewStreamTranslator(Bedrock, ChatCompletions, "m", StreamOptions{})
	var last []Event
	for _, ev := range bedrockEvents("messageStart", `{"role":"assistant"}`,
		"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hi"}}`,
		"error", `{"error":{"type":"`+BedrockErrorType("modelStreamErrorException")+`","message":"model failed"}}`) {
		var err error
		last, err = tr.Translate(ev)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(tr.Done()).To(BeTrue())
	g.Expect(tr.Reported()).To(BeFalse())
	g.Expect(last).NotTo(BeEmpty())
	g.Expect(string(last[0].Data)).To(ContainSubstring("model failed"))

	// Cut before messageStop: an error; stopped without metadata: a
	// well-formed end with estimated usage.
	d := &bedrockDecoder{}
	out, _ := d.decode(Event{Name: "messageStart", Data: []byte(`{}`)}, nil)
	out = d.finish(out)
	g.Expect(out[len(out)-1].Kind).To(Equal(EvError))
	d = &bedrockDecoder{}
	out, _ = d.decode(Event{Name: "messageStop", Data: []byte(`{"stopReason":"end_turn"}`)}, nil)
	out = d.finish(out)
	g.Expect(out[len(out)-1].Kind).To(Equal(EvFinish))
	g.Expect(out[len(out)-1].UsageReported).To(BeFalse())
}

// TestBedrockEncoderRoundTrip: the encoder's stream decodes to the response
// it came from (the replay of a complete answer sent to a stream request).
func TestBedrockEncoderRoundTrip(t *testing.T) {
	g := NewWithT(t)
	r := &Response{Parts: []Part{{Type: PartText, Text: "hi there"}, {Type: PartToolCall, ID: "t1", Name: "f", Arguments: `{"x":1}`}},
		Stop: StopToolUse, Usage: Usage{InputTokens: 3, OutputTokens: 4, CacheReadTokens: ptr[int64](2)}}
	enc := NewStreamEncoder(Bedrock, "m", false)
	var evs []Event
	for _, se := range ResponseEvents(r) {
		evs = enc.Encode(se, evs)
	}
	tr := NewStreamTranslator(Bedrock, Responses, "m", StreamOptions{})
	for _, ev := range evs {
		_, err := tr.Translate(ev)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(tr.Done()).To(BeTrue())
	g.Expect(tr.Usage().PromptTokens()).To(Equal(int64(5)))
	g.Expect(tr.Usage().OutputTokens).To(Equal(int64(4)))
}

func TestBedrockErrorType(t *testing.T) {
	g := NewWithT(t)
	for exc, want := range map[string]int{"throttlingException": 429, "ThrottlingException": 429, "serviceUnavailableException": 529,
		"validationException": 400, "modelStreamErrorException": 500, "internalServerException": 500, "AccessDeniedException": 403} {
		g.Expect(errStatus(BedrockErrorType(exc))).To(Equal(want), exc)
	}
}
