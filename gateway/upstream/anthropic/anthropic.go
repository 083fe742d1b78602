// Package anthropic is the provider for upstreams that speak the Anthropic
// Messages API.
package anthropic

import (
	"context"
	"net/http"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// Name is the provider's registered name.
const Name = "anthropic"

// DefaultBaseURL is used when a backend has no base URL.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultVersion is sent as anthropic-version when the client sent none.
const DefaultVersion = "2023-06-01"

// Provider sends messages requests.
type Provider struct {
	client *http.Client
}

// New returns a provider using client (nil: upstream.ClientOr).
func New(client *http.Client) *Provider {
	return &Provider{client: upstream.ClientOr(client)}
}

// Protocols implements upstream.TextProvider.
func (*Provider) Protocols() []upstream.Protocol {
	return []upstream.Protocol{upstream.Messages}
}

// Send implements upstream.TextProvider. Backend options: "anthropic-beta"
// adds a beta header for every call of the backend.
func (p *Provider) Send(ctx context.Context, b upstream.Backend, _ upstream.Protocol, body []byte, stream bool, h http.Header) (*http.Response, error) {
	req, err := newRequest(ctx, b, "/v1/messages", body, stream, h)
	if err != nil {
		return nil, err
	}
	return upstream.RoundTrip(p.client, req)
}

// CountTokens implements upstream.TokenCounter: POST
// /v1/messages/count_tokens with the headers and the client's query a
// Send carries (the Beta API's ?beta=true, its anthropic-beta headers).
func (p *Provider) CountTokens(ctx context.Context, b upstream.Backend, body []byte, h http.Header) (int64, error) {
	req, err := newRequest(ctx, b, "/v1/messages/count_tokens", body, false, h)
	if err != nil {
		return 0, err
	}
	resp, err := upstream.RoundTrip(p.client, req)
	if err != nil {
		return 0, err
	}
	return upstream.ReadCount(resp, upstream.Messages, "input_tokens")
}

// newRequest is a call of path on backend b: the credential, the client's
// anthropic-version (else DefaultVersion), its anthropic-beta headers and
// the backend's own (authorize).
func newRequest(ctx context.Context, b upstream.Backend, path string, body []byte, stream bool, h http.Header) (*http.Request, error) {
	base := b.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	req, err := upstream.NewJSONRequest(ctx, upstream.WithClientQuery(ctx, upstream.Endpoint(base, path)), body, stream)
	if err != nil {
		return nil, err
	}
	authorize(req, b, h)
	return req, nil
}

// authorize sets the headers every call of backend b carries.
func authorize(req *http.Request, b upstream.Backend, h http.Header) {
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
}

var (
	_ upstream.TextProvider = (*Provider)(nil)
	_ upstream.TokenCounter = (*Provider)(nil)
)
