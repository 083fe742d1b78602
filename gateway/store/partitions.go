package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// On PostgreSQL usage_logs is partitioned by month of created_at (migration
// 00012): usage_logs_legacy holds every row from before the migration's next
// month, and usage_logs_YYYYMM one month each.

// partitionsAhead is how many months after the current one EnsurePartitions
// keeps made, so a housekeeping pass that is late by weeks still finds the
// month a write needs.
const partitionsAhead = 2

// usagePartition is one partition of usage_logs and its bound [from, to).
type usagePartition struct {
	name     string
	from, to int64
}

var partitionBound = regexp.MustCompile(`FROM \('?([^')]+)'?\) TO \('?([^')]+)'?\)`)

// usagePartitions lists the partitions of usage_logs, none on SQLite.
func (s *Store) usagePartitions(ctx context.Context) ([]usagePartition, error) {
	if s.dialect != postgres {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT c.relname, pg_get_expr(c.relpartbound, c.oid)
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'usage_logs'::regclass ORDER BY c.relname`)
	if err != nil {
		return nil, fmt.Errorf("usage partitions: %w", err)
	}
	defer rows.Close()
	var out []usagePartition
	for rows.Next() {
		var name, bound string
		if err := rows.Scan(&name, &bound); err != nil {
			return nil, fmt.Errorf("usage partitions: %w", err)
		}
		m := partitionBound.FindStringSubmatch(bound)
		if m == nil {
			return nil, fmt.Errorf("usage partitions: %s: unexpected bound %q", name, bound)
		}
		p := usagePartition{name: name}
		if p.from, err = boundValue(m[1]); err == nil {
			p.to, err = boundValue(m[2])
		}
		if err != nil {
			return nil, fmt.Errorf("usage partitions: %s: %w", name, err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

func boundValue(v string) (int64, error) {
	switch v {
	case "MINVALUE":
		return math.MinInt64, nil
	case "MAXVALUE":
		return math.MaxInt64, nil
	}
	return strconv.ParseInt(v, 10, 64)
}

func utcMonthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// EnsurePartitions makes the usage_logs partitions of the current month and
// the partitionsAhead months after it that no partition covers yet. It does
// nothing on SQLite.
func (s *Store) EnsurePartitions(ctx context.Context) error {
	if s.dialect != postgres {
		return nil
	}
	now := s.clock.Now()
	var months []int64
	for i := range partitionsAhead + 1 {
		months = append(months, utcMonthStart(now).AddDate(0, i, 0).Unix())
	}
	return s.ensureMonths(ctx, months)
}

// ensureMonths makes a partition for each month (given by any instant in
// it) that no partition covers.
func (s *Store) ensureMonths(ctx context.Context, instants []int64) error {
	parts, err := s.usagePartitions(ctx)
	if err != nil {
		return err
	}
	for _, at := range instants {
		from := utcMonthStart(time.Unix(at, 0))
		to := from.AddDate(0, 1, 0)
		covered := false
		for _, p := range parts {
			// A partition overlapping the month (the legacy one ends at a
			// month start, so it covers whole months) leaves it as it is.
			if p.from < to.Unix() && from.Unix() < p.to {
				covered = true
				break
			}
		}
		if covered {
			continue
		}
		name := "usage_logs_" + from.Format("200601")
		// IF NOT EXISTS: replicas run housekeeping concurrently.
		_, err := s.db.ExecContext(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s PARTITION OF usage_logs FOR VALUES FROM (%d) TO (%d)`,
			name, from.Unix(), to.Unix()))
		if err != nil && !isDuplicateObject(err) {
			return fmt.Errorf("create usage partition %s: %w", name, err)
		}
		parts = append(parts, usagePartition{name: name, from: from.Unix(), to: to.Unix()})
	}
	return nil
}

// dropUsagePartitions detaches and drops every partition entirely before
// cutoff, counting it and its rows in out.
func (s *Store) dropUsagePartitions(ctx context.Context, cutoff int64, out *RetentionResult) error {
	parts, err := s.usagePartitions(ctx)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if p.to > cutoff {
			continue
		}
		var n int64
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+p.name).Scan(&n); err != nil {
			return fmt.Errorf("retention: %s: %w", p.name, err)
		}
		// DETACH takes an ACCESS EXCLUSIVE lock on the parent for a moment
		// (no scan); the DROP then touches only the detached table.
		if _, err := s.db.ExecContext(ctx, `ALTER TABLE usage_logs DETACH PARTITION `+p.name); err != nil {
			return fmt.Errorf("retention: detach %s: %w", p.name, err)
		}
		if _, err := s.db.ExecContext(ctx, `DROP TABLE `+p.name); err != nil {
			return fmt.Errorf("retention: drop %s: %w", p.name, err)
		}
		out.Rows[TableUsageLogs] += n
		out.Partitions[TableUsageLogs]++
	}
	return nil
}

// hasLegacyPartition reports whether usage_logs_legacy is still attached.
func (s *Store) hasLegacyPartition(ctx context.Context) (bool, error) {
	parts, err := s.usagePartitions(ctx)
	if err != nil {
		return false, err
	}
	for _, p := range parts {
		if p.name == "usage_logs_legacy" {
			return true, nil
		}
	}
	return false, nil
}

// isNoPartition is PostgreSQL refusing a row no partition of usage_logs
// takes (a month housekeeping has not made yet).
func isNoPartition(err error) bool {
	var e *pgconn.PgError
	return errors.As(err, &e) && e.Code == "23514" && e.TableName == "usage_logs"
}

func isDuplicateObject(err error) bool {
	var e *pgconn.PgError
	return errors.As(err, &e) && (e.Code == "42P07" || e.Code == "23505")
}
