package gemini

import (
	"context"
	"encoding/json"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// EmbedPart is a part of an embedding request's content.
type EmbedPart struct {
	Text string `json:"text"`
}

// EmbedContent is the content to embed.
type EmbedContent struct {
	Parts []EmbedPart `json:"parts"`
}

// EmbedContentRequest is the body of models.embedContent, and one request
// of batchEmbedContents (which names the model in each).
type EmbedContentRequest struct {
	Model                string       `json:"model,omitempty"`
	Content              EmbedContent `json:"content"`
	OutputDimensionality int          `json:"outputDimensionality,omitempty"`
}

// BatchEmbedContentsRequest is the body of models.batchEmbedContents.
type BatchEmbedContentsRequest struct {
	Requests []EmbedContentRequest `json:"requests"`
}

// ContentEmbedding is one embedding of an answer.
type ContentEmbedding struct {
	Values []float64 `json:"values"`
}

// EmbedContentResponse is embedContent's answer.
type EmbedContentResponse struct {
	Embedding *ContentEmbedding `json:"embedding"`
}

// BatchEmbedContentsResponse is batchEmbedContents' answer.
type BatchEmbedContentsResponse struct {
	Embeddings []ContentEmbedding `json:"embeddings"`
}

// Embed implements upstream.Embedder: one string with embedContent, an
// array with batchEmbedContents (one request per string, in order). The
// answers carry no token count (Reported false): the gateway bills its
// estimate (docs/embeddings.md).
func (p *Provider) Embed(ctx context.Context, b upstream.Backend, req upstream.EmbedRequest) (*upstream.EmbedResult, error) {
	if req.Texts == nil {
		return nil, upstream.Refused("token array input is not supported by this model; send strings")
	}
	return EmbedOn(req, func(method string, body []byte) ([]byte, error) {
		resp, err := p.post(ctx, b, methodURL(b, method), body, false)
		if err != nil {
			return nil, err
		}
		return upstream.ReadJSON(resp, upstream.Gemini)
	}, "models/"+modelName(b))
}

// EmbedOn runs an embedding request in Gemini's wire through post, which
// sends a body to a method (embedContent, batchEmbedContents) of the
// model named model ("models/…", or a Vertex AI resource name) and returns
// the answer's bytes; Vertex AI's Gemini endpoints share the wire.
func EmbedOn(req upstream.EmbedRequest, post func(method string, body []byte) ([]byte, error), model string) (*upstream.EmbedResult, error) {
	if len(req.Texts) == 1 {
		body, err := json.Marshal(EmbedContentRequest{Content: textContent(req.Texts[0]), OutputDimensionality: req.Dimensions})
		if err != nil {
			return nil, upstream.RequestError(err)
		}
		raw, err := post("embedContent", body)
		if err != nil {
			return nil, err
		}
		var out EmbedContentResponse
		if json.Unmarshal(raw, &out) != nil || out.Embedding == nil || out.Embedding.Values == nil {
			return nil, upstream.BadAnswer("no embedding")
		}
		return &upstream.EmbedResult{Vectors: [][]float64{out.Embedding.Values}}, nil
	}
	batch := BatchEmbedContentsRequest{Requests: make([]EmbedContentRequest, len(req.Texts))}
	for i, t := range req.Texts {
		batch.Requests[i] = EmbedContentRequest{Model: model, Content: textContent(t), OutputDimensionality: req.Dimensions}
	}
	body, err := json.Marshal(batch)
	if err != nil {
		return nil, upstream.RequestError(err)
	}
	raw, err := post("batchEmbedContents", body)
	if err != nil {
		return nil, err
	}
	var out BatchEmbedContentsResponse
	if json.Unmarshal(raw, &out) != nil || len(out.Embeddings) != len(req.Texts) {
		return nil, upstream.BadAnswer("%d embeddings for %d texts", len(out.Embeddings), len(req.Texts))
	}
	res := &upstream.EmbedResult{Vectors: make([][]float64, len(out.Embeddings))}
	for i, e := range out.Embeddings {
		if e.Values == nil {
			return nil, upstream.BadAnswer("embedding %d has no values", i)
		}
		res.Vectors[i] = e.Values
	}
	return res, nil
}

func textContent(t string) EmbedContent { return EmbedContent{Parts: []EmbedPart{{Text: t}}} }

var _ upstream.Embedder = (*Provider)(nil)
