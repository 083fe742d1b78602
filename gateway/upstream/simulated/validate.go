package simulated

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// validate refuses what the public API the simulated provider stands in
// for refuses, with a message in its manner: the gateway passes a
// same-protocol request through unjudged, so the upstream is where a
// client learns that a field is wrong, and `modelgate dev` should teach
// what the real API would. It returns "" for a valid request.
func validate(proto upstream.Protocol, body []byte, h http.Header) string {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(body, &f); err != nil {
		return "the request body is not a valid JSON object: " + err.Error()
	}
	switch proto {
	case upstream.Messages:
		return validateMessages(f, h, true)
	case upstream.ChatCompletions:
		return validateChat(f)
	case upstream.Responses:
		return validateResponses(f)
	}
	return ""
}

// validateCount checks a token count request as messages/count_tokens
// does: a Messages request without max_tokens.
func validateCount(body []byte, h http.Header) string {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(body, &f); err != nil {
		return "the request body is not a valid JSON object: " + err.Error()
	}
	return validateMessages(f, h, false)
}

// validateMessages checks a request as the Messages API does: model,
// max_tokens (when generating) and messages required; roles user and
// assistant (and system with a per-turn-control beta); text and image
// blocks complete; sampling within range.
func validateMessages(f map[string]json.RawMessage, h http.Header, generates bool) string {
	maxTokens := ""
	if generates {
		maxTokens = required(f, "max_tokens")
	}
	if msg := first(required(f, "model"), maxTokens, integer(f, "max_tokens", 0),
		number(f, "temperature", 0, 1), number(f, "top_p", 0, 1), integer(f, "top_k", 0), stopSequences(f)); msg != "" {
		return msg
	}
	if system, ok := present(f, "system"); ok {
		if msg := checkContent("system", system); msg != "" {
			return msg
		}
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(f["messages"], &msgs); err != nil || f["messages"] == nil {
		return "messages: Field required (an array of messages)"
	}
	if len(msgs) == 0 {
		return "messages: at least one message is required"
	}
	systemRole := betaHas(h, "per-turn-control")
	for i, raw := range msgs {
		if msg := checkMessage(i, raw, systemRole); msg != "" {
			return msg
		}
	}
	return ""
}

// betaHas reports whether an anthropic-beta header names a beta with
// prefix (betas are comma-separated, one header or several).
func betaHas(h http.Header, prefix string) bool {
	for _, v := range h.Values("anthropic-beta") {
		for b := range strings.SplitSeq(v, ",") {
			if strings.HasPrefix(strings.TrimSpace(b), prefix) {
				return true
			}
		}
	}
	return false
}

func checkMessage(i int, raw json.RawMessage, systemRole bool) string {
	var m struct {
		Role    *string         `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Sprintf("messages.%d: must be an object", i)
	}
	switch {
	case m.Role == nil:
		return fmt.Sprintf("messages.%d.role: Field required", i)
	case *m.Role == "user", *m.Role == "assistant", *m.Role == "system" && systemRole:
	default:
		return fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant' (a system prompt goes in the top-level system field)", i)
	}
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return fmt.Sprintf("messages.%d.content: Field required", i)
	}
	return checkContent(fmt.Sprintf("messages.%d.content", i), m.Content)
}

// checkContent accepts a string or an array of content blocks, checking
// text and image blocks; other block types pass, as the API's newer ones
// would.
func checkContent(path string, raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return ""
	}
	var blocks []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return path + ": Input should be a valid string or a list of content blocks"
	}
	for j, b := range blocks {
		p := fmt.Sprintf("%s.%d", path, j)
		var typ string
		if err := json.Unmarshal(b["type"], &typ); err != nil || typ == "" {
			return p + ".type: Field required"
		}
		switch typ {
		case "text":
			var text string
			if err := json.Unmarshal(b["text"], &text); err != nil {
				return p + ".text: Field required"
			}
		case "image":
			if msg := checkImageSource(p+".source", b["source"]); msg != "" {
				return msg
			}
		}
	}
	return ""
}

func checkImageSource(path string, raw json.RawMessage) string {
	var src struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &src) != nil {
		return path + ": Field required"
	}
	switch src.Type {
	case "base64":
		if src.MediaType == "" {
			return path + ".media_type: Field required"
		}
		if src.Data == "" {
			return path + ".data: Field required"
		}
	case "url":
		if src.URL == "" {
			return path + ".url: Field required"
		}
	default:
		return path + ".type: Input should be 'base64' or 'url'"
	}
	return ""
}

func stopSequences(f map[string]json.RawMessage) string {
	raw, ok := present(f, "stop_sequences")
	if !ok {
		return ""
	}
	var s []string
	if json.Unmarshal(raw, &s) != nil {
		return "stop_sequences: Input should be a valid list of strings"
	}
	return ""
}

// validateChat checks a chat-completions request as OpenAI does, for
// what the simulated provider answers: messages with known roles, one
// choice, sampling within range.
func validateChat(f map[string]json.RawMessage) string {
	if msg := first(required(f, "model"), number(f, "temperature", 0, 2), number(f, "top_p", 0, 1)); msg != "" {
		return msg
	}
	if raw, ok := present(f, "n"); ok {
		var n int64
		if json.Unmarshal(raw, &n) != nil || n != 1 {
			return "n: the simulated provider answers with one choice (n: 1)"
		}
	}
	var msgs []struct {
		Role string `json:"role"`
	}
	if err := json.Unmarshal(f["messages"], &msgs); err != nil || f["messages"] == nil {
		return "messages: Missing required parameter: 'messages'."
	}
	if len(msgs) == 0 {
		return "messages: Invalid 'messages': empty array. Expected an array with minimum length 1."
	}
	for i, m := range msgs {
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool", "function":
		default:
			return fmt.Sprintf("messages[%d].role: Invalid value: '%s'. Supported values are: 'system', 'developer', 'user', 'assistant', 'tool' and 'function'.", i, m.Role)
		}
	}
	return ""
}

// validateResponses checks a Responses request: an input, sampling within
// range, a known reasoning effort.
func validateResponses(f map[string]json.RawMessage) string {
	if msg := first(required(f, "model"), required(f, "input"), number(f, "temperature", 0, 2), number(f, "top_p", 0, 1)); msg != "" {
		return msg
	}
	var s string
	var items []json.RawMessage
	if json.Unmarshal(f["input"], &s) != nil && json.Unmarshal(f["input"], &items) != nil {
		return "input: Invalid type for 'input': expected a string or an array of input items."
	}
	if raw, ok := present(f, "reasoning"); ok {
		var r struct {
			Effort *string `json:"effort"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return "reasoning: Invalid type for 'reasoning': expected an object."
		}
		if r.Effort != nil {
			switch *r.Effort {
			case "none", "minimal", "low", "medium", "high", "xhigh":
			default:
				return fmt.Sprintf("reasoning.effort: Invalid value: '%s'. Supported values are: 'none', 'minimal', 'low', 'medium', 'high' and 'xhigh'.", *r.Effort)
			}
		}
	}
	return ""
}

// present is the member's value when it is there and not null.
func present(f map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	v, ok := f[name]
	return v, ok && string(v) != "null"
}

func required(f map[string]json.RawMessage, name string) string {
	if _, ok := present(f, name); !ok {
		return name + ": Field required"
	}
	return ""
}

func integer(f map[string]json.RawMessage, name string, min int64) string {
	raw, ok := present(f, name)
	if !ok {
		return ""
	}
	var n int64
	if json.Unmarshal(raw, &n) != nil {
		return name + ": Input should be a valid integer"
	}
	if n < min {
		return fmt.Sprintf("%s: Input should be greater than or equal to %d", name, min)
	}
	return ""
}

func number(f map[string]json.RawMessage, name string, lo, hi float64) string {
	raw, ok := present(f, name)
	if !ok {
		return ""
	}
	var v float64
	if json.Unmarshal(raw, &v) != nil {
		return name + ": Input should be a valid number"
	}
	if v < lo || v > hi {
		return fmt.Sprintf("%s: Input should be between %g and %g", name, lo, hi)
	}
	return ""
}

// first returns the first non-empty message.
func first(msgs ...string) string {
	for _, m := range msgs {
		if m != "" {
			return m
		}
	}
	return ""
}
