package handlers

import (
	"context"
	"slices"
	"strings"

	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/billing"
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

// bound keeps a key created by another key within the creator's own limits,
// so that no key can mint a stronger one (docs/api-choices.md, "Keys created
// by keys"). A limit the request leaves at its default is inherited from the
// creator; a limit it sets looser than the creator's is refused. Groups are
// the tenant's to allow (plan checks them), not the creator's. The returned
// string is the user-facing refusal, empty when the plan fits.
func (h *Tokens) bound(ctx context.Context, p *auth.Principal, plan *tokenPlan) (string, error) {
	parent := p.Token.Spec
	if plan.req.UnlimitedQuota && !parent.UnlimitedQuota {
		return msgExceedsUnlimited, nil
	}
	if !parent.UnlimitedQuota {
		remain, err := h.tokenRemain(ctx, p)
		if err != nil {
			return "", err
		}
		if plan.quota > remain {
			return msgExceedsQuota, nil
		}
	}
	if msg := boundPeriod(&plan.daily, billing.Quota(parent.DailyQuota), msgExceedsDaily); msg != "" {
		return msg, nil
	}
	if msg := boundPeriod(&plan.monthly, billing.Quota(parent.MonthlyQuota), msgExceedsMonthly); msg != "" {
		return msg, nil
	}
	if parent.ExpiresAt != nil {
		switch {
		case plan.expires == nil:
			plan.expires = parent.ExpiresAt.DeepCopy()
		case plan.expires.After(parent.ExpiresAt.Time):
			return msgExceedsExpiry, nil
		}
	}
	if parent.ModelLimitsEnabled {
		if !plan.req.ModelLimitsEnabled {
			plan.req.ModelLimitsEnabled = true
			plan.modelLimits = slices.Clone(parent.ModelLimits)
			names := make([]string, len(parent.ModelLimits))
			for i, m := range parent.ModelLimits {
				names[i] = string(m)
			}
			plan.modelLimitsCommaSeparated = strings.Join(names, ",")
		}
		for _, m := range plan.modelLimits {
			if !slices.Contains(parent.ModelLimits, m) {
				return msgExceedsModels, nil
			}
		}
	}
	return "", nil
}

// boundPeriod applies a daily or monthly cap: zero means "no cap", so a
// creator with a cap passes it on to a request without one.
func boundPeriod(child *billing.Quota, parent billing.Quota, refusal string) string {
	if parent == 0 {
		return ""
	}
	if *child == 0 {
		*child = parent
		return ""
	}
	if *child > parent {
		return refusal
	}
	return ""
}

// tokenRemain is the calling key's spendable quota: its ledger remainder
// plus what its leases hold, as GET /v1/balance reports it.
func (h *Tokens) tokenRemain(ctx context.Context, p *auth.Principal) (billing.Quota, error) {
	b, err := h.Ledger.TokenUsage(ctx, p.TokenID)
	if err != nil {
		return 0, err
	}
	leased, err := h.Ledger.TokenLeased(ctx, p.TokenID)
	if err != nil {
		return 0, err
	}
	return b.Remain + leased, nil
}
