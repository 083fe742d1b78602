// Package vertex is the provider for Google Cloud's Vertex AI: Gemini models
// through generateContent and streamGenerateContent (Google's wire, the
// translate package's gemini codec), Claude models through rawPredict and
// streamRawPredict (Anthropic's Messages wire), both authenticated with an
// OAuth2 access token exchanged for the backend's service-account key.
package vertex

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/modelgate/modelgate/gateway/translate"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/gemini"
)

// Name is the provider's registered name.
const Name = "vertex"

// The backend options.
const (
	// OptionProject is the Google Cloud project ID; empty: the project_id
	// of the service-account key.
	OptionProject = "project"
	// OptionRegion is the location segment of the URL ("us-east5",
	// "europe-west1", "global"); empty: DefaultRegion. Without a baseURL it
	// also names the host: {region}-aiplatform.googleapis.com, or
	// aiplatform.googleapis.com for global.
	OptionRegion = "region"
	// OptionPublisher is "google" (Gemini) or "anthropic" (Claude); empty:
	// anthropic when the upstream model starts with "claude", else google.
	OptionPublisher = "publisher"
	// OptionAPIVersion is the API version path segment; empty: "v1".
	OptionAPIVersion = "apiVersion"
)

// The publishers.
const (
	PublisherGoogle    = "google"
	PublisherAnthropic = "anthropic"
)

// DefaultRegion is the location of a backend without a region option: the
// global endpoint, which Google recommends for both Gemini and Claude
// unless data must stay in a region.
const DefaultRegion = "global"

// AnthropicVersion is the anthropic_version the body of a Claude request
// carries on Vertex AI instead of the anthropic-version header.
const AnthropicVersion = "vertex-2023-10-16"

// Provider sends Vertex AI requests.
type Provider struct {
	client *http.Client
	tokens *tokens
}

// New returns a provider using client (nil: upstream.ClientOr) for the API
// calls. Token exchanges use a client of their own on client's transport,
// with a time limit, since the OAuth2 library refreshes tokens without the
// request's context.
func New(client *http.Client) *Provider {
	c := upstream.ClientOr(client)
	return &Provider{client: c, tokens: newTokens(&http.Client{Transport: c.Transport, Timeout: tokenTimeout})}
}

// Protocols implements upstream.TextProvider: both wires, Gemini first.
// Invoke asks ProtocolsFor, which knows the backend's publisher.
func (*Provider) Protocols() []upstream.Protocol {
	return []upstream.Protocol{upstream.Gemini, upstream.Messages}
}

// ProtocolsFor implements upstream.BackendProtocols: the publisher's wire.
func (*Provider) ProtocolsFor(b upstream.Backend) []upstream.Protocol {
	if Publisher(b) == PublisherAnthropic {
		return []upstream.Protocol{upstream.Messages}
	}
	return []upstream.Protocol{upstream.Gemini}
}

// Publisher is backend b's publisher: its publisher option, else anthropic
// for a model whose name starts with "claude", else google.
func Publisher(b upstream.Backend) string {
	if p := b.Options[OptionPublisher]; p != "" {
		return p
	}
	if strings.HasPrefix(strings.ToLower(b.UpstreamModel), "claude") {
		return PublisherAnthropic
	}
	return PublisherGoogle
}

// Send implements upstream.TextProvider. It exchanges the backend's
// service-account key (the credential Secret's value) for an access token,
// builds the publisher's URL, adapts a Claude body to Vertex AI (no model,
// anthropic_version in the body) and posts it with the token as Bearer.
func (p *Provider) Send(ctx context.Context, b upstream.Backend, _ upstream.Protocol, body []byte, stream bool, h http.Header) (*http.Response, error) {
	pub := Publisher(b)
	if pub != PublisherGoogle && pub != PublisherAnthropic {
		return nil, unsupported(b, "publisher %q is not supported (google or anthropic)", pub)
	}
	return p.post(ctx, b, func(project string) (string, []byte, error) {
		u, err := URL(b, project, stream)
		if err != nil || pub != PublisherAnthropic {
			return u, body, err
		}
		ab, err := anthropicBody(body)
		return u, ab, err
	}, stream, h)
}

// CountTokens implements upstream.TokenCounter. A Claude model counts on
// Anthropic's count-tokens model through rawPredict, the body a Messages
// request that names the model and carries anthropic_version, answered
// with input_tokens. A Gemini model counts with countTokens, the body the
// contents, systemInstruction and tools of the request translated to
// Google's wire (what that method takes), answered with totalTokens.
func (p *Provider) CountTokens(ctx context.Context, b upstream.Backend, body []byte, h http.Header) (int64, error) {
	pub := Publisher(b)
	var proto upstream.Protocol
	var key string
	var build func(project string) (string, []byte, error)
	switch pub {
	case PublisherAnthropic:
		proto, key = upstream.Messages, "input_tokens"
		build = func(project string) (string, []byte, error) {
			u, err := resourceURL(b, project, "count-tokens")
			if err != nil {
				return "", nil, err
			}
			cb, err := translate.SetString(body, AnthropicVersion, "anthropic_version")
			if err != nil {
				return "", nil, upstream.RequestError(err)
			}
			return u + ":rawPredict", cb, nil
		}
	case PublisherGoogle:
		proto, key = upstream.Gemini, "totalTokens"
		build = func(project string) (string, []byte, error) {
			u, err := resourceURL(b, project, b.UpstreamModel)
			if err != nil {
				return "", nil, err
			}
			gb, err := geminiCountBody(body, b.UpstreamModel)
			if err != nil {
				return "", nil, upstream.RequestError(err)
			}
			return u + ":countTokens", gb, nil
		}
	default:
		return 0, unsupported(b, "publisher %q is not supported (google or anthropic)", pub)
	}
	resp, err := p.post(ctx, b, build, false, h)
	if err != nil {
		return 0, err
	}
	return upstream.ReadCount(resp, proto, key)
}

// geminiCountBody is a countTokens body of a messages request: the members
// of its Gemini translation that countTokens takes.
func geminiCountBody(body []byte, model string) ([]byte, error) {
	gb, _, err := translate.TranslateRequest(upstream.Messages, upstream.Gemini, body, model)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(gb, &m); err != nil {
		return nil, err
	}
	out := map[string]json.RawMessage{}
	for _, k := range []string{"contents", "systemInstruction", "tools"} {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return json.Marshal(out)
}

// post sends the request build makes for the backend's project with an
// access token for its service account: the URL and the body, or the
// reason the backend cannot serve. A Claude call carries the client's and
// the backend's anthropic-beta headers.
func (p *Provider) post(ctx context.Context, b upstream.Backend, build func(project string) (string, []byte, error), stream bool, h http.Header) (*http.Response, error) {
	acct, err := p.tokens.account(b)
	if err != nil {
		return nil, err
	}
	project := b.Options[OptionProject]
	if project == "" {
		project = acct.project
	}
	u, body, err := build(project)
	if err != nil {
		return nil, err
	}
	token, err := acct.token(ctx, b)
	if err != nil {
		return nil, err
	}
	req, err := upstream.NewJSONRequest(ctx, u, body, stream)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if Publisher(b) == PublisherAnthropic {
		for _, v := range h.Values("anthropic-beta") {
			req.Header.Add("anthropic-beta", v)
		}
		if v := b.Options["anthropic-beta"]; v != "" {
			req.Header.Add("anthropic-beta", v)
		}
	}
	resp, err := upstream.RoundTrip(p.client, req)
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		// The token was revoked or expired early: the next call gets a
		// fresh one rather than the cached one again.
		p.tokens.forget(b)
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		gemini.RetryAfterFromBody(resp)
	}
	return resp, nil
}

// region names are lower-case words and digits joined by hyphens; anything
// else would change the host name built from it.
var regionName = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// URL is the method URL of backend b in project:
// {base}/{version}/projects/{project}/locations/{region}/publishers/{publisher}/models/{model}:{method},
// the method generateContent or streamGenerateContent?alt=sse (google),
// rawPredict or streamRawPredict (anthropic). The base is the backend's
// baseURL, else the region's endpoint.
func URL(b upstream.Backend, project string, stream bool) (string, error) {
	u, err := resourceURL(b, project, b.UpstreamModel)
	if err != nil {
		return "", err
	}
	pub := Publisher(b)
	switch {
	case pub == PublisherAnthropic && stream:
		return u + ":streamRawPredict", nil
	case pub == PublisherAnthropic:
		return u + ":rawPredict", nil
	case stream:
		// alt=sse: server-sent events; without it the stream is one JSON
		// array.
		return u + ":streamGenerateContent?alt=sse", nil
	}
	return u + ":generateContent", nil
}

// resourceURL is the URL of model under backend b's publisher in project,
// without a method: {base}/{version}/projects/{project}/locations/{region}/publishers/{publisher}/models/{model}.
// It fails for a backend without an upstream model even when model is
// another (Claude's count-tokens).
func resourceURL(b upstream.Backend, project, model string) (string, error) {
	model = strings.TrimSpace(model)
	if model == "" || strings.TrimSpace(b.UpstreamModel) == "" {
		return "", unsupported(b, "no upstream model")
	}
	loc, err := locationURL(b, project, region(b))
	if err != nil {
		return "", err
	}
	return loc + "/publishers/" + Publisher(b) + "/models/" + url.PathEscape(model), nil
}

// region is backend b's region option, else DefaultRegion.
func region(b upstream.Backend) string {
	if r := b.Options[OptionRegion]; r != "" {
		return r
	}
	return DefaultRegion
}

// locationURL is the URL of a location in project:
// {base}/{version}/projects/{project}/locations/{region}.
func locationURL(b upstream.Backend, project, region string) (string, error) {
	if !regionName.MatchString(region) {
		return "", unsupported(b, "region %q is not a Google Cloud location", region)
	}
	if project == "" {
		return "", unsupported(b, "no project: set the %q option or use a service-account key with a project_id", OptionProject)
	}
	return baseURL(b, region) + "/" + url.PathEscape(apiVersion(b)) + "/projects/" + url.PathEscape(project) + "/locations/" + region, nil
}

// baseURL is the backend's baseURL, else the endpoint of region (a valid
// location name).
func baseURL(b upstream.Backend, region string) string {
	switch base := strings.TrimRight(b.BaseURL, "/"); {
	case base != "":
		return base
	case region == "global":
		return "https://aiplatform.googleapis.com"
	default:
		return "https://" + region + "-aiplatform.googleapis.com"
	}
}

// apiVersion is the backend's API version path segment.
func apiVersion(b upstream.Backend) string {
	if v := b.Options[OptionAPIVersion]; v != "" {
		return v
	}
	return "v1"
}

// anthropicBody adapts a Messages request to Vertex AI: the model is in the
// URL, not the body, and the API version is the body's anthropic_version
// (a header is not read).
func anthropicBody(body []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, &upstream.Error{Class: upstream.Permanent, Status: http.StatusBadRequest, Message: "the request body is not a JSON object", Err: err}
	}
	delete(m, "model")
	m["anthropic_version"] = json.RawMessage(`"` + AnthropicVersion + `"`)
	return json.Marshal(m)
}

// unsupported is a configuration problem of backend b: no request left, and
// another backend may do better.
func unsupported(b upstream.Backend, format string, args ...any) *upstream.Error {
	e := upstream.Unsupported("backend %q (vertex): %s", b.Name, fmt.Sprintf(format, args...))
	e.Status, e.Retryable = http.StatusBadGateway, true
	return e
}

var (
	_ upstream.TextProvider     = (*Provider)(nil)
	_ upstream.BackendProtocols = (*Provider)(nil)
	_ upstream.TokenCounter     = (*Provider)(nil)
	_ upstream.BatchProvider    = (*Provider)(nil)
)
