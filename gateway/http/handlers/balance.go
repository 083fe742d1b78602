package handlers

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/shopspring/decimal"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/modelgate/modelgate/gateway/apierr"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/store"
)

// Balance messages, as the contract gives them.
const (
	msgNoUserQuota   = "Failed to get user quota" // the tenant has no ledger account
	msgNoUsedQuota   = "Failed to get used quota" // the ledger could not be read
	msgNoTokenQuota  = "Failed to get token quota"
	unlimitedBalance = "-1"
)

// Balance serves the account and token balance endpoints. remain_balance
// and used_balance are in the configured display unit (USD by default, CNY
// at a configured rate, or quota units); the credit fields always use
// 200 credits = 1 USD. Amounts are rendered from exact decimals.
type Balance struct {
	Ledger Balances
	// Unit is the display unit of remain_balance and used_balance.
	Unit BalanceUnit
}

// BalanceUnit is the unit of remain_balance and used_balance.
type BalanceUnit struct {
	// Unit is "usd" (default), "cny" or "tokens" (quota units).
	Unit string
	// CNYPerUSD is the exchange rate for "cny".
	CNYPerUSD decimal.Decimal
}

// amount renders quota in the display unit.
func (u BalanceUnit) amount(q billing.Quota) json.Number {
	switch u.Unit {
	case "cny":
		return number(q.USD().Mul(u.CNYPerUSD).String())
	case "tokens":
		return number(strconv.FormatInt(int64(q), 10))
	default:
		return number(q.USD().String())
	}
}

// User serves GET /v1/user/balance and GET /user/balance: the account-wide
// balance of the key's tenant, independent of the key.
func (h *Balance) User(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	b, leased, _, err := h.Ledger.TenantStanding(r.Context(), p.UserID)
	if err != nil {
		log.FromContext(r.Context()).Error(err, "tenant balance", "userID", p.UserID)
		msg := msgNoUsedQuota
		if errors.Is(err, store.ErrNotFound) {
			msg = msgNoUserQuota
		}
		apierr.Simple(w, http.StatusOK, msg)
		return
	}
	b.Remain += leased // held by a gateway replica, not spent
	unlimited := b.Unlimited || p.Tenant.Spec.UnlimitedQuota
	remainUSD, remainCredits := h.Unit.amount(b.Remain), number(b.Remain.Credits().String())
	if unlimited {
		remainUSD = unlimitedBalance
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"success":         true,
		"remain_balance":  remainUSD,
		"used_balance":    h.Unit.amount(b.Used),
		"remain_credits":  remainCredits,
		"used_credits":    number(b.Used.Credits().String()),
		"credits_per_usd": creditsPerUSD,
		"unlimited_quota": unlimited,
	})
}

// Token serves GET /v1/balance: the balance of the calling key alone. The
// contract names it without a shape; it answers in the user balance's style.
func (h *Balance) Token(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	b, holds, err := h.Ledger.TokenStanding(r.Context(), p.TokenID)
	if err != nil {
		log.FromContext(r.Context()).Error(err, "token balance", "tokenID", p.TokenID)
		apierr.Simple(w, http.StatusOK, msgNoTokenQuota)
		return
	}
	unlimited := p.Token.Spec.UnlimitedQuota
	remain := b.Remain + holds.Leased
	body := map[string]any{
		"success":         true,
		"token_id":        p.TokenID,
		"name":            p.Token.Spec.DisplayName,
		"remain_quota":    int64(remain),
		"used_quota":      int64(b.Used),
		"remain_balance":  h.Unit.amount(remain),
		"used_balance":    h.Unit.amount(b.Used),
		"remain_credits":  number(remain.Credits().String()),
		"used_credits":    number(b.Used.Credits().String()),
		"credits_per_usd": creditsPerUSD,
		"unlimited_quota": unlimited,
	}
	if unlimited {
		body["remain_balance"] = json.Number(unlimitedBalance)
	}
	writeJSON(w, http.StatusOK, body)
}
