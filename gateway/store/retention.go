package store

import (
	"context"
	"fmt"
	"time"
)

// Retention is how long each kind of record is kept. Zero keeps it forever.
type Retention struct {
	// Usage rows and the hourly rollups built from them. Removed in whole
	// calendar months (UTC): a month goes once its end is older than Usage,
	// so a row lives between Usage and Usage plus one month.
	Usage time.Duration
	// Stored conversations (responses, previous_response_id).
	Responses time.Duration
	// Settled and refunded reservations, counted from when they closed. Open
	// ones are never removed here (the stale refunder closes them first).
	Reservations time.Duration
	// The archive rows of finished generation tasks, counted from when they
	// finished. Unfinished tasks are kept however old.
	Tasks time.Duration
}

// Tables a retention pass removes rows from, the label of its metrics.
const (
	TableUsageLogs        = "usage_logs"
	TableUsageHourly      = "usage_hourly"
	TableUsageHourlyModel = "usage_hourly_model"
	TableResponses        = "responses"
	TableReservations     = "reservations"
	TableTasks            = "tasks"
)

// RetentionResult is what one pass removed.
type RetentionResult struct {
	// Rows removed, by table (a dropped partition's rows included).
	Rows map[string]int64
	// Partitions dropped, by table.
	Partitions map[string]int64
}

// defaultRetentionBatch bounds one DELETE: each batch is a short transaction
// of its own, so a first pass over years of rows never holds SQLite's write
// lock (or PostgreSQL's row locks) long enough to stall the usage writer.
const defaultRetentionBatch = 5000

// ApplyRetention removes what r says has expired. A pass that fails part way
// keeps what it removed (every batch commits on its own) and reports it.
func (s *Store) ApplyRetention(ctx context.Context, r Retention) (RetentionResult, error) {
	out := RetentionResult{Rows: map[string]int64{}, Partitions: map[string]int64{}}
	now := s.clock.Now().UTC()
	users, err := s.userIDs(ctx)
	if err != nil {
		return out, err
	}
	// Months ahead are made here too, so housekeeping keeps them made
	// whatever the retention.
	if err := s.EnsurePartitions(ctx); err != nil {
		return out, err
	}
	if r.Usage > 0 {
		if err := s.expireUsage(ctx, users, UsageCutoff(now, r.Usage), &out); err != nil {
			return out, err
		}
	}
	if r.Responses > 0 {
		cutoff := now.Add(-r.Responses).Unix()
		// The index on (user_id, created_at) finds each user's oldest rows.
		for _, u := range users {
			n, err := s.deleteBatched(ctx, "responses", "id", `user_id = ? AND created_at < ?`, u, cutoff)
			out.Rows[TableResponses] += n
			if err != nil {
				return out, err
			}
		}
	}
	if r.Reservations > 0 {
		cutoff := now.Add(-r.Reservations).Unix()
		// created_at <= updated_at, so the (state, created_at) index narrows
		// the scan to closed reservations old enough.
		for _, state := range []string{stateSettled, stateRefunded} {
			n, err := s.deleteBatched(ctx, "reservations", "request_id",
				`state = ? AND created_at < ? AND updated_at < ?`, state, cutoff, cutoff)
			out.Rows[TableReservations] += n
			if err != nil {
				return out, err
			}
		}
	}
	if r.Tasks > 0 {
		cutoff := now.Add(-r.Tasks).Unix()
		for _, u := range users {
			n, err := s.deleteBatched(ctx, "tasks", "task_id",
				`user_id = ? AND created_at < ? AND completed_at IS NOT NULL AND completed_at < ?`, u, cutoff, cutoff)
			out.Rows[TableTasks] += n
			if err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// UsageCutoff is the first instant whose usage rows a retention of keep
// leaves in place at now: the start of the month that holds now - keep.
// Everything before it is in months that ended more than keep ago.
func UsageCutoff(now time.Time, keep time.Duration) time.Time {
	t := now.UTC().Add(-keep)
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// expireUsage removes the usage rows before cutoff and the rollup hours
// before it, so the summary and the console (which read the rollups for
// whole hours and the rows for the edges) agree with the rows that remain.
// The cutoff is a month start, so no rollup hour is split.
func (s *Store) expireUsage(ctx context.Context, users []int64, cutoff time.Time, out *RetentionResult) error {
	c := cutoff.Unix()
	// Rows first: a pass cut short leaves rollups that outlive their rows
	// for a while, never rows the summary cannot see. On PostgreSQL whole
	// months go as partitions; only the legacy partition (the rows from
	// before partitioning) can hold expired rows beside live ones, and it
	// is the table deleted from in batches (its log_id is its primary key).
	rowsTable := "usage_logs"
	if s.dialect == postgres {
		if err := s.dropUsagePartitions(ctx, c, out); err != nil {
			return err
		}
		legacy, err := s.hasLegacyPartition(ctx)
		if err != nil {
			return err
		}
		rowsTable = ""
		if legacy {
			rowsTable = "usage_logs_legacy"
		}
	}
	for _, u := range users {
		if rowsTable != "" {
			n, err := s.deleteBatched(ctx, rowsTable, "log_id", `user_id = ? AND created_at < ?`, u, c)
			out.Rows[TableUsageLogs] += n
			if err != nil {
				return err
			}
		}
		for _, t := range []string{TableUsageHourly, TableUsageHourlyModel} {
			n, err := s.deleteRollup(ctx, t, u, c)
			out.Rows[t] += n
			if err != nil {
				return err
			}
		}
	}
	if s.dialect == postgres {
		// The claims of expired request IDs go with their rows, as a unique
		// index entry would; not counted, being no record of their own.
		if _, err := s.deleteBatched(ctx, "usage_request_ids", "request_id", `created_at < ?`, c); err != nil {
			return err
		}
	}
	return nil
}

// deleteRollup removes a user's rollup hours before cutoff in batches; the
// rollups have no single-column key, so a batch is bounded by hour.
func (s *Store) deleteRollup(ctx context.Context, table string, userID, cutoff int64) (int64, error) {
	var total int64
	for {
		var oldest int64
		err := s.db.QueryRowContext(ctx, s.q(`SELECT COALESCE(MIN(hour_start), -1) FROM `+table+` WHERE user_id = ?`), userID).Scan(&oldest)
		if err != nil {
			return total, fmt.Errorf("retention: %s: %w", table, err)
		}
		if oldest < 0 || oldest >= cutoff {
			return total, nil
		}
		// About a month of hours per statement: a few thousand rows for a
		// busy tenant, whatever its number of keys and models.
		upTo := min(oldest+31*24*3600, cutoff)
		res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM `+table+` WHERE user_id = ? AND hour_start < ?`), userID, upTo)
		if err != nil {
			return total, fmt.Errorf("retention: %s: %w", table, err)
		}
		n, _ := res.RowsAffected()
		total += n
	}
}

// deleteBatched deletes the rows of table matching where, retentionBatch
// rows (by key) per statement, until none is left.
func (s *Store) deleteBatched(ctx context.Context, table, key, where string, args ...any) (int64, error) {
	q := s.q(fmt.Sprintf(`DELETE FROM %[1]s WHERE %[2]s IN (SELECT %[2]s FROM %[1]s WHERE %[3]s LIMIT %[4]d)`,
		table, key, where, s.retentionBatch))
	var total int64
	for {
		res, err := s.db.ExecContext(ctx, q, args...)
		if err != nil {
			return total, fmt.Errorf("retention: %s: %w", table, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("retention: %s: %w", table, err)
		}
		total += n
		if n < int64(s.retentionBatch) {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}

func (s *Store) userIDs(ctx context.Context) ([]int64, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT user_id FROM tenants ORDER BY user_id`)
	if err != nil {
		return nil, fmt.Errorf("retention: tenants: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("retention: tenants: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
