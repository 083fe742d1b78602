package handlers

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/shopspring/decimal"

	"github.com/modelgate/modelgate/gateway/billing"
)

func TestBalanceUnits(t *testing.T) {
	g := NewWithT(t)
	q := billing.Quota(1_250_000) // 2.5 USD
	g.Expect(string(BalanceUnit{}.amount(q))).To(Equal("2.5"))
	g.Expect(string(BalanceUnit{Unit: "usd"}.amount(q))).To(Equal("2.5"))
	g.Expect(string(BalanceUnit{Unit: "cny", CNYPerUSD: decimal.RequireFromString("7.2")}.amount(q))).To(Equal("18"))
	g.Expect(string(BalanceUnit{Unit: "tokens"}.amount(q))).To(Equal("1250000"))
}
