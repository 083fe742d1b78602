package translate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Codec of the responses protocol (OpenAI Responses API wire format):
// requests.

type responsesRequest struct {
	Model              string              `json:"model"`
	Input              json.RawMessage     `json:"input"`
	Instructions       string              `json:"instructions,omitempty"`
	MaxOutputTokens    *int64              `json:"max_output_tokens,omitempty"`
	Temperature        *float64            `json:"temperature,omitempty"`
	TopP               *float64            `json:"top_p,omitempty"`
	Stream             bool                `json:"stream,omitempty"`
	Tools              []responsesTool     `json:"tools,omitempty"`
	ToolChoice         json.RawMessage     `json:"tool_choice,omitempty"`
	Reasoning          *responsesReasoning `json:"reasoning,omitempty"`
	PreviousResponseID string              `json:"previous_response_id,omitempty"`
	User               string              `json:"user,omitempty"`
}

type responsesReasoning struct {
	Effort string `json:"effort,omitempty"`
}

type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

type responsesItem struct {
	Type      string                 `json:"type,omitempty"`
	ID        string                 `json:"id,omitempty"`
	Status    string                 `json:"status,omitempty"`
	Role      string                 `json:"role,omitempty"`
	Content   json.RawMessage        `json:"content,omitempty"`
	CallID    string                 `json:"call_id,omitempty"`
	Name      string                 `json:"name,omitempty"`
	Arguments *string                `json:"arguments,omitempty"`
	Output    json.RawMessage        `json:"output,omitempty"`
	Summary   []responsesContentPart `json:"summary,omitempty"`
}

type responsesContentPart struct {
	Type        string             `json:"type"`
	Text        string             `json:"text,omitempty"`
	ImageURL    string             `json:"image_url,omitempty"`
	Annotations *[]json.RawMessage `json:"annotations,omitempty"`
	Refusal     string             `json:"refusal,omitempty"`
}

func decodeResponsesRequest(body []byte) (*Request, error) {
	var in responsesRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("responses request: %w", err)
	}
	r := &Request{Model: in.Model, Temperature: in.Temperature, TopP: in.TopP, Stream: in.Stream, User: in.User}
	if in.MaxOutputTokens != nil {
		r.MaxTokens = *in.MaxOutputTokens
	}
	if in.Instructions != "" {
		r.System = []string{in.Instructions}
	}
	if in.Reasoning != nil {
		r.ReasoningEffort = in.Reasoning.Effort
	}
	if s, ok := rawString(in.Input); ok {
		r.Messages = []Message{{Role: "user", Parts: []Part{{Type: PartText, Text: s}}}}
	} else if len(in.Input) > 0 {
		var items []responsesItem
		if err := json.Unmarshal(in.Input, &items); err != nil {
			return nil, fmt.Errorf("responses input: %w", err)
		}
		for _, it := range items {
			switch it.Type {
			case "", "message":
				if it.Role == "system" || it.Role == "developer" {
					r.System = append(r.System, responsesText(it.Content))
					continue
				}
				parts, err := responsesParts(it.Content)
				if err != nil {
					return nil, err
				}
				role := "user"
				if it.Role == "assistant" {
					role = "assistant"
				}
				r.appendParts(role, parts...)
			case "function_call":
				args := ""
				if it.Arguments != nil {
					args = *it.Arguments
				}
				r.appendParts("assistant", Part{Type: PartToolCall, ID: it.CallID, Name: it.Name, Arguments: args})
			case "function_call_output":
				out, _ := rawString(it.Output)
				if out == "" && len(it.Output) > 0 && it.Output[0] == '[' {
					out = responsesText(it.Output)
				}
				r.appendParts("user", Part{Type: PartToolResult, ID: it.CallID, Text: out})
			case "reasoning":
				var b strings.Builder
				for _, s := range it.Summary {
					b.WriteString(s.Text)
				}
				r.appendParts("assistant", Part{Type: PartThinking, Text: b.String()})
			}
		}
	}
	for _, t := range in.Tools {
		if t.Type != "function" {
			continue // web_search_preview etc. have no equivalent upstream
		}
		r.Tools = append(r.Tools, Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	r.ToolChoice = decodeOpenAIToolChoice(in.ToolChoice)
	return r, nil
}

// appendParts adds parts to the last message when it has the same role (so a
// run of function_call items becomes one assistant turn), else a new one.
func (r *Request) appendParts(role string, parts ...Part) {
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role && role == "assistant" {
		r.Messages[n-1].Parts = append(r.Messages[n-1].Parts, parts...)
		return
	}
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role && len(parts) > 0 && parts[0].Type == PartToolResult {
		last := r.Messages[n-1].Parts
		if len(last) > 0 && last[len(last)-1].Type == PartToolResult {
			r.Messages[n-1].Parts = append(last, parts...)
			return
		}
	}
	r.Messages = append(r.Messages, Message{Role: role, Parts: parts})
}

func responsesText(raw json.RawMessage) string {
	if s, ok := rawString(raw); ok {
		return s
	}
	var cs []responsesContentPart
	if json.Unmarshal(raw, &cs) != nil {
		return ""
	}
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.Text)
	}
	return b.String()
}

func responsesParts(raw json.RawMessage) ([]Part, error) {
	if s, ok := rawString(raw); ok {
		return []Part{{Type: PartText, Text: s}}, nil
	}
	var cs []responsesContentPart
	if err := json.Unmarshal(raw, &cs); err != nil {
		return nil, fmt.Errorf("responses content: %w", err)
	}
	out := make([]Part, 0, len(cs))
	for _, c := range cs {
		switch c.Type {
		case "input_text", "output_text", "text":
			out = append(out, Part{Type: PartText, Text: c.Text})
		case "refusal":
			out = append(out, Part{Type: PartText, Text: c.Refusal})
		case "input_image":
			out = append(out, imagePart(c.ImageURL))
		}
	}
	return out, nil
}

func encodeResponsesRequest(r *Request, model string) ([]byte, error) {
	out := responsesRequest{Model: model, Temperature: r.Temperature, TopP: r.TopP, Stream: r.Stream, User: r.User,
		Instructions: strings.Join(r.System, "\n\n")}
	if r.MaxTokens > 0 {
		out.MaxOutputTokens = ptr(r.MaxTokens)
	}
	if r.ReasoningEffort != "" {
		out.Reasoning = &responsesReasoning{Effort: r.ReasoningEffort}
	}
	items := make([]any, 0, len(r.Messages))
	for _, m := range r.Messages {
		var content []responsesContentPart
		flush := func() {
			if len(content) > 0 {
				items = append(items, responsesItem{Type: "message", Role: m.Role, Content: mustJSON(content)})
				content = nil
			}
		}
		for _, p := range m.Parts {
			switch p.Type {
			case PartText:
				if m.Role == "assistant" {
					content = append(content, responsesContentPart{Type: "output_text", Text: p.Text, Annotations: &[]json.RawMessage{}})
				} else {
					content = append(content, responsesContentPart{Type: "input_text", Text: p.Text})
				}
			case PartImage:
				content = append(content, responsesContentPart{Type: "input_image", ImageURL: imageURL(p)})
			case PartToolCall:
				flush()
				args := string(validJSONOr(p.Arguments, "{}"))
				items = append(items, responsesItem{Type: "function_call", CallID: p.ID, Name: p.Name, Arguments: &args})
			case PartToolResult:
				flush()
				items = append(items, responsesItem{Type: "function_call_output", CallID: p.ID, Output: mustJSON(p.Text)})
			}
		}
		flush()
	}
	out.Input = mustJSON(items)
	for _, t := range r.Tools {
		out.Tools = append(out.Tools, responsesTool{Type: "function", Name: t.Name, Description: t.Description,
			Parameters: validJSONOr(string(t.Parameters), `{"type":"object"}`)})
	}
	if tc := r.ToolChoice; tc != nil && len(out.Tools) > 0 {
		if tc.Mode == "tool" {
			out.ToolChoice = mustJSON(map[string]string{"type": "function", "name": tc.Name})
		} else {
			out.ToolChoice = mustJSON(tc.Mode)
		}
	}
	return json.Marshal(out)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
