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
