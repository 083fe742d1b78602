// Package openai is the adapter for upstreams that speak OpenAI's APIs: Chat
// Completions and Responses for text, the Images API for image tasks
// (images.go), the Videos API for video tasks (videos.go). One route backend
// kind, "openai", serves all three.
package openai

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/modelgate/modelgate/gateway/translate"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// Name is the provider's registered name.
const Name = "openai"

// DefaultBaseURL is used when a backend has no base URL.
const DefaultBaseURL = "https://api.openai.com/v1"

// Provider sends chat-completions and responses requests, and image
// generation tasks.
type Provider struct {
	client *http.Client
}

// New returns a provider using client (nil: upstream.ClientOr).
func New(client *http.Client) *Provider {
	return &Provider{client: upstream.ClientOr(client)}
}

// Protocols implements upstream.TextProvider: chat completions first, so that a
// messages client is translated to the most widely implemented API.
func (*Provider) Protocols() []upstream.Protocol {
	return []upstream.Protocol{upstream.ChatCompletions, upstream.Responses}
}

// ProtocolsFor implements upstream.BackendProtocols. Backend option
// "protocols" lists the APIs the backend serves, preferred first
// ("chat_completions", "responses", comma-separated): an OpenAI-compatible
// server that has no Responses API (most self-hosted ones) takes a
// Responses client translated to chat completions. Unknown names are
// ignored; none known, both.
func (p *Provider) ProtocolsFor(b upstream.Backend) []upstream.Protocol {
	var out []upstream.Protocol
	for name := range strings.SplitSeq(b.Options["protocols"], ",") {
		switch proto := upstream.Protocol(strings.TrimSpace(name)); proto {
		case upstream.ChatCompletions, upstream.Responses:
			out = append(out, proto)
		}
	}
	if len(out) == 0 {
		return p.Protocols()
	}
	return out
}

// Send implements upstream.TextProvider. Backend options: "organization" and
// "project" set the OpenAI-Organization and OpenAI-Project headers. The
// client's OpenAI-Beta header is forwarded.
func (p *Provider) Send(ctx context.Context, b upstream.Backend, proto upstream.Protocol, body []byte, stream bool, h http.Header) (*http.Response, error) {
	base := b.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	path := "/v1/chat/completions"
	if proto == upstream.Responses {
		path = "/v1/responses"
	}
	req, err := newRequest(ctx, b, upstream.WithClientQuery(ctx, upstream.Endpoint(base, path)), body, stream)
	if err != nil {
		return nil, err
	}
	for _, v := range h.Values("OpenAI-Beta") {
		req.Header.Add("OpenAI-Beta", v)
	}
	return upstream.RoundTrip(p.client, req)
}

// CountTokens implements upstream.TokenCounter with the Responses API's
// input-token count (POST /v1/responses/input_tokens): the messages body
// translated to a Responses request, of which only the members that
// endpoint takes are sent (it refuses the others, max_output_tokens,
// stream or temperature among them).
func (p *Provider) CountTokens(ctx context.Context, b upstream.Backend, body []byte, _ http.Header) (int64, error) {
	rb, _, err := translate.TranslateRequest(upstream.Messages, upstream.Responses, body, b.UpstreamModel)
	if err != nil {
		return 0, upstream.RequestError(err)
	}
	if rb, err = keepMembers(rb, countMembers); err != nil {
		return 0, upstream.RequestError(err)
	}
	base := b.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	req, err := newRequest(ctx, b, upstream.Endpoint(base, "/v1/responses/input_tokens"), rb, false)
	if err != nil {
		return 0, err
	}
	resp, err := upstream.RoundTrip(p.client, req)
	if err != nil {
		return 0, err
	}
	return upstream.ReadCount(resp, upstream.Responses, "input_tokens")
}

// countMembers are the request members of POST /v1/responses/input_tokens
// (openai-go's InputTokenCountParams).
var countMembers = map[string]bool{
	"model": true, "input": true, "instructions": true, "tools": true, "tool_choice": true, "parallel_tool_calls": true,
	"previous_response_id": true, "conversation": true, "text": true, "reasoning": true, "truncation": true, "personality": true,
}

// keepMembers is the JSON object body with only the members keep names.
func keepMembers(body []byte, keep map[string]bool) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	for k := range m {
		if !keep[k] {
			delete(m, k)
		}
	}
	return json.Marshal(m)
}

// newRequest is a POST of body to url with the backend's key and its
// organization and project headers.
func newRequest(ctx context.Context, b upstream.Backend, url string, body []byte, stream bool) (*http.Request, error) {
	req, err := upstream.NewJSONRequest(ctx, url, body, stream)
	if err != nil {
		return nil, err
	}
	if b.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(b.APIKey))
	}
	if v := b.Options["organization"]; v != "" {
		req.Header.Set("OpenAI-Organization", v)
	}
	if v := b.Options["project"]; v != "" {
		req.Header.Set("OpenAI-Project", v)
	}
	return req, nil
}

var (
	_ upstream.TextProvider = (*Provider)(nil)
	_ upstream.TokenCounter = (*Provider)(nil)
)
