package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/admission"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/pricing"
	"github.com/modelgate/modelgate/gateway/ratelimit"
	"github.com/modelgate/modelgate/gateway/routing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/simulated"
)

// The text pipeline with no control plane: the admission's routes, limits
// and prices, the leaser and the usage sink are fakes; the upstream is the
// in-process simulated provider.

type oneRoute struct{ route *v1.ModelRoute }

func (o oneRoute) Route(_ context.Context, _, model string) (*v1.ModelRoute, error) {
	if string(o.route.Spec.Model) != model {
		return nil, nil
	}
	return o.route, nil
}

func (o oneRoute) Plan(route *v1.ModelRoute, groups []string) []routing.Candidate {
	return []routing.Candidate{{Route: route, Backend: &route.Spec.Backends[0], Group: groups[0]}}
}

type noLimits struct{}

func (noLimits) Allow(ratelimit.Key, int32) (bool, time.Duration)           { return true, 0 }
func (noLimits) TokensAvailable(ratelimit.Key, int64) (bool, time.Duration) { return true, 0 }

// fakeLeaser holds one balance: a reservation over it is refused.
type fakeLeaser struct {
	mu        sync.Mutex
	balance   billing.Quota
	reserved  []billing.Quota
	settled   []billing.Quota
	released  int
	reserveOn error
}

func (l *fakeLeaser) Reserve(_ context.Context, _ string, _, _ int64, q billing.Quota) (*store.Hold, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reserveOn != nil {
		return nil, l.reserveOn
	}
	if q > l.balance {
		return nil, store.ErrInsufficientQuota
	}
	l.reserved = append(l.reserved, q)
	return &store.Hold{}, nil
}

func (l *fakeLeaser) Settle(_ context.Context, _ *store.Hold, q billing.Quota) (store.Charge, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.settled = append(l.settled, q)
	return store.Charge{}, nil
}

func (l *fakeLeaser) Release(context.Context, *store.Hold) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.released++
	return nil
}

// fakeSink keeps submitted rows; durableErr is what Wait answers.
type fakeSink struct {
	mu         sync.Mutex
	rows       []store.UsageRow
	durableErr error
	wait       func() // called by Wait, if set
}

func (s *fakeSink) Submit(_ context.Context, row store.UsageRow) (Durable, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows = append(s.rows, row)
	return durableFunc(func(context.Context) error {
		if s.wait != nil {
			s.wait()
		}
		return s.durableErr
	}), nil
}

type durableFunc func(context.Context) error

func (f durableFunc) Wait(ctx context.Context) error { return f(ctx) }

type textFixture struct {
	deps   *TextDeps
	leaser *fakeLeaser
	sink   *fakeSink
	mux    *http.ServeMux
}

func newTextFixture(t *testing.T) *textFixture {
	t.Helper()
	const system = "modelgate-system"
	route := &v1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Name: "sim", Namespace: system},
		Spec: v1.ModelRouteSpec{Model: "sim-chat", Type: v1.ModelTypeText,
			Backends: []v1.Backend{{Name: "sim-1", Provider: simulated.NameOpenAI}}}}
	rule, err := pricing.Compile(&v1.PriceRule{ObjectMeta: metav1.ObjectMeta{Name: "sim", Namespace: system},
		Spec: v1.PriceRuleSpec{Model: "sim-chat", Group: "default", ChargeType: v1.ChargePerToken,
			PriceBasis: v1.BasisTotalTokens, Unit: v1.Unit1MTokens, UnitPrice: "2"}}, system)
	if err != nil {
		t.Fatalf("compile price: %v", err)
	}
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	f := &textFixture{leaser: &fakeLeaser{balance: 1_000_000}, sink: &fakeSink{}, mux: http.NewServeMux()}
	d := &TextDeps{
		Clock:   clock,
		Breaker: routing.NewBreaker(clock),
		Admitter: &admission.Admitter{Routes: oneRoute{route}, Limits: noLimits{}, Clock: clock,
			Prices: func(string, string, string, pricing.Facts) (*pricing.Rule, error) { return rule, nil }},
		Limiter:   &ratelimit.Limiter{Clock: clock},
		Leaser:    f.leaser,
		UsageLog:  f.sink,
		Upstreams: upstream.NewRegistry(upstream.Entry{Name: simulated.NameOpenAI, Adapter: simulated.New(upstream.ChatCompletions, upstream.Responses)}),
	}
	f.deps = d
	chat := &Text{d, chatProtocol()}
	f.mux.Handle("POST /v1/chat/completions", instrument("chat_completions", "chat", textIDHeaders,
		authenticated(keyTable{"sk-good": testPrincipal()}, false, chat.authFail, chat.serveHTTP)))
	return f
}

func (f *textFixture) post(body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer sk-good")
	r.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	f.mux.ServeHTTP(rec, r)
	return rec
}

const chatBody = `{"model":"sim-chat","max_tokens":64,"messages":[{"role":"user","content":"hello there"}]}`

func TestTextBillsWhatTheUpstreamReported(t *testing.T) {
	g := NewWithT(t)
	f := newTextFixture(t)
	rec := f.post(chatBody)
	g.Expect(rec.Code).To(Equal(http.StatusOK), rec.Body.String())
	var answer struct {
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	g.Expect(json.Unmarshal(rec.Body.Bytes(), &answer)).To(Succeed())
	g.Expect(answer.Usage.CompletionTokens).To(BeNumerically(">", 0))

	g.Expect(f.sink.rows).To(HaveLen(1))
	row := f.sink.rows[0]
	g.Expect(row.PromptTokens).To(Equal(answer.Usage.PromptTokens))
	g.Expect(row.CompletionTokens).To(Equal(answer.Usage.CompletionTokens))
	g.Expect(row.RequestID).To(Equal(rec.Header().Get("x-request-id")))
	// 2 USD per million tokens = 1 quota per token.
	g.Expect(row.Quota).To(Equal(billing.Quota(answer.Usage.PromptTokens + answer.Usage.CompletionTokens)))
	g.Expect(f.leaser.reserved).To(HaveLen(1))
	g.Expect(f.leaser.settled).To(Equal([]billing.Quota{row.Quota}))
}

func TestTextRefusesWhatTheBalanceDoesNotCover(t *testing.T) {
	g := NewWithT(t)
	f := newTextFixture(t)
	f.leaser.balance = 1
	rec := f.post(chatBody)
	g.Expect(rec.Code).To(Equal(http.StatusTooManyRequests))
	g.Expect(rec.Body.String()).To(ContainSubstring(`"insufficient_quota"`))
	g.Expect(f.sink.rows).To(BeEmpty(), "nothing billed")
	g.Expect(f.leaser.settled).To(BeEmpty())
}

func TestTextWithholdsTheAnswerWhenUsageIsNotDurable(t *testing.T) {
	g := NewWithT(t)
	f := newTextFixture(t)
	f.sink.durableErr = errors.New("journal and database down")
	rec := f.post(chatBody)
	g.Expect(rec.Code).To(Equal(http.StatusServiceUnavailable))
	g.Expect(rec.Body.String()).To(ContainSubstring("usage_not_recorded"))
	g.Expect(rec.Body.String()).NotTo(ContainSubstring(`"choices"`), "the answer is not delivered")
	g.Expect(f.sink.rows).To(HaveLen(1), "the row is still queued: the upstream did the work")
}

func TestTextUnknownModelAndBadKey(t *testing.T) {
	g := NewWithT(t)
	f := newTextFixture(t)
	rec := f.post(`{"model":"nope","messages":[{"role":"user","content":"hi"}]}`)
	g.Expect(rec.Code).To(Equal(http.StatusNotFound))
	g.Expect(rec.Body.String()).To(ContainSubstring(`"model_not_found"`))

	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(chatBody))
	r.Header.Set("Authorization", "Bearer sk-bad")
	bad := httptest.NewRecorder()
	f.mux.ServeHTTP(bad, r)
	g.Expect(bad.Code).To(Equal(http.StatusUnauthorized))
	g.Expect(bad.Body.String()).To(ContainSubstring(`"invalid_api_key"`))
	g.Expect(f.leaser.reserved).To(BeEmpty())
}

// flushRecorder is a ResponseWriter that sends only what was flushed, as a
// connection does: written bytes wait in pending until a flush.
type flushRecorder struct {
	header           http.Header
	pending, flushed bytes.Buffer
}

func (w *flushRecorder) Header() http.Header         { return w.header }
func (w *flushRecorder) WriteHeader(int)             {}
func (w *flushRecorder) Write(p []byte) (int, error) { return w.pending.Write(p) }
func (w *flushRecorder) FlushError() error {
	_, err := w.pending.WriteTo(&w.flushed)
	return err
}

// A finished stream's last events are not flushed before its settlement:
// they leave with the terminal events, once the row is durable, in one
// write.
func TestTextStreamLastEventsLeaveWithTail(t *testing.T) {
	g := NewWithT(t)
	f := newTextFixture(t)
	w := &flushRecorder{header: http.Header{}}
	var sentAtSettle string
	f.sink.wait = func() { sentAtSettle = w.flushed.String() }
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions",
		strings.NewReader(strings.Replace(chatBody, `"max_tokens"`, `"stream":true,"max_tokens"`, 1)))
	r.Header.Set("Authorization", "Bearer sk-good")
	f.mux.ServeHTTP(w, r)
	g.Expect(w.FlushError()).To(Succeed()) // the server's flush as the handler returns
	g.Expect(f.sink.rows).To(HaveLen(1))
	g.Expect(w.flushed.String()).To(HaveSuffix(`"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"))
	g.Expect(sentAtSettle).NotTo(ContainSubstring(`"finish_reason":"stop"`), "the last event was flushed before the row was durable")
}
