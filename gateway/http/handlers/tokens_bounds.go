package handlers

import (
	"context"

	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/tokenspec"
)

// Refusals of a key that asks for more than it has. Each names the field, in
// the style of the endpoint's other messages.
const (
	msgExceedsUnlimited = "当前令牌额度有限，不能创建无限额度的令牌 (unlimited_quota)"
	msgExceedsQuota     = "新令牌的额度不能超过当前令牌的剩余额度 (remain_quota)"
	msgExceedsDaily     = "新令牌的每日额度不能超过当前令牌的每日额度 (daily_credits)"
	msgExceedsMonthly   = "新令牌的每月额度不能超过当前令牌的每月额度 (monthly_credits)"
	msgExceedsExpiry    = "新令牌的过期时间不能晚于当前令牌 (expired_time)"
	msgExceedsModels    = "新令牌的模型不能超出当前令牌的模型限制 (model_limits)"
)

// grant applies tokenspec.Plan with the calling key as the creator, so that
// no key can mint a stronger one (docs/api-choices.md, "Keys created by
// keys"). Groups are the tenant's to allow, not the creator's. The returned
// string is the user-facing refusal, empty when the plan fits.
func (h *Tokens) grant(ctx context.Context, p *auth.Principal, plan *tokenPlan) (string, error) {
	parent := p.Token.Spec
	b := tokenspec.Bounds{Unlimited: parent.UnlimitedQuota, Daily: billing.Quota(parent.DailyQuota),
		Monthly: billing.Quota(parent.MonthlyQuota), ModelLimitsEnabled: parent.ModelLimitsEnabled, ModelLimits: parent.ModelLimits}
	if parent.ExpiresAt != nil {
		e := parent.ExpiresAt.Time
		b.ExpiresAt = &e
	}
	now := h.Clock.Now()
	if !parent.UnlimitedQuota {
		// A request refused whatever the balance is answered without
		// reading the ledger.
		loose := b
		loose.Unlimited = false
		loose.Remain = plan.req.Quota
		if _, refused := tokenspec.Plan(plan.req, p.Tenant, loose, now); refused != "" {
			return refusals[refused], nil
		}
		var err error
		if b.Remain, err = h.tokenRemain(ctx, p); err != nil {
			return "", err
		}
	}
	req, refused := tokenspec.Plan(plan.req, p.Tenant, b, now)
	if refused != "" {
		return refusals[refused], nil
	}
	plan.req = req
	return "", nil
}

// tokenRemain is the calling key's spendable quota: its ledger remainder
// plus what its leases hold, as GET /v1/balance reports it.
func (h *Tokens) tokenRemain(ctx context.Context, p *auth.Principal) (billing.Quota, error) {
	b, holds, err := h.Ledger.TokenStanding(ctx, p.TokenID)
	if err != nil {
		return 0, err
	}
	return b.Remain + holds.Leased, nil
}
