// Package gemini is the provider for Google's Gemini API (generateContent and
// streamGenerateContent): clients' requests are translated to it, its
// answers back (see translate's gemini codec and docs/providers.md).
package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/modelgate/modelgate/gateway/translate"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// Name is the provider's registered name.
const Name = "gemini"

// DefaultBaseURL is used when a backend has no base URL.
const DefaultBaseURL = "https://generativelanguage.googleapis.com"

// DefaultAPIVersion is the API version path segment; the backend option
// "apiVersion" overrides it.
const DefaultAPIVersion = "v1beta"

// maxErrorBody bounds the error body read to find a retry delay.
const maxErrorBody = 64 << 10

// Provider sends generateContent requests.
type Provider struct {
	client    *http.Client
	downloads *http.Client
}

// New returns a provider using client for the API (nil: upstream.ClientOr)
// and downloads for the URLs a request or the API names (nil: public
// addresses only; the composition root passes its Egress.Downloads).
func New(client, downloads *http.Client) *Provider {
	return &Provider{client: upstream.ClientOr(client), downloads: upstream.Egress{Downloads: downloads}.DownloadsOr()}
}

// Protocols implements upstream.TextProvider.
func (*Provider) Protocols() []upstream.Protocol {
	return []upstream.Protocol{upstream.Gemini}
}

// Send implements upstream.TextProvider. The model is part of the URL
// (b.UpstreamModel, which the gateway defaults to the route's model); the
// key goes in x-goog-api-key, never in the query string, where proxies and
// access logs would keep it.
func (p *Provider) Send(ctx context.Context, b upstream.Backend, _ upstream.Protocol, body []byte, stream bool, _ http.Header) (*http.Response, error) {
	return p.post(ctx, b, URL(b, stream), body, stream)
}

// CountTokens implements upstream.TokenCounter with models.countTokens:
// the messages body translated to a GenerateContentRequest, sent whole as
// its generateContentRequest (with the model it names), so that the system
// instruction and the tools are counted too, not only the contents. The
// answer's totalTokens is the count.
func (p *Provider) CountTokens(ctx context.Context, b upstream.Backend, body []byte, _ http.Header) (int64, error) {
	gb, _, err := translate.TranslateRequest(upstream.Messages, upstream.Gemini, body, b.UpstreamModel)
	if err != nil {
		return 0, upstream.RequestError(err)
	}
	if gb, err = translate.SetString(gb, "models/"+modelName(b), "model"); err != nil {
		return 0, upstream.RequestError(err)
	}
	resp, err := p.post(ctx, b, methodURL(b, "countTokens"), []byte(`{"generateContentRequest":`+string(gb)+`}`), false)
	if err != nil {
		return 0, err
	}
	return upstream.ReadCount(resp, upstream.Gemini, "totalTokens")
}

// post sends body to u with the backend's key. The key goes in
// x-goog-api-key, never in the query string, where proxies and access
// logs would keep it. A quota or overload answer gets the Retry-After its
// body states.
func (p *Provider) post(ctx context.Context, b upstream.Backend, u string, body []byte, stream bool) (*http.Response, error) {
	req, err := upstream.NewJSONRequest(ctx, u, body, stream)
	if err != nil {
		return nil, err
	}
	if b.APIKey != "" {
		req.Header.Set("x-goog-api-key", b.APIKey)
	}
	resp, err := upstream.RoundTrip(p.client, req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		RetryAfterFromBody(resp)
	}
	return resp, nil
}

// URL is the method URL of backend b: {base}/{version}/models/{model}:generateContent,
// or :streamGenerateContent?alt=sse (server-sent events; without alt the
// stream is one JSON array).
func URL(b upstream.Backend, stream bool) string {
	if stream {
		return methodURL(b, "streamGenerateContent") + "?alt=sse"
	}
	return methodURL(b, "generateContent")
}

// methodURL is {base}/{version}/models/{model}:{method} of backend b.
func methodURL(b upstream.Backend, method string) string {
	base := strings.TrimRight(b.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	version := b.Options["apiVersion"]
	if version == "" {
		version = DefaultAPIVersion
	}
	return base + "/" + version + "/models/" + url.PathEscape(modelName(b)) + ":" + method
}

// modelName is the backend's model without the resource prefix models/.
func modelName(b upstream.Backend) string { return strings.TrimPrefix(b.UpstreamModel, "models/") }

// RetryAfterFromBody sets Retry-After from the error's RetryInfo detail
// ({"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"22s"})
// when the header is absent: Gemini states its wait there, and the gateway
// reads waits from the header. Vertex AI's errors share the shape.
func RetryAfterFromBody(resp *http.Response) {
	if resp.Header.Get("Retry-After") != "" {
		return
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(raw))
	if d := RetryDelay(raw); d > 0 {
		resp.Header.Set("Retry-After", strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
	}
}

// RetryDelay reads the retryDelay of an error body's RetryInfo detail; zero
// when there is none.
func RetryDelay(body []byte) time.Duration {
	var e struct {
		Error struct {
			Details []struct {
				Type       string `json:"@type"`
				RetryDelay string `json:"retryDelay"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return 0
	}
	for _, d := range e.Error.Details {
		if !strings.HasSuffix(d.Type, "google.rpc.RetryInfo") {
			continue
		}
		// A protobuf Duration in JSON: seconds with an "s" suffix.
		if v, err := time.ParseDuration(d.RetryDelay); err == nil && v > 0 {
			return v
		}
	}
	return 0
}

var (
	_ upstream.TextProvider = (*Provider)(nil)
	_ upstream.TokenCounter = (*Provider)(nil)
)
