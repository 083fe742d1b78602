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

type bReq struct {
	Messages        []bMessage        `json:"messages"`
	System          []bSystem         `json:"system,omitempty"`
	InferenceConfig *bInferenceConfig `json:"inferenceConfig,omitempty"`
	ToolConfig      *bToolConfig      `json:"toolConfig,omitempty"`
}

type bMessage struct {
	Role    string   `json:"role"`
	Content []bBlock `json:"content"`
}

type bSystem struct {
	Text string `json:"text"`
}

// bBlock is a ContentBlock, a union: exactly one member is set.
type bBlock struct {
	Text             *string     `json:"text,omitempty"`
	Image            *bImage     `json:"image,omitempty"`
	ToolUse          *bToolUse   `json:"toolUse,omitempty"`
	ToolResult       *bToolRes   `json:"toolResult,omitempty"`
	ReasoningContent *bReasoning `json:"reasoningContent,omitempty"`
}

type bImage struct {
	Format string       `json:"format"`
	Source bImageSource `json:"source"`
}

// bImageSource holds the image bytes, base64 in the JSON protocol.
type bImageSource struct {
	Bytes string `json:"bytes"`
}

type bToolUse struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type bToolRes struct {
	ToolUseID string         `json:"toolUseId"`
	Content   []bToolResItem `json:"content"`
	Status    string         `json:"status,omitempty"`
}

type bToolResItem struct {
	Text *string         `json:"text,omitempty"`
	JSON json.RawMessage `json:"json,omitempty"`
}

type bReasoning struct {
	ReasoningText *struct {
		Text      string `json:"text"`
		Signature string `json:"signature,omitempty"`
	} `json:"reasoningText,omitempty"`
	RedactedContent string `json:"redactedContent,omitempty"`
}

type bInferenceConfig struct {
	MaxTokens     int64    `json:"maxTokens,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"topP,omitempty"`
	StopSequences []string `json:"stopSequences,omitempty"`
}

type bToolConfig struct {
	Tools      []bTool      `json:"tools"`
	ToolChoice *bToolChoice `json:"toolChoice,omitempty"`
}

type bTool struct {
	ToolSpec bToolSpec `json:"toolSpec"`
}

type bToolSpec struct {
	Name        string       `json:"name"`
	Description string       `json:"description,omitempty"`
	InputSchema bInputSchema `json:"inputSchema"`
}

type bInputSchema struct {
	JSON json.RawMessage `json:"json"`
}

// bToolChoice is a union: auto, any or tool.
type bToolChoice struct {
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
	out := bReq{Messages: []bMessage{}}
	for _, s := range r.System {
		if s != "" {
			out.System = append(out.System, bSystem{Text: s})
		}
	}
	for _, m := range r.Messages {
		role := "user"
		if m.Role == "assistant" {
			role = "assistant"
		}
		var blocks []bBlock
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
		out.Messages = append(out.Messages, bMessage{Role: role, Content: blocks})
	}
	if len(r.Tools) > 0 {
		tc := &bToolConfig{}
		for _, t := range r.Tools {
			tc.Tools = append(tc.Tools, bTool{ToolSpec: bToolSpec{Name: t.Name, Description: t.Description,
				InputSchema: bInputSchema{JSON: validJSONOr(string(t.Parameters), `{"type":"object","properties":{}}`)}}})
		}
		// Converse has no "none": the tools stay declared (a conversation
		// holding toolUse blocks needs them) and the model chooses.
		if c := r.ToolChoice; c != nil {
			switch c.Mode {
			case "required":
				tc.ToolChoice = &bToolChoice{Any: &struct{}{}}
			case "tool":
				tc.ToolChoice = &bToolChoice{Tool: &struct {
					Name string `json:"name"`
				}{Name: c.Name}}
			case "auto":
				tc.ToolChoice = &bToolChoice{Auto: &struct{}{}}
			}
		}
		out.ToolConfig = tc
	}
	ic := bInferenceConfig{MaxTokens: r.MaxTokens, Temperature: r.Temperature, TopP: r.TopP, StopSequences: r.Stop}
	if ic.MaxTokens > 0 || ic.Temperature != nil || ic.TopP != nil || len(ic.StopSequences) > 0 {
		out.InferenceConfig = &ic
	}
	return json.Marshal(out)
}

// bedrockBlock is the ContentBlock of one part; ok is false for a part
// Converse gets no block for (empty text, thinking).
func bedrockBlock(p Part) (bBlock, bool, error) {
	switch p.Type {
	case PartText:
		if p.Text == "" {
			return bBlock{}, false, nil
		}
		return bBlock{Text: ptr(p.Text)}, true, nil
	case PartImage:
		mt, data := p.MediaType, p.Data
		if p.ImageURL != "" {
			var ok bool
			if mt, data, ok = splitDataURL(p.ImageURL); !ok {
				return bBlock{}, false, errBedrockImageURL
			}
		}
		format, ok := bedrockImageFormat(mt)
		if !ok {
			return bBlock{}, false, errBedrockImageFormat
		}
		return bBlock{Image: &bImage{Format: format, Source: bImageSource{Bytes: data}}}, true, nil
	case PartToolCall:
		return bBlock{ToolUse: &bToolUse{ToolUseID: p.ID, Name: p.Name, Input: validJSONOr(p.Arguments, "{}")}}, true, nil
	case PartToolResult:
		res := &bToolRes{ToolUseID: p.ID, Status: "success"}
		if p.IsError {
			res.Status = "error"
		}
		if t := strings.TrimSpace(p.Text); strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
			res.Content = []bToolResItem{{JSON: json.RawMessage(t)}}
		} else {
			res.Content = []bToolResItem{{Text: ptr(p.Text)}}
		}
		return bBlock{ToolResult: res}, true, nil
	}
	// Thinking parts are not sent back: a reasoning block in the history
	// must carry the signature the same model family issued, which other
	// vendors' thinking does not have.
	return bBlock{}, false, nil
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
