package admission

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/pricing"
	"github.com/modelgate/modelgate/gateway/ratelimit"
	"github.com/modelgate/modelgate/gateway/routing"
	"github.com/modelgate/modelgate/gateway/store"
)

// fakeRoutes serves one route per model.
type fakeRoutes struct {
	routes map[string]*v1.ModelRoute
	err    error
	empty  bool // no backend for any group
}

func (f *fakeRoutes) Route(_ context.Context, _, model string) (*v1.ModelRoute, error) {
	return f.routes[model], f.err
}

func (f *fakeRoutes) Plan(route *v1.ModelRoute, groups []string) []routing.Candidate {
	if f.empty {
		return nil
	}
	return []routing.Candidate{{Route: route, Backend: &route.Spec.Backends[0], Group: groups[0]}}
}

// fakeLimits refuses the keys it lists, the request and the token limits
// separately.
type fakeLimits struct {
	requests, tokens map[ratelimit.Key]time.Duration
}

func (f fakeLimits) Allow(key ratelimit.Key, _ int32) (bool, time.Duration) {
	wait, refused := f.requests[key]
	return !refused, wait
}

func (f fakeLimits) TokensAvailable(key ratelimit.Key, _ int64) (bool, time.Duration) {
	wait, refused := f.tokens[key]
	return !refused, wait
}

// fakeSubject records what admission asked of it.
type fakeSubject struct {
	check    *Error
	done     bool
	estimate billing.Quota
	estErr   error
	checked  bool
}

func (s *fakeSubject) Check(context.Context, *v1.ModelRoute) (bool, *Error) {
	s.checked = true
	return s.done, s.check
}
func (s *fakeSubject) Facts() pricing.Facts { return pricing.Facts{Resolution: "1080p"} }
func (s *fakeSubject) Estimate(*pricing.Rule, *v1.ModelRoute, time.Time) (billing.Quota, error) {
	return s.estimate, s.estErr
}

// fakeReserver records reservations.
type fakeReserver struct {
	err      error
	reserved []billing.Quota
}

func (r *fakeReserver) Reserve(_ context.Context, _ string, _, _ int64, q billing.Quota) (*store.Hold, error) {
	if r.err != nil {
		return nil, r.err
	}
	r.reserved = append(r.reserved, q)
	return &store.Hold{}, nil
}

// fixture is one admission with every dependency working; a case breaks
// one of them.
type fixture struct {
	routes   *fakeRoutes
	limits   fakeLimits
	priceErr error
	priced   []string // group of each price lookup
	subject  *fakeSubject
	reserver *fakeReserver
	req      Request
}

func newFixture() *fixture {
	route := func(model string, typ v1.ModelType, eps ...v1.EndpointType) *v1.ModelRoute {
		return &v1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: "modelgate-system"},
			Spec: v1.ModelRouteSpec{Model: v1.ModelID(model), Type: typ, EndpointTypes: eps,
				Backends: []v1.Backend{{Name: "b", Provider: "simulated"}}}}
	}
	f := &fixture{
		routes: &fakeRoutes{routes: map[string]*v1.ModelRoute{
			"chat":     route("chat", v1.ModelTypeText),
			"chat-msg": route("chat-msg", v1.ModelTypeText, v1.EndpointType("messages")),
			"img":      route("img", v1.ModelTypeImage),
		}},
		limits:   fakeLimits{requests: map[ratelimit.Key]time.Duration{}, tokens: map[ratelimit.Key]time.Duration{}},
		subject:  &fakeSubject{estimate: 700},
		reserver: &fakeReserver{},
	}
	p := &auth.Principal{
		Tenant:  &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "acme", Namespace: "tenant-acme"}},
		Token:   &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{Name: "k", Namespace: "tenant-acme"}, Spec: v1.ApiTokenSpec{Group: "gold", RequestsPerMinute: 10}},
		TokenID: 7, UserID: 3,
	}
	f.req = Request{Principal: p, RequestID: "req-1", Model: "chat", Family: v1.ModelTypeText,
		Endpoint: v1.EndpointType("chat"), CountsTokens: true, Subject: f.subject, Reserver: f.reserver}
	return f
}

func (f *fixture) admit() (Admission, *Error) {
	a := &Admitter{Routes: f.routes, Limits: f.limits, Clock: clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0)),
		Prices: func(_, _, group string, facts pricing.Facts) (*pricing.Rule, error) {
			f.priced = append(f.priced, group+"/"+facts.Resolution)
			return &pricing.Rule{}, f.priceErr
		}}
	return a.Admit(context.Background(), f.req)
}

var (
	tenantKey = ratelimit.Tenant("tenant-acme")
	tokenKey  = ratelimit.Token("tenant-acme", "k")
)

func TestAdmitRefusals(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(f *fixture)
		want   Reason
		status int
		// checked: the subject's own check ran; the reservation never does
		// on a refusal.
		checked bool
	}{
		{"model outside the key's allow-list", func(f *fixture) {
			f.req.Principal.Token.Spec.ModelLimitsEnabled = true
			f.req.Principal.Token.Spec.ModelLimits = []v1.ModelID{"other"}
		}, ModelNotAllowed, 403, false},
		{"unknown model", func(f *fixture) { f.req.Model = "nope" }, ModelNotFound, 404, false},
		{"route lookup fails", func(f *fixture) { f.routes.err = errors.New("cache down") }, Internal, 500, false},
		{"a media model on a text endpoint", func(f *fixture) { f.req.Model = "img" }, WrongFamily, 400, false},
		{"endpoint the route does not serve", func(f *fixture) { f.req.Model = "chat-msg" }, UnsupportedEndpoint, 400, false},
		{"the subject's own check", func(f *fixture) { f.subject.check = Refuse(Invalid, "max_tokens too large") }, Invalid, 400, true},
		{"no backend for the key's group", func(f *fixture) { f.routes.empty = true }, NoBackend, 503, true},
		{"the key's request limit", func(f *fixture) { f.limits.requests[tokenKey] = 2 * time.Second }, RateLimited, 429, true},
		{"the tenant's request limit", func(f *fixture) { f.limits.requests[tenantKey] = time.Second }, RateLimited, 429, true},
		{"the tenant's token limit", func(f *fixture) { f.limits.tokens[tenantKey] = time.Second }, RateLimited, 429, true},
		{"the key's token limit", func(f *fixture) { f.limits.tokens[tokenKey] = time.Second }, RateLimited, 429, true},
		{"no published price", func(f *fixture) { f.priceErr = pricing.ErrNoPrice }, ModelNotFound, 404, true},
		{"prices unavailable", func(f *fixture) { f.priceErr = errors.New("stale table") }, PricingUnavailable, 503, true},
		{"no estimate", func(f *fixture) { f.subject.estErr = errors.New("no token budget") }, Unpriceable, 500, true},
		{"balance too small", func(f *fixture) { f.reserver.err = store.ErrInsufficientQuota }, InsufficientQuota, 402, true},
		{"ledger down", func(f *fixture) { f.reserver.err = errors.New("connection refused") }, Unavailable, 503, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture()
			c.break_(f)
			_, e := f.admit()
			if e == nil {
				t.Fatalf("admitted; want refusal %s", c.want)
			}
			if e.Reason != c.want || e.Status != c.status || e.Message == "" {
				t.Fatalf("refusal = %+v; want %s with status %d and a message", e, c.want, c.status)
			}
			if f.subject.checked != c.checked {
				t.Errorf("subject checked = %v; want %v", f.subject.checked, c.checked)
			}
			if len(f.reserver.reserved) != 0 {
				t.Errorf("reserved %v on a refusal", f.reserver.reserved)
			}
		})
	}
}

func TestAdmitRateLimitSaysWhichAndHowLong(t *testing.T) {
	f := newFixture()
	f.limits.requests[tokenKey] = 1500 * time.Millisecond
	_, e := f.admit()
	if e == nil || e.RetryAfter != 1500*time.Millisecond || e.Message[:len("the key's requests-per-minute")] != "the key's requests-per-minute" {
		t.Fatalf("refusal = %+v; want the key's request limit with its wait", e)
	}
}

// A task has no token count at admission: media requests ignore the token
// limits but keep the request limits of the key and the tenant.
func TestAdmitWithoutTokensIgnoresTokenLimits(t *testing.T) {
	f := newFixture()
	f.req.Model, f.req.Family, f.req.Endpoint, f.req.CountsTokens = "img", v1.ModelTypeImage, "", false
	f.limits.tokens[tenantKey], f.limits.tokens[tokenKey] = time.Second, time.Second
	if _, e := f.admit(); e != nil {
		t.Fatalf("refused by a token limit: %+v", e)
	}
	f = newFixture()
	f.req.Model, f.req.Family, f.req.Endpoint, f.req.CountsTokens = "img", v1.ModelTypeImage, "", false
	f.limits.requests[tokenKey] = time.Second
	if _, e := f.admit(); e == nil || e.Reason != RateLimited {
		t.Fatalf("refusal = %+v; want the key's request limit", e)
	}
}

func TestAdmitReplayStopsBeforeLimitsAndReservation(t *testing.T) {
	f := newFixture()
	f.subject.done = true
	f.limits.requests[tokenKey] = time.Second // would refuse if reached
	ad, e := f.admit()
	if e != nil || !ad.Done {
		t.Fatalf("admission = %+v, %+v; want done without refusal", ad, e)
	}
	if len(f.reserver.reserved) != 0 || len(f.priced) != 0 {
		t.Fatalf("a replay was priced %v or reserved %v", f.priced, f.reserver.reserved)
	}
}

func TestAdmitReservesTheEstimate(t *testing.T) {
	f := newFixture()
	ad, e := f.admit()
	if e != nil {
		t.Fatalf("refused: %+v", e)
	}
	if ad.Route == nil || ad.Route.Name != "chat" || len(ad.Plan) != 1 || ad.Rule == nil || ad.Hold == nil {
		t.Fatalf("admission = %+v; want route, plan, rule and hold", ad)
	}
	if ad.Estimate != 700 || len(f.reserver.reserved) != 1 || f.reserver.reserved[0] != 700 {
		t.Fatalf("estimate %d, reserved %v; want 700 reserved once", ad.Estimate, f.reserver.reserved)
	}
	if !ad.Accepted.Equal(time.Unix(1_800_000_000, 0)) {
		t.Fatalf("accepted at %v; want the clock's now", ad.Accepted)
	}
	// The price is the first candidate's group's, with the subject's facts.
	if len(f.priced) != 1 || f.priced[0] != "gold/1080p" {
		t.Fatalf("priced %v; want [gold/1080p]", f.priced)
	}
}

// A token count is limited like any request and never priced or reserved:
// a missing price or an empty balance does not refuse it.
func TestAdmitUnbilledStopsAfterTheLimits(t *testing.T) {
	f := newFixture()
	f.req.Unbilled, f.req.CountsTokens, f.req.Subject, f.req.Reserver = true, false, nil, nil
	f.priceErr = pricing.ErrNoPrice
	f.limits.tokens[tokenKey] = time.Second // token limits are not asked
	ad, e := f.admit()
	if e != nil {
		t.Fatalf("refused: %+v", e)
	}
	if ad.Route == nil || len(ad.Plan) != 1 || ad.Rule != nil || ad.Hold != nil || ad.Estimate != 0 || len(f.priced) != 0 {
		t.Fatalf("admission = %+v, priced %v; want route and plan, nothing priced or held", ad, f.priced)
	}

	f.limits.requests[tokenKey] = time.Second
	if _, e := f.admit(); e == nil || e.Reason != RateLimited {
		t.Fatalf("refusal = %+v; want the key's request limit", e)
	}
	f = newFixture()
	f.req.Unbilled, f.req.Subject, f.req.Model = true, nil, "nope"
	if _, e := f.admit(); e == nil || e.Reason != ModelNotFound {
		t.Fatalf("refusal = %+v; want model not found", e)
	}
}

func TestDirectReservesWithoutHold(t *testing.T) {
	var got billing.Quota
	d := Direct{Ledger: ledgerFunc(func(q billing.Quota) error { got = q; return nil })}
	h, err := d.Reserve(context.Background(), "r", 1, 2, 42)
	if err != nil || h != nil || got != 42 {
		t.Fatalf("Direct.Reserve = %v, %v (ledger got %d); want no hold, 42 reserved", h, err, got)
	}
	d = Direct{Ledger: ledgerFunc(func(billing.Quota) error { return store.ErrInsufficientQuota })}
	if _, err := d.Reserve(context.Background(), "r", 1, 2, 42); !errors.Is(err, store.ErrInsufficientQuota) {
		t.Fatalf("err = %v; want the ledger's refusal", err)
	}
}

type ledgerFunc func(billing.Quota) error

func (f ledgerFunc) Reserve(_ context.Context, _ string, _, _ int64, q billing.Quota) error {
	return f(q)
}

func TestErrorCodeForTextProtocols(t *testing.T) {
	for r, want := range map[Reason]string{
		ModelNotAllowed: "model_not_allowed", WrongFamily: "model_not_found", NoBackend: "no_available_backend",
		InsufficientQuota: "insufficient_quota", Invalid: "", Internal: "", Unavailable: "", Unpriceable: "",
	} {
		if got := Refuse(r, "m").Code(); got != want {
			t.Errorf("%s.Code() = %q; want %q", r, got, want)
		}
	}
}

// A model of the wrong family is refused with the endpoints that serve it,
// each one that exists.
func TestWrongFamilyNamesTheEndpointsThatServeIt(t *testing.T) {
	f := newFixture()
	f.req.Model, f.req.Family, f.req.Endpoint, f.req.CountsTokens = "chat", v1.ModelTypeImage, "", false
	_, e := f.admit()
	if e == nil || e.Reason != WrongFamily {
		t.Fatalf("refusal = %+v; want %s", e, WrongFamily)
	}
	if want := `model "chat" is a text model; use /v1/chat/completions, /v1/messages or /v1/responses`; e.Message != want {
		t.Fatalf("message %q; want %q", e.Message, want)
	}
	f = newFixture()
	f.req.Model = "img"
	if _, e = f.admit(); e == nil || e.Message != `model "img" is an image model; use /v1/images/generations` {
		t.Fatalf("refusal = %+v", e)
	}
}

// A line of an upstream batch job is queued by the upstream, not sent in
// real time: the per-minute limits that would refuse it now do not apply,
// while the rest of admission (price, estimate, reservation) does.
func TestAdmitNoRateLimitsPassesTheLimits(t *testing.T) {
	f := newFixture()
	f.limits.requests[tokenKey], f.limits.requests[tenantKey] = time.Second, time.Second
	f.limits.tokens[tokenKey], f.limits.tokens[tenantKey] = time.Second, time.Second
	if _, e := f.admit(); e == nil || e.Reason != RateLimited {
		t.Fatalf("refusal = %+v; want a rate limit without NoRateLimits", e)
	}
	f.req.NoRateLimits = true
	ad, e := f.admit()
	if e != nil {
		t.Fatalf("refused: %+v", e)
	}
	if ad.Rule == nil || ad.Estimate != 700 {
		t.Fatalf("admission = %+v; want priced and estimated", ad)
	}
}
