package translate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Codec of the messages protocol (Anthropic Messages API wire format).

// DefaultMaxTokens is sent as max_tokens to a messages upstream when the
// client's protocol made it optional and the client did not set it.
var DefaultMaxTokens int64 = 4096

type mReq struct {
	Model         string          `json:"model"`
	Messages      []mMsg          `json:"messages"`
	System        json.RawMessage `json:"system,omitempty"`
	MaxTokens     int64           `json:"max_tokens"`
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          *float64        `json:"top_p,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
	Tools         []mTool         `json:"tools,omitempty"`
	ToolChoice    *mToolChoice    `json:"tool_choice,omitempty"`
	Thinking      *mThinking      `json:"thinking,omitempty"`
	Metadata      *mMetadata      `json:"metadata,omitempty"`
}

type mMetadata struct {
	UserID string `json:"user_id,omitempty"`
}

type mMsg struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type mBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text,omitempty"`
	Source       *mSource        `json:"source,omitempty"`
	ID           string          `json:"id,omitempty"`
	Name         string          `json:"name,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	Content      json.RawMessage `json:"content,omitempty"`
	IsError      bool            `json:"is_error,omitempty"`
	Thinking     *string         `json:"thinking,omitempty"`
	Signature    string          `json:"signature,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

type mSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type mTool struct {
	Type         string          `json:"type,omitempty"`
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

type mToolChoice struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
}

type mThinking struct {
	Type         string `json:"type"`
	BudgetTokens int64  `json:"budget_tokens,omitempty"`
}

type mUsage struct {
	InputTokens              int64  `json:"input_tokens"`
	OutputTokens             int64  `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens,omitempty"`
}

type mResp struct {
	ID           string   `json:"id"`
	Type         string   `json:"type"`
	Role         string   `json:"role"`
	Content      []mBlock `json:"content"`
	Model        string   `json:"model"`
	StopReason   *string  `json:"stop_reason"`
	StopSequence *string  `json:"stop_sequence"`
	Usage        mUsage   `json:"usage"`
}

func (u mUsage) toUsage() Usage {
	return Usage{
		InputTokens:      u.InputTokens,
		OutputTokens:     u.OutputTokens,
		CacheReadTokens:  u.CacheReadInputTokens,
		CacheWriteTokens: u.CacheCreationInputTokens,
	}
}

func messagesUsage(u Usage) mUsage {
	return mUsage{
		InputTokens:              u.InputTokens,
		OutputTokens:             u.OutputTokens,
		CacheCreationInputTokens: u.CacheWriteTokens,
		CacheReadInputTokens:     u.CacheReadTokens,
	}
}

// ---- requests ----

func decodeMessagesRequest(body []byte) (*Request, error) {
	var in mReq
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("messages request: %w", err)
	}
	r := &Request{
		Model: in.Model, MaxTokens: in.MaxTokens, Temperature: in.Temperature, TopP: in.TopP,
		Stop: in.StopSequences, Stream: in.Stream,
	}
	if in.Metadata != nil {
		r.User = in.Metadata.UserID
	}
	if s, ok := rawString(in.System); ok {
		r.System = []string{s}
	} else if len(in.System) > 0 && in.System[0] == '[' {
		var blocks []mBlock
		if err := json.Unmarshal(in.System, &blocks); err != nil {
			return nil, fmt.Errorf("messages request system: %w", err)
		}
		for _, b := range blocks {
			if len(b.CacheControl) > 0 {
				r.CacheControl = true
			}
			if b.Type == "text" {
				r.System = append(r.System, b.Text)
			}
		}
	}
	for _, m := range in.Messages {
		parts, cc, err := decodeMessagesContent(m.Content)
		if err != nil {
			return nil, err
		}
		r.CacheControl = r.CacheControl || cc
		r.Messages = append(r.Messages, Message{Role: m.Role, Parts: parts})
	}
	for _, t := range in.Tools {
		if len(t.CacheControl) > 0 {
			r.CacheControl = true
		}
		if t.Type != "" && t.Type != "custom" {
			continue // server tools have no equivalent elsewhere
		}
		r.Tools = append(r.Tools, Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	if tc := in.ToolChoice; tc != nil {
		switch tc.Type {
		case "any":
			r.ToolChoice = &ToolChoice{Mode: "required"}
		case "tool":
			r.ToolChoice = &ToolChoice{Mode: "tool", Name: tc.Name}
		default:
			r.ToolChoice = &ToolChoice{Mode: tc.Type}
		}
	}
	if in.Thinking != nil && in.Thinking.Type == "enabled" {
		r.ThinkingBudget = in.Thinking.BudgetTokens
		r.ReasoningEffort = budgetEffort(in.Thinking.BudgetTokens)
	}
	return r, nil
}

func decodeMessagesContent(raw json.RawMessage) ([]Part, bool, error) {
	if s, ok := rawString(raw); ok {
		return []Part{{Type: PartText, Text: s}}, false, nil
	}
	var blocks []mBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, false, fmt.Errorf("messages content: %w", err)
	}
	cc := false
	parts := make([]Part, 0, len(blocks))
	for _, b := range blocks {
		if len(b.CacheControl) > 0 {
			cc = true
		}
		switch b.Type {
		case "text":
			parts = append(parts, Part{Type: PartText, Text: b.Text})
		case "image":
			if b.Source == nil {
				continue
			}
			if b.Source.Type == "url" {
				parts = append(parts, Part{Type: PartImage, ImageURL: b.Source.URL})
			} else {
				parts = append(parts, Part{Type: PartImage, MediaType: b.Source.MediaType, Data: b.Source.Data})
			}
		case "tool_use":
			parts = append(parts, Part{Type: PartToolCall, ID: b.ID, Name: b.Name, Arguments: string(validJSONOr(string(b.Input), "{}"))})
		case "tool_result":
			parts = append(parts, Part{Type: PartToolResult, ID: b.ToolUseID, Text: flattenToolResult(b.Content), IsError: b.IsError})
		case "thinking":
			t := ""
			if b.Thinking != nil {
				t = *b.Thinking
			}
			parts = append(parts, Part{Type: PartThinking, Text: t, Signature: b.Signature})
		}
	}
	return parts, cc, nil
}

func flattenToolResult(raw json.RawMessage) string {
	if s, ok := rawString(raw); ok {
		return s
	}
	var blocks []mBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var b strings.Builder
	for _, bl := range blocks {
		if bl.Type == "text" {
			b.WriteString(bl.Text)
		}
	}
	return b.String()
}

func encodeMessagesRequest(r *Request, model string) ([]byte, error) {
	out := mReq{
		Model: model, MaxTokens: r.MaxTokens, TopP: r.TopP, StopSequences: r.Stop, Stream: r.Stream,
		Messages: make([]mMsg, 0, len(r.Messages)),
	}
	if out.MaxTokens <= 0 {
		out.MaxTokens = DefaultMaxTokens
	}
	if r.Temperature != nil {
		t := min(max(*r.Temperature, 0), 1)
		out.Temperature = &t
	}
	if len(r.System) > 0 {
		out.System, _ = json.Marshal(strings.Join(r.System, "\n\n"))
	}
	// Merge consecutive turns of one role: the messages protocol wants all
	// tool results of a turn in one user message, tool results first.
	var merged []Message
	for _, m := range r.Messages {
		if len(m.Parts) == 0 {
			continue
		}
		if n := len(merged); n > 0 && merged[n-1].Role == m.Role {
			merged[n-1].Parts = append(merged[n-1].Parts[:len(merged[n-1].Parts):len(merged[n-1].Parts)], m.Parts...)
			continue
		}
		merged = append(merged, m)
	}
	for _, m := range merged {
		blocks := make([]json.RawMessage, 0, len(m.Parts))
		var rest []json.RawMessage
		for _, p := range m.Parts {
			b, ok := messagesBlock(p)
			if !ok {
				continue
			}
			raw, err := json.Marshal(b)
			if err != nil {
				return nil, err
			}
			if p.Type == PartToolResult {
				blocks = append(blocks, raw)
			} else {
				rest = append(rest, raw)
			}
		}
		blocks = append(blocks, rest...)
		if len(blocks) == 0 {
			continue
		}
		content, err := json.Marshal(blocks)
		if err != nil {
			return nil, err
		}
		out.Messages = append(out.Messages, mMsg{Role: m.Role, Content: content})
	}
	for _, t := range r.Tools {
		out.Tools = append(out.Tools, mTool{Name: t.Name, Description: t.Description, InputSchema: validJSONOr(string(t.Parameters), `{"type":"object"}`)})
	}
	if tc := r.ToolChoice; tc != nil && len(out.Tools) > 0 {
		switch tc.Mode {
		case "required":
			out.ToolChoice = &mToolChoice{Type: "any"}
		case "tool":
			out.ToolChoice = &mToolChoice{Type: "tool", Name: tc.Name}
		case "none", "auto":
			out.ToolChoice = &mToolChoice{Type: tc.Mode}
		}
	}
	budget := r.ThinkingBudget
	if budget == 0 {
		budget = effortBudget(r.ReasoningEffort)
	}
	if budget >= 1024 && budget < out.MaxTokens {
		out.Thinking = &mThinking{Type: "enabled", BudgetTokens: budget}
		out.Temperature, out.TopP = nil, nil // not allowed with thinking
	}
	if r.User != "" {
		out.Metadata = &mMetadata{UserID: r.User}
	}
	return json.Marshal(out)
}

func messagesBlock(p Part) (mBlock, bool) {
	switch p.Type {
	case PartText:
		if p.Text == "" {
			return mBlock{}, false
		}
		return mBlock{Type: "text", Text: p.Text}, true
	case PartImage:
		if p.ImageURL != "" {
			if mt, data, ok := splitDataURL(p.ImageURL); ok {
				return mBlock{Type: "image", Source: &mSource{Type: "base64", MediaType: mt, Data: data}}, true
			}
			return mBlock{Type: "image", Source: &mSource{Type: "url", URL: p.ImageURL}}, true
		}
		return mBlock{Type: "image", Source: &mSource{Type: "base64", MediaType: p.MediaType, Data: p.Data}}, true
	case PartToolCall:
		return mBlock{Type: "tool_use", ID: p.ID, Name: p.Name, Input: validJSONOr(p.Arguments, "{}")}, true
	case PartToolResult:
		c, _ := json.Marshal(p.Text)
		return mBlock{Type: "tool_result", ToolUseID: p.ID, Content: c, IsError: p.IsError}, true
	case PartThinking:
		if p.Signature == "" {
			return mBlock{}, false // unsigned thinking cannot be replayed upstream
		}
		t := p.Text
		return mBlock{Type: "thinking", Thinking: &t, Signature: p.Signature}, true
	}
	return mBlock{}, false
}

// ---- responses ----

func decodeMessagesResponse(body []byte) (*Response, error) {
	var in mResp
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("messages response: %w", err)
	}
	r := &Response{ID: in.ID, Model: in.Model, Usage: in.Usage.toUsage()}
	if in.StopReason != nil {
		r.Stop = stopFromMessages(*in.StopReason)
	}
	if in.StopSequence != nil {
		r.StopSequence = *in.StopSequence
	}
	for _, b := range in.Content {
		switch b.Type {
		case "text":
			r.Parts = append(r.Parts, Part{Type: PartText, Text: b.Text})
		case "tool_use":
			r.Parts = append(r.Parts, Part{Type: PartToolCall, ID: b.ID, Name: b.Name, Arguments: string(validJSONOr(string(b.Input), "{}"))})
		case "thinking":
			t := ""
			if b.Thinking != nil {
				t = *b.Thinking
			}
			r.Parts = append(r.Parts, Part{Type: PartThinking, Text: t, Signature: b.Signature})
		}
	}
	return r, nil
}

func encodeMessagesResponse(r *Response) ([]byte, error) {
	out := mResp{
		ID: r.ID, Type: "message", Role: "assistant", Model: r.Model, Content: []mBlock{},
		Usage: messagesUsage(r.Usage),
	}
	if !strings.HasPrefix(out.ID, "msg_") {
		out.ID = NewID("msg_")
	}
	stop := string(r.Stop)
	if stop == "" {
		stop = string(StopEndTurn)
	}
	out.StopReason = &stop
	if r.Stop == StopSequence && r.StopSequence != "" {
		out.StopSequence = &r.StopSequence
	}
	for _, p := range r.Parts {
		switch p.Type {
		case PartText:
			out.Content = append(out.Content, mBlock{Type: "text", Text: p.Text})
		case PartToolCall:
			out.Content = append(out.Content, mBlock{Type: "tool_use", ID: p.ID, Name: p.Name, Input: validJSONOr(p.Arguments, "{}")})
		case PartThinking:
			t := p.Text
			out.Content = append(out.Content, mBlock{Type: "thinking", Thinking: &t, Signature: p.Signature})
		}
	}
	return json.Marshal(out)
}

func stopFromMessages(s string) StopReason {
	switch s {
	case "max_tokens", "model_context_window_exceeded":
		return StopMaxTokens
	case "stop_sequence":
		return StopSequence
	case "tool_use":
		return StopToolUse
	case "refusal":
		return StopContentFilter
	}
	return StopEndTurn
}

func messagesUsageOf(body []byte) (Usage, bool) {
	raw, ok := FieldRaw(body, "usage")
	if !ok {
		return Usage{}, false
	}
	var u mUsage
	if json.Unmarshal(raw, &u) != nil {
		return Usage{}, false
	}
	return u.toUsage(), true
}

// ---- streaming: decoder (messages upstream → neutral) ----

type messagesDecoder struct {
	usage    Usage
	stop     StopReason
	stopSeq  string
	reported bool
	started  bool
	finished bool
	ignored  map[int]bool
	buf      struct {
		Type    string `json:"type"`
		Index   int    `json:"index"`
		Message *mResp `json:"message"`
		Block   *struct {
			Type     string `json:"type"`
			ID       string `json:"id"`
			Name     string `json:"name"`
			Text     string `json:"text"`
			Thinking string `json:"thinking"`
		} `json:"content_block"`
		Delta *struct {
			Type         string  `json:"type"`
			Text         string  `json:"text"`
			PartialJSON  string  `json:"partial_json"`
			Thinking     string  `json:"thinking"`
			StopReason   *string `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage *mUsage `json:"usage"`
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
}

func (d *messagesDecoder) decode(ev Event, out []StreamEvent) ([]StreamEvent, error) {
	b := &d.buf
	b.Message, b.Block, b.Delta, b.Usage, b.Error, b.Index = nil, nil, nil, nil, nil, 0
	if err := json.Unmarshal(ev.Data, b); err != nil {
		return out, fmt.Errorf("messages stream event: %w", err)
	}
	switch b.Type {
	case "message_start":
		d.started = true
		e := StreamEvent{Kind: EvStart}
		if b.Message != nil {
			e.ID = b.Message.ID
			d.usage = b.Message.Usage.toUsage()
			e.Usage = d.usage
		}
		out = append(out, e)
	case "content_block_start":
		if b.Block == nil {
			break
		}
		switch b.Block.Type {
		case "text":
			out = append(out, StreamEvent{Kind: EvBlockStart, Index: b.Index, Part: PartText})
			if b.Block.Text != "" {
				out = append(out, StreamEvent{Kind: EvDelta, Index: b.Index, Text: b.Block.Text})
			}
		case "tool_use":
			out = append(out, StreamEvent{Kind: EvBlockStart, Index: b.Index, Part: PartToolCall, ID: b.Block.ID, Name: b.Block.Name})
		case "thinking":
			out = append(out, StreamEvent{Kind: EvBlockStart, Index: b.Index, Part: PartThinking})
		default:
			if d.ignored == nil {
				d.ignored = map[int]bool{}
			}
			d.ignored[b.Index] = true // server tool blocks etc. have no equivalent
		}
	case "content_block_delta":
		if b.Delta == nil || d.ignored[b.Index] {
			break
		}
		switch b.Delta.Type {
		case "text_delta":
			out = append(out, StreamEvent{Kind: EvDelta, Index: b.Index, Text: b.Delta.Text})
		case "input_json_delta":
			out = append(out, StreamEvent{Kind: EvDelta, Index: b.Index, Text: b.Delta.PartialJSON})
		case "thinking_delta":
			out = append(out, StreamEvent{Kind: EvDelta, Index: b.Index, Text: b.Delta.Thinking})
		}
	case "content_block_stop":
		if d.ignored[b.Index] {
			break
		}
		out = append(out, StreamEvent{Kind: EvBlockStop, Index: b.Index})
	case "message_delta":
		if b.Delta != nil && b.Delta.StopReason != nil {
			d.stop = stopFromMessages(*b.Delta.StopReason)
		}
		if b.Delta != nil && b.Delta.StopSequence != nil {
			d.stopSeq = *b.Delta.StopSequence
		}
		if u := b.Usage; u != nil {
			d.reported = true
			d.usage.OutputTokens = u.OutputTokens
			if u.InputTokens > 0 {
				d.usage.InputTokens = u.InputTokens
			}
			if u.CacheReadInputTokens != nil {
				d.usage.CacheReadTokens = u.CacheReadInputTokens
			}
			if u.CacheCreationInputTokens != nil {
				d.usage.CacheWriteTokens = u.CacheCreationInputTokens
			}
		}
	case "message_stop":
		d.finished = true
		out = append(out, StreamEvent{Kind: EvFinish, Stop: d.stop, StopSequence: d.stopSeq, Usage: d.usage, UsageReported: d.reported})
	case "error":
		e := StreamEvent{Kind: EvError, ErrType: "api_error"}
		if b.Error != nil {
			e.ErrType, e.Message = b.Error.Type, b.Error.Message
		}
		d.finished = true
		out = append(out, e)
	}
	return out, nil
}

func (d *messagesDecoder) finish(out []StreamEvent) []StreamEvent {
	if d.finished {
		return out
	}
	d.finished = true
	if d.stop != "" {
		return append(out, StreamEvent{Kind: EvFinish, Stop: d.stop, StopSequence: d.stopSeq, Usage: d.usage, UsageReported: d.reported})
	}
	return append(out, StreamEvent{Kind: EvError, ErrType: "api_error", Message: "upstream stream ended before message_stop"})
}

// ---- streaming: encoder (neutral → messages client) ----

type messagesEncoder struct {
	model    string
	id       string
	started  bool
	finished bool
	next     int
	open     map[int]openBlock // neutral index → our block
}

type openBlock struct {
	index int
	part  PartType
}

func newMessagesEncoder(model string) *messagesEncoder {
	return &messagesEncoder{model: model, open: map[int]openBlock{}}
}

func (e *messagesEncoder) event(out []Event, name string, data []byte) []Event {
	return append(out, Event{Name: name, Data: data})
}

func (e *messagesEncoder) start(out []Event, id string) []Event {
	e.started = true
	e.id = id
	if !strings.HasPrefix(e.id, "msg_") {
		e.id = NewID("msg_")
	}
	d := make([]byte, 0, 256)
	d = append(d, `{"type":"message_start","message":{"id":`...)
	d = appendJSONString(d, e.id)
	d = append(d, `,"type":"message","role":"assistant","content":[],"model":`...)
	d = appendJSONString(d, e.model)
	d = append(d, `,"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}`...)
	return e.event(out, "message_start", d)
}

func (e *messagesEncoder) encode(ev StreamEvent, out []Event) []Event {
	if e.finished {
		return out
	}
	if !e.started && ev.Kind != EvError {
		out = e.start(out, ev.ID)
		if ev.Kind == EvStart {
			return out
		}
	}
	switch ev.Kind {
	case EvBlockStart:
		b := openBlock{index: e.next, part: ev.Part}
		e.next++
		e.open[ev.Index] = b
		d := make([]byte, 0, 128)
		d = append(d, `{"type":"content_block_start","index":`...)
		d = appendInt(d, int64(b.index))
		switch ev.Part {
		case PartToolCall:
			d = append(d, `,"content_block":{"type":"tool_use","id":`...)
			d = appendJSONString(d, ev.ID)
			d = append(d, `,"name":`...)
			d = appendJSONString(d, ev.Name)
			d = append(d, `,"input":{}}}`...)
		case PartThinking:
			d = append(d, `,"content_block":{"type":"thinking","thinking":"","signature":""}}`...)
		default:
			d = append(d, `,"content_block":{"type":"text","text":""}}`...)
		}
		out = e.event(out, "content_block_start", d)
	case EvDelta:
		b, ok := e.open[ev.Index]
		if !ok || ev.Text == "" {
			return out
		}
		d := make([]byte, 0, 96+len(ev.Text))
		d = append(d, `{"type":"content_block_delta","index":`...)
		d = appendInt(d, int64(b.index))
		switch b.part {
		case PartToolCall:
			d = append(d, `,"delta":{"type":"input_json_delta","partial_json":`...)
		case PartThinking:
			d = append(d, `,"delta":{"type":"thinking_delta","thinking":`...)
		default:
			d = append(d, `,"delta":{"type":"text_delta","text":`...)
		}
		d = appendJSONString(d, ev.Text)
		d = append(d, "}}"...)
		out = e.event(out, "content_block_delta", d)
	case EvBlockStop:
		out = e.stopBlock(out, ev.Index)
	case EvFinish:
		out = e.closeAll(out)
		stop := ev.Stop
		if stop == "" {
			stop = StopEndTurn
		}
		d := make([]byte, 0, 192)
		d = append(d, `{"type":"message_delta","delta":{"stop_reason":`...)
		d = appendJSONString(d, string(stop))
		d = append(d, `,"stop_sequence":`...)
		if ev.StopSequence != "" {
			d = appendJSONString(d, ev.StopSequence)
		} else {
			d = append(d, "null"...)
		}
		d = append(d, `},"usage":{"input_tokens":`...)
		d = appendInt(d, ev.Usage.InputTokens)
		if ev.Usage.CacheWriteTokens != nil {
			d = append(d, `,"cache_creation_input_tokens":`...)
			d = appendInt(d, *ev.Usage.CacheWriteTokens)
		}
		if ev.Usage.CacheReadTokens != nil {
			d = append(d, `,"cache_read_input_tokens":`...)
			d = appendInt(d, *ev.Usage.CacheReadTokens)
		}
		d = append(d, `,"output_tokens":`...)
		d = appendInt(d, ev.Usage.OutputTokens)
		d = append(d, "}}"...)
		out = e.event(out, "message_delta", d)
		out = e.event(out, "message_stop", []byte(`{"type":"message_stop"}`))
		e.finished = true
	case EvError:
		out = e.event(out, "error", messagesErrorBody(ev.ErrType, ev.Message))
		e.finished = true
	}
	return out
}

func (e *messagesEncoder) stopBlock(out []Event, idx int) []Event {
	b, ok := e.open[idx]
	if !ok {
		return out
	}
	delete(e.open, idx)
	d := make([]byte, 0, 48)
	d = append(d, `{"type":"content_block_stop","index":`...)
	d = appendInt(d, int64(b.index))
	d = append(d, '}')
	return e.event(out, "content_block_stop", d)
}

func (e *messagesEncoder) closeAll(out []Event) []Event {
	for len(e.open) > 0 {
		lowest := -1
		for k, b := range e.open {
			if lowest < 0 || b.index < e.open[lowest].index {
				lowest = k
			}
		}
		out = e.stopBlock(out, lowest)
	}
	return out
}

func messagesErrorBody(typ, msg string) []byte {
	if typ == "" {
		typ = "api_error"
	}
	d := make([]byte, 0, 64+len(msg))
	d = append(d, `{"type":"error","error":{"type":`...)
	d = appendJSONString(d, typ)
	d = append(d, `,"message":`...)
	d = appendJSONString(d, msg)
	return append(d, "}}"...)
}
