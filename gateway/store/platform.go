package store

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/modelgate/modelgate/gateway/billing"
)

// Platform-wide reads: the usage of every tenant together, for the
// console's platform overview. They read the hourly rollups the tenant
// console reads, over the same whole-bucket windows, so a platform figure
// is the sum of the tenants' figures for the same window.
//
// The rollups are keyed (user_id, hour_start, key or model), and there is no
// index on hour_start alone, which every write would have to maintain. A
// window over all tenants is instead read one tenant at a time from the
// primary key: the query names the tenants (tenants has one row per tenant;
// rows are never deleted, so every user ID the rollups hold is there), and
// for each one the database seeks to (user_id, start) and reads the
// window's rows in key order. The cost is one index descent per tenant plus
// the rows of the window, whatever the rollups hold outside it; a scan
// would read every hour the retention keeps (400 days by default). On
// PostgreSQL the tenants are an array (= ANY(ARRAY(SELECT …))), which the
// planner turns into an index scan of the primary key with one descent per
// element. EXPLAIN (ANALYZE, BUFFERS) of a 7-day window over 300 tenants
// with 60 days of hours (TestPlatformQueryPlan): a bitmap scan of the key,
// 1 884 buffers (520 of them heap pages) of the table's 4 454, 33 ms; the
// same query with IN (SELECT …) was planned as a hash join over a parallel
// sequential scan of the whole rollup, every page of it. SQLite plans
// IN (SELECT …) as a search of the primary key per tenant by itself.

// PlatformQuery selects platform-wide usage in [Start, End) (Unix seconds),
// rounded out to whole buckets as a tenant's series is (at most 7 days of
// hours, 31 days and one of days).
type PlatformQuery struct {
	Start, End int64
	Bucket     int64 // BucketHour or BucketDay
	// Split groups a series (SplitNone, SplitModel, SplitTenant) or the
	// totals (SplitTenant, SplitModel, SplitKey).
	Split SeriesSplit
	// Limit is how many totals to return, largest first: 1 to
	// MaxPlatformTotals (PlatformTotals only).
	Limit int
}

// MaxPlatformTotals bounds one PlatformTotals answer.
const MaxPlatformTotals = 1000

// SpendTotal is the usage of one tenant, model or key over a window.
type SpendTotal struct {
	UserID  int64  // by tenant and by key
	TokenID int64  // by key
	Model   string // by model
	// TokenName is the key's name in the ledger (by key).
	TokenName    string
	RequestCount int64
	Tokens       int64 // prompt plus completion
	Quota        billing.Quota
}

// platformGroups is, for each split, the rollup a platform read uses and
// its (user, key, model) columns.
var platformGroups = map[SeriesSplit]struct {
	from  rollup
	group string
}{
	SplitNone:   {rollupByKey, "0 AS u, 0 AS k, '' AS m"},
	SplitTenant: {rollupByKey, "user_id AS u, 0 AS k, '' AS m"},
	SplitKey:    {rollupByKey, "user_id AS u, token_id AS k, '' AS m"},
	SplitModel:  {rollupByModel, "0 AS u, 0 AS k, model_name AS m"},
}

// everyTenant is the filter that makes a platform read seek tenant by tenant
// (see the comment at the top of this file).
func (s *Store) everyTenant() string {
	if s.dialect == postgres {
		return `user_id = ANY (ARRAY(SELECT user_id FROM tenants))`
	}
	return `user_id IN (SELECT user_id FROM tenants)`
}

// PlatformSeries returns every tenant's usage per bucket, oldest first and
// then by group, split by nothing, model or tenant; buckets and groups
// without usage are absent.
func (s *Store) PlatformSeries(ctx context.Context, q PlatformQuery) ([]SeriesPoint, error) {
	start, end, err := seriesWindow(q.Start, q.End, q.Bucket)
	if err != nil {
		return nil, err
	}
	g, ok := platformGroups[q.Split]
	if !ok || q.Split == SplitKey {
		return nil, fmt.Errorf("%w: a platform series splits by nothing, model or tenant, not %q", ErrInvalidQuery, q.Split)
	}
	sqlText := `SELECT hour_start - hour_start % ` + strconv.FormatInt(q.Bucket, 10) + `, ` + g.group + `,
			CAST(SUM(request_count) AS BIGINT), CAST(SUM(prompt_tokens + completion_tokens) AS BIGINT), CAST(SUM(quota) AS BIGINT)
		FROM ` + g.from.table + ` WHERE ` + s.everyTenant() + ` AND hour_start >= ? AND hour_start < ?
		GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4`
	out, err := s.scanSeries(ctx, sqlText, []any{start, end})
	if err != nil {
		return nil, fmt.Errorf("platform usage series: %w", err)
	}
	return out, nil
}

// PlatformTotals returns the usage of each tenant, model or key over the
// window, the largest quota first (then by user ID, key ID and model), at
// most q.Limit of them; groups without usage are absent.
func (s *Store) PlatformTotals(ctx context.Context, q PlatformQuery) ([]SpendTotal, error) {
	start, end, err := seriesWindow(q.Start, q.End, q.Bucket)
	if err != nil {
		return nil, err
	}
	g, ok := platformGroups[q.Split]
	if !ok || q.Split == SplitNone {
		return nil, fmt.Errorf("%w: platform totals are by tenant, model or key, not %q", ErrInvalidQuery, q.Split)
	}
	if q.Limit < 1 || q.Limit > MaxPlatformTotals {
		return nil, fmt.Errorf("%w: a platform total's limit is 1 to %d", ErrInvalidQuery, MaxPlatformTotals)
	}
	// The key's name is looked up for the few groups kept, after the limit.
	sqlText := `SELECT g.u, g.k, g.m, COALESCE(t.name, ''), g.n, g.tok, g.qu FROM (
			SELECT ` + g.group + `, CAST(SUM(request_count) AS BIGINT) AS n,
				CAST(SUM(prompt_tokens + completion_tokens) AS BIGINT) AS tok, CAST(SUM(quota) AS BIGINT) AS qu
			FROM ` + g.from.table + ` WHERE ` + s.everyTenant() + ` AND hour_start >= ? AND hour_start < ?
			GROUP BY 1, 2, 3 ORDER BY 6 DESC, 1, 2, 3 LIMIT ?
		) g
		LEFT JOIN tokens t ON t.token_id = g.k
		ORDER BY g.qu DESC, g.u, g.k, g.m`
	var out []SpendTotal
	err = s.query(ctx, sqlText, []any{start, end, q.Limit}, func(rows *sql.Rows) error {
		var t SpendTotal
		var quota int64
		if err := rows.Scan(&t.UserID, &t.TokenID, &t.Model, &t.TokenName, &t.RequestCount, &t.Tokens, &quota); err != nil {
			return err
		}
		t.Quota = billing.Quota(quota)
		out = append(out, t)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("platform usage totals by %s: %w", q.Split, err)
	}
	return out, nil
}
