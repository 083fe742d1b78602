// Package admission decides whether the gateway takes a billable request,
// the same way for text and media: the key's model allow-list, the route and
// its family and endpoint types, the request's own checks, a backend for the
// key's group, the request and token limits of the key and of its tenant,
// the price, the estimate and the reservation. An unbilled request (a token
// count) stops after the limits. A refusal is an *Error with a
// Reason; each protocol family renders it in its own error shape.
package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/platform/metrics"
	"github.com/modelgate/modelgate/gateway/pricing"
	"github.com/modelgate/modelgate/gateway/routing"
	"github.com/modelgate/modelgate/gateway/store"
)

// Routes resolves a model to its route and the route to the backends a
// key's groups may use (the gateway's *routing.Router).
type Routes interface {
	Route(ctx context.Context, tenantNamespace, model string) (*v1.ModelRoute, error)
	Plan(route *v1.ModelRoute, groups []string) []routing.Candidate
}

// Prices selects the price rule of a model for a group.
type Prices func(namespace, model, group string, f pricing.Facts) (*pricing.Rule, error)

// Reserver reserves a request's estimate. The hold is nil for a
// reservation the ledger keeps itself (Direct).
type Reserver interface {
	Reserve(ctx context.Context, requestID string, tokenID, userID int64, estimate billing.Quota) (*store.Hold, error)
}

// Subject is what differs between the families: the request's own checks
// against its route, the facts its price depends on and its estimate.
type Subject interface {
	// Check validates the request against the route it resolved to. done
	// reports that the subject has its answer without being admitted (a
	// replayed submission): nothing is limited, priced or reserved.
	Check(ctx context.Context, route *v1.ModelRoute) (done bool, err *Error)
	// Facts are the request's properties that select a price rule.
	Facts() pricing.Facts
	// Estimate is the quota to reserve under rule.
	Estimate(rule *pricing.Rule, route *v1.ModelRoute, accepted time.Time) (billing.Quota, error)
}

// Fitter is a Subject whose request can be made smaller to fit the money
// left (a text request's output cap). Fit returns the ledger's fit for the
// request under rule and, for an amount it chose below the estimate, the
// output cap that amount pays for.
type Fitter interface {
	Fit(rule *pricing.Rule, route *v1.ModelRoute, accepted time.Time) (fit store.Fit, capFor func(billing.Quota) int64)
}

// UpToReserver is a Reserver that can reserve less than the estimate when
// fit allows it (*store.Leaser).
type UpToReserver interface {
	ReserveUpTo(ctx context.Context, requestID string, tokenID, userID int64, estimate billing.Quota, fit store.Fit) (*store.Hold, error)
}

// Request is one request to admit.
type Request struct {
	Principal *auth.Principal
	RequestID string
	Model     string
	// Family is the model type the endpoint serves.
	Family v1.ModelType
	// Endpoint is the text endpoint type, checked against the route's
	// endpoint types; empty for the media families.
	Endpoint v1.EndpointType
	// CountsTokens applies the token-per-minute limits as well (text: the
	// tokens are counted at settlement; a task has no token count at
	// admission).
	CountsTokens bool
	// Unbilled admits a request the gateway never bills (a token count):
	// every step up to the request limits, which it consumes as any other
	// request does, and neither price, estimate nor reservation. Subject
	// may be nil then (no checks of its own), and Reserver is not used.
	Unbilled bool
	// NoRateLimits admits past the per-minute limits: a line of an
	// upstream batch job, which the upstream queues as its public batch
	// APIs do, outside the real-time traffic the limits pace.
	NoRateLimits bool
	Subject      Subject
	Reserver     Reserver
}

// Admission is an admitted request.
type Admission struct {
	// Route is set once the request passed the route's checks (also on a
	// later refusal).
	Route *v1.ModelRoute
	Plan  []routing.Candidate
	Rule  *pricing.Rule
	// Accepted is when the request was accepted: the price's time.
	Accepted time.Time
	Estimate billing.Quota
	// Hold is the lease hold of a leased reservation (nil: direct).
	Hold *store.Hold
	// OutputCap is the output cap the reservation was lowered to because
	// the balances did not cover the request's own; 0 when not lowered.
	OutputCap int64
	// Done is set when the subject answered the request itself (Check).
	Done bool
}

// Admitter runs admission.
type Admitter struct {
	Routes Routes
	Limits Limits
	Prices Prices
	Clock  clock.PassiveClock
}

// Admit runs every step in order and stops at the first refusal.
func (a *Admitter) Admit(ctx context.Context, req Request) (Admission, *Error) {
	var ad Admission
	p := req.Principal
	if !p.AllowsModel(req.Model) {
		return ad, Refuse(ModelNotAllowed, fmt.Sprintf("this API key may not use model %q", req.Model))
	}
	route, err := a.Routes.Route(ctx, p.Tenant.Namespace, req.Model)
	if err != nil {
		return ad, Refuse(Internal, "could not look up the model")
	}
	if route == nil {
		return ad, Refuse(ModelNotFound, fmt.Sprintf("model %q not found", req.Model))
	}
	if route.Spec.Type != req.Family {
		e := Refuse(WrongFamily, fmt.Sprintf("model %q is %s %s model; use %s", req.Model, article(route.Spec.Type), route.Spec.Type, endpointsOf(route.Spec.Type)))
		e.ModelType = route.Spec.Type
		return ad, e
	}
	if eps := route.Spec.EndpointTypes; req.Endpoint != "" && len(eps) > 0 && !slices.Contains(eps, req.Endpoint) {
		return ad, Refuse(UnsupportedEndpoint, fmt.Sprintf("model %q is not served on this endpoint (%s)", req.Model, req.Endpoint))
	}
	if req.Subject != nil {
		if done, e := req.Subject.Check(ctx, route); e != nil || done {
			ad.Done = done
			return ad, e
		}
	}
	ad.Route, ad.Plan = route, a.Routes.Plan(route, p.Groups())
	if len(ad.Plan) == 0 {
		return ad, Refuse(NoBackend, fmt.Sprintf("no upstream serves model %q for this key's group", req.Model))
	}
	if !req.NoRateLimits {
		if wait, what := exceeded(a.Limits, p, req.CountsTokens); wait > 0 {
			metrics.ReservationsRefused.WithLabelValues("rate_limit").Inc()
			e := Refuse(RateLimited, what+" rate limit exceeded; retry after the time in the Retry-After header")
			e.RetryAfter = wait
			return ad, e
		}
	}

	ad.Accepted = a.Clock.Now()
	if req.Unbilled {
		return ad, nil
	}
	ad.Rule, err = a.Prices(p.Tenant.Namespace, req.Model, ad.Plan[0].Group, req.Subject.Facts())
	switch {
	case errors.Is(err, pricing.ErrNoPrice):
		return ad, Refuse(ModelNotFound, fmt.Sprintf("model %q has no published price for this key's group", req.Model))
	case err != nil:
		return ad, Refuse(PricingUnavailable, "the price of this model cannot be loaded safely; retry later")
	}
	if ad.Estimate, err = req.Subject.Estimate(ad.Rule, route, ad.Accepted); err != nil {
		log.FromContext(ctx).Error(err, "estimate request", "model", req.Model)
		return ad, Refuse(Unpriceable, "could not price the request")
	}
	fitter, canFit := req.Subject.(Fitter)
	upTo, canReserveUpTo := req.Reserver.(UpToReserver)
	if canFit && canReserveUpTo {
		fit, capFor := fitter.Fit(ad.Rule, route, ad.Accepted)
		ad.Hold, err = upTo.ReserveUpTo(ctx, req.RequestID, p.TokenID, p.UserID, ad.Estimate, fit)
		if err == nil && ad.Hold != nil && ad.Hold.Amount() < ad.Estimate {
			ad.Estimate = ad.Hold.Amount()
			ad.OutputCap = capFor(ad.Estimate)
		}
	} else {
		ad.Hold, err = req.Reserver.Reserve(ctx, req.RequestID, p.TokenID, p.UserID, ad.Estimate)
	}
	switch {
	case errors.Is(err, store.ErrInsufficientQuota):
		metrics.ReservationsRefused.WithLabelValues("quota").Inc()
		return ad, Refuse(InsufficientQuota,
			"insufficient quota: the key's or the account's balance (or its daily or monthly limit) does not cover this request")
	case err != nil:
		log.FromContext(ctx).Error(err, "reserve quota", "requestID", req.RequestID)
		return ad, Refuse(Unavailable, "could not reserve quota; retry later")
	}
	return ad, nil
}

// Direct reserves straight from the ledger, for reservations that outlive
// this replica (a generation task is settled by the controller).
type Direct struct {
	Ledger interface {
		Reserve(ctx context.Context, requestID string, tokenID, userID int64, estimate billing.Quota) error
	}
}

// Reserve implements Reserver.
func (d Direct) Reserve(ctx context.Context, requestID string, tokenID, userID int64, estimate billing.Quota) (*store.Hold, error) {
	return nil, d.Ledger.Reserve(ctx, requestID, tokenID, userID, estimate)
}

// endpointsOf names the endpoints that serve models of type t.
func endpointsOf(t v1.ModelType) string {
	switch t {
	case v1.ModelTypeText:
		return "/v1/chat/completions, /v1/messages or /v1/responses"
	case v1.ModelTypeImage:
		return "/v1/images/generations"
	case v1.ModelTypeVideo:
		return "/v1/videos/generations"
	case v1.ModelTypeEmbedding:
		return "/v1/embeddings"
	}
	return fmt.Sprintf("an endpoint for %s models", t)
}

// article is the indefinite article before a model type's name.
func article(t v1.ModelType) string {
	if t != "" && strings.ContainsRune("aeiou", rune(t[0])) {
		return "an"
	}
	return "a"
}
