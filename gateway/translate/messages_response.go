package translate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Codec of the messages protocol (Anthropic Messages API wire format):
// complete responses and usage.

type messagesUsage struct {
	InputTokens              int64  `json:"input_tokens"`
	OutputTokens             int64  `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens,omitempty"`
}

type messagesResponse struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"`
	Role         string          `json:"role"`
	Content      []messagesBlock `json:"content"`
	Model        string          `json:"model"`
	StopReason   *string         `json:"stop_reason"`
	StopSequence *string         `json:"stop_sequence"`
	Usage        messagesUsage   `json:"usage"`
}

func (u messagesUsage) toUsage() Usage {
	return Usage{
		InputTokens:      u.InputTokens,
		OutputTokens:     u.OutputTokens,
		CacheReadTokens:  u.CacheReadInputTokens,
		CacheWriteTokens: u.CacheCreationInputTokens,
	}
}

func newMessagesUsage(u Usage) messagesUsage {
	return messagesUsage{
		InputTokens:              u.InputTokens,
		OutputTokens:             u.OutputTokens,
		CacheCreationInputTokens: u.CacheWriteTokens,
		CacheReadInputTokens:     u.CacheReadTokens,
	}
}

func decodeMessagesResponse(body []byte) (*Response, error) {
	var in messagesResponse
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("messages response: %w", err)
	}
	r := &Response{ID: in.ID, Model: in.Model, Usage: in.Usage.toUsage()}
	if in.StopReason != nil {
		r.Stop = stopFromMessages(*in.StopReason)
	}
	if in.StopSequence != nil {
		r.StopSequence = *in.StopSequence
	}
	for _, b := range in.Content {
		switch b.Type {
		case "text":
			r.Parts = append(r.Parts, Part{Type: PartText, Text: b.Text})
		case "tool_use":
			r.Parts = append(r.Parts, Part{Type: PartToolCall, ID: b.ID, Name: b.Name, Arguments: string(validJSONOr(string(b.Input), "{}"))})
		case "thinking":
			t := ""
			if b.Thinking != nil {
				t = *b.Thinking
			}
			r.Parts = append(r.Parts, Part{Type: PartThinking, Text: t, Signature: b.Signature})
		case "redacted_thinking":
			if b.Data != "" {
				r.Parts = append(r.Parts, Part{Type: PartThinking, Redacted: b.Data})
			}
		}
	}
	return r, nil
}

func encodeMessagesResponse(r *Response) ([]byte, error) {
	out := messagesResponse{
		ID: r.ID, Type: "message", Role: "assistant", Model: r.Model, Content: []messagesBlock{},
		Usage: newMessagesUsage(r.Usage),
	}
	if !strings.HasPrefix(out.ID, "msg_") {
		out.ID = NewID("msg_")
	}
	stop := string(r.Stop)
	if stop == "" {
		stop = string(StopEndTurn)
	}
	out.StopReason = &stop
	if r.Stop == StopSequence && r.StopSequence != "" {
		out.StopSequence = &r.StopSequence
	}
	for _, p := range r.Parts {
		switch p.Type {
		case PartText:
			out.Content = append(out.Content, messagesBlock{Type: "text", Text: p.Text})
		case PartToolCall:
			out.Content = append(out.Content, messagesBlock{Type: "tool_use", ID: p.ID, Name: p.Name, Input: validJSONOr(p.Arguments, "{}")})
		case PartThinking:
			if p.Redacted != "" {
				out.Content = append(out.Content, messagesBlock{Type: "redacted_thinking", Data: p.Redacted})
				continue
			}
			t := p.Text
			out.Content = append(out.Content, messagesBlock{Type: "thinking", Thinking: &t, Signature: p.Signature})
		}
	}
	return json.Marshal(out)
}

func stopFromMessages(s string) StopReason {
	switch s {
	case "max_tokens", "model_context_window_exceeded":
		return StopMaxTokens
	case "stop_sequence":
		return StopSequence
	case "tool_use":
		return StopToolUse
	case "refusal":
		return StopContentFilter
	}
	return StopEndTurn
}

func messagesUsageOf(body []byte) (Usage, bool) {
	raw, ok := FieldRaw(body, "usage")
	if !ok {
		return Usage{}, false
	}
	var u messagesUsage
	if json.Unmarshal(raw, &u) != nil {
		return Usage{}, false
	}
	return u.toUsage(), true
}
