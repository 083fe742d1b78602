package pricing

import (
	"testing"

	. "github.com/onsi/gomega"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
)

// TestOutputTokensThatFit compares the search with a scan over every cap:
// the answer is the largest n whose estimate fits, and its quota is that
// estimate.
func TestOutputTokensThatFit(t *testing.T) {
	g := NewWithT(t)
	text := perToken("chat", "text_input_tokens", "3")
	text.OutputUnitPrice = dec("15")
	minimum := text
	minimum.MinimumChargeUSD = dec("0.0001") // 50 quota
	odd := perToken("odd", "text_input_tokens", "0.7")
	odd.OutputUnitPrice = dec("1.3") // 0.65 quota a token: the rounding decides
	total := perToken("tot", "total_tokens", "2")
	for name, spec := range map[string]v1.PriceRuleSpec{"text": text, "minimum": minimum, "odd": odd, "total": total} {
		r := mustCompile(t, spec)
		const body, maxTokens = 90, 200
		for avail := billing.Quota(0); avail < 400; avail++ {
			want, wantQ := int64(0), billing.Quota(0)
			for n := int64(1); n <= maxTokens; n++ {
				q, err := r.EstimateText(body, n, t0)
				g.Expect(err).NotTo(HaveOccurred())
				if q <= avail {
					want, wantQ = n, q
				}
			}
			n, q, err := r.OutputTokensThatFit(body, maxTokens, t0, avail)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect([]any{n, q}).To(Equal([]any{want, wantQ}), "%s with %d available", name, avail)
		}
	}
}

// TestOutputTokensThatFitClaudeCode: a $0.40 key and Claude Code's
// max_tokens 32000 at $15/M output ($0.48 of output alone) is served with
// the output it can pay for, not refused.
func TestOutputTokensThatFitClaudeCode(t *testing.T) {
	g := NewWithT(t)
	spec := perToken("claude", "text_input_tokens", "3")
	spec.OutputUnitPrice = dec("15")
	r := mustCompile(t, spec)
	full, err := r.EstimateText(30000, 32000, t0) // 10 000 input tokens: 15 000 quota; output 240 000
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(full).To(Equal(billing.Quota(255000)))
	avail, err := billing.QuotaFromUSDString("0.40")
	g.Expect(err).NotTo(HaveOccurred())
	n, q, err := r.OutputTokensThatFit(30000, 32000, t0, avail)
	g.Expect(err).NotTo(HaveOccurred())
	// (200 000 − 15 000) / 7.5 = 24 666.67 → 24 666 tokens, 199 995 quota.
	g.Expect(n).To(Equal(int64(24666)))
	g.Expect(q).To(Equal(billing.Quota(199995)))
	// Input alone and no output token left: refused (0).
	n, _, err = r.OutputTokensThatFit(30000, 32000, t0, 15007)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(BeZero())
	n, q, _ = r.OutputTokensThatFit(30000, 32000, t0, 15008)
	g.Expect([]any{n, q}).To(Equal([]any{int64(1), billing.Quota(15008)}))
}
