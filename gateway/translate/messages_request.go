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
	Model         string                `json:"model"`
	Messages      []messagesMessage     `json:"messages"`
	System        json.RawMessage       `json:"system,omitempty"`
	MaxTokens     int64                 `json:"max_tokens"`
	Temperature   *float64              `json:"temperature,omitempty"`
	TopP          *float64              `json:"top_p,omitempty"`
	StopSequences []string              `json:"stop_sequences,omitempty"`
	Stream        bool                  `json:"stream,omitempty"`
	Tools         []messagesTool        `json:"tools,omitempty"`
	ToolChoice    *messagesToolChoice   `json:"tool_choice,omitempty"`
	Thinking      *messagesThinking     `json:"thinking,omitempty"`
	OutputConfig  *messagesOutputConfig `json:"output_config,omitempty"`
	Metadata      *messagesMetadata     `json:"metadata,omitempty"`
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
	Data         string          `json:"data,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// messagesSource is the source of an image or document block.
type messagesSource struct {
	Type      string          `json:"type"`
	MediaType string          `json:"media_type,omitempty"`
	Data      string          `json:"data,omitempty"`
	URL       string          `json:"url,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
}

type messagesTool struct {
	Type         string          `json:"type,omitempty"`
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

type messagesToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

type messagesThinking struct {
	Type         string `json:"type"`
	BudgetTokens int64  `json:"budget_tokens,omitempty"`
	Display      string `json:"display,omitempty"`
}

type messagesOutputConfig struct {
	Effort string                `json:"effort,omitempty"`
	Format *messagesOutputFormat `json:"format,omitempty"`
}

type messagesOutputFormat struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema,omitempty"`
}

func decodeMessagesRequest(body []byte) (*Request, error) {
	if err := requireObject("messages", body); err != nil {
		return nil, err
	}
	if err := requireArray("messages", body, "messages"); err != nil {
		return nil, err
	}
	var in messagesRequest
	skipped, err := unmarshalLenient(body, &in)
	if err != nil {
		return nil, fmt.Errorf("messages request: %w", err)
	}
	if skipped {
		in.Temperature, in.TopP = numberField(body, in.Temperature, "temperature"), numberField(body, in.TopP, "top_p")
	}
	r := &Request{
		Model: in.Model, MaxTokens: max(in.MaxTokens, 0), Temperature: in.Temperature, TopP: in.TopP,
		Stop: in.StopSequences, Stream: in.Stream,
	}
	if in.Metadata != nil {
		r.User = in.Metadata.UserID
	}
	if s, ok := rawString(in.System); ok {
		if s != "" {
			r.System = []string{s}
		}
	} else if len(in.System) > 0 && in.System[0] == '[' {
		var blocks []messagesBlock
		_, _ = unmarshalLenient(in.System, &blocks)
		for _, b := range blocks {
			if len(b.CacheControl) > 0 {
				r.CacheControl = true
			}
			if t := b.text(); t != "" {
				r.System = append(r.System, t)
			}
		}
	}
	for _, m := range in.Messages {
		parts, cc := decodeMessagesContent(m.Content)
		r.CacheControl = r.CacheControl || cc
		switch m.Role {
		case "system", "developer":
			r.addSystem(textParts(parts))
		case "assistant":
			r.Messages = append(r.Messages, Message{Role: "assistant", Parts: parts})
		default:
			r.Messages = append(r.Messages, Message{Role: "user", Parts: parts})
		}
	}
	for _, t := range in.Tools {
		if len(t.CacheControl) > 0 {
			r.CacheControl = true
		}
		if (t.Type != "" && t.Type != "custom") || t.Name == "" {
			continue // Anthropic's typed tools (server tools, schema-less client tools) have no equivalent elsewhere
		}
		r.Tools = append(r.Tools, Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	if tc := in.ToolChoice; tc != nil {
		switch tc.Type {
		case "any":
			r.ToolChoice = &ToolChoice{Mode: "required"}
		case "tool":
			r.ToolChoice = &ToolChoice{Mode: "tool", Name: tc.Name}
		case "auto", "none":
			r.ToolChoice = &ToolChoice{Mode: tc.Type}
		}
		if tc.DisableParallelToolUse {
			r.ParallelToolCalls = ptr(false)
		}
	}
	effort := ""
	if oc := in.OutputConfig; oc != nil {
		effort = oc.Effort
		if f := oc.Format; f != nil && f.Type == "json_schema" && len(f.Schema) > 0 {
			r.OutputFormat = &OutputFormat{Type: "json_schema", Schema: f.Schema}
		}
	}
	// The effort is output_config's, else the thinking budget's, else
	// medium for adaptive thinking. Without thinking (or with its display
	// omitted) the client wants no thinking text back.
	r.ReasoningEffort, r.HideThinking = effort, true
	if th := in.Thinking; th != nil {
		switch th.Type {
		case "enabled":
			r.ThinkingBudget, r.HideThinking = max(th.BudgetTokens, 0), th.Display == "omitted"
			if effort == "" {
				r.ReasoningEffort = budgetEffort(r.ThinkingBudget)
			}
		case "adaptive":
			r.HideThinking = th.Display == "omitted"
			if effort == "" {
				r.ReasoningEffort = "medium"
			}
		}
	}
	return r, nil
}

// textParts keeps the text parts of a system message.
func textParts(ps []Part) []Part {
	out := ps[:0:0]
	for _, p := range ps {
		if p.Type == PartText && p.Text != "" {
			out = append(out, p)
		}
	}
	return out
}

// text is a block's text when it is text, or by the fallback rule for a
// block of a kind the neutral form lacks (documents, search results, ...).
func (b *messagesBlock) text() string {
	ab := anyBlock{Text: b.Text, Content: b.Content}
	if b.Source != nil {
		ab.Source = &anySource{Type: b.Source.Type, Data: b.Source.Data, Content: b.Source.Content}
	}
	return ab.text(0)
}

// decodeMessagesContent reads a message's content (a string or blocks;
// anything else is empty) and reports whether a block marked a cache
// breakpoint.
func decodeMessagesContent(raw json.RawMessage) ([]Part, bool) {
	if s, ok := rawString(raw); ok {
		return []Part{{Type: PartText, Text: s}}, false
	}
	if len(raw) == 0 || raw[0] != '[' {
		return nil, false
	}
	var blocks []messagesBlock
	_, _ = unmarshalLenient(raw, &blocks)
	cc := false
	parts := make([]Part, 0, len(blocks))
	for i := range blocks {
		b := &blocks[i]
		if len(b.CacheControl) > 0 {
			cc = true
		}
		switch b.Type {
		case "text":
			parts = append(parts, Part{Type: PartText, Text: b.Text})
		case "image":
			switch {
			case b.Source == nil:
			case b.Source.Type == "url":
				parts = append(parts, Part{Type: PartImage, ImageURL: b.Source.URL})
			case b.Source.Type == "base64":
				parts = append(parts, Part{Type: PartImage, MediaType: b.Source.MediaType, Data: b.Source.Data})
			}
		case "tool_use":
			parts = append(parts, Part{Type: PartToolCall, ID: b.ID, Name: b.Name, Arguments: compactJSONOr(b.Input, "{}")})
		case "tool_result":
			parts = append(parts, Part{Type: PartToolResult, ID: b.ToolUseID, Text: contentText(b.Content, 0), IsError: b.IsError})
		case "thinking":
			t := ""
			if b.Thinking != nil {
				t = *b.Thinking
			}
			parts = append(parts, Part{Type: PartThinking, Text: t, Signature: b.Signature})
		case "redacted_thinking":
			if b.Data != "" {
				parts = append(parts, Part{Type: PartThinking, Redacted: b.Data})
			}
		case "server_tool_use", "mcp_tool_use":
			// Calls the upstream ran itself: no client protocol has them.
		default:
			if t := b.text(); t != "" {
				parts = append(parts, Part{Type: PartText, Text: t})
			}
		}
	}
	return parts, cc
}

func encodeMessagesRequest(r *Request, model string) ([]byte, error) {
	out := messagesRequest{
		Model: model, MaxTokens: r.MaxTokens, TopP: clamp(r.TopP, 0, 1), StopSequences: r.Stop, Stream: r.Stream,
		Temperature: clamp(r.Temperature, 0, 1), Messages: make([]messagesMessage, 0, len(r.Messages)),
	}
	if sys := r.systemPrompts(); len(sys) > 0 {
		out.System, _ = json.Marshal(strings.Join(sys, "\n\n"))
	}
	// Merge consecutive turns of one role: the messages protocol wants all
	// tool results of a turn in one user message, tool results first.
	var merged []Message
	for _, m := range r.turns() {
		if len(m.Parts) == 0 {
			continue
		}
		if n := len(merged); n > 0 && merged[n-1].Role == m.Role {
			merged[n-1].Parts = append(merged[n-1].Parts[:len(merged[n-1].Parts):len(merged[n-1].Parts)], m.Parts...)
			continue
		}
		merged = append(merged, m)
	}
	lastThinks := true // the last assistant turn begins with thinking (or there is none)
	for _, m := range merged {
		blocks := make([]json.RawMessage, 0, len(m.Parts))
		var rest []json.RawMessage
		first := PartType(255) // of the first block that is not a tool result
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
				continue
			}
			if len(rest) == 0 {
				first = p.Type
			}
			rest = append(rest, raw)
		}
		blocks = append(blocks, rest...)
		if len(blocks) == 0 {
			continue
		}
		if m.Role == "assistant" {
			lastThinks = first == PartThinking
		}
		content, err := json.Marshal(blocks)
		if err != nil {
			return nil, err
		}
		out.Messages = append(out.Messages, messagesMessage{Role: m.Role, Content: content})
	}
	tools := narrowTools(r)
	for _, t := range tools {
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
	if p := r.ParallelToolCalls; p != nil && !*p && len(out.Tools) > 0 {
		if out.ToolChoice == nil {
			out.ToolChoice = &messagesToolChoice{Type: "auto"}
		}
		if out.ToolChoice.Type != "none" {
			out.ToolChoice.DisableParallelToolUse = true
		}
	}
	budget := r.ThinkingBudget
	if budget == 0 {
		budget = effortBudget(r.ReasoningEffort)
	}
	if out.MaxTokens <= 0 {
		// The client's protocol made max_tokens optional: the default
		// leaves room for the thinking budget on top.
		out.MaxTokens = DefaultMaxTokens
		if budget >= 1024 {
			out.MaxTokens += budget
		}
	}
	// Thinking is sent when it fits max_tokens and the API would take it:
	// not with a forced tool choice, and not when the turn continues an
	// assistant turn (a tool loop) that has no thinking block to begin
	// with (a client of another protocol could not carry one back).
	forced := out.ToolChoice != nil && (out.ToolChoice.Type == "any" || out.ToolChoice.Type == "tool")
	if budget >= 1024 && budget < out.MaxTokens && !forced && (lastThinks || !continuesToolLoop(merged)) {
		out.Thinking = &messagesThinking{Type: "enabled", BudgetTokens: budget}
		out.Temperature, out.TopP = nil, nil // not allowed with thinking
	}
	if f := r.OutputFormat; f != nil && f.Type == "json_schema" && len(f.Schema) > 0 {
		out.OutputConfig = &messagesOutputConfig{Format: &messagesOutputFormat{Type: "json_schema", Schema: f.Schema}}
	}
	if r.User != "" {
		out.Metadata = &messagesMetadata{UserID: r.User}
	}
	return json.Marshal(out)
}

// continuesToolLoop reports whether the conversation ends with tool
// results answering the last assistant turn: the API then wants that
// assistant turn to begin with its thinking when thinking is on.
func continuesToolLoop(merged []Message) bool {
	n := len(merged)
	if n < 2 || merged[n-1].Role != "user" || merged[n-2].Role != "assistant" {
		return false
	}
	for _, p := range merged[n-1].Parts {
		if p.Type == PartToolResult {
			return true
		}
	}
	return false
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
		if p.Signer != "" && p.Signer != Messages {
			return messagesBlock{}, false // signed by another vendor: the API would refuse it
		}
		if p.Redacted != "" {
			return messagesBlock{Type: "redacted_thinking", Data: p.Redacted}, true
		}
		if p.Signature == "" {
			return messagesBlock{}, false // unsigned thinking cannot be replayed upstream
		}
		t := p.Text
		return messagesBlock{Type: "thinking", Thinking: &t, Signature: p.Signature}, true
	}
	return messagesBlock{}, false
}
