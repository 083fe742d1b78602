package upstream

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/modelgate/modelgate/gateway/translate"
)

// Protocol is a text-generation wire protocol.
type Protocol = translate.Protocol

// The protocols.
const (
	Messages        = translate.Messages
	ChatCompletions = translate.ChatCompletions
	Responses       = translate.Responses
	// Gemini is an upstream protocol only (no client speaks it).
	Gemini = translate.Gemini
	// Bedrock is an upstream protocol only (Amazon Bedrock's Converse).
	Bedrock = translate.Bedrock
)

// Usage is the token accounting of one generation; see translate.Usage.
type Usage = translate.Usage

// Event is one server-sent event in the client's protocol.
type Event = translate.Event

// Request is a client's text-generation request as the handler received it.
type Request struct {
	// Protocol is the client's protocol.
	Protocol Protocol
	// Body is the client's raw JSON body.
	Body []byte
	// Stream is the client's stream flag.
	Stream bool
	// Header carries client headers to forward (anthropic-version,
	// anthropic-beta, openai-beta); others are ignored.
	Header http.Header
	// Query is the client's raw query string (Anthropic's SDKs send
	// ?beta=true to beta endpoints); a same-protocol call passes it on.
	Query string
	// Model is the model the client asked for; it is the model of every
	// client-visible response. Empty means the body's model.
	Model string
}

// TextProvider is the text-generation capability of an adapter.
type TextProvider interface {
	// Protocols are the protocols the upstream speaks natively, preferred
	// first.
	Protocols() []Protocol
	// Send posts body (already in protocol p, model already rewritten) to
	// the backend with the provider's authentication and returns the raw
	// response. Header carries forwardable client headers. The caller
	// closes the body.
	Send(ctx context.Context, b Backend, p Protocol, body []byte, stream bool, header http.Header) (*http.Response, error)
}

// BackendProtocols is implemented by a TextProvider whose protocols depend
// on the backend (Vertex AI serves Gemini models on Google's wire and Claude
// models on Anthropic's): Invoke asks ProtocolsFor instead of Protocols.
type BackendProtocols interface {
	// ProtocolsFor are the protocols backend b speaks natively, preferred
	// first.
	ProtocolsFor(b Backend) []Protocol
}

// UpstreamProtocol is the protocol Invoke uses for a client protocol: the
// client's own when p speaks it, else p's first.
func UpstreamProtocol(p TextProvider, client Protocol) Protocol {
	return pick(p.Protocols(), client)
}

// UpstreamProtocolFor is UpstreamProtocol for backend b, asking a
// BackendProtocols provider for b's protocols.
func UpstreamProtocolFor(p TextProvider, b Backend, client Protocol) Protocol {
	if bp, ok := p.(BackendProtocols); ok {
		return pick(bp.ProtocolsFor(b), client)
	}
	return UpstreamProtocol(p, client)
}

func pick(ps []Protocol, client Protocol) Protocol {
	if slices.Contains(ps, client) {
		return client
	}
	return ps[0]
}

type clientQueryKey struct{}

// withClientQuery carries the client's query to the provider's Send.
func withClientQuery(ctx context.Context, q string) context.Context {
	if q == "" {
		return ctx
	}
	return context.WithValue(ctx, clientQueryKey{}, q)
}

// WithClientQuery is url with the query of a same-protocol client request
// added (Invoke passes it only then): a provider that forwards the
// client's call as it came calls it on the URL it sends to.
func WithClientQuery(ctx context.Context, url string) string {
	q, _ := ctx.Value(clientQueryKey{}).(string)
	if q == "" {
		return url
	}
	if strings.Contains(url, "?") {
		return url + "&" + q
	}
	return url + "?" + q
}
