package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/admission"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/pricing"
	"github.com/modelgate/modelgate/gateway/routing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/translate"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// A batch line for an upstream batch job is admitted here as a lone
// request is (PrepareUpstream: rights, route, limits, the batch price and
// its estimate, but no reservation: the Batch controller reserves a job's
// lines at once, durably), and its answer, read from the job, becomes what
// the endpoint would have returned with the usage row a lone request
// writes (AnswerUpstream) (docs/batches.md, "Upstream execution").

// BatchTarget is a backend whose batch API runs a line: the route of
// Model, its backend Backend, priced as group Group.
type BatchTarget struct {
	Model, Backend, Group string
}

// UpstreamLine is a line admitted for an upstream batch job.
type UpstreamLine struct {
	Target   BatchTarget
	Estimate billing.Quota
	// Body is the request in the protocol of the target's batch API.
	Body []byte
}

// ErrNoUpstreamBatch is PrepareUpstream's answer for a line whose backend
// has no batch API (or whose endpoint is not a text endpoint): it runs
// through Serve.
var ErrNoUpstreamBatch = errors.New("the line's backend has no batch API")

// unreserved admits without reserving: a job's lines are reserved together.
type unreserved struct{}

func (unreserved) Reserve(context.Context, string, int64, int64, billing.Quota) (*store.Hold, error) {
	return nil, nil
}

// TargetFor is the backend whose batch API serves model for p: the first
// of its plan, ok false when that backend has none.
func (b *BatchLines) TargetFor(ctx context.Context, endpoint string, p *auth.Principal, model string) (BatchTarget, bool, error) {
	t, ok := b.texts[endpoint]
	if !ok {
		return BatchTarget{}, false, nil
	}
	route, err := t.Admitter.Routes.Route(ctx, p.Tenant.Namespace, model)
	if err != nil || route == nil {
		return BatchTarget{}, false, err
	}
	plan := t.Admitter.Routes.Plan(route, p.Groups())
	if len(plan) == 0 {
		return BatchTarget{}, false, nil
	}
	// A backend that cannot batch now (no batch API, its credential
	// unreadable) runs the batch through the gateway, whose lines fail
	// over as any request does.
	target, _, _, err := t.batchTarget(ctx, model, plan[0])
	return target, err == nil, nil
}

// batchTarget resolves a candidate into its batch API: the provider, the
// backend (credential included) and the protocol its jobs take.
func (t *Text) batchTarget(ctx context.Context, model string, cand routing.Candidate) (BatchTarget, upstream.BatchProvider, upstream.Backend, error) {
	target := BatchTarget{Model: model, Backend: cand.Backend.Name, Group: cand.Group}
	prov, ok := t.Upstreams.Text(cand.Backend.Provider)
	if !ok {
		return target, nil, upstream.Backend{}, ErrNoUpstreamBatch
	}
	bp, ok := prov.(upstream.BatchProvider)
	if !ok {
		return target, nil, upstream.Backend{}, ErrNoUpstreamBatch
	}
	backend, err := t.backend(ctx, cand)
	if err != nil {
		return target, nil, upstream.Backend{}, fmt.Errorf("backend %s: %w", cand.Backend.Name, err)
	}
	if _, ok := bp.BatchProtocol(backend, t.p.proto); !ok {
		return target, nil, upstream.Backend{}, ErrNoUpstreamBatch
	}
	return target, bp, backend, nil
}

// PrepareUpstream admits one line for an upstream job: its target (the
// first backend of its plan), its estimate at the batch price and its body
// for the target's batch API. refused is the line's answer when admission
// refused it.
func (b *BatchLines) PrepareUpstream(ctx context.Context, endpoint string, p *auth.Principal, requestID string, body []byte) (UpstreamLine, *LineResult, error) {
	t, ok := b.texts[endpoint]
	if !ok {
		return UpstreamLine{}, nil, ErrNoUpstreamBatch
	}
	rec := &lineRecorder{header: http.Header{}}
	req, msg := t.p.parse(body)
	switch {
	case msg != "":
		t.p.fail(rec, http.StatusBadRequest, "", msg)
		return UpstreamLine{}, rec.answer(), nil
	case req.Stream:
		t.p.fail(rec, http.StatusBadRequest, "", "stream is not supported in a batch: a batch line is answered with a whole body")
		return UpstreamLine{}, rec.answer(), nil
	}
	if t.p.proto == upstream.Responses && continuesConversation(body) {
		// The conversation it continues is the gateway's: the line runs there.
		return UpstreamLine{}, nil, ErrNoUpstreamBatch
	}
	ad, refused := t.Admitter.Admit(ctx, admission.Request{
		Principal: p, RequestID: requestID, Model: req.Model,
		Family: v1.ModelTypeText, Endpoint: t.p.endpoint, NoRateLimits: true,
		Subject:  textSubject{req: req, bodyLen: int64(len(body)), batch: true},
		Reserver: unreserved{},
	})
	if refused != nil {
		t.refuse(rec, req.Model, refused)
		return UpstreamLine{}, rec.answer(), nil
	}
	target, bp, backend, err := t.batchTarget(ctx, req.Model, ad.Plan[0])
	if err != nil {
		return UpstreamLine{}, nil, err
	}
	up, _ := bp.BatchProtocol(backend, t.p.proto)
	upBody, err := upstream.BatchBody(t.p.proto, up, body, backend.UpstreamModel)
	if err != nil {
		t.p.fail(rec, http.StatusBadRequest, "", "the request cannot be sent to this model's upstream: "+err.Error())
		return UpstreamLine{}, rec.answer(), nil
	}
	return UpstreamLine{Target: target, Estimate: ad.Estimate, Body: upBody}, nil, nil
}

// UpstreamBatch is the batch API of target as p's route has it: the
// provider, the backend with its credential, and the protocol of its
// lines.
func (b *BatchLines) UpstreamBatch(ctx context.Context, endpoint string, p *auth.Principal, target BatchTarget) (upstream.BatchProvider, upstream.Backend, upstream.Protocol, error) {
	t, ok := b.texts[endpoint]
	if !ok {
		return nil, upstream.Backend{}, "", ErrNoUpstreamBatch
	}
	cand, err := t.targetCandidate(ctx, p, target)
	if err != nil {
		return nil, upstream.Backend{}, "", err
	}
	_, bp, backend, err := t.batchTarget(ctx, target.Model, cand)
	if err != nil {
		return nil, upstream.Backend{}, "", err
	}
	up, _ := bp.BatchProtocol(backend, t.p.proto)
	return bp, backend, up, nil
}

// targetCandidate finds target's backend on its route (whatever the
// breaker thinks of it now: the job was submitted there).
func (t *Text) targetCandidate(ctx context.Context, p *auth.Principal, target BatchTarget) (routing.Candidate, error) {
	route, err := t.Admitter.Routes.Route(ctx, p.Tenant.Namespace, target.Model)
	if err != nil {
		return routing.Candidate{}, err
	}
	if route == nil {
		return routing.Candidate{}, fmt.Errorf("model %q has no route any more", target.Model)
	}
	for i := range route.Spec.Backends {
		if be := &route.Spec.Backends[i]; be.Name == target.Backend {
			return routing.Candidate{Route: route, Backend: be, Group: target.Group}, nil
		}
	}
	return routing.Candidate{}, fmt.Errorf("model %q has no backend %q any more", target.Model, target.Backend)
}

// AnswerUpstream is a line's answer from an upstream job (ans, in protocol
// up) as the endpoint would have returned it: a 2xx answer in the client's
// protocol and model with its usage row priced at the batch price of
// accepted; an error in the endpoint's error shape, without a row.
func (b *BatchLines) AnswerUpstream(ctx context.Context, endpoint string, p *auth.Principal, target BatchTarget, up upstream.Protocol,
	requestID string, body []byte, accepted time.Time, ans upstream.BatchAnswer) (LineResult, *store.UsageRow, error) {
	t, ok := b.texts[endpoint]
	if !ok {
		return LineResult{}, nil, ErrNoUpstreamBatch
	}
	if ans.Status < 200 || ans.Status > 299 {
		e := &upstream.Error{Protocol: up, Status: ans.Status, Body: ans.Body, Message: upstream.ErrorMessage(ans.Body)}
		if e.Message == "" {
			e.Message = http.StatusText(ans.Status)
		}
		return LineResult{Status: e.ClientStatus(), Body: e.ClientBody(t.p.proto)}, nil, nil
	}
	req, msg := t.p.parse(body)
	if msg != "" {
		return LineResult{}, nil, fmt.Errorf("the line's body: %s", msg)
	}
	res, err := upstream.BatchAnswerResult(t.p.proto, up, body, ans.Body, req.Model)
	if err != nil {
		return LineResult{}, nil, err
	}
	rule, err := t.Prices().Select(p.Tenant.Namespace, req.Model, target.Group, pricing.Facts{})
	if err != nil {
		return LineResult{}, nil, fmt.Errorf("price of %s: %w", req.Model, err)
	}
	u := res.Usage
	quota, err := rule.ForBatch().Charge(pricing.Usage{
		Requests: 1, InputTextTokens: u.PromptTokens(), CachedTextTokens: deref(u.CacheReadTokens),
		CacheWriteTokens: deref(u.CacheWriteTokens), OutputTextTokens: u.OutputTokens,
	}, accepted)
	if err != nil {
		return LineResult{}, nil, fmt.Errorf("price the answer: %w", err)
	}
	modelMetricsFor(req.Model).add(quota, u)
	tenantMetricsFor(p.Tenant.Namespace).add(quota, u)
	row := &store.UsageRow{
		RequestID: requestID, CreatedAt: t.Clock.Now().Unix(), UserID: p.UserID, TokenID: p.TokenID,
		TokenName: p.Token.Spec.DisplayName, ModelName: req.Model,
		PromptTokens: u.PromptTokens(), CompletionTokens: u.OutputTokens,
		CacheTokens: u.CacheReadTokens, CacheCreationTokens: u.CacheWriteTokens, ReportedTotalTokens: u.ReportedTotalTokens,
		// Charged by the job's reservation when it settles (Charge zero).
		BillingPhase: store.PhaseSettled, Quota: quota, Backend: target.Backend,
	}
	return LineResult{Status: http.StatusOK, Body: res.Body, Billed: true, Quota: quota, Tokens: batchTokens(u)}, row, nil
}

// batchTokens are u's counts as a batch's usage adds them up.
func batchTokens(u upstream.Usage) v1.BatchTokens {
	return v1.BatchTokens{InputTokens: u.PromptTokens(), CachedTokens: deref(u.CacheReadTokens),
		OutputTokens: u.OutputTokens, ReasoningTokens: u.ReasoningTokens}
}

// continuesConversation reports a responses body that names a previous
// response or a conversation, which only the gateway holds.
func continuesConversation(body []byte) bool {
	for _, f := range []string{"previous_response_id", "conversation"} {
		if raw, ok := translate.FieldRaw(body, f); ok && string(raw) != "null" {
			return true
		}
	}
	return false
}

// answer is a refusal written to the recorder.
func (w *lineRecorder) answer() *LineResult {
	res := w.result(nil)
	return &res
}
