package handlers

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/modelgate/modelgate/gateway/auth"
)

// The middleware of the API endpoints. A billable endpoint is
//
//	instrument(endpoint, operation, headers, authenticated(keys, …, handler))
//
// instrument gives the request its ID, server span and metrics;
// authenticated resolves the API key and hands the handler its principal.
// The balance endpoints add cors.

// APIKeys authenticates a request's API key (the gateway's
// *auth.Authenticator).
type APIKeys interface {
	APIKey(ctx context.Context, r *http.Request, allowXAPIKey bool) (*auth.Principal, *auth.Failure)
}

// requestInfo is what instrument learns of a request, in its context: the
// ID and span for the handler, and the metric labels the handler fills in
// once it knows them.
type requestInfo struct {
	id   string
	span trace.Span
	// model is the routed model ("" until a route matched: client-chosen
	// names never become label values); backend the one that answered.
	model, backend string
	// batch marks a batch line run in process (BatchLines): settlement
	// charges the batch price and records the charge in it.
	batch *batchLine
}

type requestInfoKey struct{}

// infoOf is the request's info; a request that did not pass instrument
// gets an empty one (no ID, a no-op span).
func infoOf(ctx context.Context) *requestInfo {
	if info, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		return info
	}
	return &requestInfo{span: trace.SpanFromContext(ctx)}
}

// instrument gives each request an ID (in the context and in each header
// named), the server span of operation, and the request metrics labelled
// by endpoint, routed model and backend: every answer is counted and
// traced, refusals of authentication included.
func instrument(endpoint, operation string, headers []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w, r := begin(endpoint, operation, headers, rw, r)
		defer w.end()
		next.ServeHTTP(w, r)
	})
}

// begin is instrument's start of a request: its ID, span and observed
// writer. It is not inlined into instrument, whose frame stays under every
// stream for the stream's life (see Text.serveHTTP).
//
//go:noinline
func begin(endpoint, operation string, headers []string, rw http.ResponseWriter, r *http.Request) (*observed, *http.Request) {
	info := &requestInfo{id: newRequestID()}
	w := &observed{ResponseWriter: rw, start: time.Now(), info: info, endpoint: endpoint}
	for _, h := range headers {
		w.Header().Set(h, info.id)
	}
	ctx, span := startRequestSpan(r, operation, info.id)
	info.span = span
	return w, r.WithContext(context.WithValue(ctx, requestInfoKey{}, info))
}

// end reports the finished request: its metrics and its span.
func (o *observed) end() {
	o.record(o.endpoint, o.info.model, o.info.backend)
	endRequestSpan(o.info.span, o.status)
}

// authFail writes an authentication failure in an endpoint's shape.
type authFail func(w http.ResponseWriter, status int, message string)

// principalHandler serves an authenticated request.
type principalHandler func(w http.ResponseWriter, r *http.Request, p *auth.Principal)

// authenticated resolves the request's API key (the x-api-key header too
// where allowXAPIKey) and calls next with its principal; a failure is
// answered by fail and never reaches next.
func authenticated(keys APIKeys, allowXAPIKey bool, fail authFail, next principalHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, f := keys.APIKey(r.Context(), r, allowXAPIKey)
		if f != nil {
			fail(w, f.Status, f.Message)
			return
		}
		next(w, r, p)
	})
}

// cors allows browser clients of any origin: the balance endpoints are
// documented as cross-origin. Credentials travel in headers, not cookies.
func cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Allow-Methods", "GET, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
		h.Set("Access-Control-Max-Age", "600")
		next.ServeHTTP(w, r)
	})
}
