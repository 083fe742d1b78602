package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/admission"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/platform/telemetry"
	"github.com/modelgate/modelgate/gateway/routing"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// countTokensPath is Anthropic's token counting endpoint.
const countTokensPath = "/v1/messages/count_tokens"

// countTokensEndpoint labels the endpoint's metrics.
const countTokensEndpoint = "count_tokens"

// CountTokens serves POST /v1/messages/count_tokens: a Messages request
// without max_tokens, answered with the upstream's count of its input
// tokens. It is admitted like a messages request (the key's models, the
// route, the messages endpoint type, a backend for the key's group, the
// request limits, which it consumes) but never billed: nothing is
// reserved, no usage row is written. The count is the upstream's own
// (upstream.TokenCounter); when no upstream of the route can count, the
// answer says so rather than guess (docs/api-choices.md, "Token counts").
type CountTokens struct {
	// t is the messages endpoint, whose error shape, refusals and backend
	// resolution a count shares.
	t *Text
}

// newCountTokens runs the count on the messages pipeline with only what a
// count uses.
func newCountTokens(d *CountTokensDeps) *CountTokens {
	return &CountTokens{&Text{&TextDeps{Clock: d.Clock, Admitter: d.Admitter, Breaker: d.Breaker,
		Upstreams: d.Upstreams, Credentials: d.Credentials}, messagesProtocol()}}
}

func (c *CountTokens) authFail(w http.ResponseWriter, status int, message string) {
	c.t.authFail(w, status, message)
}

// serveHTTP counts the tokens of an authenticated request.
func (c *CountTokens) serveHTTP(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	t := c.t
	ctx := r.Context()
	info := infoOf(ctx)
	body, ok := t.readBody(w, r, "")
	if !ok {
		return
	}
	// Only the model is the gateway's business; the rest (messages, system,
	// tools, thinking, ...) is the upstream's to judge.
	f, msg := decodeObject(body)
	var model string
	if msg == "" {
		model, msg = f.str("model", true)
	}
	if msg != "" {
		t.p.fail(w, http.StatusBadRequest, "", msg)
		return
	}
	requestParsed(info.span, p, model, 0, false)
	ad, refused := t.Admitter.Admit(ctx, admission.Request{
		Principal: p, RequestID: info.id, Model: model,
		Family: v1.ModelTypeText, Endpoint: v1.EndpointMessages, Unbilled: true,
	})
	if ad.Route != nil {
		info.model = model
		requestRouted(info.span, telemetry.OperationCountTokens, model)
	}
	if refused != nil {
		t.refuse(w, model, refused)
		return
	}
	n, cand, err := c.count(ctx, ad.Plan, body, r.Header, r.URL.RawQuery)
	if cand != nil {
		requestServed(info.span, *cand)
		info.backend = cand.Backend.Name
	}
	switch {
	case errors.Is(err, errCannotCount):
		t.p.fail(w, http.StatusBadRequest, "", fmt.Sprintf(
			"token counting is not available for model %q: its upstreams cannot count tokens; count locally", model))
	case err != nil:
		t.writeUpstreamError(w, err)
	default:
		writeJSON(w, http.StatusOK, struct {
			InputTokens int64 `json:"input_tokens"`
		}{n})
	}
}

// errCannotCount: no candidate's provider counts tokens.
var errCannotCount = errors.New("no upstream of the route counts tokens")

// count walks the plan as Text.invoke does: the first candidate whose
// provider counts answers; a retryable failure (network, 429, 5xx) moves
// on to the next, any other failure is the answer. Candidates whose
// provider cannot count are passed over, and none that can is
// errCannotCount.
func (c *CountTokens) count(ctx context.Context, plan []routing.Candidate, body []byte, h http.Header, query string) (int64, *routing.Candidate, error) {
	t := c.t
	deadline := t.Clock.Now().Add(retryBudget)
	var lastErr error
	attempts := 0
	for i := range plan {
		cand := &plan[i]
		prov, ok := t.Upstreams.Text(cand.Backend.Provider)
		counter, counts := prov.(upstream.TokenCounter)
		if !ok || !counts {
			continue
		}
		if !t.mayAttempt(attempts, deadline) {
			break
		}
		attempts++
		backend, err := t.backend(ctx, *cand)
		if err != nil {
			lastErr = errCredentialUnavailable()
			continue
		}
		actx, attempt := startAttempt(ctx, telemetry.OperationCountTokens, *cand, backend.UpstreamModel, attempts)
		upstreamAttempts(cand.Backend.Name).Inc()
		n, err := upstream.CountTokens(actx, counter, backend, body, h, query)
		if err == nil {
			attempt.End()
			t.Breaker.Success(cand.Key())
			return n, cand, nil
		}
		lastErr = err
		if !t.attemptFailed(ctx, cand, attempt, err) {
			return 0, cand, err
		}
		log.FromContext(ctx).Info("token count attempt failed; trying the next backend",
			"backend", cand.Backend.Name, "error", err.Error())
	}
	if attempts == 0 {
		return 0, nil, errCannotCount
	}
	return 0, nil, lastErr
}
