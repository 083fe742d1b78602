package fakeupstream

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// checkOpenAI enforces what the OpenAI API rejects: the route (chat
// completions, responses, the responses input token count and embeddings), the bearer
// credential and the required body fields.
func (s *Server) checkOpenAI(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if r.Method != http.MethodPost || (r.URL.Path != "/v1/chat/completions" && r.URL.Path != "/v1/responses" && r.URL.Path != "/v1/responses/input_tokens" && r.URL.Path != "/v1/embeddings") {
		s.writeError(w, http.StatusNotFound, "invalid_request_error", "Invalid URL ("+r.Method+" "+r.URL.Path+")")
		return false
	}
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "Bearer ") {
		s.writeOpenAIAuthError(w, "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).")
		return false
	}
	if strings.TrimPrefix(auth, "Bearer ") != s.Key() {
		s.writeOpenAIAuthError(w, "Incorrect API key provided.")
		return false
	}
	var msg, code string
	switch r.URL.Path {
	case "/v1/responses":
		msg = validateResponses(body)
	case "/v1/responses/input_tokens":
		msg, code = validateOpenAICount(body)
	case "/v1/embeddings":
		msg = validateOpenAIEmbedding(body, true)
	default:
		msg = validateChat(body, true)
	}
	if msg != "" && code != "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": code}})
		return false
	}
	if msg != "" {
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", msg)
		return false
	}
	return true
}

func (s *Server) writeOpenAIAuthError(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{
		"message": msg, "type": "invalid_request_error", "param": nil, "code": "invalid_api_key"}})
}

// validateChat checks a chat completions body; needModel is false for
// Azure's deployment URLs, where the deployment names the model.
func validateChat(body []byte, needModel bool) string {
	var req struct {
		Model    *string `json:"model"`
		Messages []struct {
			Role       string  `json:"role"`
			ToolCallID *string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
		StreamOptions json.RawMessage `json:"stream_options"`
		Stream        bool            `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return "We could not parse the JSON body of your request. " + err.Error()
	}
	switch {
	case needModel && (req.Model == nil || *req.Model == ""):
		return "you must provide a model parameter"
	case len(req.Messages) == 0:
		return "[] is too short - 'messages'"
	case len(req.StreamOptions) > 0 && string(req.StreamOptions) != "null" && !req.Stream:
		return "The 'stream_options' parameter is only allowed when 'stream' is enabled."
	}
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "developer", "user", "assistant":
		case "tool":
			if m.ToolCallID == nil || *m.ToolCallID == "" {
				return fmt.Sprintf("Missing parameter 'tool_call_id': messages[%d]", i)
			}
		default:
			return fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'tool', 'function', and 'developer'.", m.Role)
		}
		for j, tc := range m.ToolCalls {
			var s string
			if tc.ID == "" || tc.Type != "function" || json.Unmarshal(tc.Function.Arguments, &s) != nil {
				return fmt.Sprintf("Invalid 'messages[%d].tool_calls[%d]': id, type function and string arguments are required", i, j)
			}
		}
	}
	return ""
}

func validateResponses(body []byte) string {
	var req struct {
		Model *string         `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return "We could not parse the JSON body of your request. " + err.Error()
	}
	switch {
	case req.Model == nil || *req.Model == "":
		return "Missing required parameter: 'model'."
	case len(req.Input) == 0 || string(req.Input) == "null":
		return "Missing required parameter: 'input'."
	}
	return ""
}

func finishReason(stop string) string {
	switch stop {
	case "max_tokens":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return "stop"
}

func chatUsage(u Usage) map[string]any {
	prompt := u.InputTokens + deref(u.CacheRead)
	m := map[string]any{"prompt_tokens": prompt, "completion_tokens": u.OutputTokens, "total_tokens": prompt + u.OutputTokens,
		"completion_tokens_details": map[string]any{"reasoning_tokens": u.ReasoningTokens, "audio_tokens": 0,
			"accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}
	if u.CacheRead != nil {
		m["prompt_tokens_details"] = map[string]any{"cached_tokens": *u.CacheRead, "audio_tokens": 0}
	}
	return m
}

func (s *Server) callID(r Reply) string {
	if r.ToolCall.ID != "" {
		return r.ToolCall.ID
	}
	return s.id("call_")
}

func (s *Server) chatReply(w http.ResponseWriter, hr *http.Request, req Request, r Reply, stream bool) {
	model := req.Model()
	azure := s.kind == kindAzure
	if azure {
		model = AzureModel
	}
	u := r.usage()
	id := s.id("chatcmpl-")
	created := time.Now().Unix()
	var callID string
	if r.ToolCall != nil {
		callID = s.callID(r)
	}
	if !stream {
		msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil, "annotations": []any{}}
		if r.Text != "" || r.ToolCall == nil {
			msg["content"] = r.Text
		}
		if r.ToolCall != nil {
			msg["tool_calls"] = []any{map[string]any{"id": callID, "type": "function",
				"function": map[string]any{"name": r.ToolCall.Name, "arguments": r.ToolCall.Arguments}}}
		}
		out := map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finishReason(r.stopReason())}},
			"usage":   chatUsage(u), "service_tier": "default", "system_fingerprint": "fp_fake",
		}
		if r.NoUsage {
			delete(out, "usage")
		}
		if azure {
			out["prompt_filter_results"] = azurePromptFilters()
			out["choices"].([]any)[0].(map[string]any)["content_filter_results"] = azureFilters()
			delete(out, "service_tier")
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	var opts struct {
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.Unmarshal(req.Body, &opts)
	includeUsage := opts.StreamOptions.IncludeUsage && !r.NoUsage
	sw := s.startSSE(w, hr, r)
	if azure {
		// Azure's first chunk reports the prompt's filter results only:
		// no choices, empty id, model and object.
		sw.event("", map[string]any{"id": "", "object": "", "created": 0, "model": "", "choices": []any{},
			"prompt_filter_results": azurePromptFilters()})
	}
	chunk := func(delta map[string]any, finish any) {
		choice := map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"service_tier": "default", "system_fingerprint": "fp_fake", "choices": []any{choice}}
		if azure {
			delete(c, "service_tier")
			choice["content_filter_results"] = map[string]any{}
		}
		if includeUsage {
			c["usage"] = nil
		}
		sw.event("", c)
	}
	chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)
	for _, c := range chunks(r.Text) {
		chunk(map[string]any{"content": c}, nil)
	}
	if r.ToolCall != nil {
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": callID, "type": "function",
			"function": map[string]any{"name": r.ToolCall.Name, "arguments": ""}}}}, nil)
		args := r.ToolCall.Arguments
		half := len(args) / 2
		for _, part := range []string{args[:half], args[half:]} {
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": part}}}}, nil)
		}
	}
	chunk(map[string]any{}, finishReason(r.stopReason()))
	if includeUsage {
		sw.event("", map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"service_tier": "default", "system_fingerprint": "fp_fake", "choices": []any{}, "usage": chatUsage(u)})
	}
	sw.event("", "[DONE]")
}

func responsesUsage(u Usage) map[string]any {
	in := u.InputTokens + deref(u.CacheRead)
	m := map[string]any{"input_tokens": in, "output_tokens": u.OutputTokens, "total_tokens": in + u.OutputTokens,
		"output_tokens_details": map[string]any{"reasoning_tokens": u.ReasoningTokens}}
	if u.CacheRead != nil {
		m["input_tokens_details"] = map[string]any{"cached_tokens": *u.CacheRead}
	}
	return m
}

func (s *Server) responsesReply(w http.ResponseWriter, hr *http.Request, req Request, r Reply, stream bool) {
	body := req.JSON()
	u := r.usage()
	id := s.id("resp_")
	msgID := s.id("msg_")
	created := time.Now().Unix()
	status, incomplete := "completed", any(nil)
	switch r.stopReason() {
	case "max_tokens":
		status, incomplete = "incomplete", map[string]any{"reason": "max_output_tokens"}
	case "refusal":
		status, incomplete = "incomplete", map[string]any{"reason": "content_filter"}
	}
	var callID, fcID string
	if r.ToolCall != nil {
		callID, fcID = s.callID(r), s.id("fc_")
	}
	textPart := func(text string) map[string]any {
		return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
	}
	msgItem := func(st string, content []any) map[string]any {
		return map[string]any{"type": "message", "id": msgID, "status": st, "role": "assistant", "content": content}
	}
	fcItem := func(st, args string) map[string]any {
		return map[string]any{"type": "function_call", "id": fcID, "call_id": callID, "name": r.ToolCall.Name, "arguments": args, "status": st}
	}
	var output []any
	if r.Text != "" || r.ToolCall == nil {
		output = append(output, msgItem("completed", []any{textPart(r.Text)}))
	}
	if r.ToolCall != nil {
		output = append(output, fcItem("completed", r.ToolCall.Arguments))
	}
	response := func(st string, out []any, usage any, inc any) map[string]any {
		tools := body["tools"]
		if tools == nil {
			tools = []any{}
		}
		return map[string]any{
			"id": id, "object": "response", "created_at": created, "status": st, "background": false, "error": nil,
			"incomplete_details": inc, "instructions": body["instructions"], "max_output_tokens": body["max_output_tokens"],
			"model": req.Model(), "output": out, "parallel_tool_calls": true, "previous_response_id": nil,
			"reasoning": map[string]any{"effort": nil, "summary": nil}, "store": true, "temperature": 1.0,
			"text": map[string]any{"format": map[string]any{"type": "text"}}, "tool_choice": "auto", "tools": tools,
			"top_p": 1.0, "truncation": "disabled", "usage": usage, "user": nil, "metadata": map[string]any{},
		}
	}
	if !stream {
		writeJSON(w, http.StatusOK, response(status, output, responsesUsage(u), incomplete))
		return
	}
	sw := s.startSSE(w, hr, r)
	seq := 0
	ev := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		sw.event(typ, fields)
	}
	ev("response.created", map[string]any{"response": response("in_progress", []any{}, nil, nil)})
	ev("response.in_progress", map[string]any{"response": response("in_progress", []any{}, nil, nil)})
	idx := 0
	if r.Text != "" || r.ToolCall == nil {
		ev("response.output_item.added", map[string]any{"output_index": idx, "item": msgItem("in_progress", []any{})})
		ev("response.content_part.added", map[string]any{"item_id": msgID, "output_index": idx, "content_index": 0, "part": textPart("")})
		for _, c := range chunks(r.Text) {
			ev("response.output_text.delta", map[string]any{"item_id": msgID, "output_index": idx, "content_index": 0, "delta": c, "logprobs": []any{}})
		}
		ev("response.output_text.done", map[string]any{"item_id": msgID, "output_index": idx, "content_index": 0, "text": r.Text, "logprobs": []any{}})
		ev("response.content_part.done", map[string]any{"item_id": msgID, "output_index": idx, "content_index": 0, "part": textPart(r.Text)})
		ev("response.output_item.done", map[string]any{"output_index": idx, "item": msgItem("completed", []any{textPart(r.Text)})})
		idx++
	}
	if r.ToolCall != nil {
		args := r.ToolCall.Arguments
		ev("response.output_item.added", map[string]any{"output_index": idx, "item": fcItem("in_progress", "")})
		half := len(args) / 2
		for _, part := range []string{args[:half], args[half:]} {
			ev("response.function_call_arguments.delta", map[string]any{"item_id": fcID, "output_index": idx, "delta": part})
		}
		ev("response.function_call_arguments.done", map[string]any{"item_id": fcID, "output_index": idx, "arguments": args})
		ev("response.output_item.done", map[string]any{"output_index": idx, "item": fcItem("completed", args)})
	}
	final := "response.completed"
	if status == "incomplete" {
		final = "response.incomplete"
	}
	ev(final, map[string]any{"response": response(status, output, responsesUsage(u), incomplete)})
}
