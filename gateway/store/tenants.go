package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/modelgate/modelgate/gateway/billing"
)

// Balance is the ledger state of a tenant or a token.
type Balance struct {
	// Remain is the quota left to spend. It excludes quota held by open
	// reservations and leases, and is not decremented for an unlimited owner.
	Remain billing.Quota
	// Used is the settled quota: the sum of its usage charges.
	Used      billing.Quota
	Unlimited bool
	// CreditLimit is how far below zero a tenant's Remain may go (its
	// credit line); always 0 for a token.
	CreditLimit billing.Quota
}

// EnsureTenant returns the integer user ID of the tenant with Kubernetes UID
// uid, creating the row on first call. Repeated calls return the same ID and
// refresh namespace and name.
func (s *Store) EnsureTenant(ctx context.Context, uid, namespace, name string) (int64, error) {
	var id int64
	err := s.db.QueryRowContext(ctx, s.q(`
		INSERT INTO tenants (uid, namespace, name, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (uid) DO UPDATE SET namespace = excluded.namespace, name = excluded.name
		RETURNING user_id`), uid, namespace, name, s.now()).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("ensure tenant %s/%s: %w", namespace, name, err)
	}
	return id, nil
}

// SetTenantUnlimited sets the tenant's unlimited flag. Reservations already
// open keep the flag they were made with.
func (s *Store) SetTenantUnlimited(ctx context.Context, userID int64, unlimited bool) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE tenants SET unlimited = ? WHERE user_id = ?`), unlimited, userID)
	if err != nil {
		return fmt.Errorf("set tenant %d unlimited: %w", userID, err)
	}
	return expectOne(res, "tenant", userID)
}

// SetTenantCreditLimit sets the tenant's credit line: reservations are taken
// against remain + limit, so the balance can go down to -limit. Lowering it
// below what is already owed refuses new requests until grants cover it;
// nothing already reserved is taken back.
func (s *Store) SetTenantCreditLimit(ctx context.Context, userID int64, limit billing.Quota) error {
	if limit < 0 {
		return fmt.Errorf("set tenant %d credit limit: negative limit %d", userID, limit)
	}
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE tenants SET credit_limit = ? WHERE user_id = ?`), int64(limit), userID)
	if err != nil {
		return fmt.Errorf("set tenant %d credit limit: %w", userID, err)
	}
	return expectOne(res, "tenant", userID)
}

// ApplyGrant adds amount to the tenant's balance exactly once per grantID:
// the first call applies it and returns true, every later call (concurrent or
// not, from any replica) returns false and changes nothing. A negative amount
// is a correction that debits the balance.
func (s *Store) ApplyGrant(ctx context.Context, userID int64, grantID string, amount billing.Quota) (bool, error) {
	applied := false
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`
			INSERT INTO grants (user_id, grant_id, amount, applied_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (user_id, grant_id) DO NOTHING`), userID, grantID, int64(amount), s.now())
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil // applied before
		}
		res, err = tx.ExecContext(ctx, s.q(`UPDATE tenants SET remain_quota = remain_quota + ? WHERE user_id = ?`), int64(amount), userID)
		if err != nil {
			return err
		}
		applied = true
		return expectOne(res, "tenant", userID)
	})
	if err != nil {
		return false, fmt.Errorf("apply grant %q to tenant %d: %w", grantID, userID, err)
	}
	return applied, nil
}

// TenantBalance returns the tenant's balance (account-wide, all tokens).
func (s *Store) TenantBalance(ctx context.Context, userID int64) (Balance, error) {
	var b Balance
	var remain, used, credit int64
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT remain_quota, used_quota, unlimited, credit_limit FROM tenants WHERE user_id = ?`), userID).
		Scan(&remain, &used, &b.Unlimited, &credit)
	if errors.Is(err, sql.ErrNoRows) {
		return b, fmt.Errorf("tenant %d: %w", userID, ErrNotFound)
	}
	if err != nil {
		return b, fmt.Errorf("tenant %d balance: %w", userID, err)
	}
	b.Remain, b.Used, b.CreditLimit = billing.Quota(remain), billing.Quota(used), billing.Quota(credit)
	return b, nil
}

// TenantGranted is the sum of the tenant's grants: every quota it was ever
// given (a negative grant, a correction, counts against it).
func (s *Store) TenantGranted(ctx context.Context, userID int64) (billing.Quota, error) {
	var sum int64
	if err := s.rdb.QueryRowContext(ctx, s.q(`SELECT COALESCE(SUM(amount), 0) FROM grants WHERE user_id = ?`), userID).Scan(&sum); err != nil {
		return 0, fmt.Errorf("grants of tenant %d: %w", userID, err)
	}
	return billing.Quota(sum), nil
}

func expectOne(res sql.Result, what string, id int64) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%s %d: %w", what, id, ErrNotFound)
	}
	return nil
}
