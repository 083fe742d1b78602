package fakeupstream

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// checkAnthropic enforces what the Messages API (and its token count)
// rejects: the route, the credential, the version header and the required
// body fields.
func (s *Server) checkAnthropic(w http.ResponseWriter, r *http.Request, body []byte) bool {
	count := r.URL.Path == "/v1/messages/count_tokens"
	if r.Method != http.MethodPost || (r.URL.Path != "/v1/messages" && !count) {
		s.writeError(w, http.StatusNotFound, "not_found_error", "Not Found")
		return false
	}
	if r.Header.Get("x-api-key") == "" {
		s.writeError(w, http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
		return false
	}
	if r.Header.Get("x-api-key") != s.Key() {
		s.writeError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return false
	}
	if r.Header.Get("anthropic-version") == "" {
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
		return false
	}
	if msg := validateMessagesBody(body, !count, betaHas(r.Header, "per-turn-control")); msg != "" {
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", msg)
		return false
	}
	return true
}

// validateMessages checks a Messages request that generates, without the
// betas that allow more.
func validateMessages(body []byte) string { return validateMessagesBody(body, true, false) }

// validateMessagesBody checks what the Messages API refuses: max_tokens is
// required of a request that generates, not of a token count; systemRole:
// the request enabled system messages inside messages (a per-turn-control
// beta, which Claude Code sends).
func validateMessagesBody(body []byte, generates, systemRole bool) string {
	var req struct {
		Model     *string `json:"model"`
		MaxTokens *int64  `json:"max_tokens"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string          `json:"name"`
			Type        string          `json:"type"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return "invalid JSON body: " + err.Error()
	}
	switch {
	case req.Model == nil || *req.Model == "":
		return "model: Field required"
	case req.MaxTokens == nil && generates:
		return "max_tokens: Field required"
	case len(req.Messages) == 0:
		return "messages: Field required"
	}
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" && (m.Role != "system" || !systemRole) {
			return fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		var str string
		if json.Unmarshal(m.Content, &str) == nil {
			continue
		}
		var blocks []map[string]json.RawMessage
		if err := json.Unmarshal(m.Content, &blocks); err != nil {
			return fmt.Sprintf("messages.%d.content: Input should be a valid list", i)
		}
		for j, b := range blocks {
			var typ string
			_ = json.Unmarshal(b["type"], &typ)
			switch typ {
			case "tool_use":
				var in map[string]any
				if json.Unmarshal(b["input"], &in) != nil || in == nil {
					return fmt.Sprintf("messages.%d.content.%d.tool_use.input: Input should be a valid dictionary", i, j)
				}
				if len(b["id"]) == 0 || len(b["name"]) == 0 {
					return fmt.Sprintf("messages.%d.content.%d.tool_use: id and name are required", i, j)
				}
			case "tool_result":
				if len(b["tool_use_id"]) == 0 {
					return fmt.Sprintf("messages.%d.content.%d.tool_result.tool_use_id: Field required", i, j)
				}
			case "":
				return fmt.Sprintf("messages.%d.content.%d.type: Field required", i, j)
			}
		}
	}
	for i, t := range req.Tools {
		if t.Type == "" && len(t.InputSchema) == 0 {
			return fmt.Sprintf("tools.%d.custom.input_schema: Field required", i)
		}
	}
	return ""
}

func anthropicUsage(u Usage, outputTokens int64) map[string]any {
	m := map[string]any{"input_tokens": u.InputTokens, "output_tokens": outputTokens}
	if u.CacheWrite != nil {
		m["cache_creation_input_tokens"] = *u.CacheWrite
	}
	if u.CacheRead != nil {
		m["cache_read_input_tokens"] = *u.CacheRead
	}
	return m
}

func (s *Server) anthropicReply(w http.ResponseWriter, hr *http.Request, req Request, r Reply, stream bool) {
	model := req.Model()
	u := r.usage()
	id := s.id("msg_")
	toolID := ""
	if r.ToolCall != nil {
		toolID = r.ToolCall.ID
		if toolID == "" {
			toolID = s.id("toolu_")
		}
	}
	if !stream {
		writeJSON(w, http.StatusOK, anthropicMessage(id, toolID, model, r))
		return
	}
	sw := s.startSSE(w, hr, r)
	sw.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": anthropicUsage(u, 1),
	}})
	index := 0
	if r.Text != "" || r.ToolCall == nil {
		sw.event("content_block_start", map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "text", "text": ""}})
		sw.event("ping", map[string]any{"type": "ping"})
		for _, c := range chunks(r.Text) {
			sw.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
				"delta": map[string]any{"type": "text_delta", "text": c}})
		}
		sw.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	if r.ToolCall != nil {
		sw.event("content_block_start", map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "tool_use", "id": toolID, "name": r.ToolCall.Name, "input": map[string]any{}}})
		args := r.ToolCall.Arguments
		half := len(args) / 2
		for _, part := range []string{"", args[:half], args[half:]} {
			sw.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
		sw.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
	}
	sw.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": r.stopReason(), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": u.OutputTokens}})
	sw.event("message_stop", map[string]any{"type": "message_stop"})
}

// betaHas reports whether an anthropic-beta header names a beta with
// prefix (betas are comma-separated, in one header or several).
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

// anthropicMessage is the Messages API's answer to a request that does not
// stream.
func anthropicMessage(id, toolID, model string, r Reply) map[string]any {
	u := r.usage()
	content := []any{}
	if r.Text != "" || r.ToolCall == nil {
		content = append(content, map[string]any{"type": "text", "text": r.Text})
	}
	if r.ToolCall != nil {
		content = append(content, map[string]any{"type": "tool_use", "id": toolID, "name": r.ToolCall.Name,
			"input": json.RawMessage(r.ToolCall.Arguments)})
	}
	msg := map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": content,
		"stop_reason": r.stopReason(), "stop_sequence": nil, "usage": anthropicUsage(u, u.OutputTokens),
	}
	if r.NoUsage {
		delete(msg, "usage")
	}
	return msg
}

// anthropicMessage (a method) is anthropicMessage with IDs of the server's (a
// message ID with prefix).
func (s *Server) anthropicMessage(prefix, model string, r Reply) map[string]any {
	toolID := ""
	if r.ToolCall != nil {
		toolID = r.ToolCall.ID
		if toolID == "" {
			toolID = s.id("toolu_bdrk_")
		}
	}
	return anthropicMessage(s.id(prefix), toolID, model, r)
}
