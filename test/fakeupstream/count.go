package fakeupstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// The token count endpoints, written from the vendors' public references:
//
//   - Anthropic: POST /v1/messages/count_tokens, a Messages request without
//     max_tokens (model and messages required), answered
//     {"input_tokens": N} (docs.anthropic.com/en/api/messages-count-tokens);
//   - OpenAI: POST /v1/responses/input_tokens, the members of a Responses
//     request that counting takes (others are an unknown_parameter),
//     answered {"object":"response.input_tokens","input_tokens": N}
//     (platform.openai.com/docs/api-reference/responses/input-tokens);
//   - Gemini: POST /v1beta/models/{model}:countTokens, either contents or a
//     generateContentRequest that names its model, never both, answered
//     {"totalTokens": N, "promptTokensDetails": […]} (ai.google.dev/api/tokens);
//   - Bedrock: POST /model/{modelId}/count-tokens, signed like Converse,
//     {"input":{"converse":{messages, system, toolConfig,
//     additionalModelRequestFields}}} (or input.invokeModel.body), answered
//     {"inputTokens": N} (…/APIReference/API_runtime_CountTokens.html);
//   - Vertex AI: publishers/google/models/{model}:countTokens, Gemini's
//     contents, systemInstruction, tools and generationConfig, answered
//     {"totalTokens": N, "totalBillableCharacters": …}; and
//     publishers/anthropic/models/count-tokens:rawPredict, a Messages body
//     that names the Claude model and carries anthropic_version, answered
//     {"input_tokens": N} (cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/count-tokens).
//
// The count is the scripted reply's Usage.InputTokens when it sets one,
// else TokenCount of the body the fake received; a scripted Status fails
// the count in the vendor's error shape, as for any other call.

// TokenCount is the count a fake answers for a count request's body (as
// it received it, Request.Body): a quarter of its bytes, rounded up.
func TokenCount(body []byte) int64 { return int64(len(body)+3) / 4 }

// vertexCountModel is the model segment of Claude's count-tokens method.
const vertexCountModel = "count-tokens"

// isCount reports whether r is a token count request of the server's API.
func (s *Server) isCount(r *http.Request) bool {
	switch s.kind {
	case kindAnthropic:
		return r.URL.Path == "/v1/messages/count_tokens"
	case kindOpenAI:
		return r.URL.Path == "/v1/responses/input_tokens"
	case kindGemini:
		_, method, ok := geminiPath(r.URL.Path)
		return ok && method == "countTokens"
	case kindBedrock:
		_, method, ok := bedrockPath(r)
		return ok && method == "count-tokens"
	case kindVertex:
		rt, ok := vertexPath(r.URL.Path)
		return ok && (rt.method == "countTokens" || rt.model == vertexCountModel)
	}
	return false
}

// countReply answers a count request that passed the checks.
func (s *Server) countReply(w http.ResponseWriter, r *http.Request, body []byte, reply Reply) {
	n := reply.Usage.InputTokens
	if n == 0 {
		n = TokenCount(body)
	}
	switch {
	case s.kind == kindOpenAI:
		writeJSON(w, http.StatusOK, map[string]any{"object": "response.input_tokens", "input_tokens": n})
	case s.kind == kindBedrock:
		w.Header().Set("x-amzn-RequestId", "00000000-0000-4000-8000-000000000001")
		writeJSON(w, http.StatusOK, map[string]any{"inputTokens": n})
	case s.kind == kindGemini:
		writeJSON(w, http.StatusOK, map[string]any{"totalTokens": n,
			"promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": n}}})
	case s.wire(r) == kindGemini: // Vertex AI, Gemini models
		writeJSON(w, http.StatusOK, map[string]any{"totalTokens": n, "totalBillableCharacters": len(body),
			"promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": n}}})
	default: // Anthropic, and Claude on Vertex AI
		if s.kind == kindAnthropic {
			w.Header().Set("request-id", s.id("req_"))
		}
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": n})
	}
}

// openAICountMembers are the members POST /v1/responses/input_tokens takes.
var openAICountMembers = []string{"model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls",
	"previous_response_id", "conversation", "text", "reasoning", "truncation", "personality"}

// validateOpenAICount checks an input token count body.
func validateOpenAICount(body []byte) (string, string) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return "We could not parse the JSON body of your request. " + err.Error(), ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(openAICountMembers, k) {
			return fmt.Sprintf("Unknown parameter: '%s'.", k), "unknown_parameter"
		}
	}
	if in, ok := m["input"]; ok {
		var str string
		var items []json.RawMessage
		if json.Unmarshal(in, &str) != nil && json.Unmarshal(in, &items) != nil {
			return "Invalid type for 'input': expected a string or an array of input items.", "invalid_type"
		}
	}
	return "", ""
}

// validateGeminiCount checks a countTokens body of the Gemini API.
func validateGeminiCount(body []byte, model string) string {
	var req struct {
		Contents               json.RawMessage `json:"contents"`
		GenerateContentRequest json.RawMessage `json:"generateContentRequest"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return "Invalid JSON payload received. " + err.Error()
	}
	switch {
	case req.Contents != nil && req.GenerateContentRequest != nil:
		return "* CountTokensRequest: contents and generate_content_request are mutually exclusive"
	case req.GenerateContentRequest == nil:
		return validateGemini([]byte(`{"contents":` + string(req.Contents) + `}`))
	}
	var inner map[string]json.RawMessage
	if err := json.Unmarshal(req.GenerateContentRequest, &inner); err != nil {
		return "Invalid JSON payload received. Invalid value at 'generate_content_request'"
	}
	var name string
	if json.Unmarshal(inner["model"], &name) != nil || name == "" {
		return "* CountTokensRequest.generate_content_request.model: Field required"
	}
	if name != "models/"+model {
		return fmt.Sprintf("* CountTokensRequest.generate_content_request.model: %q is not the model of the URL, models/%s", name, model)
	}
	delete(inner, "model")
	rest, _ := json.Marshal(inner)
	return validateGemini(rest)
}

// bedrockConverseCountMembers are ConverseTokensRequest's members.
var bedrockConverseCountMembers = []string{"messages", "system", "toolConfig", "additionalModelRequestFields"}

// validateBedrockCount checks a CountTokens body: one member of the input
// union, a converse input a valid Converse conversation.
func validateBedrockCount(body []byte) string {
	var req struct {
		Input *struct {
			Converse    map[string]json.RawMessage `json:"converse"`
			InvokeModel *struct {
				Body string `json:"body"`
			} `json:"invokeModel"`
		} `json:"input"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return "Malformed input request: " + err.Error() + ", please reformat your input and try again."
	}
	switch {
	case req.Input == nil:
		return "1 validation error detected: Value null at 'input' failed to satisfy constraint: Member must not be null"
	case (req.Input.Converse != nil) == (req.Input.InvokeModel != nil):
		return "input must set exactly one of converse and invokeModel"
	case req.Input.InvokeModel != nil:
		if req.Input.InvokeModel.Body == "" {
			return "input.invokeModel.body: Member must not be null"
		}
		return ""
	}
	for k := range req.Input.Converse {
		if !slices.Contains(bedrockConverseCountMembers, k) {
			return fmt.Sprintf("Malformed input request: #/input/converse: extraneous key [%s] is not permitted, please reformat your input and try again.", k)
		}
	}
	converse, _ := json.Marshal(req.Input.Converse)
	return validateConverse(converse)
}

// validateVertexClaudeCount checks a Claude count-tokens body on Vertex
// AI: anthropic_version, a Claude model named in the body, no stream, then
// what the Messages API's count checks.
func validateVertexClaudeCount(body []byte, rt vertexRoute) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return "invalid JSON body: " + err.Error()
	}
	var version, model string
	_ = json.Unmarshal(m["anthropic_version"], &version)
	_ = json.Unmarshal(m["model"], &model)
	switch {
	case rt.method != "rawPredict":
		return fmt.Sprintf("count-tokens is called with rawPredict, not %s", rt.method)
	case version == "":
		return "anthropic_version: Field required"
	case version != "vertex-2023-10-16":
		return fmt.Sprintf("anthropic_version: Input should be 'vertex-2023-10-16' (got %q)", version)
	case model == "":
		return "model: Field required"
	case !strings.HasPrefix(model, "claude"):
		return fmt.Sprintf("model: %q is not a Claude model", model)
	case m["stream"] != nil:
		return "stream: Extra inputs are not permitted"
	}
	delete(m, "anthropic_version")
	b, _ := json.Marshal(m)
	return validateMessagesBody(b, false, false)
}
