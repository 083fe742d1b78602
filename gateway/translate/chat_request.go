package translate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Codec of the chat_completions protocol (OpenAI Chat Completions wire
// format): requests.

type chatRequest struct {
	Model               string             `json:"model"`
	Messages            []chatMessage      `json:"messages"`
	MaxTokens           *int64             `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int64             `json:"max_completion_tokens,omitempty"`
	Temperature         *float64           `json:"temperature,omitempty"`
	TopP                *float64           `json:"top_p,omitempty"`
	Stop                json.RawMessage    `json:"stop,omitempty"`
	Stream              bool               `json:"stream,omitempty"`
	StreamOptions       *chatStreamOptions `json:"stream_options,omitempty"`
	Tools               []chatTool         `json:"tools,omitempty"`
	ToolChoice          json.RawMessage    `json:"tool_choice,omitempty"`
	ReasoningEffort     string             `json:"reasoning_effort,omitempty"`
	User                string             `json:"user,omitempty"`
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
	ImageURL *chatImageURL `json:"image_url,omitempty"`
}

type chatImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

type chatToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

func decodeChatRequest(body []byte) (*Request, error) {
	var in chatRequest
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
	var parts []chatContentPart
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
	var parts []chatContentPart
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
	out := chatRequest{Model: model, Temperature: r.Temperature, TopP: r.TopP, Stream: r.Stream,
		ReasoningEffort: r.ReasoningEffort, User: r.User}
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
		if m.Role == "assistant" {
			msg := chatMessage{Role: "assistant"}
			var text strings.Builder
			for _, p := range m.Parts {
				switch p.Type {
				case PartText:
					text.WriteString(p.Text)
				case PartToolCall:
					var tc chatToolCall
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
	for _, t := range r.Tools {
		var ct chatTool
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
