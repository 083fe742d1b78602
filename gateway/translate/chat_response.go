package translate

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Codec of the chat_completions protocol (OpenAI Chat Completions wire
// format): complete responses and usage.

type chatUsage struct {
	PromptTokens            int64                        `json:"prompt_tokens"`
	CompletionTokens        int64                        `json:"completion_tokens"`
	TotalTokens             int64                        `json:"total_tokens"`
	PromptTokensDetails     *chatPromptTokensDetails     `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *chatCompletionTokensDetails `json:"completion_tokens_details,omitempty"`
}

type chatPromptTokensDetails struct {
	CachedTokens *int64 `json:"cached_tokens,omitempty"`
}

type chatCompletionTokensDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

type chatChoice struct {
	Index        int             `json:"index"`
	Message      chatMessage     `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type chatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *chatUsage   `json:"usage,omitempty"`
}

func (u *chatUsage) toUsage() Usage {
	out := Usage{OutputTokens: u.CompletionTokens, InputTokens: u.PromptTokens, ReportedTotalTokens: ptr(u.TotalTokens)}
	if d := u.PromptTokensDetails; d != nil && d.CachedTokens != nil {
		out.CacheReadTokens = ptr(*d.CachedTokens)
		out.InputTokens -= *d.CachedTokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		out.ReasoningTokens = d.ReasoningTokens
	}
	return out
}

func newChatUsage(u Usage) *chatUsage {
	out := &chatUsage{PromptTokens: u.PromptTokens(), CompletionTokens: u.OutputTokens}
	out.TotalTokens = out.PromptTokens + out.CompletionTokens
	out.PromptTokensDetails = &chatPromptTokensDetails{CachedTokens: ptr(deref(u.CacheReadTokens))}
	out.CompletionTokensDetails = &chatCompletionTokensDetails{ReasoningTokens: u.ReasoningTokens}
	return out
}

func appendChatUsage(d []byte, u Usage) []byte {
	p := u.PromptTokens()
	d = append(d, `{"prompt_tokens":`...)
	d = appendInt(d, p)
	d = append(d, `,"completion_tokens":`...)
	d = appendInt(d, u.OutputTokens)
	d = append(d, `,"total_tokens":`...)
	d = appendInt(d, p+u.OutputTokens)
	d = append(d, `,"prompt_tokens_details":{"cached_tokens":`...)
	d = appendInt(d, deref(u.CacheReadTokens))
	d = append(d, `},"completion_tokens_details":{"reasoning_tokens":`...)
	d = appendInt(d, u.ReasoningTokens)
	return append(d, "}}"...)
}

func decodeChatResponse(body []byte) (*Response, error) {
	var in chatResponse
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("chat completions response: %w", err)
	}
	r := &Response{ID: in.ID, Model: in.Model, Created: in.Created, Stop: StopEndTurn}
	if in.Usage != nil {
		r.Usage = in.Usage.toUsage()
	}
	if len(in.Choices) > 0 {
		c := in.Choices[0]
		if c.FinishReason != nil {
			r.Stop = stopFromChat(*c.FinishReason)
		}
		if c.Message.ReasoningContent != "" {
			r.Parts = append(r.Parts, Part{Type: PartThinking, Text: c.Message.ReasoningContent})
		}
		if t := chatText(c.Message.Content); t != "" {
			r.Parts = append(r.Parts, Part{Type: PartText, Text: t})
		} else if c.Message.Refusal != nil && *c.Message.Refusal != "" {
			r.Parts = append(r.Parts, Part{Type: PartText, Text: *c.Message.Refusal})
		}
		for i := range c.Message.ToolCalls {
			r.Parts = append(r.Parts, c.Message.ToolCalls[i].part())
		}
	}
	return r, nil
}

func encodeChatResponse(r *Response) ([]byte, error) {
	out := chatResponse{ID: r.ID, Object: "chat.completion", Created: r.Created, Model: r.Model, Usage: newChatUsage(r.Usage)}
	if !strings.HasPrefix(out.ID, "chatcmpl-") {
		out.ID = NewID("chatcmpl-")
	}
	if out.Created == 0 {
		out.Created = time.Now().Unix()
	}
	msg := chatMessage{Role: "assistant"}
	var text strings.Builder
	for _, p := range r.Parts {
		switch p.Type {
		case PartText:
			text.WriteString(p.Text)
		case PartToolCall:
			msg.ToolCalls = append(msg.ToolCalls, chatToolCallOf(p))
		}
	}
	if text.Len() > 0 || len(msg.ToolCalls) == 0 {
		msg.Content, _ = json.Marshal(text.String())
	} else {
		msg.Content = json.RawMessage("null")
	}
	fr := chatFinish(r.Stop)
	out.Choices = []chatChoice{{Index: 0, Message: msg, Logprobs: json.RawMessage("null"), FinishReason: &fr}}
	return json.Marshal(out)
}

func stopFromChat(s string) StopReason {
	switch s {
	case "length":
		return StopMaxTokens
	case "tool_calls", "function_call":
		return StopToolUse
	case "content_filter":
		return StopContentFilter
	}
	return StopEndTurn
}

func chatFinish(s StopReason) string {
	switch s {
	case StopMaxTokens:
		return "length"
	case StopToolUse:
		return "tool_calls"
	case StopContentFilter:
		return "content_filter"
	}
	return "stop"
}

func chatUsageOf(body []byte) (Usage, bool) {
	raw, ok := FieldRaw(body, "usage")
	if !ok || string(raw) == "null" {
		return Usage{}, false
	}
	var u chatUsage
	if !decodeChatUsage(raw, &u) {
		return Usage{}, false
	}
	return u.toUsage(), true
}
