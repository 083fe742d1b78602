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
	ParallelToolCalls  *bool               `json:"parallel_tool_calls,omitempty"`
	Reasoning          *responsesReasoning `json:"reasoning,omitempty"`
	Text               *responsesText      `json:"text,omitempty"`
	PreviousResponseID string              `json:"previous_response_id,omitempty"`
	User               string              `json:"user,omitempty"`
	SafetyIdentifier   string              `json:"safety_identifier,omitempty"`
}

type responsesReasoning struct {
	Effort string `json:"effort,omitempty"`
}

// responsesText is the request's text configuration: its output format.
type responsesText struct {
	Format *responsesTextFormat `json:"format,omitempty"`
}

type responsesTextFormat struct {
	Type   string          `json:"type"`
	Name   string          `json:"name,omitempty"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict *bool           `json:"strict,omitempty"`
}

// responsesTool is a function, a custom (freeform) tool with its Format, or
// a namespace of such tools; other types are the API's own tools.
type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Format      json.RawMessage `json:"format,omitempty"`
	Tools       []responsesTool `json:"tools,omitempty"`
}

type responsesItem struct {
	Type             string                 `json:"type,omitempty"`
	ID               string                 `json:"id,omitempty"`
	Status           string                 `json:"status,omitempty"`
	Role             string                 `json:"role,omitempty"`
	Content          json.RawMessage        `json:"content,omitempty"`
	CallID           string                 `json:"call_id,omitempty"`
	Name             string                 `json:"name,omitempty"`
	Namespace        string                 `json:"namespace,omitempty"`
	Arguments        *string                `json:"arguments,omitempty"`
	Input            *string                `json:"input,omitempty"`
	Output           json.RawMessage        `json:"output,omitempty"`
	Summary          []responsesContentPart `json:"summary,omitempty"`
	EncryptedContent string                 `json:"encrypted_content,omitempty"`
	Tools            []responsesTool        `json:"tools,omitempty"`
	Reasoning        *responsesReasoning    `json:"reasoning,omitempty"`
}

type responsesContentPart struct {
	Type        string             `json:"type"`
	Text        string             `json:"text,omitempty"`
	ImageURL    string             `json:"image_url,omitempty"`
	Annotations *[]json.RawMessage `json:"annotations,omitempty"`
	Refusal     string             `json:"refusal,omitempty"`
}

func decodeResponsesRequest(body []byte) (*Request, error) {
	if err := requireObject("responses", body); err != nil {
		return nil, err
	}
	var in responsesRequest
	skipped, err := unmarshalLenient(body, &in)
	if err != nil {
		return nil, fmt.Errorf("responses request: %w", err)
	}
	if skipped {
		in.Temperature, in.TopP = numberField(body, in.Temperature, "temperature"), numberField(body, in.TopP, "top_p")
	}
	r := &Request{Model: in.Model, Temperature: in.Temperature, TopP: in.TopP, Stream: in.Stream, User: in.User,
		ParallelToolCalls: in.ParallelToolCalls}
	if r.User == "" {
		r.User = in.SafetyIdentifier
	}
	if in.MaxOutputTokens != nil && *in.MaxOutputTokens > 0 {
		r.MaxTokens = *in.MaxOutputTokens
	}
	if in.Instructions != "" {
		r.System = []string{in.Instructions}
	}
	if in.Reasoning != nil {
		r.ReasoningEffort = in.Reasoning.Effort
	}
	if t := in.Text; t != nil && t.Format != nil {
		switch f := t.Format; {
		case f.Type == "json_object":
			r.OutputFormat = &OutputFormat{Type: "json_object"}
		case f.Type == "json_schema" && len(f.Schema) > 0:
			r.OutputFormat = &OutputFormat{Type: "json_schema", Name: f.Name, Schema: f.Schema, Strict: f.Strict}
		}
	}
	r.addResponsesTools(in.Tools)
	switch {
	case len(in.Input) == 0 || string(in.Input) == "null":
	case in.Input[0] == '"':
		s, _ := rawString(in.Input)
		r.Messages = []Message{{Role: "user", Parts: []Part{{Type: PartText, Text: s}}}}
	case in.Input[0] == '[':
		var items []responsesItem
		_, _ = unmarshalLenient(in.Input, &items)
		for i := range items {
			r.addResponsesItem(&items[i])
		}
	default:
		return nil, fmt.Errorf("responses request: input is neither a string nor an array")
	}
	r.ToolChoice = decodeOpenAIToolChoice(in.ToolChoice)
	return r, nil
}

// addResponsesTools adds the functions and freeform tools of a tools list,
// those nested in namespace tools with their namespace. The API's own tools
// (web_search, file_search, tool_search, mcp, ...) have no equivalent
// elsewhere and are dropped.
func (r *Request) addResponsesTools(tools []responsesTool) {
	for _, t := range tools {
		if t.Type == "namespace" {
			for _, nt := range t.Tools {
				if tool, ok := nt.neutral(); ok {
					tool.Namespace = t.Name
					if t.Description != "" {
						tool.Description += "\n\n(" + t.Name + ": " + t.Description + ")"
					}
					r.Tools = append(r.Tools, tool)
				}
			}
			continue
		}
		if tool, ok := t.neutral(); ok {
			r.Tools = append(r.Tools, tool)
		}
	}
}

func (t *responsesTool) neutral() (Tool, bool) {
	switch {
	case t.Name == "":
	case t.Type == "function":
		return Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters}, true
	case t.Type == "custom":
		return Tool{Name: t.Name, Description: t.Description, Custom: true, Format: t.Format}, true
	}
	return Tool{}, false
}

// addResponsesItem adds one input item. Kinds without an equivalent (the
// API's own tool calls, item references, compaction, ...) are dropped.
func (r *Request) addResponsesItem(it *responsesItem) {
	switch it.Type {
	case "", "message":
		switch it.Role {
		case "system", "developer":
			if t := responsesTextOf(it.Content); t != "" {
				r.addSystem([]Part{{Type: PartText, Text: t}})
			}
		case "assistant":
			r.appendParts("assistant", responsesParts(it.Content)...)
		default:
			r.appendParts("user", responsesParts(it.Content)...)
		}
	case "function_call":
		args := ""
		if it.Arguments != nil {
			args = *it.Arguments
		}
		r.appendParts("assistant", Part{Type: PartToolCall, ID: it.CallID, Name: it.Name, Namespace: it.Namespace, Arguments: args})
	case "custom_tool_call":
		input := ""
		if it.Input != nil {
			input = *it.Input
		}
		r.appendParts("assistant", Part{Type: PartToolCall, ID: it.CallID, Name: it.Name, Namespace: it.Namespace, Custom: true, Input: input})
	case "function_call_output", "custom_tool_call_output":
		r.appendParts("user", Part{Type: PartToolResult, ID: it.CallID, Text: contentText(it.Output, 0)})
	case "reasoning":
		if p, ok := decodeReasoning(it.EncryptedContent); ok {
			r.appendParts("assistant", p)
			break
		}
		// OpenAI's own reasoning: its encrypted_content means nothing to
		// another vendor, and the summary is not thinking a model signed.
		var b strings.Builder
		for _, s := range it.Summary {
			b.WriteString(s.Text)
		}
		r.appendParts("assistant", Part{Type: PartThinking, Text: b.String()})
	case "additional_tools":
		r.addResponsesTools(it.Tools)
	case "configuration_update":
		// A setting stays in effect until a later update replaces it.
		if it.Reasoning != nil && it.Reasoning.Effort != "" {
			r.ReasoningEffort = it.Reasoning.Effort
		}
	}
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

// responsesTextOf is the text of a message's content: a string, or the text
// of its parts.
func responsesTextOf(raw json.RawMessage) string {
	return contentText(raw, 0)
}

// responsesParts reads a message's content: a string, or parts (text,
// images; others by the fallback rule for blocks).
func responsesParts(raw json.RawMessage) []Part {
	if s, ok := rawString(raw); ok {
		return []Part{{Type: PartText, Text: s}}
	}
	if len(raw) == 0 || raw[0] != '[' {
		return nil
	}
	var cs []responsesContentPart
	_, _ = unmarshalLenient(raw, &cs)
	out := make([]Part, 0, len(cs))
	for _, c := range cs {
		switch c.Type {
		case "input_text", "output_text", "text":
			out = append(out, Part{Type: PartText, Text: c.Text})
		case "refusal":
			out = append(out, Part{Type: PartText, Text: c.Refusal})
		case "input_image":
			if c.ImageURL != "" {
				out = append(out, imagePart(c.ImageURL))
			}
		default:
			if t := (&anyBlock{Text: c.Text, Refusal: c.Refusal}).text(0); t != "" {
				out = append(out, Part{Type: PartText, Text: t})
			}
		}
	}
	return out
}

func encodeResponsesRequest(r *Request, model string) ([]byte, error) {
	out := responsesRequest{Model: model, Temperature: clamp(r.Temperature, 0, 2), TopP: clamp(r.TopP, 0, 1), Stream: r.Stream, User: r.User,
		Instructions: strings.Join(r.System, "\n\n")}
	if r.MaxTokens > 0 {
		out.MaxOutputTokens = ptr(r.MaxTokens)
	}
	if r.ReasoningEffort != "" {
		out.Reasoning = &responsesReasoning{Effort: openAIEffort(r.ReasoningEffort)}
	}
	items := make([]any, 0, len(r.Messages))
	for _, m := range r.Messages {
		if m.Role == "system" {
			if t := partsText(m.Parts); t != "" {
				items = append(items, responsesItem{Type: "message", Role: "developer", Content: mustJSON([]responsesContentPart{{Type: "input_text", Text: t}})})
			}
			continue
		}
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
	for _, t := range narrowTools(r) {
		out.Tools = append(out.Tools, responsesTool{Type: "function", Name: t.Name, Description: t.Description,
			Parameters: validJSONOr(string(t.Parameters), `{"type":"object"}`)})
	}
	if len(out.Tools) > 0 {
		if tc := r.ToolChoice; tc != nil {
			if tc.Mode == "tool" {
				out.ToolChoice = mustJSON(map[string]string{"type": "function", "name": tc.Name})
			} else {
				out.ToolChoice = mustJSON(tc.Mode)
			}
		}
		out.ParallelToolCalls = r.ParallelToolCalls
	}
	if f := r.OutputFormat; f != nil {
		tf := &responsesTextFormat{Type: f.Type}
		if f.Type == "json_schema" {
			tf.Name, tf.Schema, tf.Strict = outputFormatName(f), f.Schema, f.Strict
		}
		out.Text = &responsesText{Format: tf}
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
