package upstream

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Backend is one upstream target of a model route, credential resolved.
type Backend struct {
	// Name identifies the backend inside its route, in logs and metrics.
	Name string
	// Provider is the registered adapter name ("anthropic", "openai",
	// "taskapi", "simulated", ...).
	Provider string
	// BaseURL is the upstream API root, with or without a trailing /v1.
	BaseURL string
	// APIKey is the upstream credential. It is never logged.
	APIKey string
	// SecretKey reads another key of the credential Secret APIKey came
	// from (nil without one), for credentials of several parts (an AWS
	// access key ID beside its secret key). Values are never logged.
	SecretKey func(ctx context.Context, key string) (string, error)
	// UpstreamModel replaces the client's model in the upstream request.
	UpstreamModel string
	// Options are provider-specific settings.
	Options map[string]string
	// Timeout bounds the wait for the upstream: for a text call its
	// response headers (and a non-streaming body too), for a task one HTTP
	// exchange. Zero means the caller's default (DefaultTimeout for text).
	Timeout time.Duration
}

// DefaultTimeout applies to a text call when Backend.Timeout is zero.
const DefaultTimeout = 120 * time.Second

// TimeoutOr returns b's timeout, else def.
func (b Backend) TimeoutOr(def time.Duration) time.Duration {
	if b.Timeout > 0 {
		return b.Timeout
	}
	return def
}

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
