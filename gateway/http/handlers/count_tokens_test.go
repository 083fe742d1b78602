package handlers

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/admission"
	"github.com/modelgate/modelgate/gateway/pricing"
	"github.com/modelgate/modelgate/gateway/ratelimit"
	"github.com/modelgate/modelgate/gateway/routing"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// The token count endpoint with no control plane: the route's backends are
// fake providers, some of which count.

// generator is a text provider that cannot count.
type generator struct{}

func (generator) Protocols() []upstream.Protocol { return []upstream.Protocol{upstream.Messages} }
func (generator) Send(context.Context, upstream.Backend, upstream.Protocol, []byte, bool, http.Header) (*http.Response, error) {
	return nil, errors.New("a count never generates")
}

// counter counts n, or fails with err; it records what it was given.
type counter struct {
	generator
	n      int64
	err    error
	calls  int
	body   string
	header http.Header
	model  string
}

func (c *counter) CountTokens(_ context.Context, b upstream.Backend, body []byte, h http.Header) (int64, error) {
	c.calls++
	c.body, c.header, c.model = string(body), h, b.UpstreamModel
	return c.n, c.err
}

// everyBackend plans every backend of its route, in order.
type everyBackend struct{ route *v1.ModelRoute }

func (e everyBackend) Route(_ context.Context, _, model string) (*v1.ModelRoute, error) {
	if string(e.route.Spec.Model) != model {
		return nil, nil
	}
	return e.route, nil
}

func (e everyBackend) Plan(route *v1.ModelRoute, groups []string) []routing.Candidate {
	var out []routing.Candidate
	for i := range route.Spec.Backends {
		out = append(out, routing.Candidate{Route: route, Backend: &route.Spec.Backends[i], Group: groups[0]})
	}
	return out
}

// refuseRequests refuses every request with a wait.
type refuseRequests struct{}

func (refuseRequests) Allow(ratelimit.Key, int32) (bool, time.Duration) {
	return false, 7 * time.Second
}
func (refuseRequests) TokensAvailable(ratelimit.Key, int64) (bool, time.Duration) {
	return true, 0
}

type countFixture struct {
	mux    *http.ServeMux
	priced int
}

// newCountFixture serves model "claude" from one backend per provider
// named, in order, each of the registry's providers.
func newCountFixture(t *testing.T, limits admission.Limits, providers map[string]upstream.TextProvider, order ...string) *countFixture {
	t.Helper()
	route := &v1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Name: "claude", Namespace: "modelgate-system"},
		Spec: v1.ModelRouteSpec{Model: "claude", Type: v1.ModelTypeText}}
	var entries []upstream.Entry
	for _, name := range order {
		route.Spec.Backends = append(route.Spec.Backends, v1.Backend{Name: name + "-backend", Provider: name, UpstreamModel: name + "-model"})
		entries = append(entries, upstream.Entry{Name: name, Adapter: providers[name]})
	}
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	f := &countFixture{mux: http.NewServeMux()}
	d := &CountTokensDeps{
		Clock:   clock,
		Breaker: routing.NewBreaker(clock),
		Admitter: &admission.Admitter{Routes: everyBackend{route}, Limits: limits, Clock: clock,
			Prices: func(string, string, string, pricing.Facts) (*pricing.Rule, error) {
				f.priced++
				return nil, pricing.ErrNoPrice
			}},
		Upstreams: upstream.NewRegistry(entries...),
	}
	count := newCountTokens(d)
	f.mux.Handle("POST "+countTokensPath, instrument(countTokensEndpoint, "count_tokens", textIDHeaders,
		authenticated(keyTable{"sk-good": testPrincipal()}, true, count.authFail, count.serveHTTP)))
	return f
}

func (f *countFixture) post(target, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
	r.Header.Set("x-api-key", "sk-good")
	r.Header.Set("anthropic-version", "2023-06-01")
	r.Header.Set("anthropic-beta", "token-counting-2024-11-01")
	rec := httptest.NewRecorder()
	f.mux.ServeHTTP(rec, r)
	return rec
}

const countBody = `{"model":"claude","messages":[{"role":"user","content":"hello"}],"thinking":{"type":"enabled","budget_tokens":2048}}`

func (f *countFixture) expectNothingBilled(g Gomega) {
	// CountTokensDeps has no leaser nor usage sink: a count cannot reserve
	// or record; its price rule is the one thing it could still look up.
	g.Expect(f.priced).To(BeZero(), "a count is never priced")
}

func TestCountTokensWalksThePlanToACounter(t *testing.T) {
	g := NewWithT(t)
	down := &counter{err: &upstream.Error{Class: upstream.Failover, Status: 529, Retryable: true, Message: "Overloaded"}}
	up := &counter{n: 42}
	f := newCountFixture(t, noLimits{}, map[string]upstream.TextProvider{"gen": generator{}, "down": down, "up": up}, "gen", "down", "up")

	rec := f.post(countTokensPath+"?beta=true", countBody)
	g.Expect(rec.Code).To(Equal(http.StatusOK), rec.Body.String())
	g.Expect(rec.Body.String()).To(MatchJSON(`{"input_tokens":42}`))
	g.Expect(rec.Header().Get("request-id")).NotTo(BeEmpty())
	g.Expect(rec.Header().Get("x-request-id")).To(Equal(rec.Header().Get("request-id")))
	g.Expect(down.calls).To(Equal(1), "a retryable failure moves on")
	g.Expect(up.calls).To(Equal(1))
	g.Expect(up.model).To(Equal("up-model"), "the backend's upstream model")
	g.Expect(up.body).To(ContainSubstring(`"thinking"`), "the body is passed on unjudged")
	g.Expect(up.header.Get("anthropic-beta")).To(Equal("token-counting-2024-11-01"))
	f.expectNothingBilled(g)
}

func TestCountTokensWithoutACounterSaysCountLocally(t *testing.T) {
	g := NewWithT(t)
	f := newCountFixture(t, noLimits{}, map[string]upstream.TextProvider{"gen": generator{}}, "gen")
	rec := f.post(countTokensPath, countBody)
	g.Expect(rec.Code).To(Equal(http.StatusBadRequest), "never a fake 0, never a 5xx that SDKs retry")
	g.Expect(rec.Body.String()).To(MatchJSON(`{"type":"error","error":{"type":"invalid_request_error",` +
		`"message":"token counting is not available for model \"claude\": its upstreams cannot count tokens; count locally"}}`))
	f.expectNothingBilled(g)
}

func TestCountTokensUpstreamRefusalIsTheAnswer(t *testing.T) {
	g := NewWithT(t)
	refusal := `{"type":"error","error":{"type":"invalid_request_error","message":"messages: Field required"}}`
	bad := &counter{err: &upstream.Error{Class: upstream.Permanent, Status: 400, Message: "messages: Field required",
		Body: []byte(refusal), Protocol: upstream.Messages}}
	next := &counter{n: 1}
	f := newCountFixture(t, noLimits{}, map[string]upstream.TextProvider{"bad": bad, "next": next}, "bad", "next")
	rec := f.post(countTokensPath, `{"model":"claude"}`)
	g.Expect(rec.Code).To(Equal(http.StatusBadRequest))
	g.Expect(rec.Body.String()).To(Equal(refusal), "an Anthropic upstream's error reaches the client as written")
	g.Expect(next.calls).To(BeZero(), "a 4xx is not retried elsewhere")
}

func TestCountTokensEveryCounterDown(t *testing.T) {
	g := NewWithT(t)
	down := &counter{err: &upstream.Error{Class: upstream.Failover, Status: 503, Retryable: true, Message: "unavailable"}}
	f := newCountFixture(t, noLimits{}, map[string]upstream.TextProvider{"down": down, "gen": generator{}}, "down", "gen")
	rec := f.post(countTokensPath, countBody)
	g.Expect(rec.Code).To(Equal(http.StatusBadGateway))
	g.Expect(rec.Body.String()).To(ContainSubstring(`"api_error"`))
}

func TestCountTokensRefusals(t *testing.T) {
	up := &counter{n: 5}
	providers := map[string]upstream.TextProvider{"up": up}
	for _, c := range []struct {
		name, body string
		limits     admission.Limits
		status     int
		typ, msg   string
	}{
		{"not an object", `[1]`, noLimits{}, 400, "invalid_request_error", "must be a JSON object"},
		{"no model", `{"messages":[]}`, noLimits{}, 400, "invalid_request_error", "model: field required"},
		{"model not a string", `{"model":7}`, noLimits{}, 400, "invalid_request_error", "model: must be a string"},
		{"unknown model", `{"model":"nope","messages":[]}`, noLimits{}, 404, "not_found_error", `model \"nope\" not found`},
		{"rate limited", countBody, refuseRequests{}, 429, "rate_limit_error", "requests-per-minute"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newCountFixture(t, c.limits, providers, "up")
			rec := f.post(countTokensPath, c.body)
			g.Expect(rec.Code).To(Equal(c.status), rec.Body.String())
			g.Expect(rec.Body.String()).To(ContainSubstring(`"type":"`+c.typ+`"`), rec.Body.String())
			g.Expect(rec.Body.String()).To(ContainSubstring(c.msg))
			if c.status == 429 {
				g.Expect(rec.Header().Get("Retry-After")).To(Equal("7"))
			}
			f.expectNothingBilled(g)
		})
	}
	if up.calls != 0 {
		t.Fatalf("the upstream was called %d times for refused requests", up.calls)
	}
}
