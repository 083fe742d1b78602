package vertex

import (
	"context"
	"strings"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/gemini"
)

// Embed implements upstream.Embedder for Google's embedding models:
// Gemini's wire (embedContent for one string, batchEmbedContents for an
// array, each request naming the model's resource) at the model's Vertex AI
// URL, with the service account's access token. No token count is read
// (Reported false): the gateway bills its estimate, as for Gemini.
func (p *Provider) Embed(ctx context.Context, b upstream.Backend, req upstream.EmbedRequest) (*upstream.EmbedResult, error) {
	if pub := Publisher(b); pub != PublisherGoogle {
		return nil, unsupported(b, "publisher %q has no embedding models on Vertex AI", pub)
	}
	if req.Texts == nil {
		return nil, upstream.Refused("token array input is not supported by this model; send strings")
	}
	// The batch's requests name the model by its resource name, which needs
	// the project the token's account resolves: a first call learns it.
	var resource string
	post := func(method string, body []byte) ([]byte, error) {
		resp, err := p.post(ctx, b, func(project string) (string, []byte, error) {
			u, err := resourceURL(b, project, b.UpstreamModel)
			return u + ":" + method, body, err
		}, false, nil)
		if err != nil {
			return nil, err
		}
		return upstream.ReadJSON(resp, upstream.Gemini)
	}
	if len(req.Texts) > 1 {
		acct, err := p.tokens.account(b)
		if err != nil {
			return nil, err
		}
		project := b.Options[OptionProject]
		if project == "" {
			project = acct.project
		}
		u, err := resourceURL(b, project, b.UpstreamModel)
		if err != nil {
			return nil, err
		}
		_, after, _ := strings.Cut(u, "/projects/")
		resource = "projects/" + after
	}
	return gemini.EmbedOn(req, post, resource)
}

var _ upstream.Embedder = (*Provider)(nil)
