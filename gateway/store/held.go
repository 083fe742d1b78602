package store

import (
	"context"
	"database/sql"
	"errors"
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
	_, h, err := s.TokenStanding(ctx, tokenID)
	return h, err
}

// TokenStanding reads the token's balance and what its leases and open
// reservations hold in one statement, so that the figures agree: read one
// after another, a request settling between the reads would be counted
// neither as held nor as used, and a budget alert would measure a total
// short by its reservation.
func (s *Store) TokenStanding(ctx context.Context, tokenID int64) (TokenBalance, TokenHolds, error) {
	now := s.clock.Now()
	var t tokenRow
	var leased, day, month, reserved int64
	err := s.rdb.QueryRowContext(ctx, s.q(`
		SELECT `+tokenCols+`, l.leased, l.day_leased, l.month_leased, r.reserved
		FROM tokens,
			(SELECT COALESCE(SUM(CASE WHEN debit_token THEN remaining ELSE 0 END), 0) AS leased,
				COALESCE(SUM(CASE WHEN daily_start = ? THEN remaining ELSE 0 END), 0) AS day_leased,
				COALESCE(SUM(CASE WHEN monthly_start = ? THEN remaining ELSE 0 END), 0) AS month_leased
			FROM leases WHERE token_id = ?) l,
			(SELECT COALESCE(SUM(amount), 0) AS reserved FROM reservations
			WHERE state = ? AND token_id = ? AND debit_token) r
		WHERE token_id = ?`), dayStart(now), monthStart(now), tokenID, stateReserved, tokenID, tokenID).
		Scan(append(t.dest(), &leased, &day, &month, &reserved)...)
	if errors.Is(err, sql.ErrNoRows) {
		return TokenBalance{}, TokenHolds{}, fmt.Errorf("token %d: %w", tokenID, ErrNotFound)
	}
	if err != nil {
		return TokenBalance{}, TokenHolds{}, fmt.Errorf("token %d standing: %w", tokenID, err)
	}
	t.roll(now)
	return t.balance(), TokenHolds{Leased: billing.Quota(leased), Reserved: billing.Quota(reserved),
		DayLeased: billing.Quota(day), MonthLeased: billing.Quota(month)}, nil
}

// TenantStanding reads the tenant's balance, what its leases hold and the
// sum of its grants in one statement, so that the figures agree (see
// TokenStanding).
func (s *Store) TenantStanding(ctx context.Context, userID int64) (b Balance, leased, granted billing.Quota, err error) {
	var remain, used, credit, held, sum int64
	err = s.rdb.QueryRowContext(ctx, s.q(`
		SELECT remain_quota, used_quota, unlimited, credit_limit,
			(SELECT COALESCE(SUM(remaining), 0) FROM leases WHERE user_id = ? AND debit_tenant),
			(SELECT COALESCE(SUM(amount), 0) FROM grants WHERE user_id = ?)
		FROM tenants WHERE user_id = ?`), userID, userID, userID).
		Scan(&remain, &used, &b.Unlimited, &credit, &held, &sum)
	if errors.Is(err, sql.ErrNoRows) {
		return b, 0, 0, fmt.Errorf("tenant %d: %w", userID, ErrNotFound)
	}
	if err != nil {
		return b, 0, 0, fmt.Errorf("tenant %d standing: %w", userID, err)
	}
	b.Remain, b.Used, b.CreditLimit = billing.Quota(remain), billing.Quota(used), billing.Quota(credit)
	return b, billing.Quota(held), billing.Quota(sum), nil
}
