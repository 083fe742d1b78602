package tokenspec

import (
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/keys"
)

// MaxNameLength is the longest key name, in characters (the contract's 50).
const MaxNameLength = 50

// AutoGroup is the group value that lets the gateway choose the group per
// request (auth.AutoGroup); any tenant may ask for it.
const AutoGroup = "auto"

// Reason says why a key request is refused; each caller renders it in its
// own words (POST /v1/tokens in the contract's messages, the console in
// English).
type Reason string

// The refusals of a key request, in the order they are checked.
const (
	NameRequired     Reason = "name_required"
	NameTooLong      Reason = "name_too_long"
	ExpiresInPast    Reason = "expires_in_past"
	NegativeAmount   Reason = "negative_amount"
	GroupNotAllowed  Reason = "group_not_allowed"
	ExceedsUnlimited Reason = "exceeds_unlimited"
	ExceedsQuota     Reason = "exceeds_quota"
	ExceedsDaily     Reason = "exceeds_daily"
	ExceedsMonthly   Reason = "exceeds_monthly"
	ExceedsExpiry    Reason = "exceeds_expiry"
	ExceedsModels    Reason = "exceeds_models"
)

// Request is a request for a new key in ledger units, parsed from the
// caller's own format (JSON of POST /v1/tokens, the console's form).
type Request struct {
	Name string
	// ExpiresAt is nil for a key that never expires.
	ExpiresAt          *time.Time
	Quota              billing.Quota
	Unlimited          bool
	Daily, Monthly     billing.Quota // 0: no cap
	RequestsPerMinute  int32
	TokensPerMinute    int64
	ModelLimitsEnabled bool
	ModelLimits        []v1.ModelID
	Group              string
	CrossGroupRetry    bool
}

// Bounds are what the creator of a key may grant: a key creating a key
// passes its own limits, the console the tenant's. The zero value of a
// period cap, an expiry or the model list means the creator has none.
type Bounds struct {
	Unlimited          bool
	Remain             billing.Quota // checked only when !Unlimited
	Daily, Monthly     billing.Quota
	ExpiresAt          *time.Time
	ModelLimitsEnabled bool
	ModelLimits        []v1.ModelID
}

// Plan applies the rules every new key obeys, wherever it is asked for, and
// returns the request as it will be granted: a name of 1–50 characters, an
// expiry in the future, no negative amount, a group the tenant allows, and
// nothing the creator does not have itself (docs/api-choices.md, "Keys
// created by keys"): a limit the request leaves at its default is inherited
// from the creator, a looser one is refused. The empty Reason means granted.
func Plan(req Request, tenant *v1.Tenant, b Bounds, now time.Time) (Request, Reason) {
	if strings.TrimSpace(req.Name) == "" {
		return req, NameRequired
	}
	if utf8.RuneCountInString(req.Name) > MaxNameLength {
		return req, NameTooLong
	}
	if req.ExpiresAt != nil && !req.ExpiresAt.After(now) {
		return req, ExpiresInPast
	}
	if req.Quota < 0 || req.Daily < 0 || req.Monthly < 0 || req.RequestsPerMinute < 0 || req.TokensPerMinute < 0 {
		return req, NegativeAmount
	}
	if req.Group != "" && req.Group != AutoGroup && !TenantAllowsGroup(tenant, req.Group) {
		return req, GroupNotAllowed
	}
	if req.Unlimited && !b.Unlimited {
		return req, ExceedsUnlimited
	}
	if !b.Unlimited && req.Quota > b.Remain {
		return req, ExceedsQuota
	}
	var ok bool
	if req.Daily, ok = boundPeriod(req.Daily, b.Daily); !ok {
		return req, ExceedsDaily
	}
	if req.Monthly, ok = boundPeriod(req.Monthly, b.Monthly); !ok {
		return req, ExceedsMonthly
	}
	if b.ExpiresAt != nil {
		switch {
		case req.ExpiresAt == nil:
			e := *b.ExpiresAt
			req.ExpiresAt = &e
		case req.ExpiresAt.After(*b.ExpiresAt):
			return req, ExceedsExpiry
		}
	}
	if b.ModelLimitsEnabled {
		if !req.ModelLimitsEnabled {
			req.ModelLimitsEnabled = true
			req.ModelLimits = slices.Clone(b.ModelLimits)
		}
		for _, m := range req.ModelLimits {
			if !slices.Contains(b.ModelLimits, m) {
				return req, ExceedsModels
			}
		}
	}
	return req, ""
}

// boundPeriod applies a daily or monthly cap: zero means "no cap", so a
// creator with a cap passes it on to a request without one.
func boundPeriod(child, parent billing.Quota) (billing.Quota, bool) {
	switch {
	case parent == 0:
		return child, true
	case child == 0:
		return parent, true
	default:
		return child, child <= parent
	}
}

// TenantAllowsGroup tells whether the tenant may use the group: its own
// (the default group when it names none) or one of spec.allowedGroups.
func TenantAllowsGroup(t *v1.Tenant, group string) bool {
	if string(t.Spec.Group) == group || (t.Spec.Group == "" && group == v1.DefaultGroup) {
		return true
	}
	for _, g := range t.Spec.AllowedGroups {
		if string(g) == group {
			return true
		}
	}
	return false
}

// NewApiToken is the ApiToken of a granted request (Plan's result) for the
// raw key: only the key's hash and display prefix are kept. The ledger
// finalizer is set because the creator registers the key in the ledger
// right after writing it, so deletion must disable it there.
func NewApiToken(req Request, namespace, key string, labels map[string]string) *v1.ApiToken {
	quota := int64(req.Quota)
	tok := &v1.ApiToken{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "token-", Namespace: namespace, Labels: labels,
			Finalizers: []string{v1.LedgerFinalizer},
		},
		Spec: v1.ApiTokenSpec{
			DisplayName: req.Name, KeyHash: keys.Hash(key), KeyPrefix: keys.DisplayPrefix(key),
			Quota: &quota, UnlimitedQuota: req.Unlimited,
			DailyQuota: int64(req.Daily), MonthlyQuota: int64(req.Monthly),
			RequestsPerMinute: req.RequestsPerMinute, TokensPerMinute: req.TokensPerMinute,
			ModelLimitsEnabled: req.ModelLimitsEnabled, Group: req.Group, CrossGroupRetry: req.CrossGroupRetry,
		},
	}
	if req.ExpiresAt != nil {
		t := metav1.NewTime(*req.ExpiresAt)
		tok.Spec.ExpiresAt = &t
	}
	if req.ModelLimitsEnabled {
		tok.Spec.ModelLimits = req.ModelLimits
	}
	return tok
}
