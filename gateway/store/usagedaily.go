package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/modelgate/modelgate/gateway/billing"
)

// DayUsage is a user's usage in one UTC day.
type DayUsage struct {
	Day          int64 // Unix seconds of the day's 00:00 UTC
	RequestCount int64
	Quota        billing.Quota
}

// UsageByDay returns a user's usage per UTC day, oldest first, from the
// hourly rollup, for the days of [start, end) (Unix seconds; start is
// rounded down and end up to whole days). Days without usage are absent.
// The window is at most MaxUsageWindow plus a day.
func (s *Store) UsageByDay(ctx context.Context, userID, start, end int64) ([]DayUsage, error) {
	const day = 86400
	start -= start % day
	if end%day != 0 {
		end += day - end%day
	}
	if end <= start || end-start > int64((MaxUsageWindow+24*time.Hour)/time.Second) {
		return nil, fmt.Errorf("%w: a daily window must be positive and at most 32 days", ErrInvalidQuery)
	}
	var out []DayUsage
	q := `SELECT hour_start - hour_start % 86400 AS day, SUM(request_count), SUM(quota)
		FROM usage_hourly WHERE user_id = ? AND hour_start >= ? AND hour_start < ?
		GROUP BY hour_start - hour_start % 86400 ORDER BY day`
	err := s.query(ctx, q, []any{userID, start, end}, func(rows *sql.Rows) error {
		var d DayUsage
		var quota int64
		if err := rows.Scan(&d.Day, &d.RequestCount, &quota); err != nil {
			return err
		}
		d.Quota = billing.Quota(quota)
		out = append(out, d)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("daily usage of user %d: %w", userID, err)
	}
	return out, nil
}
