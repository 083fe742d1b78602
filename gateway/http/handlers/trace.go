package handlers

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/modelgate/modelgate/gateway/admission"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/platform/telemetry"
	"github.com/modelgate/modelgate/gateway/routing"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// The spans of a request (docs/observability.md): the server span
// "{operation} {model}" with the GenAI attributes, and its children
// "admission", one client span per upstream attempt and "settlement".
// Every function here returns at once when the span does not record
// (tracing off), before any attribute is built.

// startRequestSpan starts the server span of an API request; its name gets
// the model once the route is known (requestRouted).
func startRequestSpan(r *http.Request, operation, requestID string) (context.Context, trace.Span) {
	ctx, span := telemetry.StartRequest(r, operation)
	if span.IsRecording() {
		_, route, _ := strings.Cut(r.Pattern, " ") // "POST /v1/messages": the route is the path part
		span.SetAttributes(telemetry.OperationName.String(operation), telemetry.HTTPMethod.String(r.Method),
			telemetry.HTTPRoute.String(route), telemetry.RequestID.String(requestID))
	}
	return ctx, span
}

// requestParsed records what the client asked for. The requested model is
// the client's text: it names the span only once a route matched it.
func requestParsed(span trace.Span, p *auth.Principal, model string, maxTokens int64, stream bool) {
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{telemetry.RequestModel.String(model), telemetry.Stream.Bool(stream)}
	if maxTokens > 0 {
		attrs = append(attrs, telemetry.MaxTokens.Int64(maxTokens))
	}
	if p != nil {
		attrs = append(attrs, telemetry.Tenant.String(p.Tenant.Namespace))
	}
	span.SetAttributes(attrs...)
}

// requestRouted names the span after the operation and the routed model,
// as the GenAI conventions name spans.
func requestRouted(span trace.Span, operation, model string) {
	if span.IsRecording() {
		span.SetName(operation + " " + model)
	}
}

// endRequestSpan records the answer's status and ends the span. A 5xx is
// an error of the gateway's; a 4xx is the client's and leaves the status
// unset, as the HTTP server conventions say.
func endRequestSpan(span trace.Span, status int) {
	if !span.IsRecording() {
		return
	}
	if status == 0 {
		status = http.StatusOK
	}
	span.SetAttributes(telemetry.HTTPStatusCode.Int(status))
	if status >= 500 {
		span.SetAttributes(telemetry.ErrorType.String(strconv.Itoa(status)))
		span.SetStatus(codes.Error, "")
	}
	span.End()
}

// endAdmission ends the admission span with the refusal's code, if any,
// and the quota reserved.
func endAdmission(span trace.Span, refused *admission.Error, c *textCall) {
	if !span.IsRecording() {
		return
	}
	if refused != nil {
		code := refused.Code()
		if code == "" {
			code = strconv.Itoa(refused.Status)
		}
		span.SetAttributes(telemetry.Refusal.String(code))
	} else {
		span.SetAttributes(telemetry.QuotaReserved.Int64(int64(c.Estimate)))
	}
	span.End()
}

// startAttempt starts the client span of one upstream attempt of operation
// op, named after the model asked of the upstream. The upstream request
// inherits it from the context: telemetry.Transport sends its traceparent.
func startAttempt(ctx context.Context, op string, cand routing.Candidate, upstreamModel string, n int) (context.Context, trace.Span) {
	ctx, span := telemetry.Start(ctx, op, trace.SpanKindClient)
	if span.IsRecording() {
		span.SetName(op + " " + upstreamModel)
		span.SetAttributes(telemetry.OperationName.String(op),
			telemetry.ProviderName.String(cand.Backend.Provider), telemetry.RequestModel.String(upstreamModel),
			telemetry.Backend.String(cand.Backend.Name), telemetry.Attempt.Int(n))
	}
	return ctx, span
}

// attemptFailed ends an attempt's span with the failure's kind: the
// upstream's status, or "transport" when none came. The upstream's message
// stays out of the span.
func attemptFailed(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	kind := "transport"
	if ue, ok := upstream.As(err); ok && ue.Status != 0 {
		kind = strconv.Itoa(ue.Status)
	}
	span.SetAttributes(telemetry.ErrorType.String(kind))
	span.SetStatus(codes.Error, "")
	span.End()
}

// requestServed records on the server span the backend that answered: its
// provider and the model it answered with (the upstream model the route
// maps the requested one to, as Text.backend resolves it).
func requestServed(span trace.Span, cand routing.Candidate) {
	if !span.IsRecording() {
		return
	}
	model := cand.Backend.UpstreamModel
	if model == "" {
		model = string(cand.Route.Spec.Model)
	}
	span.SetAttributes(telemetry.ProviderName.String(cand.Backend.Provider),
		telemetry.ResponseModel.String(model), telemetry.Backend.String(cand.Backend.Name))
}

// settlementSpan starts the settlement span.
func settlementSpan(ctx context.Context) trace.Span {
	_, span := telemetry.Start(ctx, "settlement", trace.SpanKindInternal)
	return span
}

// endSettlement records the charge on the settlement span and the usage on
// the request's server span (parent), then ends the settlement span.
func endSettlement(span, parent trace.Span, u upstream.Usage, quota int64, cut bool, err error) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(telemetry.Outcome.String("settled"), telemetry.QuotaCharged.Int64(quota), telemetry.Cut.Bool(cut))
	if err != nil {
		span.SetStatus(codes.Error, "usage row not durable")
	}
	span.End()
	usage := []attribute.KeyValue{telemetry.InputTokens.Int64(u.PromptTokens()), telemetry.OutputTokens.Int64(u.OutputTokens)}
	if u.CacheReadTokens != nil {
		usage = append(usage, telemetry.CacheRead.Int64(*u.CacheReadTokens))
	}
	if u.CacheWriteTokens != nil {
		usage = append(usage, telemetry.CacheCreation.Int64(*u.CacheWriteTokens))
	}
	parent.SetAttributes(usage...)
}

// endRelease ends the settlement span of a request that no upstream
// answered: its reservation went back.
func endRelease(span trace.Span) {
	if span.IsRecording() {
		span.SetAttributes(telemetry.Outcome.String("released"))
		span.End()
	}
}

// taskSubmitted names a media submission's span after its model and
// records the task it created (a replay's existing task).
func taskSubmitted(span trace.Span, model, task string) {
	if span.IsRecording() {
		requestRouted(span, telemetry.OperationGenerateContent, model)
		span.SetAttributes(telemetry.TaskID.String(task))
	}
}
