package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/modelgate/modelgate/gateway/billing"
)

// Reservation states.
const (
	stateReserved = "reserved"
	stateSettled  = "settled"
	stateRefunded = "refunded"
)

// sides says which balances an amount was taken from. An unlimited token or
// tenant is not debited (its remain stays meaningful if the flag is removed
// later) but its used quota still counts.
type sides struct{ token, tenant bool }

// Fit lowers a reservation that the balances cannot cover in full: given
// the quota available (the least of what every debited balance and window
// allows, never below 0), it returns the amount to reserve instead (at most
// available) and false when nothing smaller fits either. It runs inside the
// reservation's transaction, under the row locks, so concurrent requests
// each fit against what the ones before them left.
type Fit func(available billing.Quota) (billing.Quota, bool)

// available is the least of what the token, its window caps and its tenant
// (balance plus credit line) allow; -1 when none of them bounds it.
func available(t tokenRow, tenantRemain int64, tenantUnlimited bool) int64 {
	budget := int64(-1)
	bound := func(v int64) {
		if budget < 0 || v < budget {
			budget = max(v, 0)
		}
	}
	if !t.unlimited {
		bound(t.remain)
	}
	if wb := t.windowBudget(); wb >= 0 {
		bound(wb)
	}
	if !tenantUnlimited {
		bound(tenantRemain)
	}
	return budget
}

// admit checks that the token, its window caps and its tenant can all cover
// amount, and returns the balances to debit. Unlimited owners skip their own
// check; window caps apply regardless.
func admit(t tokenRow, tenantRemain int64, tenantUnlimited bool, amount int64) (sides, error) {
	d := sides{token: !t.unlimited, tenant: !tenantUnlimited}
	switch {
	case d.token && t.remain < amount:
		return d, fmt.Errorf("token has %d, needs %d: %w", t.remain, amount, ErrInsufficientQuota)
	case t.windowBudget() >= 0 && t.windowBudget() < amount:
		return d, fmt.Errorf("token window allows %d, needs %d: %w", t.windowBudget(), amount, ErrInsufficientQuota)
	case d.tenant && tenantRemain < amount:
		return d, fmt.Errorf("tenant has %d, needs %d: %w", tenantRemain, amount, ErrInsufficientQuota)
	}
	return d, nil
}

// fitAmount is what to reserve of estimate: all of it when the balances
// cover it, else what fit lowers it to within what they allow.
func fitAmount(t tokenRow, tenantRemain int64, tenantUnlimited bool, estimate int64, fit Fit) (int64, error) {
	budget := available(t, tenantRemain, tenantUnlimited)
	if budget < 0 || budget >= estimate || fit == nil {
		return estimate, nil
	}
	amount, ok := fit(billing.Quota(budget))
	if !ok || int64(amount) > budget || amount < 0 {
		return 0, fmt.Errorf("balances allow %d, request needs %d: %w", budget, estimate, ErrInsufficientQuota)
	}
	return int64(amount), nil
}

// hold takes amount out of the token row (remain and windows) in memory.
func (t *tokenRow) hold(d sides, amount, now int64) {
	if d.token {
		t.remain -= amount
	}
	t.dailyUsed += amount
	t.monthlyUsed += amount
	t.accessed = now
}

// Reserve pre-consumes estimate for a request before the upstream call. The
// token, its daily and monthly windows and its tenant are checked and debited
// in one transaction; if any cannot cover the estimate nothing changes and the
// error wraps ErrInsufficientQuota. Reserve is idempotent by requestID: a
// repeat of an open or settled reservation returns nil without charging.
func (s *Store) Reserve(ctx context.Context, requestID string, tokenID, userID int64, estimate billing.Quota) error {
	_, err := s.ReserveUpTo(ctx, requestID, tokenID, userID, estimate, nil)
	return err
}

// ReserveUpTo is Reserve for a request that can be made smaller: when the
// balances cannot cover estimate, fit (if not nil) chooses a smaller amount
// within what they allow, under the same row locks, and that is reserved.
// It returns the amount reserved (for a repeat, the amount the reservation
// holds).
func (s *Store) ReserveUpTo(ctx context.Context, requestID string, tokenID, userID int64, estimate billing.Quota, fit Fit) (billing.Quota, error) {
	return s.reserve(ctx, requestID, tokenID, userID, estimate, fit, 0)
}

// ReserveHeld is ReserveUpTo for a reservation that stays open past the
// stale-reservation sweep until holdUntil (unix time): a batch line waiting
// on an upstream batch job is settled or refunded by the Batch controller,
// however long the job takes; a batch deleted meanwhile gives its quota back
// at holdUntil.
func (s *Store) ReserveHeld(ctx context.Context, requestID string, tokenID, userID int64, estimate billing.Quota, fit Fit, holdUntil time.Time) (billing.Quota, error) {
	return s.reserve(ctx, requestID, tokenID, userID, estimate, fit, holdUntil.Unix())
}

// reserve is ReserveUpTo with the reservation held from the stale sweep
// until holdUntil (unix seconds; 0 for not held). A repeat keeps the hold
// the reservation was made with.
func (s *Store) reserve(ctx context.Context, requestID string, tokenID, userID int64, estimate billing.Quota, fit Fit, holdUntil int64) (billing.Quota, error) {
	if estimate < 0 {
		return 0, fmt.Errorf("reserve %s: negative estimate %d", requestID, estimate)
	}
	var reserved int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.now()
		// Claim the request ID first: a concurrent duplicate blocks here on
		// the unique key and then sees the row, so it cannot charge twice.
		res, err := tx.ExecContext(ctx, s.q(`
			INSERT INTO reservations (request_id, token_id, user_id, amount, state, created_at, updated_at, hold_until)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (request_id) DO NOTHING`),
			requestID, tokenID, userID, int64(estimate), stateReserved, now, now, holdUntil)
		if err != nil {
			return fmt.Errorf("claim request: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			reserved, err = s.repeatReserve(ctx, tx, requestID)
			return err
		}
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
		tenantRemain, tenantUnlimited, err := s.lockTenant(ctx, tx, userID)
		if err != nil {
			return err
		}
		amount, err := fitAmount(t, tenantRemain, tenantUnlimited, int64(estimate), fit)
		if err != nil {
			return err
		}
		d, err := admit(t, tenantRemain, tenantUnlimited, amount)
		if err != nil {
			return err
		}
		t.hold(d, amount, now)
		if err := s.writeToken(ctx, tx, tokenID, t); err != nil {
			return err
		}
		if d.tenant {
			if err := s.addTenant(ctx, tx, userID, -amount, 0); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, s.q(`
			UPDATE reservations SET amount = ?, debit_token = ?, debit_tenant = ?, daily_start = ?, monthly_start = ?
			WHERE request_id = ?`), amount, d.token, d.tenant, t.dailyStart, t.monthlyStart, requestID)
		reserved = amount
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("reserve %s: %w", requestID, err)
	}
	return billing.Quota(reserved), nil
}

func (s *Store) repeatReserve(ctx context.Context, tx *sql.Tx, requestID string) (int64, error) {
	var state string
	var amount int64
	if err := tx.QueryRowContext(ctx, s.q(`SELECT state, amount FROM reservations WHERE request_id = ?`), requestID).Scan(&state, &amount); err != nil {
		return 0, fmt.Errorf("read existing reservation: %w", err)
	}
	if state == stateRefunded {
		return 0, fmt.Errorf("request was refunded: %w", ErrReservationClosed)
	}
	return amount, nil
}

// reservationRow is a reservation as read inside a quota transaction.
type reservationRow struct {
	tokenID, userID          int64
	amount                   int64
	state                    string
	debit                    sides
	dailyStart, monthlyStart int64
}

func (s *Store) lockReservation(ctx context.Context, tx *sql.Tx, requestID string) (reservationRow, error) {
	var r reservationRow
	err := tx.QueryRowContext(ctx, s.q(`
		SELECT token_id, user_id, amount, state, debit_token, debit_tenant, daily_start, monthly_start
		FROM reservations WHERE request_id = ?`+s.forUpdate()), requestID).
		Scan(&r.tokenID, &r.userID, &r.amount, &r.state, &r.debit.token, &r.debit.tenant, &r.dailyStart, &r.monthlyStart)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("reservation: %w", ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("lock reservation: %w", err)
	}
	return r, nil
}

// Settle charges the actual amount of a reserved request: the difference to
// the estimate is taken from (or returned to) the same balances, the actual
// amount is added to used quota, and the token's windows are corrected when
// they are still the ones the reservation counted in. Actual may exceed the
// estimate, so a balance can dip below zero by that one difference. Settle is
// idempotent: settling again returns nil and charges nothing.
func (s *Store) Settle(ctx context.Context, requestID string, actual billing.Quota) error {
	if actual < 0 {
		return fmt.Errorf("settle %s: negative amount %d", requestID, actual)
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := s.lockReservation(ctx, tx, requestID)
		if err != nil {
			return err
		}
		switch r.state {
		case stateSettled:
			return nil
		case stateRefunded:
			return fmt.Errorf("request was refunded: %w", ErrReservationClosed)
		}
		return s.closeReservation(ctx, tx, requestID, r, int64(actual), stateSettled)
	})
	if err != nil {
		return fmt.Errorf("settle %s: %w", requestID, err)
	}
	return nil
}

// Refund returns the whole estimate of a reserved request (a failure before
// any charge). Refunding again returns nil; refunding a settled request gives
// ErrReservationClosed.
func (s *Store) Refund(ctx context.Context, requestID string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := s.lockReservation(ctx, tx, requestID)
		if err != nil {
			return err
		}
		switch r.state {
		case stateRefunded:
			return nil
		case stateSettled:
			return fmt.Errorf("request was settled: %w", ErrReservationClosed)
		}
		return s.closeReservation(ctx, tx, requestID, r, 0, stateRefunded)
	})
	if err != nil {
		return fmt.Errorf("refund %s: %w", requestID, err)
	}
	return nil
}

// closeReservation moves an open reservation to its final amount and state.
func (s *Store) closeReservation(ctx context.Context, tx *sql.Tx, requestID string, r reservationRow, final int64, state string) error {
	diff := final - r.amount
	var tokRemain, tenRemain int64
	if r.debit.token {
		tokRemain = -diff
	}
	if r.debit.tenant {
		tenRemain = -diff
	}
	if err := s.shiftToken(ctx, tx, r.tokenID, tokRemain, final, diff, r.dailyStart, r.monthlyStart); err != nil {
		return err
	}
	if err := s.addTenant(ctx, tx, r.userID, tenRemain, final); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, s.q(`UPDATE reservations SET amount = ?, state = ?, updated_at = ? WHERE request_id = ?`),
		final, state, s.now(), requestID)
	if err != nil {
		return fmt.Errorf("close reservation: %w", err)
	}
	if state == stateRefunded {
		// A refunded request is not billable: its pre_consumed usage row
		// (a task's held reservation) leaves the usage list with it.
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM usage_logs WHERE request_id = ? AND billing_phase = ?`),
			requestID, PhasePreConsumed); err != nil {
			return fmt.Errorf("drop pre-consumed usage row: %w", err)
		}
	}
	return nil
}

// shiftToken adds dRemain and dUsed to a token and dWindow to its daily and
// monthly counters, each only while the stored window is still the one given
// (quota counted in a window that has rolled over is not touched).
func (s *Store) shiftToken(ctx context.Context, tx *sql.Tx, tokenID, dRemain, dUsed, dWindow, dailyStart, monthlyStart int64) error {
	_, err := tx.ExecContext(ctx, s.q(`
		UPDATE tokens SET remain_quota = remain_quota + ?, used_quota = used_quota + ?,
			daily_used = daily_used + CASE WHEN daily_start = ? THEN ? ELSE 0 END,
			monthly_used = monthly_used + CASE WHEN monthly_start = ? THEN ? ELSE 0 END
		WHERE token_id = ?`),
		dRemain, dUsed, dailyStart, dWindow, monthlyStart, dWindow, tokenID)
	if err != nil {
		return fmt.Errorf("update token %d: %w", tokenID, err)
	}
	return nil
}

// StaleRefund is what one pass of RefundStale gave back.
type StaleRefund struct {
	Reservations int           // reservations refunded
	Quota        billing.Quota // quota they held
}

// RefundStale refunds reservations still open after olderThan: a gateway
// that died between Reserve and Settle leaves them behind, holding quota.
// A reservation of a generation task that has not finished is never stale:
// the task's controller settles or refunds it, however long the task runs
// (and a deleted task's finalizer refunds it). Nor is a held reservation
// (ReserveHeld) before its hold_until: a batch line waiting on an upstream
// batch job is closed by the Batch controller, and swept only once the hold
// has passed. Pick olderThan above the longest text request.
func (s *Store) RefundStale(ctx context.Context, olderThan time.Duration) (StaleRefund, error) {
	var out StaleRefund
	now := s.clock.Now()
	cutoff := now.Add(-olderThan).Unix()
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT r.request_id, r.amount FROM reservations r
		WHERE r.state = ? AND r.created_at < ? AND r.hold_until <= ?
		AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.request_id = r.request_id AND t.completed_at IS NULL)
		ORDER BY r.created_at`), stateReserved, cutoff, now.Unix())
	if err != nil {
		return out, fmt.Errorf("find stale reservations: %w", err)
	}
	type stale struct {
		id     string
		amount int64
	}
	var found []stale
	for rows.Next() {
		var r stale
		if err := rows.Scan(&r.id, &r.amount); err != nil {
			_ = rows.Close()
			return out, fmt.Errorf("find stale reservations: %w", err)
		}
		found = append(found, r)
	}
	if err := rows.Close(); err != nil {
		return out, fmt.Errorf("find stale reservations: %w", err)
	}
	for _, r := range found {
		// Refund re-checks the state under the row lock: a Settle that won
		// the race gives ErrReservationClosed, which is fine.
		switch err := s.Refund(ctx, r.id); {
		case err == nil:
			out.Reservations++
			out.Quota += billing.Quota(r.amount)
		case errors.Is(err, ErrReservationClosed):
		default:
			return out, err
		}
	}
	return out, nil
}
