package handlers

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/apierr"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/keys"
	"github.com/modelgate/modelgate/gateway/tokenspec"
)

// Messages of the token endpoint. The contract gives Chinese-language
// messages for an overlong name and for a failed generation (as the public
// gateway it mirrors does); the others follow the same style.
const (
	msgNameTooLong     = "令牌名称过长"
	msgNameRequired    = "令牌名称不能为空"
	msgGenerateFailed  = "令牌生成失败"
	msgInvalidBody     = "无效的参数"
	msgExpiredInPast   = "过期时间不能早于当前时间"
	msgGroupNotAllowed = "无权使用该分组"
	msgNegativeAmount  = "额度不能为负数"
	creditsPerUSD      = 200
	maxTokenBody       = 64 << 10
)

// Tokens serves POST /v1/tokens.
type Tokens struct {
	// Writer creates the ApiToken (and deletes it when registering fails).
	Writer client.Writer
	// Ledger registers the key and answers the token's bounds.
	Ledger interface {
		TokenRegistry
		Balances
	}
	// Auth tells when this replica's cache knows the new key.
	Auth  Authenticator
	Clock clock.PassiveClock
}

// createTokenRequest is the body of POST /v1/tokens. Credits are json.Number
// so 0.1 credits converts exactly.
type createTokenRequest struct {
	Name               *string      `json:"name"`
	ExpiredTime        *int64       `json:"expired_time"`
	RemainQuota        *int64       `json:"remain_quota"`
	RemainCredits      *json.Number `json:"remain_credits"`
	DailyCredits       *json.Number `json:"daily_credits"`
	MonthlyCredits     *json.Number `json:"monthly_credits"`
	UnlimitedQuota     bool         `json:"unlimited_quota"`
	ModelLimitsEnabled bool         `json:"model_limits_enabled"`
	ModelLimits        string       `json:"model_limits"`
	Group              string       `json:"group"`
	CrossGroupRetry    bool         `json:"cross_group_retry"`
}

// tokenView is the contract's API token resource.
type tokenView struct {
	ID                 int64       `json:"id"`
	UserID             int64       `json:"user_id"`
	Key                string      `json:"key,omitempty"`
	Name               string      `json:"name"`
	Status             int32       `json:"status"`
	CreatedTime        int64       `json:"created_time"`
	AccessedTime       int64       `json:"accessed_time"`
	ExpiredTime        int64       `json:"expired_time"`
	RemainQuota        int64       `json:"remain_quota"`
	RemainCredits      json.Number `json:"remain_credits"`
	UnlimitedQuota     bool        `json:"unlimited_quota"`
	UsedQuota          int64       `json:"used_quota"`
	UsedCredits        json.Number `json:"used_credits"`
	DailyCredits       json.Number `json:"daily_credits"`
	MonthlyCredits     json.Number `json:"monthly_credits"`
	ModelLimitsEnabled bool        `json:"model_limits_enabled"`
	ModelLimits        string      `json:"model_limits"`
	Group              string      `json:"group"`
	CrossGroupRetry    bool        `json:"cross_group_retry"`
}

// number renders an exact decimal as a JSON number.
func number(s string) json.Number { return json.Number(s) }

// tokenPlan is a creation request read from the body: the shared request
// in ledger units.
type tokenPlan struct {
	req tokenspec.Request
}

// Create makes an ApiToken in the caller's tenant namespace. The key is made
// here, returned once, and only its hash is stored. Failures answer HTTP 200
// with {success:false, message} as the contract shows.
func (h *Tokens) Create(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	plan, msg := h.plan(r)
	if msg == "" {
		var err error
		if msg, err = h.grant(r.Context(), p, &plan); err != nil {
			log.FromContext(r.Context()).Error(err, "read the creating key's balance")
			msg = msgGenerateFailed
		}
	}
	if msg != "" {
		apierr.Simple(w, http.StatusOK, msg)
		return
	}
	view, err := h.create(r, p, plan)
	if err != nil {
		log.FromContext(r.Context()).Error(err, "create token")
		apierr.Simple(w, http.StatusOK, msgGenerateFailed)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"success": true, "message": "", "credits_per_usd": creditsPerUSD, "data": view,
	})
}

// plan reads the body and converts credits to quota; a non-empty string is
// the user-facing failure message. The rules are tokenspec.Plan's (grant).
func (h *Tokens) plan(r *http.Request) (tokenPlan, string) {
	var req createTokenRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxTokenBody))
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil {
		return tokenPlan{}, msgInvalidBody
	}
	plan := tokenPlan{req: tokenspec.Request{
		ModelLimitsEnabled: req.ModelLimitsEnabled, Group: req.Group, CrossGroupRetry: req.CrossGroupRetry,
		Unlimited: req.UnlimitedQuota,
	}}
	if req.Name != nil {
		plan.req.Name = *req.Name
	}
	if req.ExpiredTime != nil && *req.ExpiredTime != -1 {
		t := time.Unix(*req.ExpiredTime, 0)
		plan.req.ExpiresAt = &t
	}
	var err error
	if plan.req.Quota, err = initialTokenQuota(req); err != nil {
		return plan, msgNegativeAmount
	}
	if plan.req.Daily, err = creditsQuota(req.DailyCredits); err != nil {
		return plan, msgNegativeAmount
	}
	if plan.req.Monthly, err = creditsQuota(req.MonthlyCredits); err != nil {
		return plan, msgNegativeAmount
	}
	for _, m := range strings.Split(req.ModelLimits, ",") {
		if m = strings.TrimSpace(m); m != "" {
			plan.req.ModelLimits = append(plan.req.ModelLimits, v1.ModelID(m))
		}
	}
	return plan, ""
}

// refusals are the endpoint's messages for tokenspec.Plan's refusals.
var refusals = map[tokenspec.Reason]string{
	tokenspec.NameRequired:     msgNameRequired,
	tokenspec.NameTooLong:      msgNameTooLong,
	tokenspec.ExpiresInPast:    msgExpiredInPast,
	tokenspec.NegativeAmount:   msgNegativeAmount,
	tokenspec.GroupNotAllowed:  msgGroupNotAllowed,
	tokenspec.ExceedsUnlimited: msgExceedsUnlimited,
	tokenspec.ExceedsQuota:     msgExceedsQuota,
	tokenspec.ExceedsDaily:     msgExceedsDaily,
	tokenspec.ExceedsMonthly:   msgExceedsMonthly,
	tokenspec.ExceedsExpiry:    msgExceedsExpiry,
	tokenspec.ExceedsModels:    msgExceedsModels,
}

// initialTokenQuota applies the contract: remain_credits, when given,
// overrides remain_quota; both default to 0.
func initialTokenQuota(req createTokenRequest) (billing.Quota, error) {
	if req.RemainCredits != nil {
		return creditsQuota(req.RemainCredits)
	}
	if req.RemainQuota != nil {
		if *req.RemainQuota < 0 {
			return 0, errors.New("negative quota")
		}
		return billing.Quota(*req.RemainQuota), nil
	}
	return 0, nil
}

func creditsQuota(n *json.Number) (billing.Quota, error) {
	if n == nil {
		return 0, nil
	}
	return billing.QuotaFromCreditsNumber(*n)
}

// create writes the ApiToken and registers it in the ledger
// (tokenspec.Create, as the console does) and renders the response.
func (h *Tokens) create(r *http.Request, p *auth.Principal, plan tokenPlan) (tokenView, error) {
	ctx := r.Context()
	key, err := keys.NewAPIKey()
	if err != nil {
		return tokenView{}, err
	}
	req := plan.req
	tok := tokenspec.NewApiToken(req, p.Tenant.Namespace, key, map[string]string{"modelgate.io/created-by": "api"})
	id, err := tokenspec.Create(ctx, h.Writer, h.Ledger, tok, p.UserID)
	if err != nil {
		return tokenView{}, err
	}
	tokenspec.AwaitCached(ctx, h.Auth.KnowsKey, tok.Spec.KeyHash)
	now := tok.CreationTimestamp.Unix()
	expired := int64(-1)
	if req.ExpiresAt != nil {
		expired = req.ExpiresAt.Unix()
	}
	names := make([]string, len(req.ModelLimits))
	for i, m := range req.ModelLimits {
		names[i] = string(m)
	}
	return tokenView{
		ID: id, UserID: p.UserID, Key: strings.TrimPrefix(key, keys.APIKeyPrefix), Name: req.Name,
		Status: int32(v1.TokenEnabled), CreatedTime: now, AccessedTime: now, ExpiredTime: expired,
		RemainQuota: int64(req.Quota), RemainCredits: number(req.Quota.Credits().String()),
		UnlimitedQuota: req.Unlimited, UsedQuota: 0, UsedCredits: number("0"),
		DailyCredits: number(req.Daily.Credits().String()), MonthlyCredits: number(req.Monthly.Credits().String()),
		ModelLimitsEnabled: req.ModelLimitsEnabled, ModelLimits: strings.Join(names, ","),
		Group: req.Group, CrossGroupRetry: req.CrossGroupRetry,
	}, nil
}
