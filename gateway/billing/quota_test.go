package billing

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
)

func TestQuotaFromUSDString(t *testing.T) {
	cases := []struct {
		in      string
		want    Quota
		wantErr bool
	}{
		{in: "1", want: 500000},
		{in: "0", want: 0},
		{in: "0.002", want: 1000},
		{in: "0.000002", want: 1},
		{in: "0.000001", want: 1},        // 0.5 quota rounds half up
		{in: "0.0000009999", want: 0},    // 0.49995 rounds down
		{in: "0.000003", want: 2},        // 1.5 → 2
		{in: "0.0000050000001", want: 3}, // 2.50000005 → 3
		{in: "12.345678", want: 6172839},
		{in: "18446744073709551616", wantErr: true}, // overflows int64 quota
		{in: "-1", wantErr: true},
		{in: "1e3", wantErr: true},
		{in: "", wantErr: true},
		{in: " 1", wantErr: true},
		{in: "1.", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			g := NewWithT(t)
			got, err := QuotaFromUSDString(tc.in)
			if tc.wantErr {
				g.Expect(err).To(MatchError(ErrInvalidAmount))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestQuotaStrings(t *testing.T) {
	cases := []struct {
		q       Quota
		usd     string
		credits string
	}{
		{q: 0, usd: "0", credits: "0"},
		{q: 1, usd: "0.000002", credits: "0.0004"},
		{q: 2500, usd: "0.005", credits: "1"},
		{q: 500000, usd: "1", credits: "200"},
		{q: 750001, usd: "1.500002", credits: "300.0004"},
		{q: -250000, usd: "-0.5", credits: "-100"},
		{q: 9223372036854775807, usd: "18446744073709.551614", credits: "3689348814741910.3228"},
	}
	for _, tc := range cases {
		t.Run(tc.usd, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(tc.q.CostUSD()).To(Equal(tc.usd))
			g.Expect(tc.q.CreditsString()).To(Equal(tc.credits))
		})
	}
}

func TestQuotaFromCredits(t *testing.T) {
	cases := []struct {
		in   json.Number
		want Quota
	}{
		{in: "0", want: 0},
		{in: "1", want: 2500},
		{in: "0.1", want: 250},
		{in: "200", want: 500000},
		{in: "0.0002", want: 1}, // 0.5 → 1
		{in: "0.00019", want: 0},
		{in: "1e2", want: 250000}, // JSON numbers may carry exponents
	}
	for _, tc := range cases {
		t.Run(string(tc.in), func(t *testing.T) {
			g := NewWithT(t)
			got, err := QuotaFromCreditsNumber(tc.in)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
			f, _ := tc.in.Float64()
			fromFloat, err := QuotaFromCreditsFloat(f)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(fromFloat).To(Equal(tc.want), "float path must agree with the text path")
		})
	}

	g := NewWithT(t)
	_, err := QuotaFromCreditsNumber("-1")
	g.Expect(err).To(MatchError(ErrInvalidAmount))
	_, err = QuotaFromCreditsNumber("abc")
	g.Expect(err).To(MatchError(ErrInvalidAmount))
}

func TestFloatOutputs(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Quota(2500).CreditsFloat()).To(Equal(1.0))
	g.Expect(Quota(250000).USDFloat()).To(Equal(0.5))
}
