// Package azureopenai is the adapter for Azure OpenAI deployments: the OpenAI Chat Completions wire format behind Azure's URLs and api-key header.
package azureopenai

import (
	"context"
	"net/http"
	"net/url"
	"strings"

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
}

// New returns a provider using client (nil: upstream.Client).
func New(client *http.Client) *Provider {
	return &Provider{client: upstream.ClientOr(client)}
}

// Protocols implements upstream.TextProvider. Only chat completions: every
// api-version of both URL schemes has it, while the Responses API exists
// only in some versions and regions.
func (*Provider) Protocols() []upstream.Protocol {
	return []upstream.Protocol{upstream.ChatCompletions}
}

// Send implements upstream.TextProvider. The credential goes in the
// api-key header (Azure's key authentication); Entra ID bearer tokens are
// not supported, since they expire hourly and a static Secret cannot hold
// one.
func (p *Provider) Send(ctx context.Context, b upstream.Backend, _ upstream.Protocol, body []byte, stream bool, _ http.Header) (*http.Response, error) {
	req, err := upstream.NewJSONRequest(ctx, URL(b, body), body, stream)
	if err != nil {
		return nil, err
	}
	if k := strings.TrimSpace(b.APIKey); k != "" {
		req.Header.Set("api-key", k)
	}
	return p.client.Do(req)
}

// URL is the chat-completions URL of backend b for body. The base is the
// resource endpoint (https://NAME.openai.azure.com); a base that already
// ends in /openai or /openai/v1 is not doubled.
func URL(b upstream.Backend, body []byte) string {
	base := strings.TrimRight(b.BaseURL, "/")
	base = strings.TrimSuffix(base, "/v1")
	base = strings.TrimSuffix(base, "/openai")
	v := b.Options[OptionAPIVersion]
	if v == "" || v == "v1" {
		return base + "/openai/v1/chat/completions"
	}
	// The deployment is the backend's upstream model; without one, the
	// client's model names it (Invoke left it in the body).
	dep := b.UpstreamModel
	if dep == "" {
		dep, _ = translate.FieldString(body, "model")
	}
	return base + "/openai/deployments/" + url.PathEscape(dep) + "/chat/completions?api-version=" + url.QueryEscape(v)
}

var _ upstream.TextProvider = (*Provider)(nil)
