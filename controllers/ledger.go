package controllers

import (
	"context"

	"github.com/modelgate/modelgate/controllers/batch"
	"github.com/modelgate/modelgate/controllers/generationtask"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/housekeeping"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/tasks"
)

// Ledger is the part of the database the controllers use; *store.Store
// implements it.
type Ledger interface {
	EnsureTenant(ctx context.Context, uid, namespace, name string) (int64, error)
	SetTenantUnlimited(ctx context.Context, userID int64, unlimited bool) error
	SetTenantCreditLimit(ctx context.Context, userID int64, limit billing.Quota) error
	ApplyGrant(ctx context.Context, userID int64, grantID string, amount billing.Quota) (bool, error)
	EnsureToken(ctx context.Context, spec store.TokenSpec) (int64, error)
	UpdateTokenLimits(ctx context.Context, tokenID int64, l store.TokenLimits) error
	// The standings read a balance and what is held out of it in one
	// statement: the mirrors and the budget alerts compare them.
	TenantStanding(ctx context.Context, userID int64) (b store.Balance, leased, granted billing.Quota, err error)
	TokenStanding(ctx context.Context, tokenID int64) (store.TokenBalance, store.TokenHolds, error)
	DisableToken(ctx context.Context, tokenID int64) (billing.Quota, error)
	DisableTenantTokens(ctx context.Context, userID int64) (billing.Quota, error)
}

var _ Ledger = (*store.Store)(nil)

// SystemLedger is everything the controller set needs from the database:
// the reconcilers' Ledger, the GenerationTask controller's, the
// review sweeper's records and the housekeeping jobs. Setup takes it whole,
// so a ledger that lacks a part is a compile error, not a controller that
// silently never runs.
type SystemLedger interface {
	Ledger
	generationtask.Ledger
	tasks.ReviewRecords
	housekeeping.Ledger
	batch.Ledger
}

var _ SystemLedger = (*store.Store)(nil)
