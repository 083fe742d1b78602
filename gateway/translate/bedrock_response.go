package translate

import (
	"encoding/json"
	"fmt"
)

// Codec of the bedrock protocol (Amazon Bedrock Converse API wire format):
// complete responses and usage.

type bedrockResponse struct {
	Output struct {
		Message *bedrockMessage `json:"message,omitempty"`
	} `json:"output"`
	StopReason string          `json:"stopReason"`
	Usage      *bedrockUsage   `json:"usage,omitempty"`
	Metrics    json.RawMessage `json:"metrics,omitempty"`
}

// bedrockUsage is TokenUsage. inputTokens counts the input neither read from nor
// written to the prompt cache, as Anthropic's input_tokens does;
// totalTokens is inputTokens + outputTokens + both cache counts.
type bedrockUsage struct {
	InputTokens           int64  `json:"inputTokens"`
	OutputTokens          int64  `json:"outputTokens"`
	TotalTokens           *int64 `json:"totalTokens,omitempty"`
	CacheReadInputTokens  *int64 `json:"cacheReadInputTokens,omitempty"`
	CacheWriteInputTokens *int64 `json:"cacheWriteInputTokens,omitempty"`
}

// toUsage maps TokenUsage one to one: cache reads and writes are billed as
// the anthropic provider bills cache_read_input_tokens and
// cache_creation_input_tokens.
func (u bedrockUsage) toUsage() Usage {
	return Usage{
		InputTokens:         u.InputTokens,
		OutputTokens:        u.OutputTokens,
		CacheReadTokens:     u.CacheReadInputTokens,
		CacheWriteTokens:    u.CacheWriteInputTokens,
		ReportedTotalTokens: u.TotalTokens,
	}
}

func newBedrockUsage(u Usage) *bedrockUsage {
	return &bedrockUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: ptr(u.TotalTokens()),
		CacheReadInputTokens: u.CacheReadTokens, CacheWriteInputTokens: u.CacheWriteTokens}
}

func decodeBedrockResponse(body []byte) (*Response, error) {
	var in bedrockResponse
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("bedrock response: %w", err)
	}
	// Converse answers carry no ID (the request ID is a header); the
	// client protocol's encoder makes one.
	r := &Response{Stop: stopFromBedrock(in.StopReason)}
	if in.Usage != nil {
		r.Usage = in.Usage.toUsage()
	}
	if in.Output.Message != nil {
		for _, b := range in.Output.Message.Content {
			if p, ok := bedrockPart(b); ok {
				r.Parts = append(r.Parts, p)
			}
		}
	}
	return r, nil
}

// bedrockPart is the neutral part of an output ContentBlock; ok is false
// for blocks no client protocol has (redacted reasoning, citations, ...).
func bedrockPart(b bedrockContentBlock) (Part, bool) {
	switch {
	case b.Text != nil:
		return Part{Type: PartText, Text: *b.Text}, true
	case b.ToolUse != nil:
		return Part{Type: PartToolCall, ID: b.ToolUse.ToolUseID, Name: b.ToolUse.Name,
			Arguments: string(validJSONOr(string(b.ToolUse.Input), "{}"))}, true
	case b.ReasoningContent != nil && b.ReasoningContent.ReasoningText != nil:
		rt := b.ReasoningContent.ReasoningText
		return Part{Type: PartThinking, Text: rt.Text, Signature: rt.Signature}, true
	}
	return Part{}, false
}

// stopFromBedrock maps a stopReason. guardrail_intervened and
// content_filtered are the policy stops: the request was served and is
// billed for what it consumed, the client sees a content-filter stop.
func stopFromBedrock(s string) StopReason {
	switch s {
	case "max_tokens", "model_context_window_exceeded":
		return StopMaxTokens
	case "stop_sequence":
		return StopSequence
	case "tool_use":
		return StopToolUse
	case "guardrail_intervened", "content_filtered":
		return StopContentFilter
	}
	return StopEndTurn
}

func bedrockStopReason(s StopReason) string {
	switch s {
	case StopMaxTokens:
		return "max_tokens"
	case StopSequence:
		return "stop_sequence"
	case StopToolUse:
		return "tool_use"
	case StopContentFilter:
		return "content_filtered"
	}
	return "end_turn"
}

func bedrockUsageOf(body []byte) (Usage, bool) {
	raw, ok := FieldRaw(body, "usage")
	if !ok {
		return Usage{}, false
	}
	var u bedrockUsage
	if json.Unmarshal(raw, &u) != nil {
		return Usage{}, false
	}
	return u.toUsage(), true
}
