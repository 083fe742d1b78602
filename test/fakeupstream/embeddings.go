package fakeupstream

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// The embedding endpoints of each fake, in their vendor's wire format:
// OpenAI's POST /v1/embeddings (Azure's under its two URL schemes),
// Bedrock's InvokeModel of Titan and Cohere embedding models, Gemini's
// embedContent and batchEmbedContents. Vectors are deterministic
// (EmbeddingVector); token counts are the Reply's Usage.InputTokens, or
// EmbeddingTokens of the inputs.

// DefaultEmbeddingDims is the fakes' vector length when the request sets
// none (the real models' 768 to 3 072 would only make tests slower).
const DefaultEmbeddingDims = 8

// EmbeddingVector is the fakes' embedding of text with dims values
// (DefaultEmbeddingDims when dims is 0): a hash of the text spread over
// [-0.5, 0.5), in float32 as the real models answer.
func EmbeddingVector(text string, dims int) []float32 {
	if dims <= 0 {
		dims = DefaultEmbeddingDims
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(text))
	seed := h.Sum64()
	out := make([]float32, dims)
	for i := range out {
		seed = seed*6364136223846793005 + 1442695040888963407
		out[i] = float32(seed>>40)/float32(1<<24) - 0.5
	}
	return out
}

// EmbeddingTokens is the fakes' token count of an input text: one per
// word, at least one.
func EmbeddingTokens(text string) int64 { return max(int64(len(strings.Fields(text))), 1) }

// isEmbedding reports whether r is an embedding call of the server's API.
func (s *Server) isEmbedding(r *http.Request) bool {
	switch s.kind {
	case kindOpenAI:
		return r.URL.Path == "/v1/embeddings"
	case kindAzure:
		return r.URL.Path == "/openai/v1/embeddings" ||
			strings.HasPrefix(r.URL.Path, "/openai/deployments/") && strings.HasSuffix(r.URL.Path, "/embeddings")
	case kindGemini:
		_, method, ok := geminiPath(r.URL.Path)
		return ok && (method == "embedContent" || method == "batchEmbedContents")
	case kindBedrock:
		_, method, ok := bedrockPath(r)
		return ok && method == "invoke"
	case kindVertex:
		rt, ok := vertexPath(r.URL.Path)
		return ok && (rt.method == "embedContent" || rt.method == "batchEmbedContents")
	}
	return false
}

// openAIEmbeddingRequest is OpenAI's embeddings body (unknown members are
// refused, as the API does).
type openAIEmbeddingRequest struct {
	Model          *string         `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat *string         `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           *string         `json:"user"`
}

// openAIInputs are the texts of an input (a token array's text is its
// numbers), or a message saying what OpenAI would refuse.
func openAIInputs(raw json.RawMessage) ([]string, string) {
	var one string
	if json.Unmarshal(raw, &one) == nil && one != "" {
		return []string{one}, ""
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
		return many, ""
	}
	var tokens []int64
	if json.Unmarshal(raw, &tokens) == nil && len(tokens) > 0 {
		return []string{fmt.Sprint(tokens)}, ""
	}
	var arrays [][]int64
	if json.Unmarshal(raw, &arrays) == nil && len(arrays) > 0 {
		out := make([]string, len(arrays))
		for i, a := range arrays {
			out[i] = fmt.Sprint(a)
		}
		return out, ""
	}
	return nil, "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference."
}

// validateOpenAIEmbedding checks an embeddings body; needModel is false
// for Azure's deployment URLs.
func validateOpenAIEmbedding(body []byte, needModel bool) string {
	var req openAIEmbeddingRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return "We could not parse the JSON body of your request: " + err.Error()
	}
	if needModel && (req.Model == nil || *req.Model == "") {
		return "you must provide a model parameter"
	}
	if _, msg := openAIInputs(req.Input); msg != "" {
		return msg
	}
	if f := req.EncodingFormat; f != nil && *f != "float" && *f != "base64" {
		return "'" + *f + "' is not one of ['float', 'base64'] - 'encoding_format'"
	}
	if d := req.Dimensions; d != nil && *d < 1 {
		return "Invalid value for 'dimensions' = " + strconv.Itoa(*d) + ". Must be a positive integer."
	}
	return ""
}

// embeddingReply answers an embedding call that passed the checks.
func (s *Server) embeddingReply(w http.ResponseWriter, r *http.Request, body []byte, reply Reply) {
	switch s.kind {
	case kindGemini:
		_, method, _ := geminiPath(r.URL.Path)
		s.geminiEmbeddingReply(w, method, body)
	case kindVertex:
		rt, _ := vertexPath(r.URL.Path)
		s.geminiEmbeddingReply(w, rt.method, body)
	case kindBedrock:
		s.bedrockEmbeddingReply(w, r, body, reply)
	default:
		s.openAIEmbeddingReply(w, r, body, reply)
	}
}

func (s *Server) openAIEmbeddingReply(w http.ResponseWriter, r *http.Request, body []byte, reply Reply) {
	var req openAIEmbeddingRequest
	_ = json.Unmarshal(body, &req)
	texts, _ := openAIInputs(req.Input)
	dims := 0
	if req.Dimensions != nil {
		dims = *req.Dimensions
	}
	b64 := req.EncodingFormat != nil && *req.EncodingFormat == "base64"
	data := make([]map[string]any, len(texts))
	var tokens int64
	for i, t := range texts {
		vec := EmbeddingVector(t, dims)
		var emb any = vec
		if b64 {
			emb = EncodeEmbedding(vec)
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": emb}
		tokens += EmbeddingTokens(t)
	}
	if reply.Usage.InputTokens > 0 {
		tokens = reply.Usage.InputTokens
	}
	model := ""
	if req.Model != nil {
		model = *req.Model
	}
	if s.kind == kindAzure && model == "" {
		model = strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/openai/deployments/"), "/embeddings")
	}
	out := map[string]any{"object": "list", "data": data, "model": model}
	if !reply.NoUsage {
		out["usage"] = map[string]any{"prompt_tokens": tokens, "total_tokens": tokens}
	}
	writeJSON(w, http.StatusOK, out)
}

// EncodeEmbedding is OpenAI's base64 encoding of a vector: its
// little-endian float32 bytes in standard base64.
func EncodeEmbedding(vec []float32) string {
	raw := make([]byte, 0, 4*len(vec))
	for _, x := range vec {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// DecodeEmbedding reverses EncodeEmbedding.
func DecodeEmbedding(s string) ([]float32, error) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(raw)%4 != 0 {
		return nil, fmt.Errorf("not a base64 float32 vector: %v", err)
	}
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out, nil
}

// Bedrock's embedding bodies.
type titanFakeRequest struct {
	InputText      *string  `json:"inputText"`
	Dimensions     *int     `json:"dimensions"`
	Normalize      *bool    `json:"normalize"`
	EmbeddingTypes []string `json:"embeddingTypes"`
}

type cohereFakeRequest struct {
	Texts           []string `json:"texts"`
	InputType       string   `json:"input_type"`
	EmbeddingTypes  []string `json:"embedding_types"`
	Truncate        string   `json:"truncate"`
	OutputDimension *int     `json:"output_dimension"`
}

// validateBedrockEmbedding checks an InvokeModel body of an embedding
// model as Bedrock's ValidationException does.
func validateBedrockEmbedding(model string, body []byte) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	switch {
	case strings.Contains(model, "titan-embed"):
		var req titanFakeRequest
		if err := dec.Decode(&req); err != nil {
			return "Malformed input request: " + err.Error() + ", please reformat your input and try again."
		}
		if req.InputText == nil || *req.InputText == "" {
			return "Malformed input request: #: required key [inputText] not found, please reformat your input and try again."
		}
		if d := req.Dimensions; d != nil && *d != 256 && *d != 512 && *d != 1024 {
			return "Malformed input request: #/dimensions: " + strconv.Itoa(*d) + " is not a valid enum value, please reformat your input and try again."
		}
	case strings.Contains(model, "cohere.embed"):
		var req cohereFakeRequest
		if err := dec.Decode(&req); err != nil {
			return "Malformed input request: " + err.Error() + ", please reformat your input and try again."
		}
		if len(req.Texts) == 0 || len(req.Texts) > 96 {
			return "Malformed input request: #/texts: expected 1 to 96 items, please reformat your input and try again."
		}
		switch req.InputType {
		case "search_document", "search_query", "classification", "clustering":
		default:
			return "Malformed input request: #/input_type: " + req.InputType + " is not a valid enum value, please reformat your input and try again."
		}
	default:
		return "The provided model identifier is invalid."
	}
	return ""
}

func (s *Server) bedrockEmbeddingReply(w http.ResponseWriter, r *http.Request, body []byte, reply Reply) {
	model, _, _ := bedrockPath(r)
	var tokens int64
	var out map[string]any
	if strings.Contains(model, "titan-embed") {
		var req titanFakeRequest
		_ = json.Unmarshal(body, &req)
		dims := 0
		if req.Dimensions != nil {
			dims = *req.Dimensions
		}
		tokens = EmbeddingTokens(*req.InputText)
		if reply.Usage.InputTokens > 0 {
			tokens = reply.Usage.InputTokens
		}
		vec := EmbeddingVector(*req.InputText, dims)
		out = map[string]any{"embedding": vec, "inputTextTokenCount": tokens, "embeddingsByType": map[string]any{"float": vec}}
	} else {
		var req cohereFakeRequest
		_ = json.Unmarshal(body, &req)
		dims := 0
		if req.OutputDimension != nil {
			dims = *req.OutputDimension
		}
		vecs := make([][]float32, len(req.Texts))
		for i, t := range req.Texts {
			vecs[i] = EmbeddingVector(t, dims)
			tokens += EmbeddingTokens(t)
		}
		if reply.Usage.InputTokens > 0 {
			tokens = reply.Usage.InputTokens
		}
		out = map[string]any{"id": s.id("emb-"), "texts": req.Texts}
		if len(req.EmbeddingTypes) > 0 {
			out["response_type"], out["embeddings"] = "embeddings_by_type", map[string]any{"float": vecs}
		} else {
			out["response_type"], out["embeddings"] = "embeddings_floats", vecs
		}
	}
	w.Header().Set("X-Amzn-Bedrock-Input-Token-Count", strconv.FormatInt(tokens, 10))
	w.Header().Set("X-Amzn-Bedrock-Invocation-Latency", "12")
	writeJSON(w, http.StatusOK, out)
}

// Gemini's embedding bodies.
type geminiFakeEmbed struct {
	Model                string             `json:"model"`
	Content              *geminiFakeContent `json:"content"`
	TaskType             string             `json:"taskType"`
	Title                string             `json:"title"`
	OutputDimensionality *int               `json:"outputDimensionality"`
}

// validateGeminiEmbedding checks an embedContent or batchEmbedContents
// body: content with text parts, and in a batch each request naming the
// model of the URL (model: "models/…", or a Vertex AI resource name).
func validateGeminiEmbedding(model, method string, body []byte) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var reqs []geminiFakeEmbed
	if method == "batchEmbedContents" {
		var b struct {
			Requests []geminiFakeEmbed `json:"requests"`
		}
		if err := dec.Decode(&b); err != nil {
			return "Invalid JSON payload received. " + err.Error()
		}
		if len(b.Requests) == 0 {
			return "* BatchEmbedContentsRequest.requests: contents is not specified"
		}
		for i, r := range b.Requests {
			if r.Model != model {
				return fmt.Sprintf("* BatchEmbedContentsRequest.model: requests[%d].model %q does not match the request's model %s", i, r.Model, model)
			}
		}
		reqs = b.Requests
	} else {
		var r geminiFakeEmbed
		if err := dec.Decode(&r); err != nil {
			return "Invalid JSON payload received. " + err.Error()
		}
		reqs = []geminiFakeEmbed{r}
	}
	for _, r := range reqs {
		if r.Content == nil || len(r.Content.Parts) == 0 || geminiEmbedText(r) == "" {
			return "* EmbedContentRequest.content: contents is not specified"
		}
		if d := r.OutputDimensionality; d != nil && *d < 1 {
			return "* EmbedContentRequest.output_dimensionality: must be positive"
		}
	}
	return ""
}

func geminiEmbedText(r geminiFakeEmbed) string {
	var b strings.Builder
	for _, p := range r.Content.Parts {
		if p.Text != nil {
			b.WriteString(*p.Text)
		}
	}
	return b.String()
}

func geminiEmbedding(r geminiFakeEmbed) map[string]any {
	dims := 0
	if r.OutputDimensionality != nil {
		dims = *r.OutputDimensionality
	}
	return map[string]any{"values": EmbeddingVector(geminiEmbedText(r), dims)}
}

// geminiEmbeddingReply answers with vectors only: the Gemini API reports
// no token count for embeddings.
func (s *Server) geminiEmbeddingReply(w http.ResponseWriter, method string, body []byte) {
	if method == "batchEmbedContents" {
		var b struct {
			Requests []geminiFakeEmbed `json:"requests"`
		}
		_ = json.Unmarshal(body, &b)
		embs := make([]map[string]any, len(b.Requests))
		for i, req := range b.Requests {
			embs[i] = geminiEmbedding(req)
		}
		writeJSON(w, http.StatusOK, map[string]any{"embeddings": embs})
		return
	}
	var req geminiFakeEmbed
	_ = json.Unmarshal(body, &req)
	writeJSON(w, http.StatusOK, map[string]any{"embedding": geminiEmbedding(req)})
}
