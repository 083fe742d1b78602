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

// The three text protocols. A request is read only for what admission,
// routing and billing need: the model, whether it streams, its output cap
// (and for responses the previous response it continues). Everything else
// reaches the upstream as the client sent it, and the upstream judges it:
// a field, role, block or tool type newer than this code is never refused
// here (docs/api-choices.md, "Pass-through").

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

// parseCommon reads what every text protocol's request must carry for the
// gateway itself: a JSON object with a model (a string, which routing
// needs) and, when present, a boolean stream (the answer's framing
// depends on it).
func parseCommon(body []byte) (fields, textRequest, string) {
	f, msg := decodeObject(body)
	if msg != "" {
		return nil, textRequest{}, msg
	}
	var req textRequest
	if req.Model, msg = f.str("model", true); msg != "" {
		return nil, req, msg
	}
	if req.Stream, msg = f.boolean("stream"); msg != "" {
		return nil, req, msg
	}
	return f, req, ""
}

// parseMessages reads a messages-protocol body (Anthropic Messages API).
// max_tokens is reserved for when present; 0 is allowed (the public API
// takes it to warm a prompt cache).
func parseMessages(body []byte) (textRequest, string) {
	f, req, msg := parseCommon(body)
	if msg != "" {
		return req, msg
	}
	req.MaxTokens, msg = f.integer("max_tokens", 0)
	return req, msg
}

// parseChat reads a chat-completions body (OpenAI): the output cap is
// max_completion_tokens, else the older max_tokens.
func parseChat(body []byte) (textRequest, string) {
	f, req, msg := parseCommon(body)
	if msg != "" {
		return req, msg
	}
	if req.MaxTokens, msg = f.integer("max_completion_tokens", 0); msg == "" && req.MaxTokens == 0 {
		req.MaxTokens, msg = f.integer("max_tokens", 0)
	}
	return req, msg
}

// parseResponses reads a responses body (OpenAI Responses API); the
// gateway keeps conversations, so previous_response_id must be a string.
func parseResponses(body []byte) (textRequest, string) {
	f, req, msg := parseCommon(body)
	if msg != "" {
		return req, msg
	}
	if req.MaxTokens, msg = f.integer("max_output_tokens", 0); msg != "" {
		return req, msg
	}
	_, msg = f.str("previous_response_id", false)
	return req, msg
}

// OutputCapHeader tells the client the output cap its request was served
// with when the gateway lowered it to what the balance pays for.
const OutputCapHeader = "x-modelgate-output-cap"

// setOutputCap writes the output cap into a client body in its protocol's
// field, keeping every other byte: messages max_tokens, responses
// max_output_tokens, chat whichever of max_completion_tokens and max_tokens
// the client sent (both when it sent both), max_completion_tokens when it
// sent neither. A translated route's upstream body is built from this one,
// so it carries the cap in the upstream's own field. A messages body that
// asks for no output (max_tokens 0, a cache warm-up) is returned as it is.
func setOutputCap(proto upstream.Protocol, body []byte, n int64) ([]byte, error) {
	v := []byte(strconv.FormatInt(n, 10))
	switch proto {
	case upstream.Messages:
		if raw, ok := translate.FieldRaw(body, "max_tokens"); ok && string(raw) == "0" {
			return body, nil
		}
		return translate.SetField(body, v, "max_tokens")
	case upstream.Responses:
		return translate.SetField(body, v, "max_output_tokens")
	}
	_, mct := translate.FieldRaw(body, "max_completion_tokens")
	_, mt := translate.FieldRaw(body, "max_tokens")
	var err error
	if mct || !mt {
		if body, err = translate.SetField(body, v, "max_completion_tokens"); err != nil {
			return nil, err
		}
	}
	if mt {
		body, err = translate.SetField(body, v, "max_tokens")
	}
	return body, err
}
