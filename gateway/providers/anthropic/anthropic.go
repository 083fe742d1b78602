// Package anthropic is the provider for upstreams that speak the Anthropic
// Messages API.
package anthropic

import (
	"context"
	"net/http"

	"github.com/modelgate/modelgate/gateway/providers"
)

// Name is the provider's registered name.
const Name = "anthropic"

// DefaultBaseURL is used when a backend has no base URL.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultVersion is sent as anthropic-version when the client sent none.
const DefaultVersion = "2023-06-01"

func init() { providers.Register(Name, New(nil)) }

// Provider sends messages requests.
type Provider struct {
	client *http.Client
}

// New returns a provider using client (nil: providers.Client).
func New(client *http.Client) *Provider {
	if client == nil {
		client = providers.Client
	}
	return &Provider{client: client}
}

// Protocols implements providers.Provider.
func (*Provider) Protocols() []providers.Protocol {
	return []providers.Protocol{providers.Messages}
}

// Send implements providers.Provider. Backend options: "anthropic-beta"
// adds a beta header for every call of the backend.
func (p *Provider) Send(ctx context.Context, b providers.Backend, _ providers.Protocol, body []byte, stream bool, h http.Header) (*http.Response, error) {
	base := b.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	req, err := providers.NewJSONRequest(ctx, providers.Endpoint(base, "/v1/messages"), body, stream)
	if err != nil {
		return nil, err
	}
	req.Header.Set("x-api-key", b.APIKey)
	version := h.Get("anthropic-version")
	if version == "" {
		version = DefaultVersion
	}
	req.Header.Set("anthropic-version", version)
	for _, v := range h.Values("anthropic-beta") {
		req.Header.Add("anthropic-beta", v)
	}
	if v := b.Options["anthropic-beta"]; v != "" {
		req.Header.Add("anthropic-beta", v)
	}
	return p.client.Do(req)
}
