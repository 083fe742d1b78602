package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// Codec of the gemini protocol (Google Gemini API generateContent wire
// format): requests. Gemini is an upstream protocol only: the gateway encodes
// requests in it and decodes its answers, never the other way round.

type geminiRequest struct {
	Contents          []geminiContent         `json:"contents"`
	SystemInstruction *geminiContent          `json:"systemInstruction,omitempty"`
	Tools             []geminiTool            `json:"tools,omitempty"`
	ToolConfig        *geminiToolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *geminiGenerationConfig `json:"generationConfig,omitempty"`
}

type geminiContent struct {
	Role  string       `json:"role,omitempty"`
	Parts []geminiPart `json:"parts"`
}

type geminiPart struct {
	Text             *string                 `json:"text,omitempty"`
	Thought          bool                    `json:"thought,omitempty"`
	ThoughtSignature string                  `json:"thoughtSignature,omitempty"`
	InlineData       *geminiBlob             `json:"inlineData,omitempty"`
	FunctionCall     *geminiFunctionCall     `json:"functionCall,omitempty"`
	FunctionResponse *geminiFunctionResponse `json:"functionResponse,omitempty"`
}

type geminiBlob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type geminiFunctionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type geminiFunctionResponse struct {
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type geminiTool struct {
	FunctionDeclarations []geminiFunctionDeclaration `json:"functionDeclarations"`
}

type geminiFunctionDeclaration struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type geminiToolConfig struct {
	FunctionCallingConfig geminiFunctionCallingConfig `json:"functionCallingConfig"`
}

type geminiFunctionCallingConfig struct {
	Mode                 string   `json:"mode"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type geminiGenerationConfig struct {
	MaxOutputTokens    int64                 `json:"maxOutputTokens,omitempty"`
	Temperature        *float64              `json:"temperature,omitempty"`
	TopP               *float64              `json:"topP,omitempty"`
	StopSequences      []string              `json:"stopSequences,omitempty"`
	ResponseMimeType   string                `json:"responseMimeType,omitempty"`
	ResponseJSONSchema json.RawMessage       `json:"responseJsonSchema,omitempty"`
	ThinkingConfig     *geminiThinkingConfig `json:"thinkingConfig,omitempty"`
}

type geminiThinkingConfig struct {
	IncludeThoughts bool  `json:"includeThoughts,omitempty"`
	ThinkingBudget  int64 `json:"thinkingBudget"`
}

// skipThoughtSignature goes on every functionCall part sent back. Gemini 3
// refuses a function call of the current turn without the thoughtSignature
// it returned with it, and no client protocol carries that signature back;
// this is the value Google documents for history it did not sign
// (ai.google.dev/gemini-api/docs/thought-signatures).
const skipThoughtSignature = "skip_thought_signature_validator"

// errGeminiImageURL: the Gemini API reads images inline (inlineData) or
// from its own File API (fileData); it does not fetch arbitrary URLs.
var errGeminiImageURL = errors.New("gemini upstream: images must be inline (data: URLs); image URLs are not supported")

// encodeGeminiRequest renders r as a generateContent body. The model is not
// part of the body (it is in the URL path), and neither is the stream flag
// (streamGenerateContent is another method).
func encodeGeminiRequest(r *Request, _ string) ([]byte, error) {
	out := geminiRequest{Contents: []geminiContent{}}
	if prompts := r.systemPrompts(); len(prompts) > 0 {
		sys := &geminiContent{}
		for _, s := range prompts {
			sys.Parts = append(sys.Parts, geminiPart{Text: ptr(s)})
		}
		out.SystemInstruction = sys
	}
	// Tool results name the function, not the call: Gemini matches a
	// functionResponse to its functionCall by name, so the names of the
	// conversation's calls are looked up by call ID.
	callNames := map[string]string{}
	for _, m := range r.turns() {
		role := "user"
		if m.Role == "assistant" {
			role = "model"
		}
		var parts []geminiPart
		for _, p := range m.Parts {
			switch p.Type {
			case PartText:
				if p.Text != "" {
					parts = append(parts, geminiPart{Text: ptr(p.Text)})
				}
			case PartImage:
				mt, data := p.MediaType, p.Data
				if p.ImageURL != "" {
					var ok bool
					if mt, data, ok = splitDataURL(p.ImageURL); !ok {
						return nil, errGeminiImageURL
					}
				}
				parts = append(parts, geminiPart{InlineData: &geminiBlob{MimeType: mt, Data: data}})
			case PartToolCall:
				callNames[p.ID] = p.Name
				parts = append(parts, geminiPart{FunctionCall: &geminiFunctionCall{Name: p.Name, Args: validJSONOr(p.Arguments, "{}")},
					ThoughtSignature: skipThoughtSignature})
			case PartToolResult:
				name := callNames[p.ID]
				if name == "" {
					name = p.ID
				}
				parts = append(parts, geminiPart{FunctionResponse: &geminiFunctionResponse{Name: name, Response: geminiToolResponse(p)}})
			}
			// Thinking parts are not sent back: Gemini's thoughts are
			// summaries, and a thought part in the history is not an input
			// the API accepts from other vendors' signatures.
		}
		if len(parts) == 0 {
			continue
		}
		// Gemini wants turns to alternate; a chat client's consecutive tool
		// messages (each its own user turn here) become one turn.
		if n := len(out.Contents); n > 0 && out.Contents[n-1].Role == role {
			out.Contents[n-1].Parts = append(out.Contents[n-1].Parts, parts...)
			continue
		}
		out.Contents = append(out.Contents, geminiContent{Role: role, Parts: parts})
	}
	tools := narrowTools(r)
	if len(tools) > 0 {
		t := geminiTool{}
		for _, tl := range tools {
			t.FunctionDeclarations = append(t.FunctionDeclarations, geminiFunctionDeclaration{Name: tl.Name,
				Description: tl.Description, Parameters: withoutSchemaKeyword(tl.Parameters)})
		}
		out.Tools = []geminiTool{t}
	}
	if tc := r.ToolChoice; tc != nil && len(tools) > 0 {
		c := geminiFunctionCallingConfig{Mode: "AUTO"}
		switch tc.Mode {
		case "none":
			c.Mode = "NONE"
		case "required":
			c.Mode = "ANY"
		case "tool":
			c.Mode, c.AllowedFunctionNames = "ANY", []string{tc.Name}
		}
		out.ToolConfig = &geminiToolConfig{FunctionCallingConfig: c}
	}
	gc := geminiGenerationConfig{MaxOutputTokens: r.MaxTokens, Temperature: clamp(r.Temperature, 0, 2), TopP: clamp(r.TopP, 0, 1), StopSequences: r.Stop}
	budget := r.ThinkingBudget
	if budget == 0 {
		budget = effortBudget(r.ReasoningEffort)
	}
	switch {
	case budget > 0:
		gc.ThinkingConfig = &geminiThinkingConfig{IncludeThoughts: !r.HideThinking, ThinkingBudget: min(budget, geminiMaxThinkingBudget)}
	case r.ReasoningEffort == "none":
		gc.ThinkingConfig = &geminiThinkingConfig{ThinkingBudget: 0}
	}
	if f := r.OutputFormat; f != nil {
		gc.ResponseMimeType = "application/json"
		if f.Type == "json_schema" {
			gc.ResponseJSONSchema = withoutSchemaKeyword(f.Schema)
		}
	}
	if gc.MaxOutputTokens > 0 || gc.Temperature != nil || gc.TopP != nil || len(gc.StopSequences) > 0 || gc.ThinkingConfig != nil || gc.ResponseMimeType != "" {
		out.GenerationConfig = &gc
	}
	return json.Marshal(out)
}

// geminiMaxThinkingBudget is the largest thinking budget every Gemini 2.5
// model takes (Flash's; Pro's is 32768): a messages client's budget of up
// to 31999 would be refused by Flash.
const geminiMaxThinkingBudget = 24576

// withoutSchemaKeyword removes a JSON schema's top-level "$schema" member,
// which Gemini refuses ("Unknown name"); Claude Code sends it on every
// tool.
func withoutSchemaKeyword(schema json.RawMessage) json.RawMessage {
	if !bytes.Contains(schema, []byte(`"$schema"`)) {
		return schema
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(schema, &m) != nil {
		return schema
	}
	delete(m, "$schema")
	out, err := json.Marshal(m)
	if err != nil {
		return schema
	}
	return out
}

// geminiToolResponse is a tool result as functionResponse.response, which
// must be a JSON object: an object result as is, any other under "output"
// (or "error" for a failed call), the keys the API reference suggests.
func geminiToolResponse(p Part) json.RawMessage {
	key := "output"
	if p.IsError {
		key = "error"
	} else if t := strings.TrimSpace(p.Text); strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(map[string]string{key: p.Text})
	return b
}
