package translate

import (
	"encoding/json"
	"errors"
	"strings"
)

// Codec of the gemini protocol (Google Gemini API generateContent wire
// format): requests. Gemini is an upstream protocol only: the gateway encodes
// requests in it and decodes its answers, never the other way round.

type gReq struct {
	Contents          []gContent   `json:"contents"`
	SystemInstruction *gContent    `json:"systemInstruction,omitempty"`
	Tools             []gTool      `json:"tools,omitempty"`
	ToolConfig        *gToolConfig `json:"toolConfig,omitempty"`
	GenerationConfig  *gGenConfig  `json:"generationConfig,omitempty"`
}

type gContent struct {
	Role  string  `json:"role,omitempty"`
	Parts []gPart `json:"parts"`
}

type gPart struct {
	Text             *string        `json:"text,omitempty"`
	Thought          bool           `json:"thought,omitempty"`
	ThoughtSignature string         `json:"thoughtSignature,omitempty"`
	InlineData       *gBlob         `json:"inlineData,omitempty"`
	FunctionCall     *gFuncCall     `json:"functionCall,omitempty"`
	FunctionResponse *gFuncResponse `json:"functionResponse,omitempty"`
}

type gBlob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type gFuncCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type gFuncResponse struct {
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type gTool struct {
	FunctionDeclarations []gFuncDecl `json:"functionDeclarations"`
}

type gFuncDecl struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type gToolConfig struct {
	FunctionCallingConfig gFuncCallingConfig `json:"functionCallingConfig"`
}

type gFuncCallingConfig struct {
	Mode                 string   `json:"mode"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type gGenConfig struct {
	MaxOutputTokens int64            `json:"maxOutputTokens,omitempty"`
	Temperature     *float64         `json:"temperature,omitempty"`
	TopP            *float64         `json:"topP,omitempty"`
	StopSequences   []string         `json:"stopSequences,omitempty"`
	ThinkingConfig  *gThinkingConfig `json:"thinkingConfig,omitempty"`
}

type gThinkingConfig struct {
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
	out := gReq{Contents: []gContent{}}
	if len(r.System) > 0 {
		sys := &gContent{}
		for _, s := range r.System {
			sys.Parts = append(sys.Parts, gPart{Text: ptr(s)})
		}
		out.SystemInstruction = sys
	}
	// Tool results name the function, not the call: Gemini matches a
	// functionResponse to its functionCall by name, so the names of the
	// conversation's calls are looked up by call ID.
	callNames := map[string]string{}
	for _, m := range r.Messages {
		role := "user"
		if m.Role == "assistant" {
			role = "model"
		}
		var parts []gPart
		for _, p := range m.Parts {
			switch p.Type {
			case PartText:
				if p.Text != "" {
					parts = append(parts, gPart{Text: ptr(p.Text)})
				}
			case PartImage:
				mt, data := p.MediaType, p.Data
				if p.ImageURL != "" {
					var ok bool
					if mt, data, ok = splitDataURL(p.ImageURL); !ok {
						return nil, errGeminiImageURL
					}
				}
				parts = append(parts, gPart{InlineData: &gBlob{MimeType: mt, Data: data}})
			case PartToolCall:
				callNames[p.ID] = p.Name
				parts = append(parts, gPart{FunctionCall: &gFuncCall{Name: p.Name, Args: validJSONOr(p.Arguments, "{}")},
					ThoughtSignature: skipThoughtSignature})
			case PartToolResult:
				name := callNames[p.ID]
				if name == "" {
					name = p.ID
				}
				parts = append(parts, gPart{FunctionResponse: &gFuncResponse{Name: name, Response: geminiToolResponse(p)}})
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
		out.Contents = append(out.Contents, gContent{Role: role, Parts: parts})
	}
	if len(r.Tools) > 0 {
		t := gTool{}
		for _, tl := range r.Tools {
			t.FunctionDeclarations = append(t.FunctionDeclarations, gFuncDecl(tl))
		}
		out.Tools = []gTool{t}
	}
	if tc := r.ToolChoice; tc != nil && len(r.Tools) > 0 {
		c := gFuncCallingConfig{Mode: "AUTO"}
		switch tc.Mode {
		case "none":
			c.Mode = "NONE"
		case "required":
			c.Mode = "ANY"
		case "tool":
			c.Mode, c.AllowedFunctionNames = "ANY", []string{tc.Name}
		}
		out.ToolConfig = &gToolConfig{FunctionCallingConfig: c}
	}
	gc := gGenConfig{MaxOutputTokens: r.MaxTokens, Temperature: r.Temperature, TopP: r.TopP, StopSequences: r.Stop}
	budget := r.ThinkingBudget
	if budget == 0 {
		budget = effortBudget(r.ReasoningEffort)
	}
	switch {
	case budget > 0:
		gc.ThinkingConfig = &gThinkingConfig{IncludeThoughts: true, ThinkingBudget: budget}
	case r.ReasoningEffort == "none":
		gc.ThinkingConfig = &gThinkingConfig{ThinkingBudget: 0}
	}
	if gc.MaxOutputTokens > 0 || gc.Temperature != nil || gc.TopP != nil || len(gc.StopSequences) > 0 || gc.ThinkingConfig != nil {
		out.GenerationConfig = &gc
	}
	return json.Marshal(out)
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
