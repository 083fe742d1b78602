package translate

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Codec of the chat_completions protocol (OpenAI Chat Completions wire
// format).

type cReq struct {
	Model               string          `json:"model"`
	Messages            []cMsg          `json:"messages"`
	MaxTokens           *int64          `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	Stop                json.RawMessage `json:"stop,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *cStreamOptions `json:"stream_options,omitempty"`
	Tools               []cTool         `json:"tools,omitempty"`
	ToolChoice          json.RawMessage `json:"tool_choice,omitempty"`
	ReasoningEffort     string          `json:"reasoning_effort,omitempty"`
	User                string          `json:"user,omitempty"`
}

type cStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type cMsg struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content,omitempty"`
	ToolCalls        []cToolCall     `json:"tool_calls,omitempty"`
	ToolCallID       string          `json:"tool_call_id,omitempty"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	Refusal          *string         `json:"refusal,omitempty"`
}

type cPart struct {
	Type     string     `json:"type"`
	Text     string     `json:"text,omitempty"`
	ImageURL *cImageURL `json:"image_url,omitempty"`
}

type cImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

type cToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type cTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

type cUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens *int64 `json:"cached_tokens,omitempty"`
	} `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details,omitempty"`
}

type cChoice struct {
	Index        int             `json:"index"`
	Message      cMsg            `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type cResp struct {
	ID      string    `json:"id"`
	Object  string    `json:"object"`
	Created int64     `json:"created"`
	Model   string    `json:"model"`
	Choices []cChoice `json:"choices"`
	Usage   *cUsage   `json:"usage,omitempty"`
}

func (u *cUsage) toUsage() Usage {
	out := Usage{OutputTokens: u.CompletionTokens, InputTokens: u.PromptTokens, ReportedTotalTokens: ptr(u.TotalTokens)}
	if d := u.PromptTokensDetails; d != nil && d.CachedTokens != nil {
		out.CacheReadTokens = ptr(*d.CachedTokens)
		out.InputTokens -= *d.CachedTokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		out.ReasoningTokens = d.ReasoningTokens
	}
	return out
}

func chatUsage(u Usage) *cUsage {
	out := &cUsage{PromptTokens: u.PromptTokens(), CompletionTokens: u.OutputTokens}
	out.TotalTokens = out.PromptTokens + out.CompletionTokens
	out.PromptTokensDetails = &struct {
		CachedTokens *int64 `json:"cached_tokens,omitempty"`
	}{CachedTokens: ptr(deref(u.CacheReadTokens))}
	out.CompletionTokensDetails = &struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	}{ReasoningTokens: u.ReasoningTokens}
	return out
}

func appendChatUsage(d []byte, u Usage) []byte {
	p := u.PromptTokens()
	d = append(d, `{"prompt_tokens":`...)
	d = appendInt(d, p)
	d = append(d, `,"completion_tokens":`...)
	d = appendInt(d, u.OutputTokens)
	d = append(d, `,"total_tokens":`...)
	d = appendInt(d, p+u.OutputTokens)
	d = append(d, `,"prompt_tokens_details":{"cached_tokens":`...)
	d = appendInt(d, deref(u.CacheReadTokens))
	d = append(d, `},"completion_tokens_details":{"reasoning_tokens":`...)
	d = appendInt(d, u.ReasoningTokens)
	return append(d, "}}"...)
}

// ---- requests ----

func decodeChatRequest(body []byte) (*Request, error) {
	var in cReq
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("chat completions request: %w", err)
	}
	r := &Request{Model: in.Model, Temperature: in.Temperature, TopP: in.TopP, Stream: in.Stream,
		ReasoningEffort: in.ReasoningEffort, User: in.User}
	switch {
	case in.MaxCompletionTokens != nil:
		r.MaxTokens = *in.MaxCompletionTokens
	case in.MaxTokens != nil:
		r.MaxTokens = *in.MaxTokens
	}
	if s, ok := rawString(in.Stop); ok {
		r.Stop = []string{s}
	} else if len(in.Stop) > 0 && in.Stop[0] == '[' {
		_ = json.Unmarshal(in.Stop, &r.Stop)
	}
	for _, m := range in.Messages {
		switch m.Role {
		case "system", "developer":
			r.System = append(r.System, chatText(m.Content))
		case "tool":
			r.Messages = append(r.Messages, Message{Role: "user", Parts: []Part{{Type: PartToolResult, ID: m.ToolCallID, Text: chatText(m.Content)}}})
		case "assistant":
			msg := Message{Role: "assistant"}
			if m.ReasoningContent != "" {
				msg.Parts = append(msg.Parts, Part{Type: PartThinking, Text: m.ReasoningContent})
			}
			if t := chatText(m.Content); t != "" {
				msg.Parts = append(msg.Parts, Part{Type: PartText, Text: t})
			}
			for _, tc := range m.ToolCalls {
				msg.Parts = append(msg.Parts, Part{Type: PartToolCall, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
			}
			r.Messages = append(r.Messages, msg)
		default:
			parts, err := chatParts(m.Content)
			if err != nil {
				return nil, err
			}
			r.Messages = append(r.Messages, Message{Role: "user", Parts: parts})
		}
	}
	for _, t := range in.Tools {
		if t.Type != "function" {
			continue
		}
		r.Tools = append(r.Tools, Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	r.ToolChoice = decodeOpenAIToolChoice(in.ToolChoice)
	return r, nil
}

// decodeOpenAIToolChoice reads both the chat ({"type":"function","function":
// {"name"}}) and the responses ({"type":"function","name"}) shapes.
func decodeOpenAIToolChoice(raw json.RawMessage) *ToolChoice {
	if s, ok := rawString(raw); ok {
		return &ToolChoice{Mode: s}
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var tc struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &tc) != nil || tc.Type != "function" {
		return nil
	}
	name := tc.Name
	if name == "" {
		name = tc.Function.Name
	}
	return &ToolChoice{Mode: "tool", Name: name}
}

func chatText(raw json.RawMessage) string {
	if s, ok := rawString(raw); ok {
		return s
	}
	var parts []cPart
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

func chatParts(raw json.RawMessage) ([]Part, error) {
	if s, ok := rawString(raw); ok {
		return []Part{{Type: PartText, Text: s}}, nil
	}
	var parts []cPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, fmt.Errorf("chat completions content: %w", err)
	}
	out := make([]Part, 0, len(parts))
	for _, p := range parts {
		switch p.Type {
		case "text":
			out = append(out, Part{Type: PartText, Text: p.Text})
		case "image_url":
			if p.ImageURL != nil {
				out = append(out, imagePart(p.ImageURL.URL))
			}
		}
	}
	return out, nil
}

func imagePart(u string) Part {
	if mt, data, ok := splitDataURL(u); ok {
		return Part{Type: PartImage, MediaType: mt, Data: data}
	}
	return Part{Type: PartImage, ImageURL: u}
}

func encodeChatRequest(r *Request, model string) ([]byte, error) {
	out := cReq{Model: model, Temperature: r.Temperature, TopP: r.TopP, Stream: r.Stream,
		ReasoningEffort: r.ReasoningEffort, User: r.User}
	if r.ReasoningEffort == "none" {
		out.ReasoningEffort = ""
	}
	if r.MaxTokens > 0 {
		out.MaxCompletionTokens = ptr(r.MaxTokens)
	}
	if r.Stream {
		out.StreamOptions = &cStreamOptions{IncludeUsage: true}
	}
	if len(r.Stop) > 0 {
		out.Stop, _ = json.Marshal(r.Stop)
	}
	for _, s := range r.System {
		c, _ := json.Marshal(s)
		out.Messages = append(out.Messages, cMsg{Role: "system", Content: c})
	}
	for _, m := range r.Messages {
		if m.Role == "assistant" {
			msg := cMsg{Role: "assistant"}
			var text strings.Builder
			for _, p := range m.Parts {
				switch p.Type {
				case PartText:
					text.WriteString(p.Text)
				case PartToolCall:
					var tc cToolCall
					tc.ID, tc.Type = p.ID, "function"
					tc.Function.Name, tc.Function.Arguments = p.Name, string(validJSONOr(p.Arguments, "{}"))
					msg.ToolCalls = append(msg.ToolCalls, tc)
				}
			}
			if text.Len() > 0 || len(msg.ToolCalls) == 0 {
				msg.Content, _ = json.Marshal(text.String())
			}
			out.Messages = append(out.Messages, msg)
			continue
		}
		var parts []cPart
		for _, p := range m.Parts {
			switch p.Type {
			case PartToolResult:
				c, _ := json.Marshal(p.Text)
				out.Messages = append(out.Messages, cMsg{Role: "tool", ToolCallID: p.ID, Content: c})
			case PartText:
				parts = append(parts, cPart{Type: "text", Text: p.Text})
			case PartImage:
				parts = append(parts, cPart{Type: "image_url", ImageURL: &cImageURL{URL: imageURL(p)}})
			}
		}
		if len(parts) == 0 {
			continue
		}
		var c []byte
		if len(parts) == 1 && parts[0].Type == "text" {
			c, _ = json.Marshal(parts[0].Text)
		} else {
			c, _ = json.Marshal(parts)
		}
		out.Messages = append(out.Messages, cMsg{Role: "user", Content: c})
	}
	for _, t := range r.Tools {
		var ct cTool
		ct.Type = "function"
		ct.Function.Name, ct.Function.Description = t.Name, t.Description
		ct.Function.Parameters = validJSONOr(string(t.Parameters), `{"type":"object"}`)
		out.Tools = append(out.Tools, ct)
	}
	if tc := r.ToolChoice; tc != nil && len(out.Tools) > 0 {
		if tc.Mode == "tool" {
			out.ToolChoice, _ = json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}})
		} else {
			out.ToolChoice, _ = json.Marshal(tc.Mode)
		}
	}
	return json.Marshal(out)
}

// ---- responses ----

func decodeChatResponse(body []byte) (*Response, error) {
	var in cResp
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("chat completions response: %w", err)
	}
	r := &Response{ID: in.ID, Model: in.Model, Created: in.Created, Stop: StopEndTurn}
	if in.Usage != nil {
		r.Usage = in.Usage.toUsage()
	}
	if len(in.Choices) > 0 {
		c := in.Choices[0]
		if c.FinishReason != nil {
			r.Stop = stopFromChat(*c.FinishReason)
		}
		if c.Message.ReasoningContent != "" {
			r.Parts = append(r.Parts, Part{Type: PartThinking, Text: c.Message.ReasoningContent})
		}
		if t := chatText(c.Message.Content); t != "" {
			r.Parts = append(r.Parts, Part{Type: PartText, Text: t})
		} else if c.Message.Refusal != nil && *c.Message.Refusal != "" {
			r.Parts = append(r.Parts, Part{Type: PartText, Text: *c.Message.Refusal})
		}
		for _, tc := range c.Message.ToolCalls {
			r.Parts = append(r.Parts, Part{Type: PartToolCall, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
	}
	return r, nil
}

func encodeChatResponse(r *Response) ([]byte, error) {
	out := cResp{ID: r.ID, Object: "chat.completion", Created: r.Created, Model: r.Model, Usage: chatUsage(r.Usage)}
	if !strings.HasPrefix(out.ID, "chatcmpl-") {
		out.ID = NewID("chatcmpl-")
	}
	if out.Created == 0 {
		out.Created = time.Now().Unix()
	}
	msg := cMsg{Role: "assistant"}
	var text strings.Builder
	for _, p := range r.Parts {
		switch p.Type {
		case PartText:
			text.WriteString(p.Text)
		case PartToolCall:
			var tc cToolCall
			tc.ID, tc.Type = p.ID, "function"
			tc.Function.Name, tc.Function.Arguments = p.Name, p.Arguments
			msg.ToolCalls = append(msg.ToolCalls, tc)
		}
	}
	if text.Len() > 0 || len(msg.ToolCalls) == 0 {
		msg.Content, _ = json.Marshal(text.String())
	} else {
		msg.Content = json.RawMessage("null")
	}
	fr := chatFinish(r.Stop)
	out.Choices = []cChoice{{Index: 0, Message: msg, Logprobs: json.RawMessage("null"), FinishReason: &fr}}
	return json.Marshal(out)
}

func stopFromChat(s string) StopReason {
	switch s {
	case "length":
		return StopMaxTokens
	case "tool_calls", "function_call":
		return StopToolUse
	case "content_filter":
		return StopContentFilter
	}
	return StopEndTurn
}

func chatFinish(s StopReason) string {
	switch s {
	case StopMaxTokens:
		return "length"
	case StopToolUse:
		return "tool_calls"
	case StopContentFilter:
		return "content_filter"
	}
	return "stop"
}

func chatUsageOf(body []byte) (Usage, bool) {
	raw, ok := FieldRaw(body, "usage")
	if !ok || string(raw) == "null" {
		return Usage{}, false
	}
	var u cUsage
	if json.Unmarshal(raw, &u) != nil {
		return Usage{}, false
	}
	return u.toUsage(), true
}

// ---- streaming: decoder (chat upstream → neutral) ----

type chatDecoder struct {
	started  bool
	finished bool
	open     int // neutral index of the open block, -1 none
	openPart PartType
	next     int
	tools    map[int]int // tool_calls[].index → neutral index
	stop     StopReason
	usage    Usage
	reported bool
}

type cChunk struct {
	ID      string `json:"id"`
	Choices []struct {
		Delta struct {
			Content          *string     `json:"content"`
			ReasoningContent *string     `json:"reasoning_content"`
			Refusal          *string     `json:"refusal"`
			ToolCalls        []cToolCall `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *cUsage `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func newChatDecoder() *chatDecoder { return &chatDecoder{open: -1} }

func (d *chatDecoder) openBlock(out []StreamEvent, part PartType, id, name string) []StreamEvent {
	out = d.closeOpen(out)
	d.open, d.openPart = d.next, part
	d.next++
	return append(out, StreamEvent{Kind: EvBlockStart, Index: d.open, Part: part, ID: id, Name: name})
}

func (d *chatDecoder) closeOpen(out []StreamEvent) []StreamEvent {
	if d.open >= 0 {
		out = append(out, StreamEvent{Kind: EvBlockStop, Index: d.open})
		d.open = -1
	}
	return out
}

func (d *chatDecoder) decode(ev Event, out []StreamEvent) ([]StreamEvent, error) {
	if ev.IsDone() {
		return d.finish(out), nil
	}
	if d.finished {
		return out, nil
	}
	var c cChunk
	if err := json.Unmarshal(ev.Data, &c); err != nil {
		return out, fmt.Errorf("chat completions chunk: %w", err)
	}
	if c.Error != nil {
		d.finished = true
		return append(out, StreamEvent{Kind: EvError, ErrType: c.Error.Type, Message: c.Error.Message}), nil
	}
	if !d.started {
		d.started = true
		out = append(out, StreamEvent{Kind: EvStart, ID: c.ID})
	}
	for _, ch := range c.Choices {
		dl := &ch.Delta
		if dl.ReasoningContent != nil && *dl.ReasoningContent != "" {
			if d.open < 0 || d.openPart != PartThinking {
				out = d.openBlock(out, PartThinking, "", "")
			}
			out = append(out, StreamEvent{Kind: EvDelta, Index: d.open, Text: *dl.ReasoningContent})
		}
		text := ""
		if dl.Content != nil {
			text = *dl.Content
		} else if dl.Refusal != nil {
			text = *dl.Refusal
		}
		if text != "" {
			if d.open < 0 || d.openPart != PartText {
				out = d.openBlock(out, PartText, "", "")
			}
			out = append(out, StreamEvent{Kind: EvDelta, Index: d.open, Text: text})
		}
		for _, tc := range dl.ToolCalls {
			k := 0
			if tc.Index != nil {
				k = *tc.Index
			}
			idx, seen := d.tools[k]
			if !seen {
				if d.tools == nil {
					d.tools = map[int]int{}
				}
				out = d.openBlock(out, PartToolCall, tc.ID, tc.Function.Name)
				idx = d.open
				d.tools[k] = idx
			}
			if tc.Function.Arguments != "" {
				out = append(out, StreamEvent{Kind: EvDelta, Index: idx, Text: tc.Function.Arguments})
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			d.stop = stopFromChat(*ch.FinishReason)
			out = d.closeOpen(out)
		}
	}
	if c.Usage != nil {
		d.usage, d.reported = c.Usage.toUsage(), true
	}
	return out, nil
}

func (d *chatDecoder) finish(out []StreamEvent) []StreamEvent {
	if d.finished {
		return out
	}
	d.finished = true
	if !d.started {
		out = append(out, StreamEvent{Kind: EvStart})
	}
	out = d.closeOpen(out)
	if d.stop == "" {
		return append(out, StreamEvent{Kind: EvError, ErrType: "api_error", Message: "upstream stream ended without a finish_reason"})
	}
	return append(out, StreamEvent{Kind: EvFinish, Stop: d.stop, Usage: d.usage, UsageReported: d.reported})
}

// ---- streaming: encoder (neutral → chat client) ----

type chatEncoder struct {
	prefix       []byte // {"id":..,"object":..,"created":..,"model":..,"choices":
	includeUsage bool
	started      bool
	finished     bool
	tools        map[int]int // neutral index → tool_calls index
	kinds        map[int]PartType
}

func newChatEncoder(model string, includeUsage bool) *chatEncoder {
	p := make([]byte, 0, 128)
	p = append(p, `{"id":`...)
	p = appendJSONString(p, NewID("chatcmpl-"))
	p = append(p, `,"object":"chat.completion.chunk","created":`...)
	p = appendInt(p, time.Now().Unix())
	p = append(p, `,"model":`...)
	p = appendJSONString(p, model)
	p = append(p, `,"choices":`...)
	return &chatEncoder{prefix: p, includeUsage: includeUsage, tools: map[int]int{}, kinds: map[int]PartType{}}
}

// chunk returns prefix + [{"index":0,"delta":<delta>,"logprobs":null,"finish_reason":<fr>}] + }.
func (e *chatEncoder) chunk(out []Event, delta []byte, finish string) []Event {
	d := make([]byte, 0, len(e.prefix)+len(delta)+80)
	d = append(d, e.prefix...)
	d = append(d, `[{"index":0,"delta":`...)
	d = append(d, delta...)
	d = append(d, `,"logprobs":null,"finish_reason":`...)
	if finish == "" {
		d = append(d, "null"...)
	} else {
		d = appendJSONString(d, finish)
	}
	d = append(d, "}]}"...)
	return append(out, Event{Data: d})
}

func (e *chatEncoder) encode(ev StreamEvent, out []Event) []Event {
	if e.finished {
		return out
	}
	if !e.started && ev.Kind != EvError {
		e.started = true
		out = e.chunk(out, []byte(`{"role":"assistant","content":""}`), "")
		if ev.Kind == EvStart {
			return out
		}
	}
	switch ev.Kind {
	case EvBlockStart:
		e.kinds[ev.Index] = ev.Part
		if ev.Part == PartToolCall {
			k := len(e.tools)
			e.tools[ev.Index] = k
			d := make([]byte, 0, 128)
			d = append(d, `{"tool_calls":[{"index":`...)
			d = appendInt(d, int64(k))
			d = append(d, `,"id":`...)
			d = appendJSONString(d, ev.ID)
			d = append(d, `,"type":"function","function":{"name":`...)
			d = appendJSONString(d, ev.Name)
			d = append(d, `,"arguments":""}}]}`...)
			out = e.chunk(out, d, "")
		}
	case EvDelta:
		if ev.Text == "" {
			return out
		}
		switch e.kinds[ev.Index] {
		case PartText:
			d := make([]byte, 0, 16+len(ev.Text))
			d = append(d, `{"content":`...)
			d = appendJSONString(d, ev.Text)
			d = append(d, '}')
			out = e.chunk(out, d, "")
		case PartToolCall:
			d := make([]byte, 0, 64+len(ev.Text))
			d = append(d, `{"tool_calls":[{"index":`...)
			d = appendInt(d, int64(e.tools[ev.Index]))
			d = append(d, `,"function":{"arguments":`...)
			d = appendJSONString(d, ev.Text)
			d = append(d, `}}]}`...)
			out = e.chunk(out, d, "")
		}
	case EvFinish:
		e.finished = true
		out = e.chunk(out, []byte(`{}`), chatFinish(ev.Stop))
		if e.includeUsage {
			d := make([]byte, 0, len(e.prefix)+200)
			d = append(d, e.prefix...)
			d = append(d, `[],"usage":`...)
			d = appendChatUsage(d, ev.Usage)
			d = append(d, '}')
			out = append(out, Event{Data: d})
		}
		out = append(out, DoneEvent)
	case EvError:
		e.finished = true
		out = append(out, Event{Data: openAIErrorBody(ev.ErrType, ev.Message)})
	}
	return out
}

func openAIErrorBody(typ, msg string) []byte {
	if typ == "" {
		typ = "server_error"
	}
	d := make([]byte, 0, 80+len(msg))
	d = append(d, `{"error":{"message":`...)
	d = appendJSONString(d, msg)
	d = append(d, `,"type":`...)
	d = appendJSONString(d, typ)
	return append(d, `,"param":null,"code":null}}`...)
}
