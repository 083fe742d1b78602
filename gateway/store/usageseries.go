package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/modelgate/modelgate/gateway/billing"
)

// SeriesSplit is what a usage series is split by.
type SeriesSplit string

const (
	SplitNone  SeriesSplit = ""
	SplitKey   SeriesSplit = "key"
	SplitModel SeriesSplit = "model"
	// SplitTenant splits platform-wide usage by tenant (PlatformSeries,
	// PlatformTotals); a tenant's own series has one tenant.
	SplitTenant SeriesSplit = "tenant"
)

// Series buckets: an hour or a UTC day.
const (
	BucketHour int64 = 3600
	BucketDay  int64 = 86400
)

// SeriesQuery asks for a user's usage per bucket of [Start, End) (Unix
// seconds; Start is rounded down and End up to whole buckets), optionally
// split by key or by model.
type SeriesQuery struct {
	UserID     int64
	Start, End int64
	Bucket     int64 // BucketHour or BucketDay
	Split      SeriesSplit
}

// SeriesPoint is one bucket of one group: the key's ID, the model's name or
// the tenant's user ID (all empty without a split).
type SeriesPoint struct {
	Bucket       int64 // Unix seconds of the bucket's start
	UserID       int64 // only in a platform series split by tenant
	TokenID      int64
	Model        string
	RequestCount int64
	Tokens       int64 // prompt plus completion
	Quota        billing.Quota
}

// seriesSplits is, for each split, the rollup a series reads and the
// (key, model) columns it groups by.
var seriesSplits = map[SeriesSplit]struct {
	from  rollup
	group string
}{
	SplitNone:  {rollupByKey, "0, ''"},
	SplitKey:   {rollupByKey, "token_id, ''"},
	SplitModel: {rollupByModel, "0, model_name"},
}

// UsageSeries returns a user's usage per bucket, oldest first and then by
// group, from the hourly rollup; buckets and groups without usage are
// absent. Because it reads whole hours, a bucket holds every request of its
// hour or day even where the window starts or ends inside it.
func (s *Store) UsageSeries(ctx context.Context, q SeriesQuery) ([]SeriesPoint, error) {
	start, end, err := seriesWindow(q.Start, q.End, q.Bucket)
	if err != nil {
		return nil, err
	}
	split, ok := seriesSplits[q.Split]
	if !ok {
		return nil, fmt.Errorf("%w: unknown series split %q", ErrInvalidQuery, q.Split)
	}
	sqlText := `SELECT hour_start - hour_start % ` + fmt.Sprint(q.Bucket) + `, 0, ` + split.group + `,
			CAST(SUM(request_count) AS BIGINT), CAST(SUM(prompt_tokens + completion_tokens) AS BIGINT), CAST(SUM(quota) AS BIGINT)
		FROM ` + split.from.table + ` WHERE user_id = ? AND hour_start >= ? AND hour_start < ?
		GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4`
	out, err := s.scanSeries(ctx, sqlText, []any{q.UserID, start, end})
	if err != nil {
		return nil, fmt.Errorf("usage series of user %d: %w", q.UserID, err)
	}
	return out, nil
}

// seriesWindow rounds [start, end) out to whole buckets and checks it
// against the limits of a series: at most 7 days of hours, or the usage
// window (31 days) and a day of days.
func seriesWindow(start, end, bucket int64) (int64, int64, error) {
	if bucket != BucketHour && bucket != BucketDay {
		return 0, 0, fmt.Errorf("%w: a series bucket is an hour or a day", ErrInvalidQuery)
	}
	start -= start % bucket
	if end%bucket != 0 {
		end += bucket - end%bucket
	}
	limit := int64((MaxUsageWindow + 24*time.Hour) / time.Second)
	if bucket == BucketHour {
		limit = 7 * BucketDay
	}
	if end <= start || end-start > limit {
		return 0, 0, fmt.Errorf("%w: a series window must be positive and at most %d days of %s buckets",
			ErrInvalidQuery, limit/BucketDay, map[int64]string{BucketHour: "hourly", BucketDay: "daily"}[bucket])
	}
	return start, end, nil
}

// scanSeries reads rows of (bucket, user, key, model, requests, tokens,
// quota).
func (s *Store) scanSeries(ctx context.Context, sqlText string, args []any) ([]SeriesPoint, error) {
	var out []SeriesPoint
	err := s.query(ctx, sqlText, args, func(rows *sql.Rows) error {
		var p SeriesPoint
		var quota int64
		if err := rows.Scan(&p.Bucket, &p.UserID, &p.TokenID, &p.Model, &p.RequestCount, &p.Tokens, &quota); err != nil {
			return err
		}
		p.Quota = billing.Quota(quota)
		out = append(out, p)
		return nil
	})
	return out, err
}
