package fakeupstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// The Gemini API fake, written from Google's public reference
// (ai.google.dev/api/generate-content, ai.google.dev/api/caching#Content,
// ai.google.dev/gemini-api/docs/troubleshooting): POST
// /v1beta/models/{model}:generateContent and :streamGenerateContent (with
// alt=sse server-sent events, without it one JSON array), the key in
// x-goog-api-key (or ?key=), errors as {"error":{"code","message","status"}}.

// NewGemini starts a fake of the Gemini API. It requires x-goog-api-key (or
// the key query parameter) = Key().
func NewGemini() *Server { return newServer(kindGemini) }

// geminiPath splits /v1beta/models/{model}:{method}.
func geminiPath(path string) (model, method string, ok bool) {
	rest, found := strings.CutPrefix(path, "/v1beta/models/")
	if !found {
		return "", "", false
	}
	model, method, found = strings.Cut(rest, ":")
	return model, method, found && model != ""
}

// googleStatus is the canonical status name the API puts beside the HTTP
// code.
func googleStatus(code int) string {
	switch code {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	if code >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// geminiError is the API's error body; retryDelay, when set, adds the
// RetryInfo detail the API sends with RESOURCE_EXHAUSTED (it sends no
// Retry-After header).
func geminiError(code int, msg, retryDelay string) map[string]any {
	e := map[string]any{"code": code, "message": msg, "status": googleStatus(code)}
	if retryDelay != "" {
		e["details"] = []any{map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retryDelay}}
	}
	return map[string]any{"error": e}
}

// checkGemini enforces what the API rejects: the route, the key, and a
// body that is a valid GenerateContentRequest, or CountTokensRequest
// (unknown fields are an INVALID_ARGUMENT, as for every Google JSON API).
func (s *Server) checkGemini(w http.ResponseWriter, r *http.Request, body []byte) bool {
	model, method, ok := geminiPath(r.URL.Path)
	if r.Method != http.MethodPost || !ok || (method != "generateContent" && method != "streamGenerateContent" && method != "countTokens" &&
		method != "embedContent" && method != "batchEmbedContents") {
		writeJSON(w, http.StatusNotFound, geminiError(404, "Not Found", ""))
		return false
	}
	key := r.Header.Get("x-goog-api-key")
	if key == "" {
		key = r.URL.Query().Get("key")
	}
	if key == "" {
		writeJSON(w, http.StatusForbidden, geminiError(403, "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.", ""))
		return false
	}
	if key != s.Key() {
		writeJSON(w, http.StatusBadRequest, geminiError(400, "API key not valid. Please pass a valid API key.", ""))
		return false
	}
	validate := validateGemini
	if method == "countTokens" {
		validate = func(body []byte) string { return validateGeminiCount(body, model) }
	}
	if method == "embedContent" || method == "batchEmbedContents" {
		validate = func(body []byte) string { return validateGeminiEmbedding("models/"+model, method, body) }
	}
	if msg := validate(body); msg != "" {
		writeJSON(w, http.StatusBadRequest, geminiError(400, msg, ""))
		return false
	}
	return true
}

type geminiFake struct {
	Contents          []geminiFakeContent `json:"contents"`
	SystemInstruction *geminiFakeContent  `json:"systemInstruction"`
	Tools             []struct {
		FunctionDeclarations []struct {
			Name                 string          `json:"name"`
			Description          string          `json:"description"`
			Parameters           json.RawMessage `json:"parameters"`
			ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	ToolConfig *struct {
		FunctionCallingConfig struct {
			Mode                 string   `json:"mode"`
			AllowedFunctionNames []string `json:"allowedFunctionNames"`
		} `json:"functionCallingConfig"`
	} `json:"toolConfig"`
	SafetySettings   json.RawMessage `json:"safetySettings"`
	CachedContent    string          `json:"cachedContent"`
	GenerationConfig *struct {
		StopSequences   []string `json:"stopSequences"`
		MaxOutputTokens *int64   `json:"maxOutputTokens"`
		Temperature     *float64 `json:"temperature"`
		TopP            *float64 `json:"topP"`
		TopK            *int64   `json:"topK"`
		CandidateCount  *int64   `json:"candidateCount"`
		ThinkingConfig  *struct {
			IncludeThoughts bool   `json:"includeThoughts"`
			ThinkingBudget  *int64 `json:"thinkingBudget"`
		} `json:"thinkingConfig"`
	} `json:"generationConfig"`
}

type geminiFakeContent struct {
	Role  string `json:"role"`
	Parts []struct {
		Text       *string `json:"text"`
		Thought    bool    `json:"thought"`
		InlineData *struct {
			MimeType string `json:"mimeType"`
			Data     string `json:"data"`
		} `json:"inlineData"`
		FileData *struct {
			MimeType string `json:"mimeType"`
			FileURI  string `json:"fileUri"`
		} `json:"fileData"`
		FunctionCall *struct {
			ID   string          `json:"id"`
			Name string          `json:"name"`
			Args json.RawMessage `json:"args"`
		} `json:"functionCall"`
		FunctionResponse *struct {
			ID       string          `json:"id"`
			Name     string          `json:"name"`
			Response json.RawMessage `json:"response"`
		} `json:"functionResponse"`
		ThoughtSignature string `json:"thoughtSignature"`
	} `json:"parts"`
}

func validateGemini(body []byte) string {
	var req geminiFake
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return "Invalid JSON payload received. " + err.Error()
	}
	if len(req.Contents) == 0 {
		return "* GenerateContentRequest.contents: contents is not specified"
	}
	for i, c := range req.Contents {
		if c.Role != "" && c.Role != "user" && c.Role != "model" {
			return fmt.Sprintf("Please use a valid role: user, model. (contents[%d].role %q)", i, c.Role)
		}
		if len(c.Parts) == 0 {
			return fmt.Sprintf("* GenerateContentRequest.contents[%d].parts: contents.parts must not be empty.", i)
		}
		for j, p := range c.Parts {
			n := 0
			for _, set := range []bool{p.Text != nil, p.InlineData != nil, p.FileData != nil, p.FunctionCall != nil, p.FunctionResponse != nil} {
				if set {
					n++
				}
			}
			if n != 1 {
				return fmt.Sprintf("* GenerateContentRequest.contents[%d].parts[%d].data: required oneof field 'data' must have one initialized field", i, j)
			}
			if fr := p.FunctionResponse; fr != nil {
				var obj map[string]any
				if fr.Name == "" {
					return fmt.Sprintf("* GenerateContentRequest.contents[%d].parts[%d].function_response.name: Name cannot be empty.", i, j)
				}
				if json.Unmarshal(fr.Response, &obj) != nil || obj == nil {
					return fmt.Sprintf("Invalid value at 'contents[%d].parts[%d].function_response.response' (type.googleapis.com/google.protobuf.Struct)", i, j)
				}
			}
			if fc := p.FunctionCall; fc != nil && fc.Name == "" {
				return fmt.Sprintf("* GenerateContentRequest.contents[%d].parts[%d].function_call.name: Name cannot be empty.", i, j)
			}
		}
	}
	for i, t := range req.Tools {
		for j, f := range t.FunctionDeclarations {
			if f.Name == "" {
				return fmt.Sprintf("* GenerateContentRequest.tools[%d].function_declarations[%d].name: Name cannot be empty.", i, j)
			}
			if len(f.Parameters) > 0 && len(f.ParametersJSONSchema) > 0 {
				return fmt.Sprintf("* GenerateContentRequest.tools[%d].function_declarations[%d]: parameters and parameters_json_schema are mutually exclusive", i, j)
			}
		}
	}
	return ""
}

// geminiUsage is usageMetadata: promptTokenCount includes the cached
// tokens, candidatesTokenCount excludes the thoughts (Usage's
// ReasoningTokens, inside OutputTokens as for OpenAI), totalTokenCount is
// their sum. output false is a stream's early chunk (prompt only).
func geminiUsage(u Usage, output bool) map[string]any {
	prompt := u.InputTokens + deref(u.CacheRead)
	m := map[string]any{"promptTokenCount": prompt, "totalTokenCount": prompt}
	if u.CacheRead != nil {
		m["cachedContentTokenCount"] = *u.CacheRead
	}
	if output {
		m["candidatesTokenCount"] = u.OutputTokens - u.ReasoningTokens
		if u.ReasoningTokens > 0 {
			m["thoughtsTokenCount"] = u.ReasoningTokens
		}
		m["totalTokenCount"] = prompt + u.OutputTokens
	}
	return m
}

func geminiFinishReason(stop string) string {
	switch stop {
	case "", "end_turn", "tool_use", "stop_sequence":
		return "STOP"
	case "max_tokens":
		return "MAX_TOKENS"
	case "refusal":
		return "SAFETY"
	}
	return stop // a Gemini reason given as is (SAFETY, RECITATION, ...)
}

func (s *Server) geminiReply(w http.ResponseWriter, hr *http.Request, model string, r Reply, stream bool) {
	u := r.usage()
	respID := s.id("")[12:] // the API's responseId is a short opaque string
	chunk := func(parts []any, finish string, output bool) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		if finish != "" {
			cand["finishReason"] = finish
		}
		m := map[string]any{"candidates": []any{cand}, "modelVersion": model, "responseId": respID}
		if !r.NoUsage {
			m["usageMetadata"] = geminiUsage(u, output)
		}
		return m
	}
	var call map[string]any
	if r.ToolCall != nil {
		fc := map[string]any{"name": r.ToolCall.Name, "args": json.RawMessage(r.ToolCall.Arguments)}
		if r.ToolCall.ID != "" {
			fc["id"] = r.ToolCall.ID
		}
		call = map[string]any{"functionCall": fc}
	}
	finish := geminiFinishReason(r.StopReason)
	if !stream {
		parts := []any{}
		if r.Text != "" {
			parts = append(parts, map[string]any{"text": r.Text})
		}
		if call != nil {
			parts = append(parts, call)
		}
		writeJSON(w, http.StatusOK, chunk(parts, finish, true))
		return
	}
	var evs []map[string]any
	words := chunks(r.Text)
	for i, c := range words {
		last := i == len(words)-1 && call == nil
		f := ""
		if last {
			f = finish
		}
		evs = append(evs, chunk([]any{map[string]any{"text": c}}, f, last))
	}
	if call != nil || len(words) == 0 {
		parts := []any{}
		if call != nil {
			parts = append(parts, call)
		}
		evs = append(evs, chunk(parts, finish, true))
	}
	if hr.URL.Query().Get("alt") != "sse" {
		// Without alt=sse the API streams one JSON array.
		out := make([]any, len(evs))
		for i, e := range evs {
			out[i] = e
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	sw := s.startSSE(w, hr, r)
	for _, e := range evs {
		sw.event("", e)
	}
}
