package handlers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/apierr"
	"github.com/modelgate/modelgate/gateway/translate"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// The three text protocols. Validation reads only what routing, billing and
// the contract's rules need; everything else passes to the upstream as sent.

func messagesProtocol() textProtocol {
	return textProtocol{
		path: "/v1/messages", proto: upstream.Messages, endpoint: v1.EndpointMessages, allowXAPIKey: true,
		parse: parseMessages, insufficientQuota: http.StatusBadRequest,
		fail: func(w http.ResponseWriter, status int, _, msg string) {
			apierr.Messages(w, status, apierr.MessagesType(status), msg)
		},
	}
}

func chatProtocol() textProtocol {
	return textProtocol{
		path: "/v1/chat/completions", proto: upstream.ChatCompletions, endpoint: v1.EndpointChatCompletions,
		parse: parseChat, insufficientQuota: http.StatusTooManyRequests, fail: openAIFail,
	}
}

func responsesProtocol() textProtocol {
	return textProtocol{
		path: "/v1/responses", proto: upstream.Responses, endpoint: v1.EndpointResponses,
		parse: parseResponses, insufficientQuota: http.StatusTooManyRequests, fail: openAIFail,
	}
}

func openAIFail(w http.ResponseWriter, status int, code, msg string) {
	typ := apierr.OpenAIType(status)
	if code == "insufficient_quota" {
		typ = "insufficient_quota"
	}
	apierr.OpenAI(w, status, typ, code, msg)
}

// fields is a JSON object's top-level members, undecoded: raw values that
// alias the body, in order. Reading a member takes the last one of its name,
// as encoding/json does when it decodes an object into a map.
type fields []member

type member struct{ key, value json.RawMessage }

// decodeObject checks the body is one valid JSON object and lists its
// members. The walk allocates nothing per member (the body is validated
// once, without decoding): the request path reads a handful of fields of
// bodies that may be megabytes of conversation.
func decodeObject(body []byte) (fields, string) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, "the request body must be a JSON object"
	}
	if !json.Valid(trimmed) {
		var m map[string]json.RawMessage // for the decoder's account of where it breaks
		err := json.Unmarshal(trimmed, &m)
		return nil, "the request body is not valid JSON: " + err.Error()
	}
	f := make(fields, 0, 16)
	translate.Members(trimmed, func(k, v []byte) bool {
		f = append(f, member{key: k, value: v})
		return true
	})
	return f, ""
}

// raw is the member's value, nil when absent.
func (f fields) raw(name string) json.RawMessage {
	for i := len(f) - 1; i >= 0; i-- {
		if translate.KeyIs(f[i].key, name) {
			return f[i].value
		}
	}
	return nil
}

// value is the member's value when it is present and not null.
func (f fields) value(name string) (json.RawMessage, bool) {
	v := f.raw(name)
	return v, v != nil && !bytes.Equal(v, []byte("null"))
}

func (f fields) has(name string) bool {
	_, ok := f.value(name)
	return ok
}

// plainString reads a JSON string without escapes or non-ASCII bytes, the
// common case, which needs no decoder; ok is false for anything else.
func plainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	for _, c := range v[1 : len(v)-1] {
		if c == '\\' || c >= utf8.RuneSelf {
			return "", false
		}
	}
	return string(v[1 : len(v)-1]), true
}

// isNumber reports whether v is a JSON number literal (v is valid JSON).
func isNumber(v []byte) bool { return len(v) > 0 && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) }

func (f fields) str(name string, required bool) (string, string) {
	raw, present := f.value(name)
	if !present {
		if required {
			return "", name + ": field required"
		}
		return "", ""
	}
	s, ok := plainString(raw)
	if !ok && json.Unmarshal(raw, &s) != nil {
		return "", name + ": must be a string"
	}
	if required && s == "" {
		return "", name + ": must not be empty"
	}
	return s, ""
}

func (f fields) boolean(name string) (bool, string) {
	raw, present := f.value(name)
	if !present {
		return false, ""
	}
	switch string(raw) {
	case "true":
		return true, ""
	case "false":
		return false, ""
	}
	return false, name + ": must be a boolean"
}

// integer reads a positive integer; 0 when absent.
func (f fields) integer(name string, min int64) (int64, string) {
	raw, present := f.value(name)
	if !present {
		return 0, ""
	}
	var n json.Number
	if isNumber(raw) {
		n = json.Number(raw)
	} else if err := json.Unmarshal(raw, &n); err != nil { // a quoted number decodes too
		return 0, name + ": must be an integer"
	}
	v, err := n.Int64()
	if err != nil {
		return 0, name + ": must be an integer"
	}
	if v < min {
		return 0, fmt.Sprintf("%s: must be at least %d", name, min)
	}
	return v, ""
}

func (f fields) number(name string, lo, hi float64) string {
	raw, present := f.value(name)
	if !present {
		return ""
	}
	if !isNumber(raw) {
		return name + ": must be a number"
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return name + ": must be a number"
	}
	if v < lo || v > hi {
		return fmt.Sprintf("%s: must be between %g and %g", name, lo, hi)
	}
	return ""
}

// array lists the elements of an array member (aliasing the body).
func (f fields) array(name string, required bool) ([]json.RawMessage, string) {
	raw, present := f.value(name)
	if !present {
		if required {
			return nil, name + ": field required"
		}
		return nil, ""
	}
	var a []json.RawMessage
	if !translate.Elements(raw, func(v []byte) bool {
		a = append(a, v)
		return true
	}) {
		return nil, name + ": must be an array"
	}
	return a, ""
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

// parseMessages validates a messages-protocol body (Anthropic Messages API).
func parseMessages(body []byte) (textRequest, string) {
	f, msg := decodeObject(body)
	if msg != "" {
		return textRequest{}, msg
	}
	var req textRequest
	var m1, m2, m3 string
	req.Model, m1 = f.str("model", true)
	req.Stream, m2 = f.boolean("stream")
	if !f.has("max_tokens") {
		m3 = "max_tokens: field required"
	} else {
		// 0 is allowed: the public API uses it to warm a prompt cache.
		req.MaxTokens, m3 = f.integer("max_tokens", 0)
	}
	if msg := first(m1, m3, m2, f.number("temperature", 0, 1), f.number("top_p", 0, 1), checkStopSequences(f)); msg != "" {
		return req, msg
	}
	if f.has("top_k") {
		if _, msg := f.integer("top_k", 0); msg != "" {
			return req, msg
		}
	}
	if system, ok := f.value("system"); ok {
		if msg := checkContent("system", system); msg != "" {
			return req, msg
		}
	}
	msgs, msg := f.array("messages", true)
	if msg != "" {
		return req, msg
	}
	if len(msgs) == 0 {
		return req, "messages: at least one message is required"
	}
	for i, raw := range msgs {
		if msg := checkAnthropicMessage(i, raw); msg != "" {
			return req, msg
		}
	}
	return req, ""
}

func checkStopSequences(f fields) string {
	raw, ok := f.value("stop_sequences")
	if !ok {
		return ""
	}
	var s []string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "stop_sequences: must be an array of strings"
	}
	return ""
}

func checkAnthropicMessage(i int, raw json.RawMessage) string {
	var m struct {
		Role    *string         `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Sprintf("messages.%d: must be an object", i)
	}
	if m.Role == nil {
		return fmt.Sprintf("messages.%d.role: field required", i)
	}
	if *m.Role != "user" && *m.Role != "assistant" {
		return fmt.Sprintf("messages.%d.role: must be 'user' or 'assistant' (a system prompt goes in the top-level system field)", i)
	}
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return fmt.Sprintf("messages.%d.content: field required", i)
	}
	return checkContent(fmt.Sprintf("messages.%d.content", i), m.Content)
}

// checkContent accepts a string or an array of content blocks, checking
// the text and image blocks the contract describes; other block types
// (tool_use, tool_result, document, thinking, …) pass through.
func checkContent(path string, raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return ""
	}
	var blocks []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return path + ": must be a string or an array of content blocks"
	}
	for j, b := range blocks {
		p := fmt.Sprintf("%s.%d", path, j)
		var typ string
		if err := json.Unmarshal(b["type"], &typ); err != nil || typ == "" {
			return p + ".type: field required"
		}
		switch typ {
		case "text":
			var text string
			if err := json.Unmarshal(b["text"], &text); err != nil {
				return p + ".text: field required for a text block"
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
		return path + ": field required for an image block"
	}
	switch src.Type {
	case "base64":
		if src.MediaType == "" {
			return path + ".media_type: field required for a base64 image"
		}
		if src.Data == "" {
			return path + ".data: field required for a base64 image"
		}
	case "url":
		if src.URL == "" {
			return path + ".url: field required for a url image"
		}
	default:
		return path + ".type: must be 'base64' or 'url'"
	}
	return ""
}

// parseChat validates a chat-completions body (OpenAI).
func parseChat(body []byte) (textRequest, string) {
	f, msg := decodeObject(body)
	if msg != "" {
		return textRequest{}, msg
	}
	var req textRequest
	var m1, m2, m3, m4 string
	req.Model, m1 = f.str("model", true)
	req.Stream, m2 = f.boolean("stream")
	req.MaxTokens, m3 = f.integer("max_completion_tokens", 1)
	if req.MaxTokens == 0 {
		req.MaxTokens, m4 = f.integer("max_tokens", 1)
	}
	if msg := first(m1, m2, m3, m4, f.number("temperature", 0, 2), f.number("top_p", 0, 1)); msg != "" {
		return req, msg
	}
	if n, msg := f.integer("n", 1); msg != "" || n > 1 {
		return req, first(msg, "n: only 1 choice per request is supported")
	}
	msgs, msg := f.array("messages", true)
	if msg != "" {
		return req, msg
	}
	if len(msgs) == 0 {
		return req, "messages: at least one message is required"
	}
	for i, raw := range msgs {
		role, ok := chatRole(raw)
		if !ok {
			return req, fmt.Sprintf("messages[%d]: must be an object", i)
		}
		switch role {
		case "system", "developer", "user", "assistant", "tool", "function":
		default:
			return req, fmt.Sprintf("messages[%d].role: must be one of system, developer, user, assistant, tool", i)
		}
	}
	return req, ""
}

// chatRole reads a chat message's role as decoding it into
// struct{Role string} would (ok false where that fails), without the
// decoder in the common case: an object whose role is a plain string.
// Anything else is left to the decoder.
func chatRole(raw json.RawMessage) (role string, ok bool) {
	plain := true
	isObject := translate.Members(raw, func(k, v []byte) bool {
		key := k[1 : len(k)-1]
		switch {
		case bytes.IndexByte(key, '\\') >= 0:
			plain = false // an escaped key may spell role: the decoder decides
		case !bytes.EqualFold(key, []byte("role")):
			return true
		case string(key) != "role":
			plain = false // encoding/json matches field names case-insensitively
		case string(v) == "null":
			return true // and leaves a field unchanged for null
		default:
			role, plain = plainString(v)
		}
		return plain
	})
	if isObject && plain {
		return role, true
	}
	var m struct {
		Role string `json:"role"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", false
	}
	return m.Role, true
}

// parseResponses validates a responses body (OpenAI Responses API).
func parseResponses(body []byte) (textRequest, string) {
	f, msg := decodeObject(body)
	if msg != "" {
		return textRequest{}, msg
	}
	var req textRequest
	var m1, m2, m3, m4, m5 string
	req.Model, m1 = f.str("model", true)
	req.Stream, m2 = f.boolean("stream")
	req.MaxTokens, m3 = f.integer("max_output_tokens", 1)
	_, m4 = f.str("instructions", false)
	_, m5 = f.str("previous_response_id", false)
	if msg := first(m1, m2, m3, m4, m5, f.number("temperature", 0, 2), f.number("top_p", 0, 1)); msg != "" {
		return req, msg
	}
	input, ok := f.value("input")
	if !ok {
		return req, "input: field required"
	}
	var s string
	var items []json.RawMessage
	if json.Unmarshal(input, &s) != nil && json.Unmarshal(input, &items) != nil {
		return req, "input: must be a string or an array of input items"
	}
	if reasoning, ok := f.value("reasoning"); ok {
		var r struct {
			Effort *string `json:"effort"`
		}
		if err := json.Unmarshal(reasoning, &r); err != nil {
			return req, "reasoning: must be an object"
		}
		if r.Effort != nil {
			switch *r.Effort {
			case "high", "medium", "low", "minimal", "none":
			default:
				return req, "reasoning.effort: must be one of high, medium, low, none"
			}
		}
	}
	return req, checkTools(f)
}

func checkTools(f fields) string {
	tools, msg := f.array("tools", false)
	if msg != "" {
		return msg
	}
	for i, raw := range tools {
		var t struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return fmt.Sprintf("tools[%d]: must be an object", i)
		}
		switch t.Type {
		case "function", "web_search_preview", "web_search":
		default:
			return fmt.Sprintf("tools[%d].type: must be function or web_search_preview", i)
		}
	}
	if choice, ok := f.value("tool_choice"); ok {
		var s string
		if json.Unmarshal(choice, &s) == nil {
			switch s {
			case "auto", "none", "required":
			default:
				return "tool_choice: must be auto, none, required or a tool object"
			}
		}
	}
	return ""
}
