package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// RateGrant is what LeaseRateWindow gave a replica.
type RateGrant struct {
	// Granted is the share of the window moved to the caller: at least need
	// while the window has that much left, else what is left (possibly 0).
	Granted int64
	// Replicas is how many gateway replicas hold live quota leases (at least
	// 1): a replica that loses the database limits itself to its part of the
	// limit by it.
	Replicas int
}

// LeaseRateWindow leases a share of subject's window starting at start, of
// a limit per window: at least need (the caller's shortfall) and, while the
// window has room, up to want, but never more than a quarter of what is left
// beyond need, so that the last of a window is not stranded in one replica.
// The shares of all replicas together never exceed limit: the grant is one
// transaction under the window row's lock.
func (s *Store) LeaseRateWindow(ctx context.Context, subject string, start time.Time, limit, want, need int64) (RateGrant, error) {
	var g RateGrant
	ws := start.Unix()
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO rate_windows (subject, window_start, granted) VALUES (?, ?, 0)
			ON CONFLICT (subject, window_start) DO NOTHING`), subject, ws); err != nil {
			return fmt.Errorf("create window: %w", err)
		}
		var granted int64
		err := tx.QueryRowContext(ctx, s.q(`SELECT granted FROM rate_windows WHERE subject = ? AND window_start = ?`+s.forUpdate()),
			subject, ws).Scan(&granted)
		if err != nil {
			return fmt.Errorf("lock window: %w", err)
		}
		g.Granted = rateShare(limit, granted, want, need)
		if g.Granted > 0 {
			if _, err := tx.ExecContext(ctx, s.q(`UPDATE rate_windows SET granted = granted + ? WHERE subject = ? AND window_start = ?`),
				g.Granted, subject, ws); err != nil {
				return fmt.Errorf("grow window: %w", err)
			}
		}
		return tx.QueryRowContext(ctx, s.q(`SELECT COUNT(DISTINCT replica_id) FROM leases WHERE expires_at > ?`), s.now()).Scan(&g.Replicas)
	})
	if err != nil {
		return RateGrant{}, fmt.Errorf("lease rate window %s@%d: %w", subject, ws, err)
	}
	g.Replicas = max(g.Replicas, 1)
	return g, nil
}

// rateShare is the grant from a window of limit of which granted is leased
// already: need if it fits, raised towards want by at most a quarter of the
// rest; what is left when need does not fit.
func rateShare(limit, granted, want, need int64) int64 {
	left := limit - granted
	if left <= 0 {
		return 0
	}
	if need >= left {
		return left
	}
	extra := min(max(want-need, 0), (left-need)/4)
	return need + extra
}

// RateWindowsTotal reports how much of subject's window has been leased (for
// tests and diagnostics).
func (s *Store) RateWindowsTotal(ctx context.Context, subject string, start time.Time) (int64, error) {
	var granted int64
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT COALESCE(SUM(granted), 0) FROM rate_windows WHERE subject = ? AND window_start = ?`),
		subject, start.Unix()).Scan(&granted)
	if err != nil {
		return 0, fmt.Errorf("rate window %s: %w", subject, err)
	}
	return granted, nil
}

// DeleteRateWindows deletes the windows that started before before; a
// window is only read while it is current.
func (s *Store) DeleteRateWindows(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM rate_windows WHERE window_start < ?`), before.Unix())
	if err != nil {
		return 0, fmt.Errorf("delete rate windows: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("delete rate windows: %w", err)
	}
	return n, nil
}
