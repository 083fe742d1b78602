package openai

import (
	"context"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// Embed implements upstream.Embedder with POST /v1/embeddings: the client's
// body as it came, only its model replaced by the backend's upstream model,
// so every parameter (encoding_format, dimensions, user, token arrays)
// reaches the upstream unchanged and its answer comes back whole.
func (p *Provider) Embed(ctx context.Context, b upstream.Backend, req upstream.EmbedRequest) (*upstream.EmbedResult, error) {
	body, err := upstream.SetModel(req.Body, b.UpstreamModel)
	if err != nil {
		return nil, upstream.RequestError(err)
	}
	base := b.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	hr, err := newRequest(ctx, b, upstream.Endpoint(base, "/v1/embeddings"), body, false)
	if err != nil {
		return nil, err
	}
	resp, err := upstream.RoundTrip(p.client, hr)
	if err != nil {
		return nil, err
	}
	raw, err := upstream.ReadJSON(resp, upstream.ChatCompletions)
	if err != nil {
		return nil, err
	}
	return upstream.OpenAIEmbedding(raw)
}

var _ upstream.Embedder = (*Provider)(nil)
