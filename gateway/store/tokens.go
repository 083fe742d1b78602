package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/modelgate/modelgate/gateway/billing"
)

// TokenSpec describes an API token for EnsureToken. Callers build it from an
// ApiToken with tokenspec.For, never by hand: the controller, the gateway's
// authenticator and POST /v1/tokens may each register the token first, and
// only one mapping makes their registrations the same.
type TokenSpec struct {
	// UID is the Kubernetes UID of the ApiToken; the idempotency key.
	UID    string
	UserID int64
	// Name is a display label; the latest registration's name is kept.
	Name string
	// RemainQuota is the starting balance, applied only when the row is
	// created. Later top-ups go through a grant-like path, not EnsureToken, so
	// a re-sync from the API server never resets spending.
	RemainQuota billing.Quota
	// TokenLimits are the first limits; later changes go through
	// UpdateTokenLimits.
	TokenLimits
}

// TokenLimits are the token's restrictions that may change after creation.
type TokenLimits struct {
	Unlimited bool
	// DailyLimit and MonthlyLimit cap the quota reserved per UTC calendar day
	// and month; 0 means no cap. They apply even to unlimited tokens, since
	// they are set explicitly.
	DailyLimit   billing.Quota
	MonthlyLimit billing.Quota
}

// TokenBalance is the ledger state of a token.
type TokenBalance struct {
	Balance
	UserID       int64
	DailyUsed    billing.Quota // in the current UTC day
	MonthlyUsed  billing.Quota // in the current UTC month
	AccessedTime int64         // Unix seconds of the last reservation
}

// EnsureToken registers the token with spec.UID and returns its integer
// token ID. The first registration creates the row with the spec's starting
// balance and limits, and those stay: every later registration of the UID
// (a re-sync, a retry, another replica or another caller racing the first)
// returns the same ID, whatever quota or limits it carries, and only
// refreshes the name. The balance then moves only by reservations and
// settlements, and the limits by UpdateTokenLimits. Keeping the first
// registration is right because every caller builds the spec with
// tokenspec.For from the ApiToken itself, so the first registration is
// complete, not a partial view that a later one would have to fix.
//
// A UID already bound to another tenant gives ErrConflict. A spec without a
// UID or user, or with a negative amount, is refused and writes nothing.
func (s *Store) EnsureToken(ctx context.Context, spec TokenSpec) (int64, error) {
	if err := spec.check(); err != nil {
		return 0, fmt.Errorf("ensure token %q: %w", spec.UID, err)
	}
	var id, owner int64
	err := s.db.QueryRowContext(ctx, s.q(`
		INSERT INTO tokens (uid, user_id, name, remain_quota, unlimited, daily_limit, monthly_limit, created_time)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (uid) DO UPDATE SET name = excluded.name
		RETURNING token_id, user_id`),
		spec.UID, spec.UserID, spec.Name, int64(spec.RemainQuota), spec.Unlimited,
		int64(spec.DailyLimit), int64(spec.MonthlyLimit), s.now()).Scan(&id, &owner)
	if err != nil {
		return 0, fmt.Errorf("ensure token %q: %w", spec.UID, err)
	}
	if owner != spec.UserID {
		return 0, fmt.Errorf("ensure token %q: belongs to user %d, not %d: %w", spec.UID, owner, spec.UserID, ErrConflict)
	}
	return id, nil
}

// check refuses a registration that cannot be the token's first: one that
// names no token or owner, or starts from a negative amount.
func (spec TokenSpec) check() error {
	switch {
	case spec.UID == "":
		return errors.New("no UID")
	case spec.UserID <= 0:
		return fmt.Errorf("no owner (user %d)", spec.UserID)
	case spec.RemainQuota < 0 || spec.DailyLimit < 0 || spec.MonthlyLimit < 0:
		return fmt.Errorf("negative quota or limit (quota %d, daily %d, monthly %d)",
			int64(spec.RemainQuota), int64(spec.DailyLimit), int64(spec.MonthlyLimit))
	}
	return nil
}

// UpdateTokenLimits replaces the token's unlimited flag and window caps.
// Quota already used in the current windows stays counted.
func (s *Store) UpdateTokenLimits(ctx context.Context, tokenID int64, l TokenLimits) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE tokens SET unlimited = ?, daily_limit = ?, monthly_limit = ? WHERE token_id = ?`),
		l.Unlimited, int64(l.DailyLimit), int64(l.MonthlyLimit), tokenID)
	if err != nil {
		return fmt.Errorf("update token %d limits: %w", tokenID, err)
	}
	return expectOne(res, "token", tokenID)
}

// TokenUsage returns the token's balance and window usage as of now.
func (s *Store) TokenUsage(ctx context.Context, tokenID int64) (TokenBalance, error) {
	var t tokenRow
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT `+tokenCols+` FROM tokens WHERE token_id = ?`), tokenID).Scan(t.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return TokenBalance{}, fmt.Errorf("token %d: %w", tokenID, ErrNotFound)
	}
	if err != nil {
		return TokenBalance{}, fmt.Errorf("token %d usage: %w", tokenID, err)
	}
	t.roll(s.clock.Now())
	return t.balance(), nil
}

func (t *tokenRow) balance() TokenBalance {
	return TokenBalance{
		Balance:      Balance{Remain: billing.Quota(t.remain), Used: billing.Quota(t.used), Unlimited: t.unlimited},
		UserID:       t.userID,
		DailyUsed:    billing.Quota(t.dailyUsed),
		MonthlyUsed:  billing.Quota(t.monthlyUsed),
		AccessedTime: t.accessed,
	}
}

const tokenCols = `user_id, remain_quota, used_quota, unlimited, daily_limit, daily_used, daily_start, monthly_limit, monthly_used, monthly_start, accessed_time, disabled`

// tokenRow is a token as read inside a quota transaction.
type tokenRow struct {
	userID                                  int64
	remain, used                            int64
	unlimited                               bool
	dailyLimit, dailyUsed, dailyStart       int64
	monthlyLimit, monthlyUsed, monthlyStart int64
	accessed                                int64
	disabled                                bool // deleted: reserves nothing more
}

func (t *tokenRow) dest() []any {
	return []any{&t.userID, &t.remain, &t.used, &t.unlimited, &t.dailyLimit, &t.dailyUsed, &t.dailyStart,
		&t.monthlyLimit, &t.monthlyUsed, &t.monthlyStart, &t.accessed, &t.disabled}
}

// roll starts new daily and monthly windows when now has left the stored
// ones. Windows are UTC calendar days and months so that every replica agrees
// on them without coordination.
func (t *tokenRow) roll(now time.Time) {
	if d := dayStart(now); t.dailyStart != d {
		t.dailyStart, t.dailyUsed = d, 0
	}
	if m := monthStart(now); t.monthlyStart != m {
		t.monthlyStart, t.monthlyUsed = m, 0
	}
}

// windowBudget is what the daily and monthly caps still allow, or -1 when
// neither cap is set.
func (t *tokenRow) windowBudget() int64 {
	budget := int64(-1)
	if t.dailyLimit > 0 {
		budget = t.dailyLimit - t.dailyUsed
	}
	if t.monthlyLimit > 0 {
		if m := t.monthlyLimit - t.monthlyUsed; budget < 0 || m < budget {
			budget = m
		}
	}
	if t.dailyLimit > 0 || t.monthlyLimit > 0 {
		return max(budget, 0)
	}
	return -1
}

// windowEnd is when the earliest capped window of the token closes; zero
// time when no cap is set. A lease never outlives it.
func (t *tokenRow) windowEnd() time.Time {
	var end time.Time
	if t.monthlyLimit > 0 {
		end = time.Unix(t.monthlyStart, 0).UTC().AddDate(0, 1, 0)
	}
	if t.dailyLimit > 0 {
		end = time.Unix(t.dailyStart, 0).UTC().AddDate(0, 0, 1)
	}
	return end
}

func dayStart(now time.Time) int64 {
	y, m, d := now.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix()
}

func monthStart(now time.Time) int64 {
	y, m, _ := now.UTC().Date()
	return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC).Unix()
}

// lockToken reads a token inside tx, locking its row on PostgreSQL, and rolls
// its windows to now.
func (s *Store) lockToken(ctx context.Context, tx *sql.Tx, tokenID int64) (tokenRow, error) {
	var t tokenRow
	err := tx.QueryRowContext(ctx, s.q(`SELECT `+tokenCols+` FROM tokens WHERE token_id = ?`+s.forUpdate()), tokenID).Scan(t.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("token %d: %w", tokenID, ErrNotFound)
	}
	if err != nil {
		return t, fmt.Errorf("lock token %d: %w", tokenID, err)
	}
	t.roll(s.clock.Now())
	return t, nil
}

// lockTenant reads what a tenant can spend (its remain plus its credit
// line) and its unlimited flag inside tx, locking the row on PostgreSQL. Always lock the token first: the order
// reservation → token → tenant → lease is the same everywhere, so
// transactions never deadlock.
func (s *Store) lockTenant(ctx context.Context, tx *sql.Tx, userID int64) (remain int64, unlimited bool, err error) {
	err = tx.QueryRowContext(ctx, s.q(`SELECT remain_quota + credit_limit, unlimited FROM tenants WHERE user_id = ?`+s.forUpdate()), userID).Scan(&remain, &unlimited)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, fmt.Errorf("tenant %d: %w", userID, ErrNotFound)
	}
	if err != nil {
		return 0, false, fmt.Errorf("lock tenant %d: %w", userID, err)
	}
	return remain, unlimited, nil
}

// writeToken stores the token's balance and windows after a quota change.
func (s *Store) writeToken(ctx context.Context, tx *sql.Tx, tokenID int64, t tokenRow) error {
	_, err := tx.ExecContext(ctx, s.q(`
		UPDATE tokens SET remain_quota = ?, used_quota = ?, daily_used = ?, daily_start = ?,
			monthly_used = ?, monthly_start = ?, accessed_time = ?
		WHERE token_id = ?`),
		t.remain, t.used, t.dailyUsed, t.dailyStart, t.monthlyUsed, t.monthlyStart, t.accessed, tokenID)
	if err != nil {
		return fmt.Errorf("update token %d: %w", tokenID, err)
	}
	return nil
}

// addTenant moves quota on a tenant row: remain += dRemain, used += dUsed.
func (s *Store) addTenant(ctx context.Context, tx *sql.Tx, userID, dRemain, dUsed int64) error {
	if dRemain == 0 && dUsed == 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, s.q(`UPDATE tenants SET remain_quota = remain_quota + ?, used_quota = used_quota + ? WHERE user_id = ?`),
		dRemain, dUsed, userID)
	if err != nil {
		return fmt.Errorf("update tenant %d: %w", userID, err)
	}
	return nil
}
