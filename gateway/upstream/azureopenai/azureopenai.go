// Package azureopenai is the adapter for Azure OpenAI deployments: the OpenAI Chat Completions wire format behind Azure's URLs, authenticated with the api-key header or a Microsoft Entra ID token.
package azureopenai

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/modelgate/modelgate/gateway/translate"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// Name is the provider's registered name.
const Name = "azure-openai"

// OptionAPIVersion is the backend option that chooses the URL scheme: empty
// or "v1" selects the v1 API ({base}/openai/v1/chat/completions, model =
// deployment name); any other value is an api-version of the
// deployment-scoped API
// ({base}/openai/deployments/{deployment}/chat/completions?api-version=…).
const OptionAPIVersion = "apiVersion"

// Provider sends chat-completions requests to Azure OpenAI. The body is the
// OpenAI codec's own (Azure speaks the same wire format), so responses and
// messages clients are translated to chat completions like for openai.
type Provider struct {
	client *http.Client
	entra  atomic.Pointer[entra]
}

// New returns a provider using client (nil: upstream.ClientOr) for the API
// calls. Entra ID token requests use a client of their own on client's
// transport, with a time limit.
func New(client *http.Client) *Provider {
	p := &Provider{client: upstream.ClientOr(client)}
	p.entra.Store(newEntra(nil, p.client.Transport))
	return p
}

// SetIdentityClient replaces the client of Entra ID token requests (nil:
// the default) and drops the cached credentials. It exists for tests,
// whose fake authority serves TLS with its own certificate; nothing in the
// gateway's configuration reaches it.
func (p *Provider) SetIdentityClient(c *http.Client) {
	p.entra.Store(newEntra(c, p.client.Transport))
}

// Protocols implements upstream.TextProvider. Only chat completions: every
// api-version of both URL schemes has it, while the Responses API exists
// only in some versions and regions.
func (*Provider) Protocols() []upstream.Protocol {
	return []upstream.Protocol{upstream.ChatCompletions}
}

// Send implements upstream.TextProvider. With key authentication (the
// default) the credential goes in the api-key header; with auth: entra-id
// it is a Microsoft Entra ID token for the backend's service principal (or
// the pod's workload identity), sent as Authorization: Bearer.
func (p *Provider) Send(ctx context.Context, b upstream.Backend, _ upstream.Protocol, body []byte, stream bool, _ http.Header) (*http.Response, error) {
	return p.post(ctx, b, URL(b, body), body, stream)
}

// Embed implements upstream.Embedder: Azure's embeddings operation speaks
// OpenAI's wire, so the client's body goes as it came (model replaced by
// the deployment on the v1 API), authenticated as Send is.
func (p *Provider) Embed(ctx context.Context, b upstream.Backend, req upstream.EmbedRequest) (*upstream.EmbedResult, error) {
	body, err := upstream.SetModel(req.Body, b.UpstreamModel)
	if err != nil {
		return nil, upstream.RequestError(err)
	}
	resp, err := p.post(ctx, b, operationURL(b, body, "embeddings"), body, false)
	if err != nil {
		return nil, err
	}
	raw, err := upstream.ReadJSON(resp, upstream.ChatCompletions)
	if err != nil {
		return nil, err
	}
	return upstream.OpenAIEmbedding(raw)
}

// post sends body to u with the backend's credential.
func (p *Provider) post(ctx context.Context, b upstream.Backend, u string, body []byte, stream bool) (*http.Response, error) {
	auth := Auth(b)
	if auth != AuthAPIKey && auth != AuthEntraID {
		e := upstream.Unsupported("backend %q (azure-openai): option %s %q is not %s or %s", b.Name, OptionAuth, auth, AuthAPIKey, AuthEntraID)
		e.Status, e.Retryable = http.StatusBadGateway, true
		return nil, e
	}
	var (
		token string
		id    [sha256.Size]byte
		ent   = p.entra.Load()
	)
	if auth == AuthEntraID {
		var err error
		if token, id, err = ent.token(ctx, b); err != nil {
			return nil, err
		}
	}
	req, err := upstream.NewJSONRequest(ctx, u, body, stream)
	if err != nil {
		return nil, err
	}
	switch {
	case token != "":
		req.Header.Set("Authorization", "Bearer "+token)
	case strings.TrimSpace(b.APIKey) != "":
		req.Header.Set("api-key", strings.TrimSpace(b.APIKey))
	}
	resp, err := upstream.RoundTrip(p.client, req)
	if err == nil && token != "" && resp.StatusCode == http.StatusUnauthorized {
		// The token was revoked or expired early: the next call gets a
		// fresh one rather than the cached one again.
		ent.forget(id)
	}
	return resp, err
}

// URL is the chat-completions URL of backend b for body. The base is the
// resource endpoint (https://NAME.openai.azure.com); a base that already
// ends in /openai or /openai/v1 is not doubled.
func URL(b upstream.Backend, body []byte) string {
	return operationURL(b, body, "chat/completions")
}

// operationURL is the URL of an OpenAI operation ("chat/completions",
// "embeddings") of backend b under either URL scheme.
func operationURL(b upstream.Backend, body []byte, op string) string {
	base := strings.TrimRight(b.BaseURL, "/")
	base = strings.TrimSuffix(base, "/v1")
	base = strings.TrimSuffix(base, "/openai")
	v := b.Options[OptionAPIVersion]
	if v == "" || v == "v1" {
		return base + "/openai/v1/" + op
	}
	// The deployment is the backend's upstream model; without one, the
	// client's model names it (Invoke left it in the body).
	dep := b.UpstreamModel
	if dep == "" {
		dep, _ = translate.FieldString(body, "model")
	}
	return base + "/openai/deployments/" + url.PathEscape(dep) + "/" + op + "?api-version=" + url.QueryEscape(v)
}

var (
	_ upstream.TextProvider = (*Provider)(nil)
	_ upstream.Embedder     = (*Provider)(nil)
)
