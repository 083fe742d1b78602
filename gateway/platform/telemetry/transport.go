package telemetry

import (
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Transport wraps next, the upstream HTTP transport, so that each upstream
// request carries its caller's trace context (W3C traceparent: the span of
// the upstream attempt, so a provider's own traces join the request's) and
// the attempt's span records the upstream's HTTP status. The wiring
// installs it on the upstream client once; with tracing off, or a request
// whose context has no span, the request passes through untouched.
//
// The span is the caller's: the handler starts one per attempt, where the
// route's backend (name, provider, model) is known, which an HTTP-level
// span could not name. The attribute values are a status code only: no URL,
// host or address of the upstream.
func Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return transport{next}
}

type transport struct{ next http.RoundTripper }

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	tr := current.Load()
	if tr == nil {
		return t.next.RoundTrip(req)
	}
	ctx := req.Context()
	span := trace.SpanFromContext(ctx)
	if !span.SpanContext().IsValid() {
		return t.next.RoundTrip(req)
	}
	// A RoundTripper must not modify its request: the headers are copied
	// before the trace context goes in.
	out := new(http.Request)
	*out = *req
	out.Header = req.Header.Clone()
	if out.Header == nil {
		out.Header = http.Header{}
	}
	tr.prop.Inject(ctx, propagation.HeaderCarrier(out.Header))
	resp, err := t.next.RoundTrip(out)
	if err == nil && span.IsRecording() {
		span.SetAttributes(HTTPStatusCode.Int(resp.StatusCode))
	}
	return resp, err
}

// Unwrap returns the wrapped transport (for tests and for settings that
// must reach the *http.Transport).
func (t transport) Unwrap() http.RoundTripper { return t.next }

// CloseIdleConnections closes the wrapped transport's idle connections:
// http.Client.CloseIdleConnections reaches a transport only through this
// method, so without it the wrapper would keep the pool open.
func (t transport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
