// Package auth authenticates gateway requests from the informer cache
// (index.Lookup): API keys by the SHA-256 index of ApiTokens, and tenant
// access tokens (usage API) by the user-ID index of Tenants. No API-server or
// database call is made per request in steady state.
package auth

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/clock"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/index"
	"github.com/modelgate/modelgate/gateway/keys"
)

// AutoGroup lets a key use every group its tenant may use.
const AutoGroup = "auto"

// Principal is an authenticated API key and its tenant. The objects are the
// cache's own (no copy is made on the hot path): never modify them.
type Principal struct {
	Token  *v1.ApiToken
	Tenant *v1.Tenant
	// TokenID and UserID are the ledger IDs.
	TokenID int64
	UserID  int64
}

// Group is the key's routing group: its own, else its tenant's, else "default".
func (p *Principal) Group() string {
	if g := p.Token.Spec.Group; g != "" {
		return g
	}
	if g := string(p.Tenant.Spec.Group); g != "" {
		return g
	}
	return v1.DefaultGroup
}

// Groups are the routing groups the key may use, its own first.
func (p *Principal) Groups() []string {
	own := p.Group()
	if own != AutoGroup && !p.Token.Spec.CrossGroupRetry {
		return []string{own}
	}
	groups := []string{}
	if own != AutoGroup {
		groups = append(groups, own)
	}
	for _, g := range append([]v1.GroupName{p.Tenant.Spec.Group}, p.Tenant.Spec.AllowedGroups...) {
		if g != "" && !slices.Contains(groups, string(g)) {
			groups = append(groups, string(g))
		}
	}
	if len(groups) == 0 {
		groups = append(groups, v1.DefaultGroup)
	}
	return groups
}

// AllowsGroup reports whether the key may use a routing group.
func (p *Principal) AllowsGroup(group string) bool { return slices.Contains(p.Groups(), group) }

// AllowsModel applies the key's model allow-list, when enabled.
func (p *Principal) AllowsModel(model string) bool {
	if !p.Token.Spec.ModelLimitsEnabled {
		return true
	}
	return slices.Contains(p.Token.Spec.ModelLimits, v1.ModelID(model))
}

// Failure is why a request was not authenticated: the status and a message
// safe to show (it never contains the credential).
type Failure struct {
	Status  int
	Message string
}

func (f *Failure) Error() string { return f.Message }

func unauthorized(msg string) *Failure {
	return &Failure{Status: http.StatusUnauthorized, Message: msg}
}

// TokenIDResolver finds the ledger ID of a token whose status does not carry
// it yet (a key made by POST /v1/tokens moments ago on another replica).
type TokenIDResolver func(ctx context.Context, tok *v1.ApiToken, userID int64) (int64, error)

// Authenticator checks credentials against the cache.
type Authenticator struct {
	Lookup *index.Lookup
	Clock  clock.PassiveClock
	// ResolveTokenID is used only while a new token's status is empty.
	ResolveTokenID TokenIDResolver
}

// Credential extracts the API key of a request: `Authorization: Bearer`, or
// `x-api-key` where allowed (the messages protocol). A key sent without its
// `sk-` prefix is accepted too, since the token creation response shows the
// 48 random characters alone.
func Credential(r *http.Request, allowXAPIKey bool) string {
	key := bearer(r)
	if key == "" && allowXAPIKey {
		key = strings.TrimSpace(r.Header.Get("x-api-key"))
	}
	if key != "" && !strings.HasPrefix(key, keys.APIKeyPrefix) {
		key = keys.APIKeyPrefix + key
	}
	return key
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// APIKey authenticates an API key and checks its and its tenant's state.
func (a *Authenticator) APIKey(ctx context.Context, r *http.Request, allowXAPIKey bool) (*Principal, *Failure) {
	key := Credential(r, allowXAPIKey)
	if key == "" {
		return nil, unauthorized("missing API key: send it as `Authorization: Bearer <key>`")
	}
	found := a.Lookup.TokensByKeyHash(keys.Hash(key))
	if len(found) != 1 {
		return nil, unauthorized("invalid API key")
	}
	return a.Principal(ctx, found[0])
}

// Principal is the principal of a key's ApiToken, with the checks APIKey
// makes once the key is found: the token usable now, its tenant ready, its
// ledger ID known. The Batch controller runs a batch's lines as the
// ApiToken that submitted it this way (raw keys are not stored).
func (a *Authenticator) Principal(ctx context.Context, tok *v1.ApiToken) (*Principal, *Failure) {
	if f := a.tokenUsable(tok); f != nil {
		return nil, f
	}
	tenant, f := a.tenantOf(tok.Namespace)
	if f != nil {
		return nil, f
	}
	p := &Principal{Token: tok, Tenant: tenant, TokenID: tok.Status.TokenID, UserID: tenant.Status.UserID}
	if p.TokenID == 0 {
		id, err := a.resolve(ctx, tok, p.UserID)
		if err != nil || id == 0 {
			return nil, &Failure{Status: http.StatusServiceUnavailable, Message: "the API key is being provisioned; retry in a moment"}
		}
		p.TokenID = id
	}
	return p, nil
}

func (a *Authenticator) resolve(ctx context.Context, tok *v1.ApiToken, userID int64) (int64, error) {
	if a.ResolveTokenID == nil {
		return 0, fmt.Errorf("no resolver")
	}
	return a.ResolveTokenID(ctx, tok, userID)
}

// tokenUsable applies the token's own state, computed now rather than read
// from the mirrored status, so an expiry takes effect to the second.
func (a *Authenticator) tokenUsable(tok *v1.ApiToken) *Failure {
	switch {
	case !tok.DeletionTimestamp.IsZero():
		return unauthorized("invalid API key")
	case tok.Spec.Disabled:
		return unauthorized("the API key is disabled")
	case tok.Spec.ExpiresAt != nil && !a.Clock.Now().Before(tok.Spec.ExpiresAt.Time):
		return unauthorized("the API key has expired")
	}
	return nil
}

// tenantOf returns the ready Tenant of a namespace.
func (a *Authenticator) tenantOf(namespace string) (*v1.Tenant, *Failure) {
	for _, t := range a.Lookup.TenantsInNamespace(namespace) {
		if t.Status.UserID != 0 && t.DeletionTimestamp.IsZero() &&
			meta.IsStatusConditionTrue(t.Status.Conditions, v1.ConditionReady) {
			return t, nil
		}
	}
	return nil, unauthorized("the account of this API key is not active")
}

// KnowsKey reports whether the informer cache holds a key with this hash
// (a key made a moment ago becomes usable once it does).
func (a *Authenticator) KnowsKey(keyHash string) bool {
	return len(a.Lookup.TokensByKeyHash(keyHash)) > 0
}

// AccessToken authenticates the usage API: `Authorization: Bearer
// <access token>` plus the numeric `X-User-Id` of the account.
func (a *Authenticator) AccessToken(ctx context.Context, r *http.Request) (*v1.Tenant, *Failure) {
	userID, err := strconv.ParseInt(strings.TrimSpace(r.Header.Get("X-User-Id")), 10, 64)
	if err != nil {
		userID = 0
	}
	return a.CheckAccessToken(userID, bearer(r))
}

// CheckAccessToken is the check behind AccessToken, for callers that take
// the credentials elsewhere than in headers (the console's sign-in form):
// the access token must hash to the current token of the account whose
// user ID is given.
func (a *Authenticator) CheckAccessToken(userID int64, token string) (*v1.Tenant, *Failure) {
	if token == "" || userID <= 0 {
		return nil, unauthorized("send the account's access token as `Authorization: Bearer <token>` and its numeric user ID as `X-User-Id`")
	}
	want := keys.Hash(token)
	for _, t := range a.Lookup.TenantsByUserID(userID) {
		if t.DeletionTimestamp.IsZero() && subtle.ConstantTimeCompare([]byte(t.Status.AccessTokenHash), []byte(want)) == 1 {
			return t, nil
		}
	}
	return nil, unauthorized("invalid access token or user ID")
}

// TenantsByUserID returns the live (not deleting) Tenants of a user ID from
// the cache; the console checks a session against them.
func (a *Authenticator) TenantsByUserID(userID int64) []*v1.Tenant {
	var out []*v1.Tenant
	for _, t := range a.Lookup.TenantsByUserID(userID) {
		if t.DeletionTimestamp.IsZero() {
			out = append(out, t)
		}
	}
	return out
}
