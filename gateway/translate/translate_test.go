package translate

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/apierr"
)

func TestFieldRawAndSetField(t *testing.T) {
	body := []byte(`{ "stream" : true, "model":"claude-x" ,"messages":[{"role":"user","content":"say \"model\": \u00e9"}], "nested":{"model":"inner","x":{}}}`)
	for _, tc := range []struct {
		name string
		keys []string
		want string
		ok   bool
	}{
		{"top", []string{"model"}, `"claude-x"`, true},
		{"bool", []string{"stream"}, `true`, true},
		{"array", []string{"messages"}, `[{"role":"user","content":"say \"model\": \u00e9"}]`, true},
		{"nested", []string{"nested", "model"}, `"inner"`, true},
		{"missing", []string{"nope"}, ``, false},
		{"not an object", []string{"model", "x"}, ``, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			raw, ok := FieldRaw(body, tc.keys...)
			g.Expect(ok).To(Equal(tc.ok))
			g.Expect(string(raw)).To(Equal(tc.want))
		})
	}

	g := NewWithT(t)
	out, err := SetString(body, "up/model \"q\"", "model")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(Equal(strings.Replace(string(body), `"claude-x"`, `"up/model \"q\""`, 1)))

	out, err = SetField(body, []byte(`{"include_usage":true}`), "stream_options")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(Equal(`{"stream_options":{"include_usage":true}, "stream" : true,` + string(body[18:])))
	g.Expect(json.Valid(out)).To(BeTrue())

	out, err = SetField([]byte(`{"a":{}}`), []byte(`1`), "a", "b")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(Equal(`{"a":{"b":1}}`))

	_, err = SetField([]byte(`[1]`), []byte(`1`), "a")
	g.Expect(err).To(HaveOccurred())

	s, ok := FieldString([]byte(`{"error":{"message":"bad \"x\"\n"}}`), "error", "message")
	g.Expect(ok).To(BeTrue())
	g.Expect(s).To(Equal("bad \"x\"\n"))
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\s", "ctl\x01\n\r\t", "é ünï 😀", "bad\xffutf8", "\u2028sep"} {
		var back string
		NewWithT(t).Expect(json.Unmarshal(appendJSONString(nil, s), &back)).To(Succeed())
		var want string
		wb, _ := json.Marshal(s)
		_ = json.Unmarshal(wb, &want)
		NewWithT(t).Expect(back).To(Equal(want))
	}
}

func TestSSEReader(t *testing.T) {
	g := NewWithT(t)
	in := ": comment\r\nevent: message_start\r\ndata: {\"a\":1}\r\n\r\n" +
		"retry: 10\nid: 7\ndata: line1\ndata: line2\n\n\n" +
		"event: custom\ndata:nospace\n\n" +
		"data: " + strings.Repeat("x", 40000) + "\n\n" +
		"data: [DONE]"
	rd := NewSSEReader(strings.NewReader(in))
	var got []string
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		g.Expect(err).NotTo(HaveOccurred())
		d := string(ev.Data)
		if len(d) > 20 {
			d = fmt.Sprintf("len=%d", len(d))
		}
		got = append(got, ev.Name+"|"+d)
	}
	g.Expect(got).To(Equal([]string{`message_start|{"a":1}`, "|line1\nline2", "custom|nospace", "|len=40000", "|[DONE]"}))
}

// A reader that ends a stream in the middle of a burst holds the pooled
// buffer; Release gives it back, and the reader reads nothing more.
func TestSSEReaderRelease(t *testing.T) {
	g := NewWithT(t)
	burst := strings.Repeat("data: {\"x\":1}\n\n", 200) // one read larger than the wait buffer
	src := &countingReader{r: strings.NewReader(burst + "data: [DONE]\n\n")}
	rd := NewSSEReader(src)
	for range 100 { // past the wait buffer's 1 KiB: the rest of the burst is read into the pooled buffer
		_, err := rd.Next()
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(rd.big).NotTo(BeNil(), "the reader holds the pooled buffer mid-burst")

	rd.Release()
	g.Expect(rd.big).To(BeNil())
	reads := src.reads
	_, err := rd.Next()
	g.Expect(err).To(MatchError(errReleased))
	g.Expect(src.reads).To(Equal(reads), "a released reader does not read its source")
	rd.Release() // twice is harmless
}

type countingReader struct {
	r     io.Reader
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}

func TestEventWire(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Event{Name: "message_stop", Data: []byte(`{"type":"message_stop"}`)}.String()).
		To(Equal("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))
	g.Expect(DoneEvent.String()).To(Equal("data: [DONE]\n\n"))
}

// contractOrder checks the messages stream order of the contract.
func contractOrder(g Gomega, evs []Event) {
	g.Expect(len(evs)).To(BeNumerically(">=", 3))
	g.Expect(evs[0].Name).To(Equal("message_start"))
	g.Expect(normalize(evs[0].Data)).To(Equal(`{"message":{"content":[],"id":"msg_X","model":"client-model","role":"assistant","stop_reason":null,"stop_sequence":null,"type":"message","usage":{"input_tokens":0,"output_tokens":0}},"type":"message_start"}`))
	state, open := "start", -1
	for i, e := range evs[1:] {
		typ, _ := FieldString(e.Data, "type")
		g.Expect(typ).To(Equal(e.Name), "event %d", i+1)
		idx := -1
		if raw, ok := FieldRaw(e.Data, "index"); ok {
			_, err := fmt.Sscan(string(raw), &idx)
			g.Expect(err).NotTo(HaveOccurred(), "event %d: index %s", i+1, raw)
		}
		switch e.Name {
		case "content_block_start":
			g.Expect(state).To(BeElementOf("start", "stopped"))
			g.Expect(idx).To(Equal(open+1), "blocks are numbered in order")
			open, state = idx, "open"
		case "content_block_delta":
			g.Expect(state).To(Equal("open"))
			g.Expect(idx).To(Equal(open))
		case "content_block_stop":
			g.Expect(state).To(Equal("open"))
			g.Expect(idx).To(Equal(open))
			state = "stopped"
		case "message_delta":
			g.Expect(state).To(BeElementOf("start", "stopped"))
			_, ok := FieldString(e.Data, "delta", "stop_reason")
			g.Expect(ok).To(BeTrue(), "message_delta has a stop_reason")
			_, ok = FieldRaw(e.Data, "usage", "output_tokens")
			g.Expect(ok).To(BeTrue(), "message_delta has usage.output_tokens")
			state = "delta"
		case "message_stop":
			g.Expect(state).To(Equal("delta"))
			state = "end"
		default:
			g.Expect(e.Name).To(BeEmpty(), "unexpected event")
		}
	}
	g.Expect(state).To(Equal("end"))
}

func collect(t *testing.T, from, to Protocol, sse string, opts StreamOptions) ([]Event, *StreamTranslator) {
	t.Helper()
	tr := NewStreamTranslator(from, to, "client-model", opts)
	rd := NewSSEReader(strings.NewReader(sse))
	var all []Event
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		out, err := tr.Translate(ev)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		for _, o := range out {
			all = append(all, Event{Name: o.Name, Data: append([]byte(nil), o.Data...)})
		}
	}
	return append(all, tr.Finish()...), tr
}

func TestMessagesStreamFollowsContract(t *testing.T) {
	for _, from := range []Protocol{ChatCompletions, Responses} {
		t.Run(string(from), func(t *testing.T) {
			evs, _ := collect(t, from, Messages, fixtureSSE[from], StreamOptions{})
			contractOrder(NewWithT(t), evs)
		})
	}
	t.Run("text only from chat", func(t *testing.T) {
		sse := `data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}` + "\n\n" +
			`data: [DONE]` + "\n\n"
		evs, tr := collect(t, ChatCompletions, Messages, sse, StreamOptions{})
		g := NewWithT(t)
		contractOrder(g, evs)
		g.Expect(renderEvents(evs[1:])).To(Equal(
			`content_block_start {"content_block":{"text":"","type":"text"},"index":0,"type":"content_block_start"}` + "\n" +
				`content_block_delta {"delta":{"text":"Hi","type":"text_delta"},"index":0,"type":"content_block_delta"}` + "\n" +
				`content_block_stop {"index":0,"type":"content_block_stop"}` + "\n" +
				`message_delta {"delta":{"stop_reason":"max_tokens","stop_sequence":null},"type":"message_delta","usage":{"input_tokens":0,"output_tokens":1}}` + "\n" +
				`message_stop {"type":"message_stop"}` + "\n"))
		// No usage chunk: output estimated, nothing reported.
		g.Expect(tr.Reported()).To(BeFalse())
		u := tr.Usage()
		g.Expect(u.OutputTokens).To(Equal(int64(1)))
		g.Expect(u.ReportedTotalTokens).To(BeNil())
	})
}

func TestChatStreamUsageChunkOnlyWhenAsked(t *testing.T) {
	g := NewWithT(t)
	evs, _ := collect(t, Messages, ChatCompletions, fixtureMessagesStream, StreamOptions{IncludeUsage: false})
	g.Expect(evs[len(evs)-1].IsDone()).To(BeTrue())
	g.Expect(string(evs[len(evs)-2].Data)).To(ContainSubstring(`"finish_reason":"tool_calls"`))
	for _, e := range evs {
		g.Expect(string(e.Data)).NotTo(ContainSubstring(`"usage"`))
	}
}

func TestTruncatedUpstreamStreamEndsWithError(t *testing.T) {
	cut := fixtureChatStream[:strings.Index(fixtureChatStream, `"finish_reason":"tool_calls"`)]
	cut = cut[:strings.LastIndex(cut, "\n\n")+2]
	for _, to := range []Protocol{Messages, Responses, ChatCompletions} {
		t.Run(string(to), func(t *testing.T) {
			g := NewWithT(t)
			from := ChatCompletions
			if to == ChatCompletions {
				from = Messages
				cut = fixtureMessagesStream[:strings.Index(fixtureMessagesStream, "event: message_delta")]
			}
			evs, tr := collect(t, from, to, cut, StreamOptions{})
			g.Expect(tr.Done()).To(BeTrue())
			last := evs[len(evs)-1]
			switch to {
			case Messages:
				g.Expect(last.Name).To(Equal("error"))
				g.Expect(string(last.Data)).To(Equal(`{"type":"error","error":{"type":"api_error","message":"upstream stream ended without a finish_reason"}}`))
			case Responses:
				g.Expect(last.Name).To(Equal("response.failed"))
			case ChatCompletions:
				g.Expect(string(last.Data)).To(HavePrefix(`{"error":{"message":"upstream stream ended before message_stop"`))
			}
		})
	}
}

func TestPassThroughStreams(t *testing.T) {
	t.Run("messages", func(t *testing.T) {
		g := NewWithT(t)
		tr := NewStreamTranslator(Messages, Messages, "client-model", StreamOptions{})
		rd := NewSSEReader(strings.NewReader(fixtureMessagesStream))
		var n int
		for {
			ev, err := rd.Next()
			if err != nil {
				break
			}
			orig := string(ev.Data)
			out, err := tr.Translate(ev)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(HaveLen(1))
			if ev.Name == "message_start" {
				g.Expect(string(out[0].Data)).To(Equal(strings.Replace(orig, `"claude-x-20250101"`, `"client-model"`, 1)))
			} else {
				g.Expect(string(out[0].Data)).To(Equal(orig), "bytes pass through")
			}
			n++
		}
		g.Expect(n).To(Equal(17))
		g.Expect(tr.Done()).To(BeTrue())
		g.Expect(tr.Reported()).To(BeTrue())
		g.Expect(tr.Usage()).To(Equal(Usage{InputTokens: 100, OutputTokens: 42, CacheReadTokens: ptr(int64(300)), CacheWriteTokens: ptr(int64(20))}))
	})
	t.Run("chat drops the usage chunk the gateway asked for", func(t *testing.T) {
		g := NewWithT(t)
		evs, tr := collect(t, ChatCompletions, ChatCompletions, fixtureChatStream, StreamOptions{IncludeUsage: false})
		g.Expect(evs).To(HaveLen(8))
		g.Expect(evs[7].IsDone()).To(BeTrue())
		for _, e := range evs[:7] {
			m, _ := FieldString(e.Data, "model")
			g.Expect(m).To(Equal("client-model"))
		}
		g.Expect(tr.Usage()).To(Equal(Usage{InputTokens: 120, OutputTokens: 42, CacheReadTokens: ptr(int64(300)), ReportedTotalTokens: ptr(int64(462)), ReasoningTokens: 10}))

		evs, _ = collect(t, ChatCompletions, ChatCompletions, fixtureChatStream, StreamOptions{IncludeUsage: true})
		g.Expect(evs).To(HaveLen(9))
	})
	t.Run("responses", func(t *testing.T) {
		g := NewWithT(t)
		evs, tr := collect(t, Responses, Responses, fixtureResponsesStream, StreamOptions{})
		g.Expect(evs).To(HaveLen(15))
		m, _ := FieldString(evs[14].Data, "response", "model")
		g.Expect(m).To(Equal("client-model"))
		g.Expect(tr.Usage().OutputTokens).To(Equal(int64(42)))
		g.Expect(tr.Usage().InputTokens).To(Equal(int64(120)))
	})
}

func TestResponseUsage(t *testing.T) {
	for _, tc := range []struct {
		p    Protocol
		want Usage
	}{
		{Messages, Usage{InputTokens: 100, OutputTokens: 42, CacheReadTokens: ptr(int64(300)), CacheWriteTokens: ptr(int64(20))}},
		{ChatCompletions, Usage{InputTokens: 120, OutputTokens: 42, CacheReadTokens: ptr(int64(300)), ReportedTotalTokens: ptr(int64(462)), ReasoningTokens: 10}},
		{Responses, Usage{InputTokens: 120, OutputTokens: 42, CacheReadTokens: ptr(int64(300)), ReportedTotalTokens: ptr(int64(462)), ReasoningTokens: 10}},
	} {
		t.Run(string(tc.p), func(t *testing.T) {
			g := NewWithT(t)
			u, ok := ResponseUsage(tc.p, []byte(fixtureResps[tc.p]))
			g.Expect(ok).To(BeTrue())
			g.Expect(u).To(Equal(tc.want))
			g.Expect(u.PromptTokens()).To(Equal(int64(420)))
		})
	}
	g := NewWithT(t)
	u, ok := ResponseUsage(Messages, []byte(`{"usage":{"input_tokens":5,"output_tokens":2}}`))
	g.Expect(ok).To(BeTrue())
	g.Expect(u.CacheReadTokens).To(BeNil(), "not reported stays nil")
	_, ok = ResponseUsage(ChatCompletions, []byte(`{"id":"x"}`))
	g.Expect(ok).To(BeFalse())
}

func TestStopReasonMapping(t *testing.T) {
	type wire struct{ messages, chat, status, incomplete string }
	for stop, w := range map[StopReason]wire{
		StopEndTurn:       {"end_turn", "stop", "completed", ""},
		StopMaxTokens:     {"max_tokens", "length", "incomplete", "max_output_tokens"},
		StopSequence:      {"stop_sequence", "stop", "completed", ""},
		StopToolUse:       {"tool_use", "tool_calls", "completed", ""},
		StopContentFilter: {"refusal", "content_filter", "incomplete", "content_filter"},
	} {
		t.Run(string(stop), func(t *testing.T) {
			g := NewWithT(t)
			r := &Response{Model: "m", Stop: stop, Parts: []Part{{Type: PartText, Text: "x"}}}
			if stop == StopToolUse {
				r.Parts = append(r.Parts, Part{Type: PartToolCall, ID: "call_1", Name: "f", Arguments: "{}"})
			}
			mb, _ := EncodeResponse(Messages, r)
			s, _ := FieldString(mb, "stop_reason")
			g.Expect(s).To(Equal(w.messages))
			cb, _ := EncodeResponse(ChatCompletions, r)
			var c chatResponse
			g.Expect(json.Unmarshal(cb, &c)).To(Succeed())
			g.Expect(*c.Choices[0].FinishReason).To(Equal(w.chat))
			rb, _ := EncodeResponse(Responses, r)
			s, _ = FieldString(rb, "status")
			g.Expect(s).To(Equal(w.status))
			s, _ = FieldString(rb, "incomplete_details", "reason")
			g.Expect(s).To(Equal(w.incomplete))

			// And back.
			back := stop
			if stop == StopSequence {
				back = StopEndTurn // chat and responses do not tell a stop sequence apart
			}
			for p, b := range map[Protocol][]byte{Messages: mb, ChatCompletions: cb, Responses: rb} {
				d, err := DecodeResponse(p, b)
				g.Expect(err).NotTo(HaveOccurred())
				if p == Messages {
					g.Expect(d.Stop).To(Equal(stop))
				} else {
					g.Expect(d.Stop).To(Equal(back), "from %s", p)
				}
			}
		})
	}
}

func TestToolCallRoundTrip(t *testing.T) {
	// A messages conversation with a tool call and its result survives
	// messages → X → messages for both OpenAI protocols.
	orig, err := DecodeRequest(Messages, []byte(fixtureMessagesRequest))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for _, via := range []Protocol{ChatCompletions, Responses} {
		t.Run(string(via), func(t *testing.T) {
			g := NewWithT(t)
			mid, _, err := TranslateRequest(Messages, via, []byte(fixtureMessagesRequest), "m")
			g.Expect(err).NotTo(HaveOccurred())
			back, _, err := TranslateRequest(via, Messages, mid, "m")
			g.Expect(err).NotTo(HaveOccurred())
			got, err := DecodeRequest(Messages, back)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Messages).To(Equal(orig.Messages))
			g.Expect(got.Tools).To(HaveLen(1))
			g.Expect(got.Tools[0].Name).To(Equal("get_weather"))
			g.Expect(got.System).To(Equal(orig.System))
		})
	}
}

func TestRequestParameters(t *testing.T) {
	g := NewWithT(t)
	// max tokens: chat max_tokens (legacy) is read; messages needs a value.
	out, _, err := TranslateRequest(ChatCompletions, Messages, []byte(`{"model":"a","max_tokens":77,"temperature":1.7,"stop":"X","messages":[{"role":"developer","content":"D"},{"role":"user","content":"hi"}]}`), "b")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(normalize(out)).To(Equal(`{"max_tokens":77,"messages":[{"content":[{"text":"hi","type":"text"}],"role":"user"}],"model":"b","stop_sequences":["X"],"system":"D","temperature":1}`))

	out, _, err = TranslateRequest(Responses, Messages, []byte(`{"model":"a","input":"hi","stream":true}`), "b")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(normalize(out)).To(Equal(fmt.Sprintf(`{"max_tokens":%d,"messages":[{"content":[{"text":"hi","type":"text"}],"role":"user"}],"model":"b","stream":true}`, DefaultMaxTokens)))

	// A stream to chat asks for the usage chunk.
	out, _, err = TranslateRequest(Messages, ChatCompletions, []byte(`{"model":"a","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`), "b")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(normalize(out)).To(Equal(`{"max_completion_tokens":10,"messages":[{"content":"hi","role":"user"}],"model":"b","stream":true,"stream_options":{"include_usage":true}}`))

	// Reasoning effort ↔ thinking budget.
	out, _, err = TranslateRequest(Responses, Messages, []byte(`{"model":"a","input":"hi","max_output_tokens":20000,"reasoning":{"effort":"high"},"temperature":0.3}`), "b")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(normalize(out)).To(Equal(`{"max_tokens":20000,"messages":[{"content":[{"text":"hi","type":"text"}],"role":"user"}],"model":"b","thinking":{"budget_tokens":16384,"type":"enabled"}}`))
	out, _, err = TranslateRequest(Messages, ChatCompletions, []byte(`{"model":"a","max_tokens":9000,"thinking":{"type":"enabled","budget_tokens":4000},"messages":[{"role":"user","content":"hi"}],"tool_choice":{"type":"any"},"tools":[{"name":"f","input_schema":{"type":"object"}}]}`), "b")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(normalize(out)).To(Equal(`{"max_completion_tokens":9000,"messages":[{"content":"hi","role":"user"}],"model":"b","reasoning_effort":"medium","tool_choice":"required","tools":[{"function":{"name":"f","parameters":{"type":"object"}},"type":"function"}]}`))

	// Same protocol: only the model changes, byte for byte.
	body := []byte("{\"model\" : \"a\",\n \"z\":1, \"messages\":[{\"role\":\"user\",\"content\":\"\\u00e9\"}]}")
	out, _, err = TranslateRequest(Messages, Messages, body, "b")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(Equal(strings.Replace(string(body), `"a"`, `"b"`, 1)))
}

func TestImages(t *testing.T) {
	g := NewWithT(t)
	mt, data, ok := splitDataURL("data:image/jpeg;base64,AAA=")
	g.Expect(ok).To(BeTrue())
	g.Expect(mt + " " + data).To(Equal("image/jpeg AAA="))
	_, _, ok = splitDataURL("https://x/y.png")
	g.Expect(ok).To(BeFalse())

	r, err := DecodeRequest(ChatCompletions, []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/webp;base64,UklG","detail":"high"}}]}]}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Messages[0].Parts).To(Equal([]Part{{Type: PartImage, MediaType: "image/webp", Data: "UklG"}}))
	out, err := EncodeRequest(Messages, r, "m")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(ContainSubstring(`{"type":"image","source":{"type":"base64","media_type":"image/webp","data":"UklG"}}`))
}

func TestErrorBodies(t *testing.T) {
	g := NewWithT(t)
	g.Expect(string(ErrorBody(Messages, 429, "slow down"))).To(Equal(`{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`))
	g.Expect(string(ErrorBody(Messages, 400, "bad"))).To(Equal(`{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`))
	g.Expect(string(ErrorBody(ChatCompletions, 500, "oops"))).To(Equal(`{"error":{"message":"oops","type":"server_error","param":null,"code":null}}`))
	g.Expect(string(ErrorBody(Responses, 401, "who"))).To(Equal(`{"error":{"message":"who","type":"authentication_error","param":null,"code":null}}`))
	// 503 and 504 by the same table as the gateway's own errors (apierr).
	g.Expect(string(ErrorBody(Messages, 503, "busy"))).To(Equal(`{"type":"error","error":{"type":"api_error","message":"busy"}}`))
	g.Expect(string(ErrorBody(Messages, 504, "slow"))).To(Equal(`{"type":"error","error":{"type":"timeout_error","message":"slow"}}`))
	g.Expect(string(ErrorBody(Messages, 529, "full"))).To(Equal(`{"type":"error","error":{"type":"overloaded_error","message":"full"}}`))
	g.Expect(string(ErrorBody(ChatCompletions, 503, "busy"))).To(Equal(`{"error":{"message":"busy","type":"server_error","param":null,"code":null}}`))
	g.Expect(string(ErrorBody(ChatCompletions, 504, "slow"))).To(Equal(`{"error":{"message":"slow","type":"server_error","param":null,"code":null}}`))
	for _, status := range []int{400, 401, 402, 403, 404, 405, 413, 422, 429, 500, 502, 503, 504, 529} {
		typ, _ := FieldString(ErrorBody(Messages, status, "m"), "error", "type")
		g.Expect(typ).To(Equal(apierr.MessagesType(status)), "messages %d", status)
		for _, p := range []Protocol{ChatCompletions, Responses} {
			typ, _ = FieldString(ErrorBody(p, status, "m"), "error", "type")
			g.Expect(typ).To(Equal(apierr.OpenAIType(status)), "%s %d", p, status)
		}
	}
	m, ok := ErrorMessage([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	g.Expect(ok).To(BeTrue())
	g.Expect(m).To(Equal("Overloaded"))
}

func TestIDs(t *testing.T) {
	g := NewWithT(t)
	r := &Response{ID: "whatever", Model: "m", Parts: []Part{{Type: PartText, Text: "x"}}}
	for p, prefix := range map[Protocol]string{Messages: "msg_", ChatCompletions: "chatcmpl-", Responses: "resp_"} {
		b, err := EncodeResponse(p, r)
		g.Expect(err).NotTo(HaveOccurred())
		id, _ := FieldString(b, "id")
		g.Expect(id).To(HavePrefix(prefix))
		g.Expect(len(id)).To(Equal(len(prefix) + 24))
	}
}

func TestResponsesDecoderToleratesMissingContentPart(t *testing.T) {
	g := NewWithT(t)
	sse := "event: response.created\n" + `data: {"type":"response.created","response":{"id":"resp_1","status":"in_progress"}}` + "\n\n" +
		"event: response.output_text.delta\n" + `data: {"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":"Hi"}` + "\n\n" +
		"event: response.output_item.done\n" + `data: {"type":"response.output_item.done","output_index":0,"item":{"type":"message"}}` + "\n\n" +
		"event: response.incomplete\n" + `data: {"type":"response.incomplete","response":{"id":"resp_1","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":3,"output_tokens":1,"total_tokens":4}}}` + "\n\n"
	evs, tr := collect(t, Responses, Messages, sse, StreamOptions{})
	contractOrder(g, evs)
	g.Expect(string(evs[len(evs)-2].Data)).To(Equal(`{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"input_tokens":3,"output_tokens":1}}`))
	g.Expect(tr.Usage().ReportedTotalTokens).To(Equal(ptr(int64(4))))
}

func TestMessagesUpstreamEdgeCases(t *testing.T) {
	g := NewWithT(t)
	// Server tool blocks are dropped with their deltas; a mid-stream error
	// is forwarded in the client's shape.
	sse := "event: message_start\n" + `data: {"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":5,"output_tokens":1}}}` + "\n\n" +
		"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{}"}}` + "\n\n" +
		"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
		"event: content_block_start\n" + `data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":"Hi"}}` + "\n\n" +
		"event: error\n" + `data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` + "\n\n"
	// Anthropic's overloaded_error (529) reaches a chat client as OpenAI's
	// type for that status.
	evs, _ := collect(t, Messages, ChatCompletions, sse, StreamOptions{})
	g.Expect(renderEvents(evs)).To(Equal(
		`{"choices":[{"delta":{"content":"","role":"assistant"},"finish_reason":null,"index":0,"logprobs":null}],"created":0,"id":"chatcmpl-X","model":"client-model","object":"chat.completion.chunk"}` + "\n" +
			`{"choices":[{"delta":{"content":"Hi"},"finish_reason":null,"index":0,"logprobs":null}],"created":0,"id":"chatcmpl-X","model":"client-model","object":"chat.completion.chunk"}` + "\n" +
			`{"error":{"code":null,"message":"Overloaded","param":null,"type":"server_error"}}` + "\n"))

	// tool_result content given as blocks is flattened to text.
	r, err := DecodeRequest(Messages, []byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}]}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Messages[0].Parts).To(Equal([]Part{{Type: PartToolResult, ID: "t1", Text: "ab", IsError: true}}))
	g.Expect(r.LastUserText()).To(Equal("ab"))
}

func FuzzSetModel(f *testing.F) {
	for _, s := range []string{`{}`, `{"model":"a"}`, ` { "x" : [1,{"model":2}], "model" : null } `, fixtureMessagesRequest, fixtureChatRequest, fixtureResponsesRequest, `{"a":"\"}"}`} {
		f.Add([]byte(s), "new/model")
	}
	f.Fuzz(func(t *testing.T, body []byte, model string) {
		var obj map[string]json.RawMessage
		if json.Unmarshal(body, &obj) != nil || model == "" {
			return
		}
		out, err := SetModel(body, model)
		if err != nil {
			t.Fatalf("SetModel(%q): %v", body, err)
		}
		var back map[string]any
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("invalid JSON from %q: %q", body, out)
		}
		var want string
		wb, _ := json.Marshal(model)
		_ = json.Unmarshal(wb, &want) // encoding/json's handling of invalid UTF-8
		if got, _ := back["model"].(string); got != want {
			t.Fatalf("model %q, want %q", got, model)
		}
	})
}

// TestTranslatedStreamErrorsUseTheClientsTable: an upstream's error event
// after output began reaches a client of another protocol with the type
// apierr's table of the client's family gives the status the upstream's type
// stands for; never the other family's type.
func TestTranslatedStreamErrorsUseTheClientsTable(t *testing.T) {
	const (
		mStart = "event: message_start\n" + `data: {"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":5,"output_tokens":1}}}` + "\n\n"
		cStart = `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"}}]}` + "\n\n"
		rStart = "event: response.created\n" + `data: {"type":"response.created","response":{"id":"resp_1","status":"in_progress"}}` + "\n\n"
	)
	mErr := func(typ string) string {
		return mStart + "event: error\n" + `data: {"type":"error","error":{"type":"` + typ + `","message":"m"}}` + "\n\n"
	}
	cErr := func(typ string) string {
		return cStart + `data: {"error":{"message":"m","type":"` + typ + `","param":null,"code":null}}` + "\n\n"
	}
	for _, c := range []struct {
		name                     string
		from                     Protocol
		sse                      string
		messagesType, openAIType string
	}{
		{"anthropic overloaded", Messages, mErr("overloaded_error"), "overloaded_error", "server_error"},
		{"anthropic timeout", Messages, mErr("timeout_error"), "timeout_error", "server_error"},
		{"anthropic api error", Messages, mErr("api_error"), "api_error", "server_error"},
		{"anthropic rate limited", Messages, mErr("rate_limit_error"), "rate_limit_error", "rate_limit_error"},
		{"anthropic unknown type", Messages, mErr("something_new"), "api_error", "server_error"},
		{"openai server error", ChatCompletions, cErr("server_error"), "api_error", "server_error"},
		{"openai rate limited", ChatCompletions, cErr("rate_limit_error"), "rate_limit_error", "rate_limit_error"},
		{"responses error event", Responses, rStart + "event: error\n" + `data: {"type":"error","code":"server_error","message":"m"}` + "\n\n", "api_error", "server_error"},
		{"responses failed", Responses, rStart + "event: response.failed\n" + `data: {"type":"response.failed","response":{"id":"resp_1","status":"failed","error":{"code":"server_error","message":"m"}}}` + "\n\n", "api_error", "server_error"},
		// A stream that just stops is a bad gateway: 502.
		{"anthropic cut", Messages, mStart, "api_error", "server_error"},
		{"openai cut", ChatCompletions, cStart, "api_error", "server_error"},
	} {
		for _, to := range []Protocol{Messages, ChatCompletions, Responses} {
			if to == c.from {
				continue // the pass-through stream forwards the upstream's own event
			}
			t.Run(c.name+" to "+string(to), func(t *testing.T) {
				g := NewWithT(t)
				evs, _ := collect(t, c.from, to, c.sse, StreamOptions{})
				last := evs[len(evs)-1].Data
				var typ string
				switch to {
				case Messages:
					typ, _ = FieldString(last, "error", "type")
					g.Expect(typ).To(Equal(c.messagesType))
				case ChatCompletions:
					typ, _ = FieldString(last, "error", "type")
					g.Expect(typ).To(Equal(c.openAIType))
				case Responses:
					typ, _ = FieldString(last, "response", "error", "code")
					g.Expect(typ).To(Equal(c.openAIType))
				}
				g.Expect(string(last)).To(ContainSubstring(`"message":`))
			})
		}
	}
}
