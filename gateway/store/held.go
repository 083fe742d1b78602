package store

import (
	"context"
	"fmt"

	"github.com/modelgate/modelgate/gateway/billing"
)

// Leased quota is taken out of a balance but not spent: it still belongs to
// the account. Balances shown to people (the balance endpoints, status)
// add it back; the ledger's own remain excludes it so leases never overdraw.

// TenantLeased is the quota the tenant's leases hold out of its balance.
func (s *Store) TenantLeased(ctx context.Context, userID int64) (billing.Quota, error) {
	return s.leasedSum(ctx, `SELECT COALESCE(SUM(remaining), 0) FROM leases WHERE user_id = ? AND debit_tenant`, userID)
}

// TokenLeased is the quota the token's leases hold out of its balance.
func (s *Store) TokenLeased(ctx context.Context, tokenID int64) (billing.Quota, error) {
	return s.leasedSum(ctx, `SELECT COALESCE(SUM(remaining), 0) FROM leases WHERE token_id = ? AND debit_token`, tokenID)
}

func (s *Store) leasedSum(ctx context.Context, q string, id int64) (billing.Quota, error) {
	var held int64
	if err := s.rdb.QueryRowContext(ctx, s.q(q), id).Scan(&held); err != nil {
		return 0, fmt.Errorf("leased quota of %d: %w", id, err)
	}
	return billing.Quota(held), nil
}

// TokenHolds is what is held out of a token's balance and windows without
// being spent yet: what its budget alerts measure besides the balance.
type TokenHolds struct {
	// Leased is what the token's leases hold out of its balance (TokenLeased).
	Leased billing.Quota
	// Reserved is what its open direct reservations hold out of its
	// balance (requests and tasks in flight).
	Reserved billing.Quota
	// DayLeased and MonthLeased are what leases hold in the token's current
	// UTC day and month windows: counted in DailyUsed and MonthlyUsed,
	// though no request has spent it.
	DayLeased, MonthLeased billing.Quota
}

// TokenHolds reads what the token's leases and open reservations hold, as of
// the ledger's clock.
func (s *Store) TokenHolds(ctx context.Context, tokenID int64) (TokenHolds, error) {
	now := s.clock.Now()
	var leased, day, month, reserved int64
	err := s.rdb.QueryRowContext(ctx, s.q(`
		SELECT COALESCE(SUM(CASE WHEN debit_token THEN remaining ELSE 0 END), 0),
			COALESCE(SUM(CASE WHEN daily_start = ? THEN remaining ELSE 0 END), 0),
			COALESCE(SUM(CASE WHEN monthly_start = ? THEN remaining ELSE 0 END), 0)
		FROM leases WHERE token_id = ?`), dayStart(now), monthStart(now), tokenID).Scan(&leased, &day, &month)
	if err != nil {
		return TokenHolds{}, fmt.Errorf("leases of token %d: %w", tokenID, err)
	}
	err = s.rdb.QueryRowContext(ctx, s.q(`
		SELECT COALESCE(SUM(amount), 0) FROM reservations
		WHERE state = ? AND token_id = ? AND debit_token`), stateReserved, tokenID).Scan(&reserved)
	if err != nil {
		return TokenHolds{}, fmt.Errorf("open reservations of token %d: %w", tokenID, err)
	}
	return TokenHolds{Leased: billing.Quota(leased), Reserved: billing.Quota(reserved),
		DayLeased: billing.Quota(day), MonthLeased: billing.Quota(month)}, nil
}
