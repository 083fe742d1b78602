package bedrock

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// Backend options of embedding models.
const (
	// OptionEmbeddingFormat names the InvokeModel body of an embedding
	// model, "titan" or "cohere"; without it the model ID decides
	// (amazon.titan-embed-… or cohere.embed-…), which an inference profile
	// or ARN may not show.
	OptionEmbeddingFormat = "embeddingFormat"
	// OptionInputType is Cohere's input_type (default search_document):
	// OpenAI's API has no such parameter, so the backend fixes it.
	OptionInputType = "inputType"
)

// The embedding body formats.
const (
	FormatTitan  = "titan"
	FormatCohere = "cohere"
)

// HeaderInputTokens is where InvokeModel reports the input tokens of every
// model, Cohere's included (whose body has no count).
const HeaderInputTokens = "X-Amzn-Bedrock-Input-Token-Count"

// cohereBatch is the most texts Cohere's embed takes in one call.
const cohereBatch = 96

// EmbeddingFormat is backend b's embedding body format ("" when neither
// the option nor the model ID tells).
func EmbeddingFormat(b upstream.Backend) string {
	if f := b.Options[OptionEmbeddingFormat]; f != "" {
		return f
	}
	m := strings.ToLower(b.UpstreamModel)
	switch {
	case strings.Contains(m, "titan-embed"):
		return FormatTitan
	case strings.Contains(m, "cohere.embed"):
		return FormatCohere
	}
	return ""
}

// Embed implements upstream.Embedder with InvokeModel
// (POST /model/{modelId}/invoke), signed as Send signs. Titan embeds one
// text per call, so an array input makes one call per text (in order, the
// counts added up); Cohere takes up to 96 texts per call.
func (p *Provider) Embed(ctx context.Context, b upstream.Backend, req upstream.EmbedRequest) (*upstream.EmbedResult, error) {
	if req.Texts == nil {
		return nil, upstream.Refused("token array input is not supported by this model; send strings")
	}
	switch f := EmbeddingFormat(b); f {
	case FormatTitan:
		return p.embedTitan(ctx, b, req)
	case FormatCohere:
		return p.embedCohere(ctx, b, req)
	default:
		e := upstream.Unsupported("backend %q (bedrock): model %q has no known embedding format: set options.%s to %s or %s",
			b.Name, b.UpstreamModel, OptionEmbeddingFormat, FormatTitan, FormatCohere)
		e.Status, e.Retryable = 502, true
		return nil, e
	}
}

// TitanRequest is the InvokeModel body of amazon.titan-embed-text models.
type TitanRequest struct {
	InputText  string `json:"inputText"`
	Dimensions int    `json:"dimensions,omitempty"`
}

// TitanResponse is their answer.
type TitanResponse struct {
	Embedding           []float64 `json:"embedding"`
	InputTextTokenCount *int64    `json:"inputTextTokenCount"`
}

func (p *Provider) embedTitan(ctx context.Context, b upstream.Backend, req upstream.EmbedRequest) (*upstream.EmbedResult, error) {
	res := &upstream.EmbedResult{Reported: true}
	for _, t := range req.Texts {
		body, err := json.Marshal(TitanRequest{InputText: t, Dimensions: req.Dimensions})
		if err != nil {
			return nil, upstream.RequestError(err)
		}
		var out TitanResponse
		n, reported, err := p.invoke(ctx, b, body, &out)
		if err != nil {
			return nil, err
		}
		if out.Embedding == nil {
			return nil, upstream.BadAnswer("no embedding")
		}
		if out.InputTextTokenCount != nil && *out.InputTextTokenCount >= 0 {
			n, reported = *out.InputTextTokenCount, true
		}
		res.Vectors = append(res.Vectors, out.Embedding)
		res.PromptTokens += n
		res.Reported = res.Reported && reported
	}
	return res, nil
}

// CohereRequest is the InvokeModel body of cohere.embed models.
type CohereRequest struct {
	Texts           []string `json:"texts"`
	InputType       string   `json:"input_type"`
	EmbeddingTypes  []string `json:"embedding_types"`
	OutputDimension int      `json:"output_dimension,omitempty"`
}

// CohereResponse is their answer: embeddings by type when embedding_types
// was sent (embeddings_by_type), a bare array of float vectors otherwise.
type CohereResponse struct {
	Embeddings json.RawMessage `json:"embeddings"`
}

func (p *Provider) embedCohere(ctx context.Context, b upstream.Backend, req upstream.EmbedRequest) (*upstream.EmbedResult, error) {
	if req.Dimensions > 0 && !strings.Contains(strings.ToLower(b.UpstreamModel), "embed-v4") {
		return nil, upstream.Refused("dimensions is not supported by this model")
	}
	inputType := b.Options[OptionInputType]
	if inputType == "" {
		inputType = "search_document"
	}
	res := &upstream.EmbedResult{Reported: true}
	for start := 0; start < len(req.Texts); start += cohereBatch {
		texts := req.Texts[start:min(start+cohereBatch, len(req.Texts))]
		body, err := json.Marshal(CohereRequest{Texts: texts, InputType: inputType, EmbeddingTypes: []string{"float"}, OutputDimension: req.Dimensions})
		if err != nil {
			return nil, upstream.RequestError(err)
		}
		var out CohereResponse
		n, reported, err := p.invoke(ctx, b, body, &out)
		if err != nil {
			return nil, err
		}
		vecs, ok := cohereFloats(out.Embeddings)
		if !ok || len(vecs) != len(texts) {
			return nil, upstream.BadAnswer("%d float embeddings for %d texts", len(vecs), len(texts))
		}
		res.Vectors = append(res.Vectors, vecs...)
		res.PromptTokens += n
		res.Reported = res.Reported && reported
	}
	return res, nil
}

// cohereFloats reads Cohere's embeddings in either shape.
func cohereFloats(raw json.RawMessage) ([][]float64, bool) {
	var byType struct {
		Float [][]float64 `json:"float"`
	}
	if json.Unmarshal(raw, &byType) == nil && byType.Float != nil {
		return byType.Float, true
	}
	var bare [][]float64
	if json.Unmarshal(raw, &bare) == nil && bare != nil {
		return bare, true
	}
	return nil, false
}

// invoke posts one InvokeModel call and decodes its answer into out; the
// count is the input-token header's.
func (p *Provider) invoke(ctx context.Context, b upstream.Backend, body []byte, out any) (int64, bool, error) {
	resp, err := p.post(ctx, b, "/invoke", body, "application/json")
	if err != nil {
		return 0, false, err
	}
	n, reported := upstream.HeaderCount(resp.Header, HeaderInputTokens)
	raw, err := upstream.ReadJSON(resp, upstream.Bedrock)
	if err != nil {
		return 0, false, err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return 0, false, upstream.BadAnswer("%v", err)
	}
	return n, reported, nil
}

var _ upstream.Embedder = (*Provider)(nil)
