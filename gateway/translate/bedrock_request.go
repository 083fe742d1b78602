package translate

import (
	"encoding/json"
	"errors"
	"strings"
)

// Codec of the bedrock protocol (Amazon Bedrock Converse API wire format):
// requests. Bedrock is an upstream protocol only: the gateway encodes
// requests in it and decodes its answers, never the other way round. The
// model and the stream flag are not part of the body: they are the URL
// (/model/{modelId}/converse or /converse-stream).

type bedrockRequest struct {
	Messages        []bedrockMessage        `json:"messages"`
	System          []bedrockSystemBlock    `json:"system,omitempty"`
	InferenceConfig *bedrockInferenceConfig `json:"inferenceConfig,omitempty"`
	ToolConfig      *bedrockToolConfig      `json:"toolConfig,omitempty"`
}

type bedrockMessage struct {
	Role    string                `json:"role"`
	Content []bedrockContentBlock `json:"content"`
}

type bedrockSystemBlock struct {
	Text string `json:"text"`
}

// bedrockContentBlock is a ContentBlock, a union: exactly one member is set.
type bedrockContentBlock struct {
	Text             *string                  `json:"text,omitempty"`
	Image            *bedrockImage            `json:"image,omitempty"`
	ToolUse          *bedrockToolUse          `json:"toolUse,omitempty"`
	ToolResult       *bedrockToolResult       `json:"toolResult,omitempty"`
	ReasoningContent *bedrockReasoningContent `json:"reasoningContent,omitempty"`
}

type bedrockImage struct {
	Format string             `json:"format"`
	Source bedrockImageSource `json:"source"`
}

// bedrockImageSource holds the image bytes, base64 in the JSON protocol.
type bedrockImageSource struct {
	Bytes string `json:"bytes"`
}

type bedrockToolUse struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type bedrockToolResult struct {
	ToolUseID string                     `json:"toolUseId"`
	Content   []bedrockToolResultContent `json:"content"`
	Status    string                     `json:"status,omitempty"`
}

type bedrockToolResultContent struct {
	Text *string         `json:"text,omitempty"`
	JSON json.RawMessage `json:"json,omitempty"`
}

type bedrockReasoningContent struct {
	ReasoningText *struct {
		Text      string `json:"text"`
		Signature string `json:"signature,omitempty"`
	} `json:"reasoningText,omitempty"`
	RedactedContent string `json:"redactedContent,omitempty"`
}

type bedrockInferenceConfig struct {
	MaxTokens     int64    `json:"maxTokens,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"topP,omitempty"`
	StopSequences []string `json:"stopSequences,omitempty"`
}

type bedrockToolConfig struct {
	Tools      []bedrockTool      `json:"tools"`
	ToolChoice *bedrockToolChoice `json:"toolChoice,omitempty"`
}

type bedrockTool struct {
	ToolSpec bedrockToolSpec `json:"toolSpec"`
}

type bedrockToolSpec struct {
	Name        string             `json:"name"`
	Description string             `json:"description,omitempty"`
	InputSchema bedrockInputSchema `json:"inputSchema"`
}

type bedrockInputSchema struct {
	JSON json.RawMessage `json:"json"`
}

// bedrockToolChoice is a union: auto, any or tool.
type bedrockToolChoice struct {
	Auto *struct{} `json:"auto,omitempty"`
	Any  *struct{} `json:"any,omitempty"`
	Tool *struct {
		Name string `json:"name"`
	} `json:"tool,omitempty"`
}

// errBedrockImageURL: Converse reads images as bytes or from S3; it does not
// fetch URLs.
var errBedrockImageURL = errors.New("bedrock upstream: images must be inline (data: URLs); image URLs are not supported")

// errBedrockImageFormat: Converse takes png, jpeg, gif and webp only.
var errBedrockImageFormat = errors.New("bedrock upstream: images must be png, jpeg, gif or webp")

// encodeBedrockRequest renders r as a Converse body.
func encodeBedrockRequest(r *Request, _ string) ([]byte, error) {
	out := bedrockRequest{Messages: []bedrockMessage{}}
	for _, s := range r.systemPrompts() {
		if s != "" {
			out.System = append(out.System, bedrockSystemBlock{Text: s})
		}
	}
	for _, m := range r.turns() {
		role := "user"
		if m.Role == "assistant" {
			role = "assistant"
		}
		var blocks []bedrockContentBlock
		for _, p := range m.Parts {
			b, ok, err := bedrockBlock(p)
			if err != nil {
				return nil, err
			}
			if ok {
				blocks = append(blocks, b)
			}
		}
		if len(blocks) == 0 {
			continue
		}
		// Converse wants turns to alternate; a chat client's consecutive
		// tool messages (each its own user turn here) become one turn.
		if n := len(out.Messages); n > 0 && out.Messages[n-1].Role == role {
			out.Messages[n-1].Content = append(out.Messages[n-1].Content, blocks...)
			continue
		}
		out.Messages = append(out.Messages, bedrockMessage{Role: role, Content: blocks})
	}
	if tools := narrowTools(r); len(tools) > 0 {
		tc := &bedrockToolConfig{}
		for _, t := range tools {
			tc.Tools = append(tc.Tools, bedrockTool{ToolSpec: bedrockToolSpec{Name: t.Name, Description: t.Description,
				InputSchema: bedrockInputSchema{JSON: validJSONOr(string(t.Parameters), `{"type":"object","properties":{}}`)}}})
		}
		// Converse has no "none": the tools stay declared (a conversation
		// holding toolUse blocks needs them) and the model chooses.
		if c := r.ToolChoice; c != nil {
			switch c.Mode {
			case "required":
				tc.ToolChoice = &bedrockToolChoice{Any: &struct{}{}}
			case "tool":
				tc.ToolChoice = &bedrockToolChoice{Tool: &struct {
					Name string `json:"name"`
				}{Name: c.Name}}
			case "auto":
				tc.ToolChoice = &bedrockToolChoice{Auto: &struct{}{}}
			}
		}
		out.ToolConfig = tc
	}
	ic := bedrockInferenceConfig{MaxTokens: r.MaxTokens, Temperature: clamp(r.Temperature, 0, 1), TopP: clamp(r.TopP, 0, 1), StopSequences: r.Stop}
	if ic.MaxTokens > 0 || ic.Temperature != nil || ic.TopP != nil || len(ic.StopSequences) > 0 {
		out.InferenceConfig = &ic
	}
	return json.Marshal(out)
}

// bedrockBlock is the ContentBlock of one part; ok is false for a part
// Converse gets no block for (empty text, thinking).
func bedrockBlock(p Part) (bedrockContentBlock, bool, error) {
	switch p.Type {
	case PartText:
		if p.Text == "" {
			return bedrockContentBlock{}, false, nil
		}
		return bedrockContentBlock{Text: ptr(p.Text)}, true, nil
	case PartImage:
		mt, data := p.MediaType, p.Data
		if p.ImageURL != "" {
			var ok bool
			if mt, data, ok = splitDataURL(p.ImageURL); !ok {
				return bedrockContentBlock{}, false, errBedrockImageURL
			}
		}
		format, ok := bedrockImageFormat(mt)
		if !ok {
			return bedrockContentBlock{}, false, errBedrockImageFormat
		}
		return bedrockContentBlock{Image: &bedrockImage{Format: format, Source: bedrockImageSource{Bytes: data}}}, true, nil
	case PartToolCall:
		return bedrockContentBlock{ToolUse: &bedrockToolUse{ToolUseID: p.ID, Name: p.Name, Input: validJSONOr(p.Arguments, "{}")}}, true, nil
	case PartToolResult:
		res := &bedrockToolResult{ToolUseID: p.ID, Status: "success"}
		if p.IsError {
			res.Status = "error"
		}
		if t := strings.TrimSpace(p.Text); strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
			res.Content = []bedrockToolResultContent{{JSON: json.RawMessage(t)}}
		} else {
			res.Content = []bedrockToolResultContent{{Text: ptr(p.Text)}}
		}
		return bedrockContentBlock{ToolResult: res}, true, nil
	}
	// Thinking parts are not sent back: a reasoning block in the history
	// must carry the signature the same model family issued, which other
	// vendors' thinking does not have.
	return bedrockContentBlock{}, false, nil
}

func bedrockImageFormat(mediaType string) (string, bool) {
	switch strings.ToLower(mediaType) {
	case "image/png":
		return "png", true
	case "image/jpeg", "image/jpg":
		return "jpeg", true
	case "image/gif":
		return "gif", true
	case "image/webp":
		return "webp", true
	}
	return "", false
}
