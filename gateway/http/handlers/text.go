package handlers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/admission"
	"github.com/modelgate/modelgate/gateway/apierr"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/platform/metrics"
	"github.com/modelgate/modelgate/gateway/platform/telemetry"
	"github.com/modelgate/modelgate/gateway/pricing"
	"github.com/modelgate/modelgate/gateway/ratelimit"
	"github.com/modelgate/modelgate/gateway/routing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/translate"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/credential"
)

const (
	// maxTextBody bounds a text request (images travel inline as base64).
	maxTextBody = 32 << 20
	// maxAttempts bounds the backends one request tries.
	maxAttempts = 3
	// retryBudget bounds the time spent on failed attempts before giving up.
	retryBudget = 90 * time.Second
)

// textRequest is what the pipeline needs to know of a text body.
type textRequest struct {
	Model     string
	Stream    bool
	MaxTokens int64 // 0 when the client set none
}

// textProtocol is what differs between the three text endpoints.
type textProtocol struct {
	path         string // where it is mounted
	proto        upstream.Protocol
	endpoint     v1.EndpointType
	allowXAPIKey bool
	// parse reads what the gateway needs of the body; a non-empty message
	// is a 400.
	parse func(body []byte) (textRequest, string)
	// fail writes an error in the protocol's shape.
	fail func(w http.ResponseWriter, status int, code, message string)
	// insufficientQuota is the status for a refused reservation: Anthropic
	// answers 400 for a low credit balance, OpenAI 429 insufficient_quota.
	insufficientQuota int
}

// Text serves one text protocol: authenticate, validate, route, reserve,
// call upstream (retrying other backends before any byte was sent), stream
// or write the answer, settle and record usage.
type Text struct {
	*TextDeps
	p textProtocol
}

// newRequestID makes a request ID (time-ordered: see store.NewRequestID).
func newRequestID() string { return store.NewRequestID() }

// serveHTTP runs the pipeline for an authenticated request (the
// middleware gave it its ID, span and metrics: Register).
//
// The functions under a stream for its whole life (serveHTTP, serve, pump)
// keep small frames, and the deep work (admission, the upstream call,
// settlement) sits in calls of its own: a goroutine's stack keeps the size
// the request's deepest moment gave it while a stream waits on it (the
// collector halves a stack only when under a quarter of it is in use, and a
// waiting stream uses 2.3 to 4 KiB plus the runtime's 800-byte guard), so
// what an open stream costs depends on that moment: with the deep work in
// calls that return before the stream waits, the stack stays within 8 KiB.
// Over HTTP/2 the deep work runs off the stream's stack (offStack), which
// then stays at 4 KiB.
func (t *Text) serveHTTP(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	o := t.openOffStack(w, r, p)
	if o.call == nil {
		return // answered
	}
	t.serve(w, r, p, o)
}

// opened is a request admitted and answered by an upstream.
type opened struct {
	call *textCall
	res  *upstream.Result
	cand *routing.Candidate
}

// openOffStack is open, on a goroutine of its own over HTTP/2 (offStack).
// HTTP/1.1 serves a request on its connection's goroutine, whose own frames
// (about 1.1 KiB) and the chunked body reader put a waiting stream past what
// a 4 KiB stack holds, so the hand-off would buy it nothing and cost every
// request a goroutine.
func (t *Text) openOffStack(w http.ResponseWriter, r *http.Request, p *auth.Principal) opened {
	if r.ProtoMajor < 2 {
		return t.open(w, r, p)
	}
	var o opened
	offStack(func() { o = t.open(w, r, p) })
	return o
}

// open admits the request and calls the upstream. A zero opened means the
// request was answered (refused, or every upstream attempt failed).
func (t *Text) open(w http.ResponseWriter, r *http.Request, p *auth.Principal) opened {
	c := t.admit(w, r, p)
	if c == nil {
		return opened{}
	}
	res, cand, err := t.invoke(p, c)
	if err != nil {
		t.release(c)
		t.writeUpstreamError(w, err)
		return opened{}
	}
	return opened{call: c, res: res, cand: cand}
}

// admit reads and validates the body and admits the request; nil means
// the request was answered (refused).
func (t *Text) admit(w http.ResponseWriter, r *http.Request, p *auth.Principal) *textCall {
	ctx := r.Context()
	info := infoOf(ctx)
	requestID, span := info.id, info.span
	// Admission (parsing to reservation) ends at prepare's answer, or here
	// for an earlier refusal; ending it twice is a no-op.
	_, admission := telemetry.Start(ctx, "admission", trace.SpanKindInternal)
	defer admission.End()

	body, ok := t.readBody(w, r, "request_too_large")
	if !ok {
		return nil
	}
	req, msg := t.p.parse(body)
	if msg != "" {
		t.p.fail(w, http.StatusBadRequest, "", msg)
		return nil
	}
	requestParsed(span, p, req.Model, req.MaxTokens, req.Stream)
	var conv *conversation
	if t.p.proto == upstream.Responses {
		if body, conv, msg = t.expandConversation(ctx, p, body); msg != "" {
			t.p.fail(w, http.StatusBadRequest, "", msg)
			return nil
		}
	}
	call, refused := t.prepare(ctx, p, req, requestID, len(body))
	if call.Route != nil {
		info.model = req.Model
		requestRouted(span, telemetry.OperationChat, req.Model)
	}
	endAdmission(admission, refused, call)
	if refused != nil {
		t.refuse(w, req.Model, refused)
		return nil
	}
	call.ctx, call.body, call.req, call.header, call.query, call.conv, call.span = ctx, body, req, r.Header, r.URL.RawQuery, conv, span
	if call.OutputCap > 0 && !asksNoOutput(t.p.proto, call.body) {
		// The reservation pays for this much output: the upstream is told
		// so, and the client by the header.
		var err error
		if call.body, err = setOutputCap(t.p.proto, call.body, call.OutputCap); err != nil {
			t.release(call)
			t.p.fail(w, http.StatusBadRequest, "", "could not set the output cap")
			return nil
		}
		call.req.MaxTokens = call.OutputCap
		w.Header().Set(OutputCapHeader, strconv.FormatInt(call.OutputCap, 10))
	}
	return call
}

// authFail answers an authentication failure in the protocol's shape.
func (t *Text) authFail(w http.ResponseWriter, status int, message string) {
	t.p.fail(w, status, "invalid_api_key", message)
}

// textCall carries one request through the pipeline.
type textCall struct {
	// ctx is the request's context.
	ctx       context.Context
	requestID string
	body      []byte
	header    http.Header
	query     string
	req       textRequest
	// Admission is the route, the price and the reservation.
	admission.Admission
	conv *conversation
	// span is the request's server span (a no-op with tracing off);
	// attempt is the span of the upstream attempt that answered a stream,
	// ended when the stream is.
	span, attempt trace.Span
}

// prepare admits the request: the key's rights, the route, the limits, the
// price and the reservation (gateway/admission).
func (t *Text) prepare(ctx context.Context, p *auth.Principal, req textRequest, requestID string, bodyLen int) (*textCall, *admission.Error) {
	ad, refused := t.Admitter.Admit(ctx, admission.Request{
		Principal: p, RequestID: requestID, Model: req.Model,
		Family: v1.ModelTypeText, Endpoint: t.p.endpoint, CountsTokens: true,
		Subject:  textSubject{req: req, bodyLen: int64(bodyLen), batch: infoOf(ctx).batch != nil},
		Reserver: t.Leaser,
	})
	return &textCall{requestID: requestID, Admission: ad}, refused
}

// refuse writes an admission refusal in the protocol's shape.
func (t *Text) refuse(w http.ResponseWriter, model string, e *admission.Error) {
	status, msg, code := e.Status, e.Message, e.Code()
	switch {
	case e.Reason == admission.WrongFamily && e.ModelType == v1.ModelTypeEmbedding:
		// An embedding model is called on another endpoint of the same
		// API: the refusal says which (OpenAI answers a model of the wrong
		// kind with invalid_request_error too).
		code = ""
	case e.Reason == admission.WrongFamily: // a text endpoint knows only text models
		status, msg = http.StatusNotFound, fmt.Sprintf("model %q not found", model)
	case e.Reason == admission.InsufficientQuota:
		status = t.p.insufficientQuota
	case e.Reason == admission.RateLimited:
		apierr.RetryAfter(w, e.RetryAfter)
	}
	t.p.fail(w, status, code, msg)
}

// textSubject is a text request's part of admission.
type textSubject struct {
	req     textRequest
	bodyLen int64
	// batch: a line of a Batch, reserved at the batch price it is
	// settled at (a full-price reservation would refuse, or cut the
	// max_tokens of, a line the key can pay for).
	batch bool
}

// priced is rule as s is priced by it: a batch line's at the batch price.
func (s textSubject) priced(rule *pricing.Rule) *pricing.Rule {
	if s.batch {
		return rule.ForBatch()
	}
	return rule
}

// Check refuses max_tokens over the route's output cap.
func (s textSubject) Check(_ context.Context, route *v1.ModelRoute) (bool, *admission.Error) {
	if maxOut := int64(route.Spec.MaxOutputTokens); maxOut > 0 && s.req.MaxTokens > maxOut {
		return false, admission.Refuse(admission.Invalid,
			fmt.Sprintf("max_tokens: %d > %d, which is the maximum allowed number of output tokens for %s", s.req.MaxTokens, maxOut, s.req.Model))
	}
	return false, nil
}

// Facts: a text price depends on no request property.
func (textSubject) Facts() pricing.Facts { return pricing.Facts{} }

// Estimate reserves the input by the body's size and the output up to
// max_tokens (or the route's cap, or defaultOutputEstimate).
func (s textSubject) Estimate(rule *pricing.Rule, route *v1.ModelRoute, accepted time.Time) (billing.Quota, error) {
	return s.priced(rule).EstimateText(s.bodyLen, s.outputCap(route), accepted)
}

// outputCap is the output the estimate reserves for.
func (s textSubject) outputCap(route *v1.ModelRoute) int64 {
	if s.req.MaxTokens > 0 {
		return s.req.MaxTokens
	}
	if maxOut := int64(route.Spec.MaxOutputTokens); maxOut > 0 {
		return maxOut
	}
	return defaultOutputEstimate
}

// Fit lowers the output cap to what the money left pays for, the input
// estimate first: a request is refused only when the input and one output
// token do not fit (docs/billing.md, "Reservations").
func (s textSubject) Fit(rule *pricing.Rule, route *v1.ModelRoute, accepted time.Time) (store.Fit, func(billing.Quota) int64) {
	rule, outCap := s.priced(rule), s.outputCap(route)
	// The ledger calls fit inside its transaction; the cap it found for the
	// amount reserved is kept, so capFor needs no second search.
	var fitted int64
	var fittedQuota billing.Quota
	fit := func(available billing.Quota) (billing.Quota, bool) {
		n, q, err := rule.OutputTokensThatFit(s.bodyLen, outCap, accepted, available)
		fitted, fittedQuota = n, q
		return q, err == nil && n > 0
	}
	capFor := func(amount billing.Quota) int64 {
		if amount == fittedQuota {
			return fitted
		}
		n, _, _ := rule.OutputTokensThatFit(s.bodyLen, outCap, accepted, amount)
		return n
	}
	return fit, capFor
}

// asksNoOutput reports a messages body with max_tokens 0 (a cache warm-up),
// whose cap nothing can lower.
func asksNoOutput(proto upstream.Protocol, body []byte) bool {
	raw, ok := translate.FieldRaw(body, "max_tokens")
	return proto == upstream.Messages && ok && string(raw) == "0"
}

// chargeTokenLimits counts a request's tokens against the token limits.
func (t *Text) chargeTokenLimits(p *auth.Principal, tokens int64) {
	t.Limiter.ChargeTokens(ratelimit.Tenant(p.Tenant.Namespace), p.Tenant.Spec.TokensPerMinute, tokens)
	t.Limiter.ChargeTokens(ratelimit.Token(p.Token.Namespace, p.Token.Name), p.Token.Spec.TokensPerMinute, tokens)
}

// defaultOutputEstimate is the output reserved for a request without
// max_tokens on a route without a cap; settlement corrects it.
const defaultOutputEstimate = 4096

// serve delivers the upstream's answer.
func (t *Text) serve(w http.ResponseWriter, r *http.Request, p *auth.Principal, o opened) {
	c, res, cand := o.call, o.res, o.cand
	requestServed(c.span, *cand)
	infoOf(c.ctx).backend = cand.Backend.Name
	if res.Stream == nil {
		defer res.Close()
		t.answer(w, p, c, cand, res)
		return
	}
	rl := startRelay(w, res.Stream)
	t.pump(c.ctx, rl)
	t.endStream(p, c, cand, rl)
	res.Close()
}

// answer writes a whole (non-streamed) answer once its usage row is
// durable: a client never holds an answer the ledger could lose.
func (t *Text) answer(w http.ResponseWriter, p *auth.Principal, c *textCall, cand *routing.Candidate, res *upstream.Result) {
	if err := t.settle(p, c, cand, res.Usage, false); err != nil {
		t.usageNotRecorded(w, c, false, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(res.Body)
	t.saveConversation(context.WithoutCancel(c.ctx), p, c.req.Model, c.conv, res.Body)
}

// endStream settles a relayed stream and sends its terminal events once
// the usage row is durable; a failed settlement sends an error event
// instead of a finished answer.
func (t *Text) endStream(p *auth.Principal, c *textCall, cand *routing.Candidate, r *relay) {
	w, s := r.w, r.s
	if c.attempt != nil {
		c.attempt.End()
	}
	u := s.Usage()
	if !s.UsageReported() && u.PromptTokens() == 0 {
		// Never bill a prompt as zero tokens: the admission's estimate.
		u.InputTokens = pricing.EstimateInputTokens(int64(len(c.body)))
	}
	if err := t.settle(p, c, cand, u, !r.complete); err != nil {
		t.usageNotRecorded(w, c, true, err)
		return
	}
	_, _ = w.Write(r.tail) // sent when the handler returns
	if r.complete {
		t.saveConversation(context.WithoutCancel(c.ctx), p, c.req.Model, c.conv, r.capture.response)
	}
}

// invoke tries the plan's candidates in order until one answers. Only
// failures before any byte reached the client are retried.
func (t *Text) invoke(p *auth.Principal, c *textCall) (*upstream.Result, *routing.Candidate, error) {
	ctx := c.ctx
	deadline := t.Clock.Now().Add(retryBudget)
	var lastErr error
	for i := range c.Plan {
		cand := &c.Plan[i]
		if !t.mayAttempt(i, deadline) {
			break
		}
		prov, ok := t.Upstreams.Text(cand.Backend.Provider)
		if !ok {
			lastErr = &upstream.Error{Class: upstream.Failover, Status: http.StatusBadGateway, Retryable: true, Message: "unknown provider"}
			continue
		}
		backend, err := t.backend(ctx, *cand)
		if err != nil {
			lastErr = errCredentialUnavailable()
			continue
		}
		// A stream's upstream call outlives the client: if the client hangs
		// up, the rest of the stream is read (bounded, see drain) so the
		// upstream's usage report is billed. The backend timeout bounds it.
		uctx := ctx
		if c.req.Stream {
			uctx = context.WithoutCancel(ctx)
		}
		uctx, attempt := startAttempt(uctx, telemetry.OperationChat, *cand, backend.UpstreamModel, i+1)
		upstreamAttempts(cand.Backend.Name).Inc()
		res, err := upstream.Invoke(uctx, prov, backend, upstream.Request{
			Protocol: t.p.proto, Body: c.body, Stream: c.req.Stream, Header: c.header, Query: c.query, Model: c.req.Model,
		})
		if err == nil {
			t.Breaker.Success(cand.Key())
			if res.Stream != nil {
				c.attempt = attempt // the attempt lasts as long as its stream
			} else {
				attempt.End()
			}
			return res, cand, nil
		}
		lastErr = err
		if !t.attemptFailed(ctx, cand, attempt, err) {
			return nil, cand, err
		}
		log.FromContext(ctx).Info("upstream attempt failed; trying the next backend",
			"model", c.req.Model, "backend", cand.Backend.Name, "error", err.Error())
	}
	return nil, nil, lastErr
}

// backend resolves a candidate into the provider's view, credential
// included; the upstream model defaults to the route's model.
func (t *Text) backend(ctx context.Context, c routing.Candidate) (upstream.Backend, error) {
	b, err := credential.Resolve(ctx, t.Credentials, c.Route.Namespace, c.Backend)
	if b.UpstreamModel == "" {
		b.UpstreamModel = string(c.Route.Spec.Model)
	}
	return b, err
}

// pump copies stream events to the client. An event is flushed as soon as
// the next one is not already buffered from the upstream (before the stream
// waits), so a burst of events leaves in one write and a slow stream still
// sends each event at once. The events from the upstream's terminal event
// on (message_stop, [DONE], response.completed, with whatever a translation
// emits with them) are not written but kept as the relay's tail, in SSE
// framing: endStream sends them once the usage row is durable. The relay's
// complete is false when the stream did not finish (client gone or upstream
// cut).
func (t *Text) pump(ctx context.Context, r *relay) {
	s := r.s
	for {
		ev, err := s.Next()
		switch {
		case errors.Is(err, io.EOF):
			// A finished stream's last events stay unflushed: endStream
			// writes the terminal ones after them once the row is durable,
			// and the client gets both in one write.
			if r.complete = s.Complete(); !r.complete {
				r.flush()
			}
			return
		case err != nil:
			r.flush()
			streamEndedEarly(ctx, err)
			return
		case r.clientGone:
			drain(ctx, s) // the client left; the upstream goes on and reports usage
			return
		}
		if t.p.proto == upstream.Responses {
			r.capture.observe(ev)
		}
		if !r.write(ev) {
			drain(ctx, s)
			return
		}
	}
}

// relay is the client side of pump: the writer, its flushes and its
// buffer, and what pump leaves for settlement.
type relay struct {
	w          http.ResponseWriter
	rc         *http.ResponseController
	s          *upstream.Stream
	buf        []byte
	unflushed  bool
	clientGone bool
	// complete: the stream finished; every event before the terminal ones
	// (tail) is written, the last of them unflushed until tail follows.
	complete bool
	tail     []byte
	capture  streamCapture
}

// startRelay sends the stream's status and headers.
func startRelay(w http.ResponseWriter, s *upstream.Stream) *relay {
	h := w.Header()
	for _, kv := range streamHeaders {
		h[kv.name] = kv.value
	}
	w.WriteHeader(http.StatusOK)
	r := &relay{w: w, rc: http.NewResponseController(w), s: s}
	s.BeforeWait(r.flush)
	return r
}

// streamHeaders are a stream's response headers, assigned rather than Set:
// the names are canonical already, and each value slice (length and
// capacity 1, so an Add copies rather than writes into it; nothing writes
// a header value in place) serves every stream without an allocation.
var streamHeaders = [...]struct {
	name  string
	value []string
}{
	{"Content-Type", []string{"text/event-stream"}},
	{"Cache-Control", []string{"no-cache"}},
	{"Connection", []string{"keep-alive"}},
	{"X-Accel-Buffering", []string{"no"}},
}

// write writes one event unflushed, or keeps it in tail once the stream
// is at its terminal events; false means the client is gone.
func (r *relay) write(ev upstream.Event) bool {
	if r.s.Complete() {
		r.tail = ev.AppendSSE(r.tail)
		return true
	}
	r.buf = ev.AppendSSE(r.buf[:0])
	if _, err := r.w.Write(r.buf); err != nil {
		return false
	}
	r.unflushed = true
	return true
}

// flush sends what was written. A failed flush means the client left: the
// stream goes on (pump drains it for its usage), so it returns no error.
func (r *relay) flush() {
	if !r.unflushed {
		return
	}
	r.unflushed = false
	if r.rc.Flush() != nil {
		r.clientGone = true
	}
}

func streamEndedEarly(ctx context.Context, err error) {
	log.FromContext(ctx).Info("stream ended early", "error", err.Error())
}

// Bounds of reading an upstream stream after its client left.
const (
	drainTimeout = 2 * time.Minute
	drainBytes   = 8 << 20
)

// drain reads the rest of an upstream stream nobody will see, so that the
// stream translator sees the upstream's usage report (OpenAI-style
// upstreams report usage only in their last chunk): a client that hangs up
// is billed what the upstream did. It stops at the upstream's end, after
// drainTimeout or after drainBytes of event data.
func drain(ctx context.Context, s *upstream.Stream) {
	s.BeforeWait(nil) // nothing to flush to any more
	deadline := time.Now().Add(drainTimeout)
	read := 0
	for read < drainBytes && time.Now().Before(deadline) {
		ev, err := s.Next()
		if err != nil {
			return
		}
		read += len(ev.Data)
	}
	log.FromContext(ctx).Info("stopped reading an abandoned upstream stream", "bytes", read)
}

// settle charges the measured usage, submits the usage row and waits until
// the row is durable (in the ledger or fsynced to the usage spool). A stream
// cut after output began is charged for what was produced, without the
// minimum charge. The error is the wait's: the client left (the row is
// still written) or the row could not be stored.
func (t *Text) settle(p *auth.Principal, c *textCall, cand *routing.Candidate, u upstream.Usage, cut bool) (err error) {
	reqCtx := c.ctx
	ctx := context.WithoutCancel(reqCtx) // the client may be gone; the charge is not
	span := settlementSpan(ctx)
	var quota billing.Quota
	defer func() { endSettlement(span, c.span, u, int64(quota), cut, err) }()
	rule := c.Rule
	if cand.Group != "" && cand.Group != c.Plan[0].Group { // served by a fallback group: its price
		if r, err := t.Prices().Select(p.Tenant.Namespace, c.req.Model, cand.Group, pricing.Facts{}); err == nil {
			rule = r
		}
	}
	measured := pricing.Usage{
		Requests: 1, InputTextTokens: u.PromptTokens(), CachedTextTokens: deref(u.CacheReadTokens),
		CacheWriteTokens: deref(u.CacheWriteTokens), OutputTextTokens: u.OutputTokens, Failed: cut,
	}
	line := infoOf(reqCtx).batch
	if line != nil {
		rule = rule.ForBatch()
	}
	quota, err = rule.Charge(measured, c.Accepted)
	if err != nil {
		log.FromContext(ctx).Error(err, "price usage; charging the reservation", "requestID", c.requestID)
		quota = c.Estimate
	}
	t.chargeTokenLimits(p, u.TotalTokens())
	modelMetricsFor(c.req.Model).add(quota, u)
	tenantMetricsFor(p.Tenant.Namespace).add(quota, u)
	charge, err := t.Leaser.Settle(ctx, c.Hold, quota)
	if err != nil {
		log.FromContext(ctx).Error(err, "settle", "requestID", c.requestID)
	}
	row := store.UsageRow{
		// Dated at billing (the contract's created_at), not at acceptance: a
		// long stream settles in the window it ends in.
		RequestID: c.requestID, CreatedAt: t.Clock.Now().Unix(), UserID: p.UserID, TokenID: p.TokenID,
		TokenName: p.Token.Spec.DisplayName, ModelName: c.req.Model,
		PromptTokens: u.PromptTokens(), CompletionTokens: u.OutputTokens,
		CacheTokens: u.CacheReadTokens, CacheCreationTokens: u.CacheWriteTokens, ReportedTotalTokens: u.ReportedTotalTokens,
		BillingPhase: store.PhaseSettled, Quota: quota, Backend: cand.Backend.Name, Charge: charge,
	}
	ack, err := t.UsageLog.Submit(ctx, row)
	if err != nil {
		log.FromContext(ctx).Error(err, "queue usage row", "requestID", c.requestID)
		return err
	}
	if err := ack.Wait(reqCtx); err != nil {
		return err
	}
	if line != nil {
		line.billed, line.quota, line.tokens = true, quota, batchTokens(u)
	}
	return nil
}

// usageNotRecorded answers a request whose usage row is not durable in
// place of its answer (or of a stream's terminal events): 503 in the
// protocol's error shape, or an error event when the stream has begun.
// A client that left gets nothing.
func (t *Text) usageNotRecorded(w http.ResponseWriter, c *textCall, streaming bool, err error) {
	ctx := c.ctx
	if ctx.Err() != nil {
		return
	}
	log.FromContext(ctx).Error(err, "usage row not durable; answer withheld", "requestID", c.requestID)
	const msg = "the answer could not be recorded for billing; retry later"
	if !streaming {
		t.p.fail(w, http.StatusServiceUnavailable, "usage_not_recorded", msg)
		return
	}
	var ev upstream.Event
	if t.p.proto != upstream.ChatCompletions {
		ev.Name = "error"
	}
	ev.Data = translate.ErrorBody(t.p.proto, http.StatusServiceUnavailable, msg)
	_, _ = w.Write(ev.AppendSSE(nil))
}

func (t *Text) release(c *textCall) {
	ctx := c.ctx
	defer endRelease(settlementSpan(ctx))
	if err := t.Leaser.Release(context.WithoutCancel(ctx), c.Hold); err != nil {
		log.FromContext(ctx).Error(err, "release reservation", "requestID", c.requestID)
	}
}

// writeUpstreamError answers a failed call in the client's protocol.
func (t *Text) writeUpstreamError(w http.ResponseWriter, err error) {
	if ue, ok := upstream.As(err); ok {
		if ue.Retryable {
			if ue.RetryAfter > 0 {
				apierr.RetryAfter(w, ue.RetryAfter) // the last upstream's own wait
			}
			t.p.fail(w, http.StatusBadGateway, "upstream_unavailable", "every upstream for this model failed; retry later")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(ue.ClientStatus())
		_, _ = w.Write(ue.ClientBody(t.p.proto))
		return
	}
	t.p.fail(w, http.StatusBadGateway, "upstream_unavailable", "the upstream call failed")
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// readBody reads a text request's body, at most maxTextBody. When it
// cannot, it has answered in the protocol's shape (413 with tooLargeCode as
// the error code, or 400) and returns false.
func (t *Text) readBody(w http.ResponseWriter, r *http.Request, tooLargeCode string) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxTextBody))
	if err == nil {
		return body, true
	}
	if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
		t.p.fail(w, http.StatusRequestEntityTooLarge, tooLargeCode, "request body is larger than 32 MiB")
	} else {
		t.p.fail(w, http.StatusBadRequest, "", "could not read the request body")
	}
	return nil, false
}

// attemptFailed records a failed upstream attempt on cand: the attempt's
// span, the error metric by status, and for an error another backend may
// not have, the breaker and the upstream's Retry-After. It reports whether
// the next candidate may be tried: not once the client is gone or for an
// error that is the request's own.
func (t *Text) attemptFailed(ctx context.Context, cand *routing.Candidate, attempt trace.Span, err error) bool {
	attemptFailed(attempt, err)
	status, retryAfter := 0, time.Duration(0)
	if ue, ok := upstream.As(err); ok {
		status, retryAfter = ue.Status, ue.RetryAfter
	}
	metrics.UpstreamErrors.WithLabelValues(cand.Backend.Name, strconv.Itoa(status)).Inc()
	if ctx.Err() != nil || !upstream.IsRetryable(err) {
		return false
	}
	t.Breaker.Failure(cand.Key())
	t.Breaker.Hold(cand.Key(), retryAfter)
	return true
}

// mayAttempt reports whether candidate i of a plan may still be tried: at
// most maxAttempts, and after the first only within the retry budget that
// ends at deadline.
func (t *Text) mayAttempt(i int, deadline time.Time) bool {
	return i < maxAttempts && (i == 0 || !t.Clock.Now().After(deadline))
}

// errCredentialUnavailable is a candidate whose Secret could not be read:
// another backend may serve.
func errCredentialUnavailable() error {
	return &upstream.Error{Class: upstream.Failover, Status: http.StatusBadGateway, Retryable: true, Message: "upstream credential unavailable"}
}
