// Package telemetry is the gateway's OpenTelemetry tracing: the tracer the
// handlers start their spans with, the standard OTEL_* environment that
// configures an exporter, and the upstream transport that carries the trace
// context to the providers.
//
// Tracing is off unless the environment asks for an exporter (see
// ConfigFromEnv). Off, nothing is installed and the request path pays one
// atomic load per span it would have started: Start and StartRequest return
// the context unchanged and a no-op span, so callers check
// span.IsRecording() before they build attributes and allocate nothing.
package telemetry

import (
	"context"
	"net/http"
	"sync/atomic"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the gateway's spans.
const ScopeName = "github.com/modelgate/modelgate/gateway"

// tracing is the installed tracer and propagator; nil when tracing is off.
type tracing struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

var current atomic.Pointer[tracing]

// propagator is W3C trace context only: traceparent and tracestate. Baggage
// is not propagated, so nothing a client puts in it travels on to an
// upstream provider.
var propagator = propagation.TraceContext{}

// Use makes tp the provider of the gateway's spans; nil turns tracing off.
// Setup calls it; tests call it with an in-memory exporter's provider.
func Use(tp trace.TracerProvider) {
	if tp == nil {
		current.Store(nil)
		return
	}
	current.Store(&tracing{tracer: tp.Tracer(ScopeName), prop: propagator})
}

// Enabled reports whether a tracer provider is installed.
func Enabled() bool { return current.Load() != nil }

// noSpan is the span of a context without one: a no-op whose methods do
// nothing and which boxes without allocating.
var noSpan = trace.SpanFromContext(context.Background())

// StartRequest starts the server span of an API request, a child of the
// trace context the caller sent (traceparent), if any. Off, it returns r's
// context and a no-op span.
func StartRequest(r *http.Request, name string) (context.Context, trace.Span) {
	t := current.Load()
	if t == nil {
		return r.Context(), noSpan
	}
	ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	return t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
}

// Start starts a child span of ctx's span with the given kind. Without a
// recording parent (tracing off, or the trace not sampled) it starts
// nothing and returns ctx unchanged with a no-op span: a child of an
// unsampled span would not be recorded either, and ctx still carries the
// unsampled trace context on to the upstream.
func Start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	t := current.Load()
	if t == nil {
		return ctx, noSpan
	}
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, noSpan
	}
	return t.tracer.Start(ctx, name, trace.WithSpanKind(kind))
}
