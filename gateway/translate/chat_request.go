package translate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Codec of the chat_completions protocol (OpenAI Chat Completions wire
// format): requests.

type chatRequest struct {
	Model               string              `json:"model"`
	Messages            []chatMessage       `json:"messages"`
	MaxTokens           *int64              `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int64              `json:"max_completion_tokens,omitempty"`
	Temperature         *float64            `json:"temperature,omitempty"`
	TopP                *float64            `json:"top_p,omitempty"`
	Stop                json.RawMessage     `json:"stop,omitempty"`
	Stream              bool                `json:"stream,omitempty"`
	StreamOptions       *chatStreamOptions  `json:"stream_options,omitempty"`
	Tools               []chatTool          `json:"tools,omitempty"`
	ToolChoice          json.RawMessage     `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool               `json:"parallel_tool_calls,omitempty"`
	ReasoningEffort     string              `json:"reasoning_effort,omitempty"`
	ResponseFormat      *chatResponseFormat `json:"response_format,omitempty"`
	User                string              `json:"user,omitempty"`
	SafetyIdentifier    string              `json:"safety_identifier,omitempty"`
}

type chatStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content,omitempty"`
	ToolCalls        []chatToolCall  `json:"tool_calls,omitempty"`
	ToolCallID       string          `json:"tool_call_id,omitempty"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	Refusal          *string         `json:"refusal,omitempty"`
}

type chatContentPart struct {
	Type     string        `json:"type"`
	Text     string        `json:"text,omitempty"`
	Refusal  string        `json:"refusal,omitempty"`
	ImageURL *chatImageURL `json:"image_url,omitempty"`
}

type chatImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// chatToolCall is a function call, or a custom (freeform) tool's call
// when Type is "custom".
type chatToolCall struct {
	Index    *int              `json:"index,omitempty"`
	ID       string            `json:"id,omitempty"`
	Type     string            `json:"type,omitempty"`
	Function *chatFunctionCall `json:"function,omitempty"`
	Custom   *chatCustomCall   `json:"custom,omitempty"`
}

type chatFunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// function is the call's function name and arguments ("" when it has no
// function member).
func (tc *chatToolCall) function() (name, args string) {
	if tc.Function == nil {
		return "", ""
	}
	return tc.Function.Name, tc.Function.Arguments
}

// part is the neutral tool call of a chat tool call.
func (tc *chatToolCall) part() Part {
	if tc.Type == "custom" && tc.Custom != nil {
		return Part{Type: PartToolCall, ID: tc.ID, Name: tc.Custom.Name, Custom: true, Input: tc.Custom.Input}
	}
	name, args := tc.function()
	return Part{Type: PartToolCall, ID: tc.ID, Name: name, Arguments: args}
}

// chatToolCallOf is the chat tool call of a neutral one: a custom tool's
// call for a freeform tool of the client's, else a function call.
func chatToolCallOf(p Part) chatToolCall {
	if p.Custom {
		return chatToolCall{ID: p.ID, Type: "custom", Custom: &chatCustomCall{Name: p.Name, Input: p.Input}}
	}
	return chatToolCall{ID: p.ID, Type: "function", Function: &chatFunctionCall{Name: p.Name, Arguments: p.Arguments}}
}

type chatCustomCall struct {
	Name  string `json:"name,omitempty"`
	Input string `json:"input"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
	Custom *chatCustomTool `json:"custom,omitempty"`
}

type chatCustomTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Format      json.RawMessage `json:"format,omitempty"`
}

type chatResponseFormat struct {
	Type       string          `json:"type"`
	JSONSchema *chatJSONSchema `json:"json_schema,omitempty"`
}

type chatJSONSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict *bool           `json:"strict,omitempty"`
}

func decodeChatRequest(body []byte) (*Request, error) {
	if err := requireObject("chat completions", body); err != nil {
		return nil, err
	}
	if err := requireArray("chat completions", body, "messages"); err != nil {
		return nil, err
	}
	var in chatRequest
	skipped, err := unmarshalLenient(body, &in)
	if err != nil {
		return nil, fmt.Errorf("chat completions request: %w", err)
	}
	if skipped {
		in.Temperature, in.TopP = numberField(body, in.Temperature, "temperature"), numberField(body, in.TopP, "top_p")
	}
	r := &Request{Model: in.Model, Temperature: in.Temperature, TopP: in.TopP, Stream: in.Stream,
		ReasoningEffort: in.ReasoningEffort, User: in.User, ParallelToolCalls: in.ParallelToolCalls}
	if r.User == "" {
		r.User = in.SafetyIdentifier
	}
	switch {
	case in.MaxCompletionTokens != nil && *in.MaxCompletionTokens > 0:
		r.MaxTokens = *in.MaxCompletionTokens
	case in.MaxTokens != nil && *in.MaxTokens > 0:
		r.MaxTokens = *in.MaxTokens
	}
	if s, ok := rawString(in.Stop); ok {
		r.Stop = []string{s}
	} else if len(in.Stop) > 0 && in.Stop[0] == '[' {
		_, _ = unmarshalLenient(in.Stop, &r.Stop)
	}
	for _, m := range in.Messages {
		switch m.Role {
		case "system", "developer":
			if t := chatText(m.Content); t != "" {
				r.addSystem([]Part{{Type: PartText, Text: t}})
			}
		case "tool":
			r.Messages = append(r.Messages, Message{Role: "user", Parts: []Part{{Type: PartToolResult, ID: m.ToolCallID, Text: chatText(m.Content)}}})
		case "assistant":
			msg := Message{Role: "assistant"}
			if m.ReasoningContent != "" {
				msg.Parts = append(msg.Parts, Part{Type: PartThinking, Text: m.ReasoningContent})
			}
			if t := chatText(m.Content); t != "" {
				msg.Parts = append(msg.Parts, Part{Type: PartText, Text: t})
			} else if m.Refusal != nil && *m.Refusal != "" {
				msg.Parts = append(msg.Parts, Part{Type: PartText, Text: *m.Refusal})
			}
			for i := range m.ToolCalls {
				msg.Parts = append(msg.Parts, m.ToolCalls[i].part())
			}
			r.Messages = append(r.Messages, msg)
		default:
			r.Messages = append(r.Messages, Message{Role: "user", Parts: chatParts(m.Content)})
		}
	}
	for _, t := range in.Tools {
		switch {
		case t.Type == "function" && t.Function.Name != "":
			r.Tools = append(r.Tools, Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
		case t.Type == "custom" && t.Custom != nil && t.Custom.Name != "":
			r.Tools = append(r.Tools, Tool{Name: t.Custom.Name, Description: t.Custom.Description, Custom: true, Format: t.Custom.Format})
		}
	}
	r.ToolChoice = decodeOpenAIToolChoice(in.ToolChoice)
	if f := in.ResponseFormat; f != nil {
		switch {
		case f.Type == "json_object":
			r.OutputFormat = &OutputFormat{Type: "json_object"}
		case f.Type == "json_schema" && f.JSONSchema != nil && len(f.JSONSchema.Schema) > 0:
			r.OutputFormat = &OutputFormat{Type: "json_schema", Name: f.JSONSchema.Name, Schema: f.JSONSchema.Schema, Strict: f.JSONSchema.Strict}
		}
	}
	return r, nil
}

// openAIToolRef names a tool in a tool choice: the chat shapes
// {"type":"function","function":{"name"}} and {"type":"custom","custom":
// {"name"}}, and the responses ones {"type":"function"|"custom","name"}.
type openAIToolRef struct {
	Type     string `json:"type"`
	Name     string `json:"name"`
	Function *struct {
		Name string `json:"name"`
	} `json:"function"`
	Custom *struct {
		Name string `json:"name"`
	} `json:"custom"`
}

func (t *openAIToolRef) name() string {
	switch {
	case t.Type != "function" && t.Type != "custom":
		return ""
	case t.Name != "":
		return t.Name
	case t.Function != nil:
		return t.Function.Name
	case t.Custom != nil:
		return t.Custom.Name
	}
	return ""
}

// decodeOpenAIToolChoice reads the chat and responses tool choices: a mode
// string, a named function or custom tool, or allowed_tools (chat nests
// mode and tools in "allowed_tools"). A choice of a hosted tool
// (web_search_preview, file_search, mcp, ...) has no equivalent: nil.
func decodeOpenAIToolChoice(raw json.RawMessage) *ToolChoice {
	if s, ok := rawString(raw); ok {
		switch s {
		case "auto", "none", "required":
			return &ToolChoice{Mode: s}
		}
		return nil
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	type allowed struct {
		Mode  string          `json:"mode"`
		Tools []openAIToolRef `json:"tools"`
	}
	var tc struct {
		openAIToolRef
		allowed
		AllowedTools *allowed `json:"allowed_tools"`
	}
	_, _ = unmarshalLenient(raw, &tc)
	if tc.Type == "allowed_tools" {
		a := tc.allowed
		if tc.AllowedTools != nil {
			a = *tc.AllowedTools
		}
		c := &ToolChoice{Mode: "auto"}
		if a.Mode == "required" {
			c.Mode = "required"
		}
		for i := range a.Tools {
			if n := a.Tools[i].name(); n != "" {
				c.Allowed = append(c.Allowed, n)
			}
		}
		return c
	}
	if n := tc.name(); n != "" {
		return &ToolChoice{Mode: "tool", Name: n}
	}
	return nil
}

func chatText(raw json.RawMessage) string {
	if s, ok := rawString(raw); ok {
		return s
	}
	if len(raw) == 0 || raw[0] != '[' {
		return ""
	}
	var parts []chatContentPart
	_, _ = unmarshalLenient(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// chatParts reads a user message's content: a string, or parts (text,
// image_url; others by the fallback rule for blocks).
func chatParts(raw json.RawMessage) []Part {
	if s, ok := rawString(raw); ok {
		return []Part{{Type: PartText, Text: s}}
	}
	if len(raw) == 0 || raw[0] != '[' {
		return nil
	}
	var parts []chatContentPart
	_, _ = unmarshalLenient(raw, &parts)
	out := make([]Part, 0, len(parts))
	for _, p := range parts {
		switch p.Type {
		case "text":
			out = append(out, Part{Type: PartText, Text: p.Text})
		case "image_url":
			if p.ImageURL != nil && p.ImageURL.URL != "" {
				out = append(out, imagePart(p.ImageURL.URL))
			}
		default:
			if t := (&anyBlock{Text: p.Text, Refusal: p.Refusal}).text(0); t != "" {
				out = append(out, Part{Type: PartText, Text: t})
			}
		}
	}
	return out
}

func imagePart(u string) Part {
	if mt, data, ok := splitDataURL(u); ok {
		return Part{Type: PartImage, MediaType: mt, Data: data}
	}
	return Part{Type: PartImage, ImageURL: u}
}

func encodeChatRequest(r *Request, model string) ([]byte, error) {
	out := chatRequest{Model: model, Temperature: clamp(r.Temperature, 0, 2), TopP: clamp(r.TopP, 0, 1), Stream: r.Stream,
		ReasoningEffort: openAIEffort(r.ReasoningEffort), User: r.User}
	if r.ReasoningEffort == "none" {
		out.ReasoningEffort = ""
	}
	if r.MaxTokens > 0 {
		out.MaxCompletionTokens = ptr(r.MaxTokens)
	}
	if r.Stream {
		out.StreamOptions = &chatStreamOptions{IncludeUsage: true}
	}
	if len(r.Stop) > 0 {
		out.Stop, _ = json.Marshal(r.Stop)
	}
	for _, s := range r.System {
		c, _ := json.Marshal(s)
		out.Messages = append(out.Messages, chatMessage{Role: "system", Content: c})
	}
	for _, m := range r.Messages {
		switch m.Role {
		case "system":
			if t := partsText(m.Parts); t != "" {
				c, _ := json.Marshal(t)
				out.Messages = append(out.Messages, chatMessage{Role: "system", Content: c})
			}
			continue
		case "assistant":
			msg := chatMessage{Role: "assistant"}
			var text strings.Builder
			for _, p := range m.Parts {
				switch p.Type {
				case PartText:
					text.WriteString(p.Text)
				case PartToolCall:
					p.Arguments = string(validJSONOr(p.Arguments, "{}"))
					msg.ToolCalls = append(msg.ToolCalls, chatToolCallOf(p))
				}
			}
			if text.Len() > 0 || len(msg.ToolCalls) == 0 {
				msg.Content, _ = json.Marshal(text.String())
			}
			out.Messages = append(out.Messages, msg)
			continue
		}
		var parts []chatContentPart
		for _, p := range m.Parts {
			switch p.Type {
			case PartToolResult:
				c, _ := json.Marshal(p.Text)
				out.Messages = append(out.Messages, chatMessage{Role: "tool", ToolCallID: p.ID, Content: c})
			case PartText:
				parts = append(parts, chatContentPart{Type: "text", Text: p.Text})
			case PartImage:
				parts = append(parts, chatContentPart{Type: "image_url", ImageURL: &chatImageURL{URL: imageURL(p)}})
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
		out.Messages = append(out.Messages, chatMessage{Role: "user", Content: c})
	}
	for _, t := range narrowTools(r) {
		var ct chatTool
		ct.Type = "function"
		ct.Function.Name, ct.Function.Description = t.Name, t.Description
		ct.Function.Parameters = validJSONOr(string(t.Parameters), `{"type":"object"}`)
		out.Tools = append(out.Tools, ct)
	}
	if len(out.Tools) > 0 {
		if tc := r.ToolChoice; tc != nil {
			if tc.Mode == "tool" {
				out.ToolChoice, _ = json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}})
			} else {
				out.ToolChoice, _ = json.Marshal(tc.Mode)
			}
		}
		out.ParallelToolCalls = r.ParallelToolCalls
	}
	out.ResponseFormat = chatResponseFormatOf(r.OutputFormat)
	return json.Marshal(out)
}

func chatResponseFormatOf(f *OutputFormat) *chatResponseFormat {
	switch {
	case f == nil:
		return nil
	case f.Type == "json_object":
		return &chatResponseFormat{Type: "json_object"}
	}
	return &chatResponseFormat{Type: "json_schema", JSONSchema: &chatJSONSchema{Name: outputFormatName(f), Schema: f.Schema, Strict: f.Strict}}
}

// outputFormatName is a structured output's name, which the OpenAI
// protocols require: the client's, else "output".
func outputFormatName(f *OutputFormat) string {
	if validToolName(f.Name) {
		return f.Name
	}
	return "output"
}
