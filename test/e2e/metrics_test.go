package e2e

import (
	"context"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/framework"
)

// metricValue sums a counter or histogram count over series whose labels
// include want.
func metricValue(t testing.TB, name string, want map[string]string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !hasLabels(m, want) {
				continue
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			}
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

var _ = Describe("Metrics", func() {
	It("requests are measured", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		model := uniqueModel("metrics")
		textModel(t, framework.SystemNamespace, model, sim("sim", "simulated"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := anthropicClient(acct.Key)
		_, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{
			Model: anthropic.Model(model), MaxTokens: 100,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("[sim:tokens=9] x"))}})
		g.Expect(err).NotTo(HaveOccurred())

		g.Expect(metricValue(t, "modelgate_requests_total", map[string]string{"endpoint": "messages", "model": model, "backend": "sim", "code": "200"})).To(Equal(1.0))
		g.Expect(metricValue(t, "modelgate_request_duration_seconds", map[string]string{"model": model})).To(Equal(1.0))
		g.Expect(metricValue(t, "modelgate_time_to_first_byte_seconds", map[string]string{"model": model})).To(Equal(1.0))
		g.Expect(metricValue(t, "modelgate_tokens_total", map[string]string{"model": model, "kind": "output"})).To(Equal(9.0))
		g.Expect(metricValue(t, "modelgate_quota_charged_total", map[string]string{"model": model})).To(BeNumerically(">", 0))
		// The same by tenant: the account's namespace is its own tenant here.
		g.Expect(metricValue(t, "modelgate_tenant_tokens_total", map[string]string{"tenant": acct.Namespace, "kind": "output"})).To(Equal(9.0))
		g.Expect(metricValue(t, "modelgate_tenant_quota_charged_total", map[string]string{"tenant": acct.Namespace})).To(
			Equal(metricValue(t, "modelgate_quota_charged_total", map[string]string{"model": model})))

		// Task phases are exported from the cache (every phase, zero included).
		families, err := ctrlmetrics.Registry.Gather()
		g.Expect(err).NotTo(HaveOccurred())
		var phases []string
		for _, f := range families {
			if f.GetName() == "modelgate_generation_tasks" {
				for _, m := range f.GetMetric() {
					phases = append(phases, m.GetLabel()[0].GetValue())
				}
			}
		}
		g.Expect(phases).To(ContainElements("queued", "in_progress", "completed", "failed"))

		// A model nobody offers is counted without its name as a label.
		_, _ = c.Messages.New(context.Background(), anthropic.MessageNewParams{
			Model: "made-up-model", MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))}})
		g.Expect(metricValue(t, "modelgate_requests_total", map[string]string{"model": "made-up-model"})).To(BeZero())
		g.Expect(metricValue(t, "modelgate_requests_total", map[string]string{"model": "unknown", "code": "404"})).To(BeNumerically(">=", 1))
	})
})
