package pricing

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/billing"
)

func TestChargeBatch(t *testing.T) {
	at := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	text := perToken("chat", "text_input_tokens", "3")
	text.OutputUnitPrice = dec("15")
	// 1000 input tokens at 3 USD/M and 1000 output at 15 USD/M: 0.018 USD,
	// 9000 quota at full price.
	u := Usage{Requests: 1, InputTextTokens: 1000, OutputTextTokens: 1000}

	quarter := text
	quarter.BatchRatio = dec("0.25")
	full := text
	full.BatchRatio = dec("1")
	grouped := text
	grouped.GroupRatio = dec("2")
	minimum := perToken("chat", "text_input_tokens", "1")
	minimum.MinimumChargeUSD = dec("0.01") // 5000 quota floor, halved in a batch

	for _, tc := range []struct {
		name          string
		rule          *Rule
		usage         Usage
		alone, inLine billing.Quota
	}{
		{"no batchRatio: half price", mustCompile(t, text), u, 9000, 4500},
		{"batchRatio 0.25", mustCompile(t, quarter), u, 9000, 2250},
		{"batchRatio 1: no discount", mustCompile(t, full), u, 9000, 9000},
		{"on top of the group ratio", mustCompile(t, grouped), u, 18000, 9000},
		{"on top of the minimum charge", mustCompile(t, minimum), Usage{Requests: 1, InputTextTokens: 1000}, 5000, 2500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			alone, err := tc.rule.Charge(tc.usage, at)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(alone).To(Equal(tc.alone))
			inLine, err := tc.rule.ChargeBatch(tc.usage, at)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(inLine).To(Equal(tc.inLine))
		})
	}

	t.Run("the default ratio is reported", func(t *testing.T) {
		NewWithT(t).Expect(mustCompile(t, text).BatchRatio().String()).To(Equal("0.5"))
	})

	t.Run("a batchRatio above 1 is refused", func(t *testing.T) {
		bad := text
		bad.BatchRatio = dec("1.5")
		pr := published(sysNS, "bad", 0, bad)
		_, err := Compile(&pr, sysNS)
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("batchRatio must be at most 1")))
	})

	t.Run("a batchRatio that is not a decimal is refused", func(t *testing.T) {
		bad := text
		bad.BatchRatio = dec("-1")
		pr := published(sysNS, "bad", 0, bad)
		_, err := Compile(&pr, sysNS)
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("batchRatio")))
	})
}

// A batch line is reserved at the price it is settled at: the estimate is
// half the one of the request sent alone, and the money that pays for n
// output tokens alone pays for about twice as many in a batch.
func TestEstimateTextBatch(t *testing.T) {
	at := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	spec := perToken("chat", "text_input_tokens", "3")
	spec.OutputUnitPrice = dec("15")
	r := mustCompile(t, spec)
	// 3000 bytes: 1000 input tokens; 1000 output: 9000 quota alone.
	alone, err := r.EstimateText(3000, 1000, at)
	if err != nil || alone != 9000 {
		t.Fatalf("EstimateText = %d, %v; want 9000", alone, err)
	}
	inLine, err := r.ForBatch().EstimateText(3000, 1000, at)
	if err != nil || inLine != 4500 {
		t.Fatalf("ForBatch().EstimateText = %d, %v; want 4500", inLine, err)
	}
	// 4500 quota: 400 output tokens alone (1500 + 400×7.5 = 4500), the
	// whole 1000 in a batch.
	n, q, err := r.OutputTokensThatFit(3000, 1000, at, 4500)
	if err != nil || n != 400 || q != 4500 {
		t.Errorf("OutputTokensThatFit = %d, %d, %v; want 400, 4500", n, q, err)
	}
	n, q, err = r.ForBatch().OutputTokensThatFit(3000, 1000, at, 4500)
	if err != nil || n != 1000 || q != 4500 {
		t.Errorf("ForBatch().OutputTokensThatFit = %d, %d, %v; want 1000, 4500", n, q, err)
	}
	n, _, err = r.ForBatch().OutputTokensThatFit(3000, 1000, at, 3000)
	if err != nil || n != 600 {
		t.Errorf("ForBatch().OutputTokensThatFit(3000 quota) = %d, %v; want 600", n, err)
	}
}
