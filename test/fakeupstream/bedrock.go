package fakeupstream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// The Amazon Bedrock Converse fake, written from AWS's public reference
// (docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html,
// …/API_runtime_ConverseStream.html, the TokenUsage and ContentBlock
// types, the event stream encoding of
// docs.aws.amazon.com/transcribe/latest/dg/event-stream.html and Signature
// Version 4 of docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv.html):
// POST /model/{modelId}/converse (JSON) and /model/{modelId}/converse-stream
// (the binary AWS event stream), each signed with SigV4 for the service
// "bedrock". The fake recomputes the signature with the AWS SDK's signer
// from the known credential and refuses a request whose signature, access
// key, scope or date is wrong, as Bedrock does; errors name their
// exception in x-amzn-ErrorType with {"message"} as the body.

// BedrockAccessKeyID is the access key ID a Bedrock fake accepts; the
// secret access key is Key().
const BedrockAccessKeyID = "AKIAFAKEBEDROCK00001"

// BedrockRegion is the region a Bedrock fake expects in the signature's
// scope.
const BedrockRegion = "us-east-1"

// NewBedrock starts a fake of Bedrock's Converse API.
func NewBedrock() *Server { return newServer(kindBedrock) }

// SetSessionToken makes a Bedrock fake require X-Amz-Security-Token = tok
// (temporary credentials); empty: none may be sent.
func (s *Server) SetSessionToken(tok string) {
	s.mu.Lock()
	s.sessionToken = tok
	s.mu.Unlock()
}

// bedrockModelPath splits the unescaped path /model/{modelId}/{method}.
func bedrockModelPath(path string) (model, method string, ok bool) {
	rest, found := strings.CutPrefix(path, "/model/")
	i := strings.LastIndex(rest, "/")
	if !found || i <= 0 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// bedrockPath splits /model/{modelId}/{converse|converse-stream}; the model
// ID arrives escaped (%3A for ':', %2F inside an ARN).
func bedrockPath(r *http.Request) (model, method string, ok bool) {
	p := r.URL.EscapedPath()
	rest, found := strings.CutPrefix(p, "/model/")
	if !found {
		return "", "", false
	}
	i := strings.LastIndex(rest, "/")
	if i <= 0 {
		return "", "", false
	}
	m, err := url.PathUnescape(rest[:i])
	if err != nil || strings.Contains(rest[:i], "/") {
		return "", "", false
	}
	return m, rest[i+1:], true
}

func writeBedrockError(w http.ResponseWriter, status int, exception, msg string) {
	w.Header().Set("x-amzn-ErrorType", exception+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	w.Header().Set("x-amzn-RequestId", "00000000-0000-4000-8000-000000000000")
	writeJSON(w, status, map[string]any{"message": msg})
}

// bedrockException is the exception Bedrock answers a status with.
func bedrockException(status int) (string, string) {
	switch status {
	case 400:
		return "ValidationException", "The provided request is not valid"
	case 403:
		return "AccessDeniedException", "You don't have access to the model with the specified model ID."
	case 404:
		return "ResourceNotFoundException", "The specified resource could not be found."
	case 408:
		return "ModelTimeoutException", "The request took too long to process."
	case 424:
		return "ModelErrorException", "The model returned an error."
	case 429:
		return "ThrottlingException", "Too many requests, please wait before trying again."
	case 503:
		return "ServiceUnavailableException", "The service isn't currently available."
	}
	return "InternalServerException", "An internal server error occurred."
}

// checkBedrock enforces the route, the signature and a valid Converse (or
// CountTokens) body.
func (s *Server) checkBedrock(w http.ResponseWriter, r *http.Request, body []byte) bool {
	model, method, ok := bedrockPath(r)
	if r.Method != http.MethodPost || !ok || (method != "converse" && method != "converse-stream" && method != "count-tokens" && method != "invoke") {
		writeBedrockError(w, http.StatusNotFound, "UnknownOperationException", "")
		return false
	}
	if exc, msg := s.verifySigV4(r, body); exc != "" {
		writeBedrockError(w, http.StatusForbidden, exc, msg)
		return false
	}
	validate := validateConverse
	if method == "count-tokens" {
		validate = validateBedrockCount
	}
	if method == "invoke" {
		validate = func(body []byte) string { return validateBedrockEmbedding(model, body) }
	}
	if msg := validate(body); msg != "" {
		writeBedrockError(w, http.StatusBadRequest, "ValidationException", msg)
		return false
	}
	return true
}

// verifySigV4 checks a runtime request's signature (see verifySig).
func (s *Server) verifySigV4(r *http.Request, body []byte) (exception, message string) {
	sum := sha256.Sum256(body)
	return s.verifySig(r, body, "bedrock", hex.EncodeToString(sum[:]))
}

// verifySig recomputes the request's signature for service with the SDK's
// signer over the headers the request says it signed and payloadHash (S3
// signs the x-amz-content-sha256 it sends, and its paths unescaped twice
// as little), and returns the exception Bedrock would answer (empty when
// the signature holds).
func (s *Server) verifySig(r *http.Request, body []byte, service, payloadHash string) (exception, message string) {
	auth := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return "MissingAuthenticationTokenException", "Missing Authentication Token"
	}
	fields := map[string]string{}
	for _, f := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 || scope[4] != "aws4_request" {
		return "IncompleteSignatureException", "Authorization header requires 'Credential' parameter."
	}
	s.mu.Lock()
	secret, token := s.key, s.sessionToken
	s.mu.Unlock()
	if scope[0] != BedrockAccessKeyID || r.Header.Get("X-Amz-Security-Token") != token {
		return "UnrecognizedClientException", "The security token included in the request is invalid."
	}
	if scope[2] != BedrockRegion || scope[3] != service {
		return "InvalidSignatureException", fmt.Sprintf("Credential should be scoped to a valid region, not '%s'; to the service '%s', not '%s'.", scope[2], service, scope[3])
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || at.Format("20060102") != scope[1] {
		return "IncompleteSignatureException", "Date must be in ISO-8601 'basic format' and match the credential scope."
	}
	if d := time.Since(at); d > 5*time.Minute || d < -5*time.Minute {
		return "InvalidSignatureException", "Signature expired: the request time is more than 5 minutes from the server's time."
	}
	clone, _ := http.NewRequestWithContext(context.Background(), r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	clone.ContentLength = r.ContentLength
	for _, h := range strings.Split(fields["SignedHeaders"], ";") {
		if h == "host" || h == "content-length" {
			continue
		}
		for _, v := range r.Header.Values(h) {
			clone.Header.Add(h, v)
		}
	}
	creds := aws.Credentials{AccessKeyID: BedrockAccessKeyID, SecretAccessKey: secret, SessionToken: token}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = service == "s3" })
	if err := signer.SignHTTP(context.Background(), creds, clone, payloadHash, service, BedrockRegion, at); err != nil {
		return "InvalidSignatureException", err.Error()
	}
	if clone.Header.Get("Authorization") != auth {
		return "InvalidSignatureException", "The request signature we calculated does not match the signature you provided. " +
			"Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
	}
	return "", ""
}

type converseFake struct {
	ModelID  string `json:"modelId"`
	Messages []struct {
		Role    string           `json:"role"`
		Content []map[string]any `json:"content"`
	} `json:"messages"`
	System          []map[string]any `json:"system"`
	InferenceConfig *struct {
		MaxTokens     *int64   `json:"maxTokens"`
		Temperature   *float64 `json:"temperature"`
		TopP          *float64 `json:"topP"`
		StopSequences []string `json:"stopSequences"`
	} `json:"inferenceConfig"`
	ToolConfig *struct {
		Tools []struct {
			ToolSpec *struct {
				Name        string         `json:"name"`
				Description string         `json:"description"`
				InputSchema map[string]any `json:"inputSchema"`
			} `json:"toolSpec"`
			CachePoint map[string]any `json:"cachePoint"`
		} `json:"tools"`
		ToolChoice map[string]any `json:"toolChoice"`
	} `json:"toolConfig"`
	GuardrailConfig                   map[string]any `json:"guardrailConfig"`
	AdditionalModelRequestFields      any            `json:"additionalModelRequestFields"`
	AdditionalModelResponseFieldPaths []string       `json:"additionalModelResponseFieldPaths"`
	PromptVariables                   map[string]any `json:"promptVariables"`
	RequestMetadata                   map[string]any `json:"requestMetadata"`
	PerformanceConfig                 map[string]any `json:"performanceConfig"`
}

// contentMembers are ContentBlock's union members.
var contentMembers = map[string]bool{"text": true, "image": true, "document": true, "video": true, "toolUse": true, "toolResult": true,
	"guardContent": true, "cachePoint": true, "reasoningContent": true, "citationsContent": true, "searchResult": true}

func validateConverse(body []byte) string {
	var req converseFake
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return "Malformed input request: " + err.Error() + ", please reformat your input and try again."
	}
	if len(req.Messages) == 0 {
		return "A conversation must start with a user message. Try again with a conversation that starts with a user message."
	}
	usesTools := false
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return fmt.Sprintf("1 validation error detected: Value '%s' at 'messages.%d.member.role' failed to satisfy constraint: Member must satisfy enum value set: [user, assistant]", m.Role, i+1)
		}
		if i == 0 && m.Role != "user" {
			return "A conversation must start with a user message. Try again with a conversation that starts with a user message."
		}
		if i > 0 && req.Messages[i-1].Role == m.Role {
			return "A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again."
		}
		if len(m.Content) == 0 {
			return fmt.Sprintf("The content field in the Message object at messages.%d is empty. Add a ContentBlock object to the content field and try again.", i)
		}
		for j, c := range m.Content {
			if len(c) != 1 {
				return fmt.Sprintf("messages.%d.content.%d: a ContentBlock must set exactly one member", i, j)
			}
			for k, v := range c {
				if !contentMembers[k] {
					return fmt.Sprintf("messages.%d.content.%d: unknown ContentBlock member %q", i, j, k)
				}
				if k == "toolUse" || k == "toolResult" {
					usesTools = true
				}
				if k == "text" {
					if t, _ := v.(string); t == "" {
						return "The text field in the ContentBlock object is blank. Add text to the text field, and try again."
					}
				}
			}
		}
	}
	if usesTools && (req.ToolConfig == nil || len(req.ToolConfig.Tools) == 0) {
		return "The toolConfig field must be defined when using toolUse and toolResult content blocks."
	}
	if tc := req.ToolConfig; tc != nil {
		for i, t := range tc.Tools {
			if t.ToolSpec != nil && (t.ToolSpec.Name == "" || t.ToolSpec.InputSchema["json"] == nil) {
				return fmt.Sprintf("toolConfig.tools.%d.toolSpec: name and inputSchema.json are required", i)
			}
		}
	}
	if ic := req.InferenceConfig; ic != nil && ic.MaxTokens != nil && *ic.MaxTokens < 1 {
		return "1 validation error detected: Value at 'inferenceConfig.maxTokens' failed to satisfy constraint: Member must have value greater than or equal to 1"
	}
	return ""
}

// bedrockUsage is TokenUsage: inputTokens excludes the cache reads and
// writes, totalTokens adds all four.
func bedrockUsage(u Usage) map[string]any {
	m := map[string]any{"inputTokens": u.InputTokens, "outputTokens": u.OutputTokens,
		"totalTokens": u.InputTokens + u.OutputTokens + deref(u.CacheRead) + deref(u.CacheWrite)}
	if u.CacheRead != nil {
		m["cacheReadInputTokens"] = *u.CacheRead
	}
	if u.CacheWrite != nil {
		m["cacheWriteInputTokens"] = *u.CacheWrite
	}
	return m
}

func bedrockStopReason(stop string) string {
	if stop == "refusal" {
		return "content_filtered"
	}
	return stop // end_turn, tool_use, max_tokens, stop_sequence, guardrail_intervened, ...
}

func (s *Server) bedrockReply(w http.ResponseWriter, hr *http.Request, r Reply, stream bool) {
	u := r.usage()
	var call map[string]any
	callID := ""
	if r.ToolCall != nil {
		callID = r.ToolCall.ID
		if callID == "" {
			callID = "tooluse_" + s.id("")[2:]
		}
		call = map[string]any{"toolUseId": callID, "name": r.ToolCall.Name, "input": json.RawMessage(r.ToolCall.Arguments)}
	}
	stop := bedrockStopReason(r.stopReason())
	w.Header().Set("x-amzn-RequestId", fmt.Sprintf("%08d-0000-4000-8000-000000000000", len(s.Requests())))
	if !stream {
		content := []any{}
		if r.Text != "" {
			content = append(content, map[string]any{"text": r.Text})
		}
		if call != nil {
			content = append(content, map[string]any{"toolUse": call})
		}
		resp := map[string]any{"output": map[string]any{"message": map[string]any{"role": "assistant", "content": content}},
			"stopReason": stop, "metrics": map[string]any{"latencyMs": 42}}
		if !r.NoUsage {
			resp["usage"] = bedrockUsage(u)
		}
		writeJSON(w, http.StatusOK, resp)
		return
	}
	type frame struct {
		name string
		v    map[string]any
	}
	frames := []frame{{"messageStart", map[string]any{"role": "assistant"}}}
	idx := 0
	if words := chunks(r.Text); len(words) > 0 {
		for _, c := range words {
			frames = append(frames, frame{"contentBlockDelta", map[string]any{"contentBlockIndex": idx, "delta": map[string]any{"text": c}}})
		}
		frames = append(frames, frame{"contentBlockStop", map[string]any{"contentBlockIndex": idx}})
		idx++
	}
	if call != nil {
		frames = append(frames,
			frame{"contentBlockStart", map[string]any{"contentBlockIndex": idx, "start": map[string]any{"toolUse": map[string]any{"toolUseId": callID, "name": r.ToolCall.Name}}}},
			frame{"contentBlockDelta", map[string]any{"contentBlockIndex": idx, "delta": map[string]any{"toolUse": map[string]any{"input": r.ToolCall.Arguments}}}},
			frame{"contentBlockStop", map[string]any{"contentBlockIndex": idx}})
	}
	frames = append(frames, frame{"messageStop", map[string]any{"stopReason": stop}})
	meta := map[string]any{"metrics": map[string]any{"latencyMs": 42}}
	if !r.NoUsage {
		meta["usage"] = bedrockUsage(u)
	}
	frames = append(frames, frame{"metadata", meta})

	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	enc := eventstream.NewEncoder()
	for i, f := range frames {
		switch {
		case r.CutAfter > 0 && i >= r.CutAfter:
			if conn, _, err := rc.Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		case r.ErrorEvent && i >= r.ErrorEventAfter:
			exc := r.ErrorType
			if exc == "" {
				exc = "serviceUnavailableException"
			}
			msg := r.ErrorMessage
			if msg == "" {
				msg = "The service isn't currently available."
			}
			payload, _ := json.Marshal(map[string]any{"message": msg})
			_ = enc.Encode(w, eventstream.Message{Headers: eventstream.Headers{
				{Name: ":message-type", Value: eventstream.StringValue("exception")},
				{Name: ":exception-type", Value: eventstream.StringValue(exc)},
				{Name: ":content-type", Value: eventstream.StringValue("application/json")},
			}, Payload: payload})
			_ = rc.Flush()
			return
		}
		// Bedrock pads every event's payload with a "p" member of random
		// length, so that the sizes of the frames do not reveal the text.
		f.v["p"] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"[:1+i%40]
		payload, _ := json.Marshal(f.v)
		_ = enc.Encode(w, eventstream.Message{Headers: eventstream.Headers{
			{Name: ":event-type", Value: eventstream.StringValue(f.name)},
			{Name: ":content-type", Value: eventstream.StringValue("application/json")},
			{Name: ":message-type", Value: eventstream.StringValue("event")},
		}, Payload: payload})
		_ = rc.Flush()
		if r.Gap > 0 {
			select {
			case <-time.After(r.Gap):
			case <-hr.Context().Done():
				return
			case <-s.stop:
				return
			}
		}
	}
}
