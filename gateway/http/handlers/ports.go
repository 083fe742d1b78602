package handlers

import (
	"context"
	"net/http"
	"time"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/admission"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/ratelimit"
	"github.com/modelgate/modelgate/gateway/routing"
	"github.com/modelgate/modelgate/gateway/store"
)

// The ledger as the handlers use it, in one small interface per endpoint
// group; the gateway passes its *store.Store, unit tests a fake of the
// part they exercise.

// Balances answers the balance endpoints. A balance and what leases hold of
// it come from one statement, so that a lease taken between two reads is
// neither counted twice nor missed.
type Balances interface {
	TenantStanding(ctx context.Context, userID int64) (b store.Balance, leased, granted billing.Quota, err error)
	TokenStanding(ctx context.Context, tokenID int64) (store.TokenBalance, store.TokenHolds, error)
}

// UsageLedger answers the usage query endpoints.
type UsageLedger interface {
	ListUsage(ctx context.Context, uq store.UsageQuery) (store.Page[store.UsageRecord], error)
	SummarizeUsage(ctx context.Context, uq store.UsageQuery) (store.Page[store.UsageSummary], error)
}

// TaskLedger holds the reservations and the archive of generation tasks.
type TaskLedger interface {
	Reserve(ctx context.Context, requestID string, tokenID, userID int64, estimate billing.Quota) error
	Refund(ctx context.Context, requestID string) error
	TaskByID(ctx context.Context, userID int64, taskID string) (*store.TaskRecord, error)
	TaskByClientBusinessID(ctx context.Context, userID int64, kind, clientBusinessID string) (*store.TaskRecord, error)
	ReviewBlobInUse(ctx context.Context, blobKey string) (bool, error)
}

// ResponseStore keeps stored responses (previous_response_id, GET and
// DELETE /v1/responses/{id}).
type ResponseStore interface {
	SaveResponse(ctx context.Context, id string, userID int64, model string, state []byte) error
	LoadResponse(ctx context.Context, id string, userID int64) ([]byte, error)
	DeleteResponse(ctx context.Context, id string, userID int64) error
}

// UploadLedger records uploads.
type UploadLedger interface {
	CreateUpload(ctx context.Context, u store.Upload) error
	GetUpload(ctx context.Context, userID int64, id string) (store.Upload, error)
	DeleteUpload(ctx context.Context, userID int64, id string) error
}

// TokenRegistry registers keys made by POST /v1/tokens.
type TokenRegistry interface {
	EnsureToken(ctx context.Context, spec store.TokenSpec) (int64, error)
}

// Ledger is every part together.
type Ledger interface {
	Balances
	UsageLedger
	TaskLedger
	ResponseStore
	UploadLedger
	TokenRegistry
}

// QuotaLeaser reserves and settles text requests from this replica's
// leases (*store.Leaser).
type QuotaLeaser interface {
	Reserve(ctx context.Context, requestID string, tokenID, userID int64, estimate billing.Quota) (*store.Hold, error)
	Settle(ctx context.Context, h *store.Hold, actual billing.Quota) (store.Charge, error)
	Release(ctx context.Context, h *store.Hold) error
}

// Routes finds routes (the gateway's *routing.Router): admission's lookup
// and plan, a family's default model and the models a tenant sees.
type Routes interface {
	admission.Routes
	DefaultModel(ctx context.Context, tenantNamespace string, typ v1.ModelType) (string, error)
	Visible(ctx context.Context, tenantNamespace string) ([]*v1.ModelRoute, error)
}

// Breaker is the per-backend circuit breaker (*routing.Breaker).
type Breaker interface {
	Success(key string)
	Failure(key string)
	Hold(key string, d time.Duration)
}

// Limits are the per-minute limits (*ratelimit.Limiter): admission's checks
// and the tokens a finished request counts.
type Limits interface {
	admission.Limits
	ChargeTokens(key ratelimit.Key, perMinute, n int64)
}

// Authenticator resolves API keys and usage access tokens
// (*auth.Authenticator).
type Authenticator interface {
	APIKeys
	AccessToken(ctx context.Context, r *http.Request) (*v1.Tenant, *auth.Failure)
	// KnowsKey reports whether this replica's cache holds a key hash yet.
	KnowsKey(keyHash string) bool
}

var (
	_ Ledger        = (*store.Store)(nil)
	_ QuotaLeaser   = (*store.Leaser)(nil)
	_ Routes        = (*routing.Router)(nil)
	_ Breaker       = (*routing.Breaker)(nil)
	_ Limits        = (*ratelimit.Limiter)(nil)
	_ Authenticator = (*auth.Authenticator)(nil)
)
