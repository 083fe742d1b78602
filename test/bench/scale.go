package bench

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/modelgate/modelgate/gateway/store"
)

// ScaleOptions say how large a usage table the scale check builds.
type ScaleOptions struct {
	// Rows of usage_logs to seed, spread over Days days before Now.
	Rows int64
	Days int
	// Tenants and keys per tenant the rows are spread over.
	Tenants, Keys int
	// Rounds of each query per tenant measured.
	Rounds int
	// IngestRows written through InsertUsage in batches of IngestBatch
	// after the seed, for the ingest rate at that table size.
	IngestRows, IngestBatch int
	Now                     time.Time
}

// ScaleResult holds the latencies of the usage reads at the seeded size
// and the ingest rate.
type ScaleResult struct {
	Rows                           int64
	Seed                           time.Duration
	Requests, Summary, ConsolePage Latency
	IngestRowsPerSecond            float64
}

// Latency is the median and the worst of a query's runs.
type Latency struct{ P50, Max time.Duration }

// Scale seeds opt.Rows usage rows into the ledger at dsn (a PostgreSQL
// database of its own) and measures, for a 31-day window ending now, the
// requests listing's first page, the summary and the ledger reads of the
// console's usage page (the listing's first page and the daily chart by
// key), then the ingest rate of InsertUsage on that table.
func Scale(ctx context.Context, dsn string, opt ScaleOptions, log io.Writer) (ScaleResult, error) {
	var res ScaleResult
	s, err := store.Open(ctx, dsn, store.WithQueryTimeout(time.Minute))
	if err != nil {
		return res, err
	}
	defer s.Close()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return res, err
	}
	defer db.Close()

	var users []int64
	for i := range opt.Tenants {
		u, err := s.EnsureTenant(ctx, fmt.Sprint("scale-tenant-", i), fmt.Sprint("ns-", i), "tenant")
		if err != nil {
			return res, err
		}
		if _, err := s.ApplyGrant(ctx, u, "initial", 1<<50); err != nil {
			return res, err
		}
		for k := range opt.Keys {
			if _, err := s.EnsureToken(ctx, store.TokenSpec{UID: fmt.Sprintf("scale-token-%d-%d", i, k), UserID: u,
				Name: fmt.Sprint("key-", k)}); err != nil {
				return res, err
			}
		}
		users = append(users, u)
	}
	tokenOf := func(u int64) int64 {
		var id int64
		_ = db.QueryRowContext(ctx, `SELECT MIN(token_id) FROM tokens WHERE user_id = $1`, u).Scan(&id)
		return id
	}
	firstUser, firstToken := users[0], tokenOf(users[0])

	// Generated server-side, a million rows per statement: loading through
	// the driver would dominate the run. Row i goes to tenant i % Tenants
	// and its key (i / Tenants) % Keys, at a time spread evenly over Days.
	end := opt.Now.Unix()
	span := int64(opt.Days) * 86400
	started := time.Now()
	const chunk = 1_000_000
	for lo := int64(1); lo <= opt.Rows; lo += chunk {
		hi := min(lo+chunk-1, opt.Rows)
		_, err := db.ExecContext(ctx, fmt.Sprintf(`
			INSERT INTO usage_logs (request_id, created_at, user_id, token_id, token_name, model_name, prompt_tokens,
				completion_tokens, total_tokens, billing_phase, quota)
			SELECT 'scale-' || i, %[1]d - (i * 7919) %% %[2]d, %[3]d + i %% %[4]d,
				%[5]d + (i %% %[4]d) * %[6]d + (i / %[4]d) %% %[6]d, 'key', 'model-' || (i %% 7), 100, 50, 150, 'settled', 1000 + i %% 97
			FROM generate_series(%[7]d::bigint, %[8]d) AS i`,
			end, span, firstUser, opt.Tenants, firstToken, opt.Keys, lo, hi))
		if err != nil {
			return res, fmt.Errorf("seed: %w", err)
		}
		fmt.Fprintf(log, "scale: seeded %d of %d rows (%s)\n", hi, opt.Rows, time.Since(started).Round(time.Second))
	}
	// Seeded rows bypass InsertUsage: the rollups are built as the
	// migrations' backfills build them, and the request IDs claimed as
	// migration 00012 claims those of the rows it finds.
	for _, q := range []string{
		`INSERT INTO usage_request_ids (request_id, created_at) SELECT request_id, created_at FROM usage_logs`,
		`INSERT INTO usage_hourly (user_id, hour_start, token_id, request_count, prompt_tokens, completion_tokens, quota)
		SELECT user_id, created_at - created_at % 3600, token_id, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(quota)
		FROM usage_logs GROUP BY 1, 2, 3`,
		`INSERT INTO usage_hourly_model (user_id, hour_start, model_name, request_count, prompt_tokens, completion_tokens, quota)
		SELECT user_id, created_at - created_at % 3600, model_name, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(quota)
		FROM usage_logs GROUP BY 1, 2, 3`,
		`VACUUM ANALYZE`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return res, fmt.Errorf("seed: %w", err)
		}
	}
	res.Seed = time.Since(started)
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM usage_logs`).Scan(&res.Rows); err != nil {
		return res, err
	}
	fmt.Fprintf(log, "scale: %d rows, rollups built and analyzed in %s\n", res.Rows, res.Seed.Round(time.Second))

	window := store.UsageQuery{Start: end - 31*86400 + 1, End: end + 1, PageSize: store.DefaultPageSize}
	measure := func(fn func(user int64) error) (Latency, error) {
		var d []time.Duration
		for range opt.Rounds {
			for _, u := range users {
				t := time.Now()
				if err := fn(u); err != nil {
					return Latency{}, err
				}
				d = append(d, time.Since(t))
			}
		}
		slices.Sort(d)
		return Latency{P50: d[len(d)/2], Max: d[len(d)-1]}, nil
	}
	list := func(u int64) error {
		q := window
		q.UserID = u
		p, err := s.ListUsage(ctx, q)
		if err == nil && len(p.Rows) == 0 {
			err = fmt.Errorf("no usage rows for tenant %d", u)
		}
		return err
	}
	if res.Requests, err = measure(list); err != nil {
		return res, err
	}
	if res.Summary, err = measure(func(u int64) error {
		q := window
		q.UserID, q.PageSize = u, store.MaxPageSize
		_, err := s.SummarizeUsage(ctx, q)
		return err
	}); err != nil {
		return res, err
	}
	if res.ConsolePage, err = measure(func(u int64) error {
		if err := list(u); err != nil {
			return err
		}
		_, err := s.UsageSeries(ctx, store.SeriesQuery{UserID: u, Start: window.Start, End: window.End,
			Bucket: store.BucketDay, Split: store.SplitKey})
		return err
	}); err != nil {
		return res, err
	}

	// Ingest: the usage writer's batches, new rows now, uncharged (the
	// tokens are unlimited), so the figure is the table's insert cost.
	started = time.Now()
	for lo := 0; lo < opt.IngestRows; lo += opt.IngestBatch {
		var batch []store.UsageRow
		for i := lo; i < min(lo+opt.IngestBatch, opt.IngestRows); i++ {
			u := users[i%len(users)]
			batch = append(batch, store.UsageRow{RequestID: fmt.Sprint("ingest-", i), CreatedAt: end, UserID: u,
				TokenID: firstToken + int64(i%len(users))*int64(opt.Keys), TokenName: "key", ModelName: "model-0",
				PromptTokens: 100, CompletionTokens: 50, BillingPhase: store.PhaseSettled, Quota: 1000})
		}
		if _, err := s.InsertUsage(ctx, batch); err != nil {
			return res, fmt.Errorf("ingest: %w", err)
		}
	}
	res.IngestRowsPerSecond = float64(opt.IngestRows) / time.Since(started).Seconds()
	return res, nil
}
