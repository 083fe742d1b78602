package translate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Codec of the messages protocol (Anthropic Messages API wire format):
// requests.

// DefaultMaxTokens is sent as max_tokens to a messages upstream when the
// client's protocol made it optional and the client did not set it.
var DefaultMaxTokens int64 = 4096

type messagesRequest struct {
	Model         string              `json:"model"`
	Messages      []messagesMessage   `json:"messages"`
	System        json.RawMessage     `json:"system,omitempty"`
	MaxTokens     int64               `json:"max_tokens"`
	Temperature   *float64            `json:"temperature,omitempty"`
	TopP          *float64            `json:"top_p,omitempty"`
	StopSequences []string            `json:"stop_sequences,omitempty"`
	Stream        bool                `json:"stream,omitempty"`
	Tools         []messagesTool      `json:"tools,omitempty"`
	ToolChoice    *messagesToolChoice `json:"tool_choice,omitempty"`
	Thinking      *messagesThinking   `json:"thinking,omitempty"`
	Metadata      *messagesMetadata   `json:"metadata,omitempty"`
}

type messagesMetadata struct {
	UserID string `json:"user_id,omitempty"`
}

type messagesMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type messagesBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text,omitempty"`
	Source       *messagesSource `json:"source,omitempty"`
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

type messagesSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type messagesTool struct {
	Type         string          `json:"type,omitempty"`
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

type messagesToolChoice struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
}

type messagesThinking struct {
	Type         string `json:"type"`
	BudgetTokens int64  `json:"budget_tokens,omitempty"`
}

func decodeMessagesRequest(body []byte) (*Request, error) {
	var in messagesRequest
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
		var blocks []messagesBlock
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
	var blocks []messagesBlock
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
	var blocks []messagesBlock
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
	out := messagesRequest{
		Model: model, MaxTokens: r.MaxTokens, TopP: r.TopP, StopSequences: r.Stop, Stream: r.Stream,
		Messages: make([]messagesMessage, 0, len(r.Messages)),
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
			b, ok := messagesBlockOf(p)
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
		out.Messages = append(out.Messages, messagesMessage{Role: m.Role, Content: content})
	}
	for _, t := range r.Tools {
		out.Tools = append(out.Tools, messagesTool{Name: t.Name, Description: t.Description, InputSchema: validJSONOr(string(t.Parameters), `{"type":"object"}`)})
	}
	if tc := r.ToolChoice; tc != nil && len(out.Tools) > 0 {
		switch tc.Mode {
		case "required":
			out.ToolChoice = &messagesToolChoice{Type: "any"}
		case "tool":
			out.ToolChoice = &messagesToolChoice{Type: "tool", Name: tc.Name}
		case "none", "auto":
			out.ToolChoice = &messagesToolChoice{Type: tc.Mode}
		}
	}
	budget := r.ThinkingBudget
	if budget == 0 {
		budget = effortBudget(r.ReasoningEffort)
	}
	if budget >= 1024 && budget < out.MaxTokens {
		out.Thinking = &messagesThinking{Type: "enabled", BudgetTokens: budget}
		out.Temperature, out.TopP = nil, nil // not allowed with thinking
	}
	if r.User != "" {
		out.Metadata = &messagesMetadata{UserID: r.User}
	}
	return json.Marshal(out)
}

func messagesBlockOf(p Part) (messagesBlock, bool) {
	switch p.Type {
	case PartText:
		if p.Text == "" {
			return messagesBlock{}, false
		}
		return messagesBlock{Type: "text", Text: p.Text}, true
	case PartImage:
		if p.ImageURL != "" {
			if mt, data, ok := splitDataURL(p.ImageURL); ok {
				return messagesBlock{Type: "image", Source: &messagesSource{Type: "base64", MediaType: mt, Data: data}}, true
			}
			return messagesBlock{Type: "image", Source: &messagesSource{Type: "url", URL: p.ImageURL}}, true
		}
		return messagesBlock{Type: "image", Source: &messagesSource{Type: "base64", MediaType: p.MediaType, Data: p.Data}}, true
	case PartToolCall:
		return messagesBlock{Type: "tool_use", ID: p.ID, Name: p.Name, Input: validJSONOr(p.Arguments, "{}")}, true
	case PartToolResult:
		c, _ := json.Marshal(p.Text)
		return messagesBlock{Type: "tool_result", ToolUseID: p.ID, Content: c, IsError: p.IsError}, true
	case PartThinking:
		if p.Signature == "" {
			return messagesBlock{}, false // unsigned thinking cannot be replayed upstream
		}
		t := p.Text
		return messagesBlock{Type: "thinking", Thinking: &t, Signature: p.Signature}, true
	}
	return messagesBlock{}, false
}
