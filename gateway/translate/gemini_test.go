package translate

import (
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestGeminiRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		from Protocol
		body string
		want string
	}{
		{
			name: "chat: system, turns, generation config",
			from: ChatCompletions,
			body: `{"model":"m","max_tokens":100,"temperature":0.5,"top_p":0.9,"stop":["END"],
				"messages":[{"role":"system","content":"be terse"},{"role":"user","content":"hi"},
				{"role":"assistant","content":"hello"},{"role":"user","content":[{"type":"text","text":"see"},
				{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`,
			want: `{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"text":"hello"}]},
				{"role":"user","parts":[{"text":"see"},{"inlineData":{"mimeType":"image/png","data":"AAAA"}}]}],
				"systemInstruction":{"parts":[{"text":"be terse"}]},
				"generationConfig":{"maxOutputTokens":100,"temperature":0.5,"topP":0.9,"stopSequences":["END"]}}`,
		},
		{
			name: "chat: tools, forced tool, call and results merged into one turn",
			from: ChatCompletions,
			body: `{"model":"m","tools":[{"type":"function","function":{"name":"get_weather","description":"weather",
				"parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
				"tool_choice":{"type":"function","function":{"name":"get_weather"}},
				"messages":[{"role":"user","content":"weather?"},
				{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
				{"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]},
				{"role":"tool","tool_call_id":"call_1","content":"sunny"},
				{"role":"tool","tool_call_id":"call_2","content":"{\"sky\":\"rain\"}"}]}`,
			want: `{"contents":[{"role":"user","parts":[{"text":"weather?"}]},
				{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"skip_thought_signature_validator"},{"functionCall":{"name":"get_weather","args":{"city":"Rome"}},"thoughtSignature":"skip_thought_signature_validator"}]},
				{"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"output":"sunny"}}},{"functionResponse":{"name":"get_weather","response":{"sky":"rain"}}}]}],
				"tools":[{"functionDeclarations":[{"name":"get_weather","description":"weather","parametersJsonSchema":{"type":"object","properties":{"city":{"type":"string"}}}}]}],
				"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["get_weather"]}}}`,
		},
		{
			name: "messages: failed tool result, thinking budget",
			from: Messages,
			body: `{"model":"m","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},"system":"sys",
				"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},
				"messages":[{"role":"user","content":"go"},
				{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"content":"boom"}]}]}`,
			want: `{"contents":[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[{"functionCall":{"name":"f","args":{}},"thoughtSignature":"skip_thought_signature_validator"}]},
				{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"error":"boom"}}}]}],
				"systemInstruction":{"parts":[{"text":"sys"}]},
				"tools":[{"functionDeclarations":[{"name":"f","parametersJsonSchema":{"type":"object"}}]}],
				"toolConfig":{"functionCallingConfig":{"mode":"ANY"}},
				"generationConfig":{"maxOutputTokens":2048,"thinkingConfig":{"includeThoughts":true,"thinkingBudget":1024}}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out, _, err := TranslateRequest(tc.from, Gemini, []byte(tc.body), "gemini-x")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(MatchJSON(tc.want))
		})
	}

	g := NewWithT(t)
	_, _, err := TranslateRequest(ChatCompletions, Gemini, []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`), "g")
	g.Expect(err).To(MatchError(errGeminiImageURL))
	_, err = DecodeRequest(Gemini, []byte(`{}`))
	g.Expect(err).To(MatchError(errUpstreamOnly))
}

func TestGeminiUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		meta string
		want Usage
	}{
		{"plain", `{"promptTokenCount":10,"candidatesTokenCount":5,"totalTokenCount":15}`,
			Usage{InputTokens: 10, OutputTokens: 5, ReportedTotalTokens: ptr[int64](15)}},
		{"cached and thoughts", `{"promptTokenCount":100,"cachedContentTokenCount":60,"candidatesTokenCount":7,"thoughtsTokenCount":20,"totalTokenCount":127}`,
			Usage{InputTokens: 40, CacheReadTokens: ptr[int64](60), OutputTokens: 27, ReasoningTokens: 20, ReportedTotalTokens: ptr[int64](127)}},
		{"tool-use prompt", `{"promptTokenCount":10,"toolUsePromptTokenCount":3,"candidatesTokenCount":2,"totalTokenCount":15}`,
			Usage{InputTokens: 13, OutputTokens: 2, ReportedTotalTokens: ptr[int64](15)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			u, ok := ResponseUsage(Gemini, []byte(`{"candidates":[],"usageMetadata":`+tc.meta+`}`))
			g.Expect(ok).To(BeTrue())
			g.Expect(u).To(Equal(tc.want))
			// The ledger's total is Google's total.
			g.Expect(u.TotalTokens()).To(Equal(*tc.want.ReportedTotalTokens))
		})
	}
	_, ok := ResponseUsage(Gemini, []byte(`{"candidates":[]}`))
	NewWithT(t).Expect(ok).To(BeFalse())
}

func TestGeminiResponse(t *testing.T) {
	const usage = `"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":4,"thoughtsTokenCount":2,"totalTokenCount":15}`
	for _, tc := range []struct {
		name string
		to   Protocol
		body string
		want string
	}{
		{
			name: "text to chat",
			to:   ChatCompletions,
			body: `{"candidates":[{"content":{"role":"model","parts":[{"text":"thinking...","thought":true},{"text":"Hello"},{"text":" world"}]},"finishReason":"STOP","index":0}],` + usage + `,"modelVersion":"gemini-x","responseId":"r1"}`,
			want: `{"id":"chatcmpl-X","object":"chat.completion","created":0,"model":"client-model","choices":[{"index":0,"message":{"role":"assistant","content":"Hello world"},"logprobs":null,"finish_reason":"stop"}],
				"usage":{"prompt_tokens":9,"completion_tokens":6,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":2}}}`,
		},
		{
			name: "function call to messages",
			to:   Messages,
			body: `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"id":"fc-1","name":"get_weather","args":{"city":"Paris"}}}]},"finishReason":"STOP","index":0}],` + usage + `}`,
			want: `{"id":"msg_X","type":"message","role":"assistant","model":"client-model","content":[{"type":"tool_use","id":"fc-1","name":"get_weather","input":{"city":"Paris"}}],
				"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":6}}`,
		},
		{
			name: "max tokens",
			to:   Messages,
			body: `{"candidates":[{"content":{"role":"model","parts":[{"text":"Hel"}]},"finishReason":"MAX_TOKENS","index":0}],` + usage + `}`,
			want: `{"id":"msg_X","type":"message","role":"assistant","model":"client-model","content":[{"type":"text","text":"Hel"}],
				"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":6}}`,
		},
		{
			name: "safety block is a content filter",
			to:   ChatCompletions,
			body: `{"candidates":[{"finishReason":"SAFETY","index":0}],` + usage + `}`,
			want: `{"id":"chatcmpl-X","object":"chat.completion","created":0,"model":"client-model","choices":[{"index":0,"message":{"role":"assistant","content":""},"logprobs":null,"finish_reason":"content_filter"}],
				"usage":{"prompt_tokens":9,"completion_tokens":6,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":2}}}`,
		},
		{
			name: "blocked prompt",
			to:   Messages,
			body: `{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9}}`,
			want: `{"id":"msg_X","type":"message","role":"assistant","model":"client-model","content":[],
				"stop_reason":"refusal","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":0}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out, _, err := TranslateResponse(Gemini, tc.to, []byte(tc.body), "client-model", nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(normalize(out)).To(MatchJSON(tc.want))
		})
	}
}

func TestGeminiResponseToolCallIDs(t *testing.T) {
	g := NewWithT(t)
	r, err := DecodeResponse(Gemini, []byte(`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"a":1}}},{"functionCall":{"name":"f"}}]},"finishReason":"STOP"}]}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Parts).To(HaveLen(2))
	g.Expect(r.Parts[0].ID).To(HavePrefix("call_"))
	g.Expect(r.Parts[0].ID).NotTo(Equal(r.Parts[1].ID))
	g.Expect(r.Parts[0].Arguments).To(Equal(`{"a":1}`))
	g.Expect(r.Parts[1].Arguments).To(Equal(`{}`))
	g.Expect(r.Stop).To(Equal(StopToolUse))
}

func geminiSSE(chunks ...string) string {
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString("data: " + c + "\r\n\r\n")
	}
	return b.String()
}

func TestGeminiStream(t *testing.T) {
	text := geminiSSE(
		`{"candidates":[{"content":{"parts":[{"text":"hmm","thought":true}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9},"responseId":"r1"}`,
		`{"candidates":[{"content":{"parts":[{"text":"Hel"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":1,"totalTokenCount":10},"responseId":"r1"}`,
		`{"candidates":[{"content":{"parts":[{"text":"lo"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":9,"cachedContentTokenCount":4,"candidatesTokenCount":2,"thoughtsTokenCount":3,"totalTokenCount":14},"responseId":"r1"}`,
	)
	tools := geminiSSE(
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}}}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":20,"candidatesTokenCount":8,"totalTokenCount":28}}`,
	)
	for _, tc := range []struct {
		name      string
		sse       string
		to        Protocol
		want      string
		wantUsage Usage
	}{
		{
			name: "text and thoughts to messages", sse: text, to: Messages,
			want: `message_start {"message":{"content":[],"id":"msg_X","model":"client-model","role":"assistant","stop_reason":null,"stop_sequence":null,"type":"message","usage":{"input_tokens":0,"output_tokens":0}},"type":"message_start"}
content_block_start {"content_block":{"signature":"","thinking":"","type":"thinking"},"index":0,"type":"content_block_start"}
content_block_delta {"delta":{"thinking":"hmm","type":"thinking_delta"},"index":0,"type":"content_block_delta"}
content_block_stop {"index":0,"type":"content_block_stop"}
content_block_start {"content_block":{"text":"","type":"text"},"index":1,"type":"content_block_start"}
content_block_delta {"delta":{"text":"Hel","type":"text_delta"},"index":1,"type":"content_block_delta"}
content_block_delta {"delta":{"text":"lo","type":"text_delta"},"index":1,"type":"content_block_delta"}
content_block_stop {"index":1,"type":"content_block_stop"}
message_delta {"delta":{"stop_reason":"end_turn","stop_sequence":null},"type":"message_delta","usage":{"cache_read_input_tokens":4,"input_tokens":5,"output_tokens":5}}
message_stop {"type":"message_stop"}
`,
			wantUsage: Usage{InputTokens: 5, CacheReadTokens: ptr[int64](4), OutputTokens: 5, ReasoningTokens: 3, ReportedTotalTokens: ptr[int64](14)},
		},
		{
			name: "function call to chat", sse: tools, to: ChatCompletions,
			wantUsage: Usage{InputTokens: 20, OutputTokens: 8, ReportedTotalTokens: ptr[int64](28)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out, tr, err := translateAll(Gemini, tc.to, tc.sse, StreamOptions{IncludeUsage: true})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(tr.Done()).To(BeTrue())
			g.Expect(tr.Reported()).To(BeTrue())
			g.Expect(tr.Usage()).To(Equal(tc.wantUsage))
			if tc.want != "" {
				g.Expect(out).To(HavePrefix(tc.want))
			}
			if tc.to == ChatCompletions {
				g.Expect(out).To(ContainSubstring(`"name":"get_weather"`))
				g.Expect(out).To(ContainSubstring(`"arguments":"{\"city\":\"Paris\"}"`))
				g.Expect(out).To(ContainSubstring(`"finish_reason":"tool_calls"`))
				g.Expect(out).To(HaveSuffix("[DONE]\n"))
			}
		})
	}
}

func TestGeminiStreamEndings(t *testing.T) {
	g := NewWithT(t)
	// A stream cut before a finishReason ends with an error event.
	out, tr, err := translateAll(Gemini, Messages, geminiSSE(`{"candidates":[{"content":{"parts":[{"text":"Hel"}]}}]}`), StreamOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tr.Reported()).To(BeFalse())
	g.Expect(out).To(ContainSubstring("\nerror {"))

	// An error chunk mid-stream keeps the upstream's status.
	out, _, err = translateAll(Gemini, ChatCompletions, geminiSSE(`{"candidates":[{"content":{"parts":[{"text":"a"}]}}]}`, `{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`), StreamOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("overloaded"))

	// A blocked prompt finishes as a content filter with the prompt billed.
	_, tr, err = translateAll(Gemini, Messages, geminiSSE(`{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":7,"totalTokenCount":7}}`), StreamOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tr.Done()).To(BeTrue())
	g.Expect(tr.Usage().InputTokens).To(Equal(int64(7)))
}

// TestGeminiReplay: a complete answer replayed through the gemini stream
// encoder decodes to the same parts, stop reason and usage.
func TestGeminiReplay(t *testing.T) {
	g := NewWithT(t)
	body := `{"candidates":[{"content":{"parts":[{"text":"a","thought":true},{"text":"hi"},{"functionCall":{"id":"c1","name":"f","args":{"x":1}}}]},"finishReason":"STOP"}],
		"usageMetadata":{"promptTokenCount":10,"cachedContentTokenCount":2,"candidatesTokenCount":4,"thoughtsTokenCount":1,"totalTokenCount":15}}`
	r, err := DecodeResponse(Gemini, []byte(body))
	g.Expect(err).NotTo(HaveOccurred())
	enc := NewStreamEncoder(Gemini, "m", true)
	var evs []Event
	for _, se := range ResponseEvents(r) {
		evs = enc.Encode(se, evs)
	}
	var sse strings.Builder
	for _, e := range evs {
		g.Expect(json.Valid(e.Data)).To(BeTrue())
		sse.Write(e.AppendSSE(nil))
	}
	out, tr, err := translateAll(Gemini, Messages, sse.String(), StreamOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tr.Done()).To(BeTrue())
	g.Expect(tr.Usage()).To(Equal(r.Usage))
	g.Expect(out).To(ContainSubstring(`"stop_reason":"tool_use"`))
	g.Expect(out).To(ContainSubstring(`"partial_json":"{\"x\":1}"`))
}
