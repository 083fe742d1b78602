package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	maxTokenNameLength = 50
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

// tokenPlan is a validated creation request in ledger units.
type tokenPlan struct {
	name                      string
	expires                   *metav1.Time
	quota, daily, monthly     billing.Quota
	req                       createTokenRequest
	modelLimits               []v1.ModelID
	modelLimitsCommaSeparated string
}

// Create makes an ApiToken in the caller's tenant namespace. The key is made
// here, returned once, and only its hash is stored. Failures answer HTTP 200
// with {success:false, message} as the contract shows.
func (h *Tokens) Create(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	plan, msg := h.plan(r, p)
	if msg == "" {
		var err error
		if msg, err = h.bound(r.Context(), p, &plan); err != nil {
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

// plan validates the body and converts credits to quota; a non-empty string
// is the user-facing failure message.
func (h *Tokens) plan(r *http.Request, p *auth.Principal) (tokenPlan, string) {
	var req createTokenRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxTokenBody))
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil {
		return tokenPlan{}, msgInvalidBody
	}
	plan := tokenPlan{req: req}
	if req.Name == nil || strings.TrimSpace(*req.Name) == "" {
		return plan, msgNameRequired
	}
	if utf8.RuneCountInString(*req.Name) > maxTokenNameLength {
		return plan, msgNameTooLong
	}
	plan.name = *req.Name
	if req.ExpiredTime != nil && *req.ExpiredTime != -1 {
		if *req.ExpiredTime <= h.Clock.Now().Unix() {
			return plan, msgExpiredInPast
		}
		t := metav1.NewTime(time.Unix(*req.ExpiredTime, 0))
		plan.expires = &t
	}
	var err error
	if plan.quota, err = initialTokenQuota(req); err != nil {
		return plan, msgNegativeAmount
	}
	if plan.daily, err = creditsQuota(req.DailyCredits); err != nil {
		return plan, msgNegativeAmount
	}
	if plan.monthly, err = creditsQuota(req.MonthlyCredits); err != nil {
		return plan, msgNegativeAmount
	}
	if req.Group != "" && req.Group != auth.AutoGroup && !tenantAllowsGroup(p.Tenant, req.Group) {
		return plan, msgGroupNotAllowed
	}
	var names []string
	for _, m := range strings.Split(req.ModelLimits, ",") {
		if m = strings.TrimSpace(m); m != "" {
			plan.modelLimits = append(plan.modelLimits, v1.ModelID(m))
			names = append(names, m)
		}
	}
	plan.modelLimitsCommaSeparated = strings.Join(names, ",")
	return plan, ""
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

func tenantAllowsGroup(t *v1.Tenant, group string) bool {
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

// create writes the ApiToken, registers it in the ledger and renders the
// response. A failed registration deletes the object again: no orphan.
func (h *Tokens) create(r *http.Request, p *auth.Principal, plan tokenPlan) (tokenView, error) {
	ctx := r.Context()
	key, err := keys.NewAPIKey()
	if err != nil {
		return tokenView{}, err
	}
	quota := int64(plan.quota)
	tok := &v1.ApiToken{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "token-", Namespace: p.Tenant.Namespace,
			Labels:     map[string]string{"modelgate.io/created-by": "api"},
			Finalizers: []string{v1.LedgerFinalizer}, // registered in the ledger below: disabled on deletion
		},
		Spec: v1.ApiTokenSpec{
			DisplayName: plan.name, KeyHash: keys.Hash(key), KeyPrefix: keys.DisplayPrefix(key),
			ExpiresAt: plan.expires, Quota: &quota, UnlimitedQuota: plan.req.UnlimitedQuota,
			DailyQuota: int64(plan.daily), MonthlyQuota: int64(plan.monthly),
			ModelLimitsEnabled: plan.req.ModelLimitsEnabled, Group: plan.req.Group,
			CrossGroupRetry: plan.req.CrossGroupRetry,
		},
	}
	if plan.req.ModelLimitsEnabled {
		tok.Spec.ModelLimits = plan.modelLimits
	}
	if err := h.Writer.Create(ctx, tok); err != nil {
		return tokenView{}, fmt.Errorf("create ApiToken: %w", err)
	}
	id, err := h.register(ctx, tok, p.UserID)
	if err != nil {
		if derr := h.Writer.Delete(ctx, tok); derr != nil {
			err = errors.Join(err, fmt.Errorf("delete the unregistered ApiToken: %w", derr))
		}
		return tokenView{}, fmt.Errorf("register token: %w", err)
	}
	h.awaitCache(ctx, tok.Spec.KeyHash)
	now := tok.CreationTimestamp.Unix()
	expired := int64(-1)
	if plan.expires != nil {
		expired = plan.expires.Unix()
	}
	return tokenView{
		ID: id, UserID: p.UserID, Key: strings.TrimPrefix(key, keys.APIKeyPrefix), Name: plan.name,
		Status: int32(v1.TokenEnabled), CreatedTime: now, AccessedTime: now, ExpiredTime: expired,
		RemainQuota: quota, RemainCredits: number(plan.quota.Credits().String()),
		UnlimitedQuota: plan.req.UnlimitedQuota, UsedQuota: 0, UsedCredits: number("0"),
		DailyCredits: number(plan.daily.Credits().String()), MonthlyCredits: number(plan.monthly.Credits().String()),
		ModelLimitsEnabled: plan.req.ModelLimitsEnabled, ModelLimits: plan.modelLimitsCommaSeparated,
		Group: plan.req.Group, CrossGroupRetry: plan.req.CrossGroupRetry,
	}, nil
}

// register enters the ApiToken just written in the ledger. The registration
// is tokenspec.For's, as the controller's and the gateway authenticator's
// are, so whichever of them reaches the ledger first the row starts the same.
func (h *Tokens) register(ctx context.Context, tok *v1.ApiToken, userID int64) (int64, error) {
	spec, err := tokenspec.For(tok, userID)
	if err != nil {
		return 0, err
	}
	return h.Ledger.EnsureToken(ctx, spec)
}

// awaitCache waits (briefly) until this gateway's informer cache holds the
// new key, so that a client using the key right after the response is not
// refused by a cache a few milliseconds behind. Other replicas catch up on
// their own within the watch latency.
func (h *Tokens) awaitCache(ctx context.Context, keyHash string) {
	deadline := time.Now().Add(2 * time.Second)
	for !h.Auth.KnowsKey(keyHash) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
}
