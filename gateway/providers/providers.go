package providers

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/modelgate/modelgate/gateway/translate"
)

// Protocol is a text-generation wire protocol.
type Protocol = translate.Protocol

// The protocols.
const (
	Messages        = translate.Messages
	ChatCompletions = translate.ChatCompletions
	Responses       = translate.Responses
)

// Usage is the token accounting of one generation; see translate.Usage.
type Usage = translate.Usage

// Event is one server-sent event in the client's protocol.
type Event = translate.Event

// Backend is one upstream target of a model route.
type Backend struct {
	// Name identifies the backend in logs and metrics.
	Name string
	// Provider is the registered provider name ("anthropic", "openai",
	// "simulated", ...).
	Provider string
	// BaseURL is the upstream API root, with or without a trailing /v1.
	BaseURL string
	// APIKey is the upstream credential. It is never logged.
	APIKey string
	// UpstreamModel replaces the client's model in the upstream request.
	UpstreamModel string
	// Options are provider-specific settings.
	Options map[string]string
	// Timeout bounds the wait for the upstream's response headers, and for
	// a non-streaming call the whole body too. Zero means DefaultTimeout.
	Timeout time.Duration
}

// DefaultTimeout applies when Backend.Timeout is zero.
const DefaultTimeout = 120 * time.Second

// String describes b without its API key.
func (b Backend) String() string {
	return fmt.Sprintf("Backend{Name:%s Provider:%s BaseURL:%s UpstreamModel:%s APIKey:%s}",
		b.Name, b.Provider, b.BaseURL, b.UpstreamModel, redact(b.APIKey))
}

// GoString is String, so %#v does not print the key either.
func (b Backend) GoString() string { return b.String() }

// LogValue logs b without its API key.
func (b Backend) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("name", b.Name),
		slog.String("provider", b.Provider),
		slog.String("base_url", b.BaseURL),
		slog.String("upstream_model", b.UpstreamModel),
		slog.String("api_key", redact(b.APIKey)),
	)
}

func redact(k string) string {
	if k == "" {
		return ""
	}
	return "[redacted]"
}

// Request is a client's text-generation request as the handler received it.
type Request struct {
	// Protocol is the client's protocol.
	Protocol Protocol
	// Body is the client's raw JSON body.
	Body []byte
	// Stream is the client's stream flag.
	Stream bool
	// Header carries client headers to forward (anthropic-version,
	// anthropic-beta); others are ignored.
	Header http.Header
	// Model is the model the client asked for; it is the model of every
	// client-visible response. Empty means the body's model.
	Model string
}

// Provider is one kind of upstream API.
type Provider interface {
	// Protocols are the protocols the upstream speaks natively, preferred
	// first.
	Protocols() []Protocol
	// Send posts body (already in protocol p, model already rewritten) to
	// the backend with the provider's authentication and returns the raw
	// response. Header carries forwardable client headers. The caller
	// closes the body.
	Send(ctx context.Context, b Backend, p Protocol, body []byte, stream bool, header http.Header) (*http.Response, error)
}

var registry = struct {
	sync.RWMutex
	m map[string]Provider
}{m: map[string]Provider{}}

// Register makes p available under name. It panics on a duplicate name, like
// database/sql.Register; call it from a provider package's init.
func Register(name string, p Provider) {
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.m[name]; dup {
		panic("providers: Register called twice for " + name)
	}
	registry.m[name] = p
}

// Get returns the provider registered under name.
func Get(name string) (Provider, bool) {
	registry.RLock()
	defer registry.RUnlock()
	p, ok := registry.m[name]
	return p, ok
}

// Names lists the registered providers, sorted.
func Names() []string {
	registry.RLock()
	defer registry.RUnlock()
	names := make([]string, 0, len(registry.m))
	for n := range registry.m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// UpstreamProtocol is the protocol Invoke uses for a client protocol: the
// client's own when p speaks it, else p's first.
func UpstreamProtocol(p Provider, client Protocol) Protocol {
	ps := p.Protocols()
	if slices.Contains(ps, client) {
		return client
	}
	return ps[0]
}
