// Package tokenspec turns an ApiToken into its ledger registration. It is the
// one mapping the ApiToken controller, the gateway's authenticator (a key
// used before the controller registered it) and POST /v1/tokens all use, so
// that whichever of them reaches the ledger first registers the same token.
// It also turns a request for a new key into an ApiToken (Plan, with the
// rules every new key obeys, NewApiToken and Create), for POST /v1/tokens
// and the console's Keys page alike.
package tokenspec

import (
	"errors"
	"fmt"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/store"
)

// For returns the ledger registration of tok, owned by the tenant whose
// ledger user ID is userID: the UID as idempotency key, the display name, the
// starting balance (spec.credits converted to quota, else spec.quota, else 0)
// and the limits (spec.unlimitedQuota, spec.dailyQuota, spec.monthlyQuota).
//
// The result depends on nothing but the object and the user ID, both of
// which every caller has in full, so every registration made through For is
// complete: the ledger keeps the first one it receives (store.EnsureToken),
// and it is the same whoever sent it. A spec that does not say one starting
// balance (both quota and credits, which the CRD refuses, a malformed or
// negative amount) gives an error and no registration.
func For(tok *v1.ApiToken, userID int64) (store.TokenSpec, error) {
	if tok.UID == "" {
		return store.TokenSpec{}, errors.New("the ApiToken has no UID yet")
	}
	if userID <= 0 {
		return store.TokenSpec{}, fmt.Errorf("the tenant of ApiToken %s/%s has no ledger user ID yet", tok.Namespace, tok.Name)
	}
	initial, err := initialQuota(tok.Spec)
	if err != nil {
		return store.TokenSpec{}, err
	}
	lim, err := limits(tok.Spec)
	if err != nil {
		return store.TokenSpec{}, err
	}
	return store.TokenSpec{
		UID: string(tok.UID), UserID: userID, Name: tok.Spec.DisplayName,
		RemainQuota: initial, TokenLimits: lim,
	}, nil
}

// initialQuota is the token's starting balance: spec.credits converted to
// quota (200 credits = 1 USD = 500000 quota, rounded half up to a whole unit
// as every money conversion, see docs/billing.md), else spec.quota, else 0.
// The two are alternatives; a spec with both is refused.
func initialQuota(spec v1.ApiTokenSpec) (billing.Quota, error) {
	switch {
	case spec.Credits != nil && spec.Quota != nil:
		return 0, errors.New("set at most one of quota or credits")
	case spec.Credits != nil:
		q, err := billing.QuotaFromCreditsText(string(*spec.Credits))
		if err != nil {
			return 0, fmt.Errorf("credits: %w", err)
		}
		return q, nil
	case spec.Quota != nil:
		if *spec.Quota < 0 {
			return 0, fmt.Errorf("quota %d is negative", *spec.Quota)
		}
		return billing.Quota(*spec.Quota), nil
	default:
		return 0, nil
	}
}

// limits are the token's restrictions that follow the spec after the
// registration (store.UpdateTokenLimits): the unlimited flag and the daily
// and monthly caps in quota units, 0 meaning no cap.
func limits(spec v1.ApiTokenSpec) (store.TokenLimits, error) {
	if spec.DailyQuota < 0 || spec.MonthlyQuota < 0 {
		return store.TokenLimits{}, fmt.Errorf("daily (%d) and monthly (%d) quota must not be negative", spec.DailyQuota, spec.MonthlyQuota)
	}
	return store.TokenLimits{
		Unlimited:    spec.UnlimitedQuota,
		DailyLimit:   billing.Quota(spec.DailyQuota),
		MonthlyLimit: billing.Quota(spec.MonthlyQuota),
	}, nil
}
