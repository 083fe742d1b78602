package translate

import (
	"encoding/json"
	"fmt"
)

// Codec of the gemini protocol (Google Gemini API generateContent wire
// format): complete responses and usage.

type geminiResponse struct {
	Candidates     []geminiCandidate     `json:"candidates"`
	PromptFeedback *geminiPromptFeedback `json:"promptFeedback,omitempty"`
	UsageMetadata  *geminiUsageMetadata  `json:"usageMetadata,omitempty"`
	ModelVersion   string                `json:"modelVersion,omitempty"`
	ResponseID     string                `json:"responseId,omitempty"`
}

type geminiCandidate struct {
	Content      *geminiContent `json:"content,omitempty"`
	FinishReason string         `json:"finishReason,omitempty"`
	Index        int            `json:"index"`
}

type geminiPromptFeedback struct {
	BlockReason string `json:"blockReason,omitempty"`
}

// geminiUsageMetadata is usageMetadata. promptTokenCount includes the cached tokens;
// candidatesTokenCount excludes the thoughts, which Google bills as output
// ("output price (including thinking tokens)"); toolUsePromptTokenCount is
// input the API's own tools added. totalTokenCount is the sum of prompt,
// tool-use prompt, candidates and thoughts.
type geminiUsageMetadata struct {
	PromptTokenCount        int64  `json:"promptTokenCount"`
	CandidatesTokenCount    int64  `json:"candidatesTokenCount"`
	CachedContentTokenCount *int64 `json:"cachedContentTokenCount,omitempty"`
	ThoughtsTokenCount      int64  `json:"thoughtsTokenCount"`
	ToolUsePromptTokenCount int64  `json:"toolUsePromptTokenCount"`
	TotalTokenCount         *int64 `json:"totalTokenCount,omitempty"`
}

// toUsage maps usageMetadata into the ledger's shape: InputTokens is the
// uncached prompt (tool-use prompt included), CacheReadTokens the cached
// part, OutputTokens candidates plus thoughts (ReasoningTokens names the
// thoughts), so that PromptTokens()+OutputTokens equals totalTokenCount.
// Gemini's implicit and explicit caches charge no write, so CacheWriteTokens
// stays unreported.
func (u geminiUsageMetadata) toUsage() Usage {
	cached := deref(u.CachedContentTokenCount)
	out := Usage{
		InputTokens:         u.PromptTokenCount - cached + u.ToolUsePromptTokenCount,
		OutputTokens:        u.CandidatesTokenCount + u.ThoughtsTokenCount,
		ReasoningTokens:     u.ThoughtsTokenCount,
		ReportedTotalTokens: u.TotalTokenCount,
	}
	if u.CachedContentTokenCount != nil {
		out.CacheReadTokens = ptr(cached)
	}
	return out
}

func newGeminiUsage(u Usage) *geminiUsageMetadata {
	return &geminiUsageMetadata{
		PromptTokenCount:        u.InputTokens + deref(u.CacheReadTokens),
		CandidatesTokenCount:    u.OutputTokens - u.ReasoningTokens,
		CachedContentTokenCount: u.CacheReadTokens,
		ThoughtsTokenCount:      u.ReasoningTokens,
		TotalTokenCount:         ptr(u.InputTokens + deref(u.CacheReadTokens) + u.OutputTokens),
	}
}

func decodeGeminiResponse(body []byte) (*Response, error) {
	var in geminiResponse
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("gemini response: %w", err)
	}
	r := &Response{ID: in.ResponseID, Model: in.ModelVersion}
	if in.UsageMetadata != nil {
		r.Usage = in.UsageMetadata.toUsage()
	}
	if len(in.Candidates) == 0 {
		// A blocked prompt has no candidate, only promptFeedback.blockReason.
		if in.PromptFeedback != nil && in.PromptFeedback.BlockReason != "" {
			r.Stop = StopContentFilter
		}
		return r, nil
	}
	c := in.Candidates[0]
	if c.Content != nil {
		r.Parts = geminiParts(c.Content.Parts, r.Parts)
	}
	r.Stop = stopFromGemini(c.FinishReason, hasToolCall(r.Parts))
	return r, nil
}

func hasToolCall(ps []Part) bool {
	for _, p := range ps {
		if p.Type == PartToolCall {
			return true
		}
	}
	return false
}

// geminiParts appends the neutral form of a candidate's parts. Gemini's
// function calls carry an id only sometimes; a call without one gets a
// fresh ID, which the client echoes back with its result.
func geminiParts(in []geminiPart, out []Part) []Part {
	for _, p := range in {
		switch {
		case p.FunctionCall != nil:
			id := p.FunctionCall.ID
			if id == "" {
				id = NewID("call_")
			}
			out = append(out, Part{Type: PartToolCall, ID: id, Name: p.FunctionCall.Name, Arguments: string(validJSONOr(string(p.FunctionCall.Args), "{}"))})
		case p.Text != nil && p.Thought:
			out = append(out, Part{Type: PartThinking, Text: *p.Text})
		case p.Text != nil:
			out = append(out, Part{Type: PartText, Text: *p.Text})
		}
	}
	return out
}

// stopFromGemini maps a finishReason. STOP with a function call is a tool
// use (Gemini has no reason of its own for it); the safety family (SAFETY,
// RECITATION, BLOCKLIST, PROHIBITED_CONTENT, SPII, IMAGE_SAFETY, ...) is a
// content-filter stop: the upstream's policy refused, the request was
// served and is billed for what it consumed.
func stopFromGemini(reason string, toolCall bool) StopReason {
	switch reason {
	case "", "STOP", "FINISH_REASON_UNSPECIFIED", "OTHER", "MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "LANGUAGE":
		if toolCall {
			return StopToolUse
		}
		return StopEndTurn
	case "MAX_TOKENS":
		return StopMaxTokens
	}
	return StopContentFilter
}

func geminiFinishReason(s StopReason) string {
	switch s {
	case StopMaxTokens:
		return "MAX_TOKENS"
	case StopContentFilter:
		return "SAFETY"
	}
	return "STOP"
}

func geminiUsageOf(body []byte) (Usage, bool) {
	raw, ok := FieldRaw(body, "usageMetadata")
	if !ok {
		return Usage{}, false
	}
	var u geminiUsageMetadata
	if json.Unmarshal(raw, &u) != nil {
		return Usage{}, false
	}
	return u.toUsage(), true
}
