package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/modelgate/modelgate/gateway/billing"
)

// leaseGrant is what takeLease moved from the balances into a lease row.
type leaseGrant struct {
	id        int64 // lease row; 0 when unbounded
	replaced  bool  // a previous lease row of the same replica and token was returned
	granted   int64
	unbounded bool // token and tenant unlimited and no window cap: nothing to lease
	expiresAt time.Time
}

// leaseRow is a lease as read inside a transaction.
type leaseRow struct {
	id, tokenID, userID      int64
	remaining                int64
	debit                    sides
	dailyStart, monthlyStart int64
	expiresAt                int64
}

const leaseCols = `lease_id, token_id, user_id, remaining, debit_token, debit_tenant, daily_start, monthly_start, expires_at`

func (l *leaseRow) dest() []any {
	return []any{&l.id, &l.tokenID, &l.userID, &l.remaining, &l.debit.token, &l.debit.tenant, &l.dailyStart, &l.monthlyStart, &l.expiresAt}
}

// takeLease moves at least want (and, when the balance allows, up to chunk
// or a quarter of what is left, whichever is less) from the token, its window
// caps and its tenant into the replica's lease row for the token, and extends
// the lease's expiry. want may be 0 to renew. unspent is what the replica
// has not yet held from the lease (its local view: the row's remaining still
// includes what settled requests spent before their usage rows arrive); a
// kept lease is only topped up by what it lacks. The move is one transaction
// under the token and tenant row locks, so the leases of all replicas together
// never exceed the balance.
func (s *Store) takeLease(ctx context.Context, replica string, tokenID, userID, want, unspent, chunk, directBelow int64, ttl time.Duration) (leaseGrant, error) {
	var g leaseGrant
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.clock.Now()
		t, err := s.lockToken(ctx, tx, tokenID)
		if err != nil {
			return err
		}
		if t.userID != userID {
			return fmt.Errorf("token %d belongs to user %d, not %d: %w", tokenID, t.userID, userID, ErrConflict)
		}
		if t.disabled {
			return fmt.Errorf("token %d: %w", tokenID, ErrTokenDisabled)
		}
		tenRemain, tenUnlimited, err := s.lockTenant(ctx, tx, userID)
		if err != nil {
			return err
		}
		d := sides{token: !t.unlimited, tenant: !tenUnlimited}
		windowed := t.windowBudget() >= 0
		g.unbounded = !d.token && !d.tenant && !windowed

		old, found, err := s.lockReplicaLease(ctx, tx, replica, tokenID)
		if err != nil {
			return err
		}
		keep := found && !g.unbounded && old.expiresAt > now.Unix() && old.debit == d &&
			old.dailyStart == t.dailyStart && old.monthlyStart == t.monthlyStart
		var tenDelta int64
		if found && !keep {
			tenDelta = unlease(&t, old)
			if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM leases WHERE lease_id = ?`), old.id); err != nil {
				return fmt.Errorf("return old lease: %w", err)
			}
			g.replaced = true
		}
		if !g.unbounded {
			held := int64(0) // a replaced lease went back in full
			if keep {
				held = unspent
			}
			take, err := leaseSize(t, d, tenRemain+tenDelta, want, held, chunk, directBelow)
			if err != nil {
				return err
			}
			t.hold(d, take, now.Unix())
			if d.tenant {
				tenDelta -= take
			}
			g.granted = take
		}
		if err := s.writeToken(ctx, tx, tokenID, t); err != nil {
			return err
		}
		if err := s.addTenant(ctx, tx, userID, tenDelta, 0); err != nil {
			return err
		}
		if g.unbounded {
			g.expiresAt = now.Add(ttl)
			return nil
		}
		g.expiresAt = leaseExpiry(now, ttl, t)
		g.id, err = s.storeLease(ctx, tx, replica, tokenID, userID, t, d, g.granted, g.expiresAt, keep, old.id)
		return err
	})
	if err != nil {
		return leaseGrant{}, fmt.Errorf("take lease on token %d for %s: %w", tokenID, replica, err)
	}
	return g, nil
}

// errLowBalance tells the Leaser to reserve directly instead of leasing.
var errLowBalance = errors.New("balance too low to lease")

// leaseSize decides how much to move into a lease that already holds held:
// at least want, and enough to bring it up to min(chunk, budget/4), so that
// a low balance is not stranded in one replica. A renewal of a lease that
// holds that much moves nothing: renewing must not grow a lease.
func leaseSize(t tokenRow, d sides, tenRemain, want, held, chunk, directBelow int64) (int64, error) {
	budget := int64(-1) // -1: no bound
	bound := func(v int64) {
		if budget < 0 || v < budget {
			budget = max(v, 0)
		}
	}
	if d.token {
		bound(t.remain)
	}
	if d.tenant {
		bound(tenRemain)
	}
	if wb := t.windowBudget(); wb >= 0 {
		bound(wb)
	}
	if budget < want {
		return 0, fmt.Errorf("balance allows %d, lease needs %d: %w", budget, want, ErrInsufficientQuota)
	}
	if budget < directBelow {
		return 0, errLowBalance
	}
	return min(max(want, min(chunk, budget/4)-held), budget), nil
}

// leaseExpiry is now+ttl, cut at the end of the token's capped window: a
// lease is counted in one window and must not outlive it.
func leaseExpiry(now time.Time, ttl time.Duration, t tokenRow) time.Time {
	exp := now.Add(ttl)
	if end := t.windowEnd(); !end.IsZero() && end.Before(exp) {
		exp = end
	}
	return exp
}

func (s *Store) lockReplicaLease(ctx context.Context, tx *sql.Tx, replica string, tokenID int64) (leaseRow, bool, error) {
	var l leaseRow
	err := tx.QueryRowContext(ctx, s.q(`SELECT `+leaseCols+` FROM leases WHERE replica_id = ? AND token_id = ?`+s.forUpdate()),
		replica, tokenID).Scan(l.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return l, false, nil
	}
	if err != nil {
		return l, false, fmt.Errorf("lock lease: %w", err)
	}
	return l, true, nil
}

func (s *Store) storeLease(ctx context.Context, tx *sql.Tx, replica string, tokenID, userID int64, t tokenRow, d sides,
	take int64, exp time.Time, keep bool, oldID int64) (int64, error) {
	if keep {
		_, err := tx.ExecContext(ctx, s.q(`UPDATE leases SET remaining = remaining + ?, expires_at = ? WHERE lease_id = ?`),
			take, exp.Unix(), oldID)
		if err != nil {
			return 0, fmt.Errorf("extend lease: %w", err)
		}
		return oldID, nil
	}
	var id int64
	err := tx.QueryRowContext(ctx, s.q(`
		INSERT INTO leases (replica_id, token_id, user_id, remaining, debit_token, debit_tenant, daily_start, monthly_start, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING lease_id`),
		replica, tokenID, userID, take, d.token, d.tenant, t.dailyStart, t.monthlyStart, exp.Unix()).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("insert lease: %w", err)
	}
	return id, nil
}

// unlease returns a lease's remaining quota to the token row in memory and
// returns the amount to add to the tenant's remain.
func unlease(t *tokenRow, l leaseRow) (tenantDelta int64) {
	if l.debit.token {
		t.remain += l.remaining
	}
	if t.dailyStart == l.dailyStart {
		t.dailyUsed -= l.remaining
	}
	if t.monthlyStart == l.monthlyStart {
		t.monthlyUsed -= l.remaining
	}
	if l.debit.tenant {
		return l.remaining
	}
	return 0
}

// lockLease locks a lease with its token and tenant rows, in the lock
// order every ledger transaction takes (token, tenant, lease), and reads
// them. found is false when the lease is gone.
func (s *Store) lockLease(ctx context.Context, tx *sql.Tx, leaseID int64) (tokenID, userID int64, t tokenRow, l leaseRow, found bool, err error) {
	err = tx.QueryRowContext(ctx, s.q(`SELECT token_id, user_id FROM leases WHERE lease_id = ?`), leaseID).Scan(&tokenID, &userID)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, t, l, false, nil
	}
	if err != nil {
		return 0, 0, t, l, false, fmt.Errorf("read lease: %w", err)
	}
	if t, err = s.lockToken(ctx, tx, tokenID); err != nil {
		return 0, 0, t, l, false, err
	}
	if _, _, err = s.lockTenant(ctx, tx, userID); err != nil {
		return 0, 0, t, l, false, err
	}
	err = tx.QueryRowContext(ctx, s.q(`SELECT `+leaseCols+` FROM leases WHERE lease_id = ?`+s.forUpdate()), leaseID).Scan(l.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, t, l, false, nil
	}
	if err != nil {
		return 0, 0, t, l, false, fmt.Errorf("lock lease: %w", err)
	}
	return tokenID, userID, t, l, true, nil
}

// releaseLease returns what is left of a lease to the balances and deletes
// it, reporting the quota it returned. With onlyExpired it does nothing to a
// lease that was renewed meanwhile. A lease that is already gone is not an
// error.
func (s *Store) releaseLease(ctx context.Context, leaseID int64, onlyExpired bool) (returned int64, released bool, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		tokenID, userID, t, l, found, err := s.lockLease(ctx, tx, leaseID)
		if err != nil || !found {
			return err
		}
		if onlyExpired && l.expiresAt > s.now() {
			return nil
		}
		tenDelta := unlease(&t, l)
		if err := s.writeToken(ctx, tx, tokenID, t); err != nil {
			return err
		}
		if err := s.addTenant(ctx, tx, userID, tenDelta, 0); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM leases WHERE lease_id = ?`), leaseID); err != nil {
			return fmt.Errorf("delete lease: %w", err)
		}
		returned, released = l.remaining, true
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("release lease %d: %w", leaseID, err)
	}
	return returned, released, nil
}

// shrinkLease returns up to amount of a lease's remaining quota to the
// balances and keeps the lease row with the rest. A lease that is gone is
// not an error.
func (s *Store) shrinkLease(ctx context.Context, leaseID, amount int64) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		tokenID, userID, t, l, found, err := s.lockLease(ctx, tx, leaseID)
		if err != nil || !found {
			return err
		}
		part := l
		part.remaining = min(amount, max(l.remaining, 0))
		if part.remaining == 0 {
			return nil
		}
		tenDelta := unlease(&t, part)
		if err := s.writeToken(ctx, tx, tokenID, t); err != nil {
			return err
		}
		if err := s.addTenant(ctx, tx, userID, tenDelta, 0); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, s.q(`UPDATE leases SET remaining = remaining - ? WHERE lease_id = ?`), part.remaining, leaseID)
		return err
	})
	if err != nil {
		return fmt.Errorf("shrink lease %d: %w", leaseID, err)
	}
	return nil
}

// LeaseSweep is what one sweep of expired leases gave back.
type LeaseSweep struct {
	Leases int           // leases released
	Quota  billing.Quota // quota they still held, returned to the balances
}

// SweepExpiredLeases returns the quota of every expired lease (a replica
// that died or lost the database) to its token and tenant. Run it
// periodically from any replica or the manager; concurrent sweeps are safe.
func (s *Store) SweepExpiredLeases(ctx context.Context) (LeaseSweep, error) {
	var sweep LeaseSweep
	ids, err := s.leaseIDs(ctx, `expires_at <= ?`, s.now())
	if err != nil {
		return sweep, fmt.Errorf("sweep leases: %w", err)
	}
	for _, id := range ids {
		returned, ok, err := s.releaseLease(ctx, id, true)
		if err != nil {
			return sweep, err
		}
		if ok {
			sweep.Leases++
			sweep.Quota += billing.Quota(returned)
		}
	}
	return sweep, nil
}

// leaseIDs lists the leases matching cond, oldest first.
func (s *Store) leaseIDs(ctx context.Context, cond string, arg any) ([]int64, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT lease_id FROM leases WHERE `+cond+` ORDER BY lease_id`), arg)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// LeaseTotals reports the number of outstanding leases on a token and the
// quota they hold (for status mirroring, metrics and tests).
func (s *Store) LeaseTotals(ctx context.Context, tokenID int64) (count int, held int64, err error) {
	err = s.rdb.QueryRowContext(ctx, s.q(`SELECT COUNT(*), COALESCE(SUM(remaining), 0) FROM leases WHERE token_id = ?`), tokenID).Scan(&count, &held)
	if err != nil {
		return 0, 0, fmt.Errorf("lease totals of token %d: %w", tokenID, err)
	}
	return count, held, nil
}
