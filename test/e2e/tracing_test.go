package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/platform/telemetry"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

// traceSpans installs an in-memory exporter as the gateway's tracer for the
// test (the shared stack's gateway runs in this process) and removes it
// afterwards: tracing is off again for every other test.
func traceSpans(t testing.TB) *tracetest.InMemoryExporter {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	telemetry.Use(tp)
	t.Cleanup(func() {
		telemetry.Use(nil)
		_ = tp.Shutdown(context.Background())
	})
	return exp
}

// spanNamed waits until a span of the trace with that name has ended.
func spanNamed(t testing.TB, exp *tracetest.InMemoryExporter, traceID trace.TraceID, name string) tracetest.SpanStub {
	t.Helper()
	var found tracetest.SpanStub
	NewWithT(t).Eventually(func() bool {
		for _, s := range exp.GetSpans() {
			if s.SpanContext.TraceID() == traceID && s.Name == name {
				found = s
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond).Should(BeTrue(), "span %q of trace %s", name, traceID)
	return found
}

// attrs maps a span's attributes by key.
func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

var _ = Describe("Tracing", func() {
	// With tracing on, a text request that fails over
	// from one backend to the next is one trace continuing the client's
	// traceparent: the server span "chat {model}" with the GenAI attributes and
	// usage (for a stream, counted at its end), and the children admission, one
	// client span per upstream attempt and settlement. Each fake upstream
	// received a traceparent of the same trace naming its attempt's span. No
	// attribute holds a credential.
	It("traces follow a request", func() {
		t := GinkgoTB()
		exp := traceSpans(t)
		first, next := startFake(t, "openai"), startFake(t, "anthropic")
		first.SetDefault(fakeupstream.Reply{Status: http.StatusServiceUnavailable})
		// Backend names of this test's own, for the attempt counters.
		a := fakeBackend(t, "traced-first", "openai", first.URL, first.Key(), "up-first")
		b := fakeBackend(t, "traced-next", "anthropic", next.URL, next.Key(), "up-next")
		b.Priority = 5
		model := uniqueModel("traced")
		textModel(t, framework.SystemNamespace, model, a, b)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

		for i, stream := range []bool{false, true} {
			By(fmt.Sprintf("stream=%v", stream))
			func() {
				g := NewWithT(t)
				next.Enqueue(fakeupstream.Reply{Text: "a traced answer", Usage: fakeupstream.Usage{InputTokens: 12, OutputTokens: 7}})
				clientTrace := trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, byte(i)}
				clientSpan := trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
				body, _ := json.Marshal(map[string]any{"model": model, "max_tokens": 100, "stream": stream,
					"messages": []map[string]any{{"role": "user", "content": "hello"}}})
				req, err := http.NewRequest(http.MethodPost, stack.BaseURL+"/v1/messages", bytes.NewReader(body))
				g.Expect(err).NotTo(HaveOccurred())
				req.Header.Set("x-api-key", acct.Key)
				req.Header.Set("anthropic-version", "2023-06-01")
				req.Header.Set("content-type", "application/json")
				req.Header.Set("traceparent", fmt.Sprintf("00-%s-%s-01", clientTrace, clientSpan))
				resp, err := http.DefaultClient.Do(req)
				g.Expect(err).NotTo(HaveOccurred())
				answer, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "%s", answer)
				g.Expect(string(answer)).To(ContainSubstring("answer"))

				server := spanNamed(t, exp, clientTrace, "chat "+model)
				g.Expect(server.SpanKind).To(Equal(trace.SpanKindServer))
				g.Expect(server.Parent.SpanID()).To(Equal(clientSpan), "the client's trace continues")
				g.Expect(server.Parent.IsRemote()).To(BeTrue())
				sa := attrs(server)
				g.Expect(sa).To(HaveKeyWithValue(telemetry.OperationName, attribute.StringValue("chat")))
				g.Expect(sa).To(HaveKeyWithValue(telemetry.RequestModel, attribute.StringValue(model)))
				g.Expect(sa).To(HaveKeyWithValue(telemetry.ProviderName, attribute.StringValue("anthropic")))
				g.Expect(sa).To(HaveKeyWithValue(telemetry.ResponseModel, attribute.StringValue("up-next")))
				g.Expect(sa).To(HaveKeyWithValue(telemetry.InputTokens, attribute.Int64Value(12)))
				g.Expect(sa).To(HaveKeyWithValue(telemetry.OutputTokens, attribute.Int64Value(7)))
				g.Expect(sa).To(HaveKeyWithValue(telemetry.MaxTokens, attribute.Int64Value(100)))
				g.Expect(sa).To(HaveKeyWithValue(telemetry.Stream, attribute.BoolValue(stream)))
				g.Expect(sa).To(HaveKeyWithValue(telemetry.HTTPStatusCode, attribute.IntValue(200)))
				g.Expect(sa).To(HaveKeyWithValue(telemetry.HTTPRoute, attribute.StringValue("/v1/messages")))
				g.Expect(sa).To(HaveKeyWithValue(telemetry.Tenant, attribute.StringValue(acct.Namespace)))
				g.Expect(sa).To(HaveKeyWithValue(telemetry.Backend, attribute.StringValue("traced-next")))
				g.Expect(sa[telemetry.RequestID].AsString()).To(Equal(resp.Header.Get("request-id")))

				childOf := func(name string) tracetest.SpanStub {
					s := spanNamed(t, exp, clientTrace, name)
					g.Expect(s.Parent.SpanID()).To(Equal(server.SpanContext.SpanID()), "%s is a child of the request's span", name)
					return s
				}
				admission := childOf("admission")
				g.Expect(attrs(admission)[telemetry.QuotaReserved].AsInt64()).To(BeNumerically(">", 0))
				failed, served := childOf("chat up-first"), childOf("chat up-next")
				g.Expect(failed.SpanKind).To(Equal(trace.SpanKindClient))
				g.Expect(attrs(failed)).To(HaveKeyWithValue(telemetry.ProviderName, attribute.StringValue("openai")))
				g.Expect(attrs(failed)).To(HaveKeyWithValue(telemetry.Attempt, attribute.IntValue(1)))
				g.Expect(attrs(failed)).To(HaveKeyWithValue(telemetry.ErrorType, attribute.StringValue("503")))
				g.Expect(attrs(failed)).To(HaveKeyWithValue(telemetry.HTTPStatusCode, attribute.IntValue(503)))
				g.Expect(attrs(served)).To(HaveKeyWithValue(telemetry.ProviderName, attribute.StringValue("anthropic")))
				g.Expect(attrs(served)).To(HaveKeyWithValue(telemetry.RequestModel, attribute.StringValue("up-next")))
				g.Expect(attrs(served)).To(HaveKeyWithValue(telemetry.Attempt, attribute.IntValue(2)))
				g.Expect(attrs(served)).To(HaveKeyWithValue(telemetry.HTTPStatusCode, attribute.IntValue(200)))
				g.Expect(attrs(served)).NotTo(HaveKey(telemetry.ErrorType))
				settlement := childOf("settlement")
				g.Expect(attrs(settlement)).To(HaveKeyWithValue(telemetry.QuotaCharged, attribute.Int64Value(textQuota(12, 7))))
				g.Expect(settlement.StartTime).NotTo(BeTemporally("<", served.StartTime), "settled after the answer")

				// Each upstream saw its own attempt's span as the parent.
				g.Expect(first.Last().Header.Get("traceparent")).To(Equal(
					fmt.Sprintf("00-%s-%s-01", clientTrace, failed.SpanContext.SpanID())))
				g.Expect(next.Last().Header.Get("traceparent")).To(Equal(
					fmt.Sprintf("00-%s-%s-01", clientTrace, served.SpanContext.SpanID())))

				// The same attempts in the Prometheus counters the error-ratio alert reads.
				g.Expect(metricValue(t, "modelgate_upstream_attempts_total", map[string]string{"backend": "traced-first"})).To(Equal(float64(i + 1)))
				g.Expect(metricValue(t, "modelgate_upstream_errors_total", map[string]string{"backend": "traced-first", "status": "503"})).To(Equal(float64(i + 1)))
				g.Expect(metricValue(t, "modelgate_upstream_attempts_total", map[string]string{"backend": "traced-next"})).To(Equal(float64(i + 1)))

				for _, s := range exp.GetSpans() {
					for _, kv := range s.Attributes {
						v := kv.Value.String()
						g.Expect(v).NotTo(ContainSubstring(acct.Key), "%s %s", s.Name, kv.Key)
						g.Expect(v).NotTo(ContainSubstring(next.Key()), "%s %s", s.Name, kv.Key)
						g.Expect(v).NotTo(ContainSubstring("127.0.0.1"), "%s %s: no addresses", s.Name, kv.Key)
					}
				}
			}()
		}
	})

	// A refused request ends its
	// admission span with the refusal's code and starts no attempt; an image
	// submission is a "generate_content {model}" span naming its task.
	It("traces of a refusal and a media submission", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		exp := traceSpans(t)
		ctx := context.Background()
		model := uniqueModel("traced-image")
		route := &v1.ModelRoute{
			ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: framework.SystemNamespace},
			Spec: v1.ModelRouteSpec{Model: v1.ModelID(model), Type: v1.ModelTypeImage, ValidationProfile: v1.ProfileMultiImage,
				Backends: []v1.Backend{sim("sim", "simulated")}},
		}
		price := &v1.PriceRule{
			ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: framework.SystemNamespace},
			Spec: v1.PriceRuleSpec{Model: v1.ModelID(model), ChargeType: v1.ChargePerRequest, PriceBasis: v1.BasisRequest,
				Unit: v1.UnitRequest, UnitPrice: "0.04"},
		}
		for _, o := range []client.Object{route, price} {
			g.Expect(stack.Client.Create(ctx, o)).To(Succeed())
			t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), o) })
			g.Expect(stack.WaitReady(ctx, o)).To(Succeed())
			g.Expect(stack.WaitCached(ctx, o)).To(Succeed())
		}
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

		post := func(path, body string) (*http.Response, []byte) {
			req, err := http.NewRequest(http.MethodPost, stack.BaseURL+path, strings.NewReader(body))
			g.Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Authorization", "Bearer "+acct.Key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp, raw
		}
		serverSpan := func(requestID string) tracetest.SpanStub {
			var found tracetest.SpanStub
			g.Eventually(func() bool {
				for _, s := range exp.GetSpans() {
					if s.SpanKind == trace.SpanKindServer && attrs(s)[telemetry.RequestID].AsString() == requestID {
						found = s
						return true
					}
				}
				return false
			}, 10*time.Second, 10*time.Millisecond).Should(BeTrue(), "the span of request %s", requestID)
			return found
		}

		resp, raw := post("/v1/images/generations", fmt.Sprintf(`{"model":%q,"prompt":"a traced cat"}`, model))
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "%s", raw)
		var task struct{ ID string }
		g.Expect(json.Unmarshal(raw, &task)).To(Succeed())
		s := serverSpan(resp.Header.Get("x-request-id"))
		g.Expect(s.Name).To(Equal("generate_content " + model))
		g.Expect(attrs(s)).To(HaveKeyWithValue(telemetry.OperationName, attribute.StringValue("generate_content")))
		g.Expect(attrs(s)).To(HaveKeyWithValue(telemetry.RequestModel, attribute.StringValue(model)))
		g.Expect(attrs(s)).To(HaveKeyWithValue(telemetry.TaskID, attribute.StringValue(task.ID)))
		g.Expect(attrs(s)).To(HaveKeyWithValue(telemetry.HTTPStatusCode, attribute.IntValue(200)))

		// A text model that does not exist: refused at admission, 404.
		resp, raw = post("/v1/chat/completions", `{"model":"no-such-model","messages":[{"role":"user","content":"hi"}]}`)
		g.Expect(resp.StatusCode).To(Equal(http.StatusNotFound), "%s", raw)
		s = serverSpan(resp.Header.Get("x-request-id"))
		g.Expect(s.Name).To(Equal("chat"), "an unrouted model does not name the span")
		g.Expect(attrs(s)).To(HaveKeyWithValue(telemetry.HTTPStatusCode, attribute.IntValue(404)))
		g.Expect(s.Status.Code.String()).To(Equal("Unset"), "a client error is not the gateway's")
		var children []string
		for _, c := range exp.GetSpans() {
			if c.Parent.SpanID() == s.SpanContext.SpanID() {
				children = append(children, c.Name)
				g.Expect(attrs(c)).To(HaveKeyWithValue(telemetry.Refusal, attribute.StringValue("model_not_found")))
			}
		}
		g.Expect(children).To(Equal([]string{"admission"}))
	})
})
