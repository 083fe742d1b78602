package store

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/pressly/goose/v3"
)

// TestHourlyRollupBackfill upgrades a ledger that has usage rows from
// schema version 1: migration 2 must build the rollup from them.
func TestHourlyRollupBackfill(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		p, db := gooseProvider(t, dsn)
		_, err := p.UpTo(ctx, 1)
		g.Expect(err).NotTo(HaveOccurred())
		insertRawUsage(t, db, `('a', 7200, 1, 1, 'k', 'm', 1, 2, 3, 'settled', 10), ('b', 7300, 1, 1, 'k', 'm', 1, 2, 3, 'settled', 20)`)

		s := openStore(t, dsn)
		page, err := s.SummarizeUsage(ctx, UsageQuery{UserID: 1, Start: 0, End: 3 * 3600})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(page.Rows).To(Equal([]UsageSummary{{TokenID: 1, RequestCount: 2, PromptTokens: 2, CompletionTokens: 4, TotalTokens: 6, Quota: 30}}))
		// Migration 7 splits the rollup by model, from the same rows.
		points, err := s.UsageSeries(ctx, SeriesQuery{UserID: 1, Start: 0, End: 3 * 3600, Bucket: BucketHour, Split: SplitModel})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(points).To(Equal([]SeriesPoint{{Bucket: 7200, Model: "m", RequestCount: 2, Tokens: 6, Quota: 30}}))
	})
}

// TestRollupByModelMigration upgrades a ledger at schema version 6 whose
// rollup has rows: migration 7 rebuilds it with models, and migrating down
// gives the per-key sums back.
func TestRollupByModelMigration(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		p, db := gooseProvider(t, dsn)
		_, err := p.UpTo(ctx, 6)
		g.Expect(err).NotTo(HaveOccurred())
		insertRawUsage(t, db, `('a', 7200, 1, 1, 'k', 'chat', 1, 2, 3, 'settled', 10), ('b', 7300, 1, 1, 'k', 'image', 1, 2, 3, 'settled', 20), ('c', 7400, 1, 1, 'k', 'chat', 1, 1, 2, 'settled', 5)`)
		_, err = db.ExecContext(ctx, `INSERT INTO usage_hourly (user_id, hour_start, token_id, request_count, prompt_tokens, completion_tokens, quota)
			VALUES (1, 7200, 1, 3, 3, 5, 35)`)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = p.UpTo(ctx, 7)
		g.Expect(err).NotTo(HaveOccurred())

		s := openStore(t, dsn)
		points, err := s.UsageSeries(ctx, SeriesQuery{UserID: 1, Start: 0, End: 3 * 3600, Bucket: BucketHour, Split: SplitModel})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(points).To(Equal([]SeriesPoint{
			{Bucket: 7200, Model: "chat", RequestCount: 2, Tokens: 5, Quota: 15},
			{Bucket: 7200, Model: "image", RequestCount: 1, Tokens: 3, Quota: 20},
		}))

		_, err = p.DownTo(ctx, 6)
		g.Expect(err).NotTo(HaveOccurred())
		var n, quota int64
		g.Expect(db.QueryRowContext(ctx, `SELECT request_count, quota FROM usage_hourly WHERE user_id = 1 AND hour_start = 7200 AND token_id = 1`).
			Scan(&n, &quota)).To(Succeed())
		g.Expect([]int64{n, quota}).To(Equal([]int64{3, 35}))
	})
}

// TestReviewUpstreamRefMigration upgrades a ledger at schema version 7
// with a passed review record: migration 8 keeps it, without a reference,
// and migrating down drops the column again.
func TestReviewUpstreamRefMigration(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		p, db := gooseProvider(t, dsn)
		_, err := p.UpTo(ctx, 7)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = db.ExecContext(ctx, `INSERT INTO review_assets (user_id, channel, asset_type, asset_key, state, blob_key, prepared_at, decided_at, last_used_at)
			VALUES (1, 'ns/r/b', 'image', 'https://cdn.example/a.png', 'passed', 'k', 1000, 2000, 3000)`)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = p.UpTo(ctx, 8)
		g.Expect(err).NotTo(HaveOccurred())

		s := openStore(t, dsn)
		r, err := s.PrepareReviewAsset(ctx, ReviewAsset{UserID: 1, Channel: "ns/r/b", Type: "image", Key: "https://cdn.example/a.png"}, time.UnixMilli(4000))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.State).To(Equal(ReviewPassed))
		g.Expect(r.BlobKey).To(Equal("k"))
		g.Expect(r.UpstreamRef).To(BeEmpty())

		_, err = p.DownTo(ctx, 7)
		g.Expect(err).NotTo(HaveOccurred())
		var n int64
		g.Expect(db.QueryRowContext(ctx, `SELECT COUNT(*) FROM review_assets`).Scan(&n)).To(Succeed())
		g.Expect(n).To(Equal(int64(1)))
		_, err = db.ExecContext(ctx, `SELECT upstream_ref FROM review_assets`)
		g.Expect(err).To(HaveOccurred(), "the column is gone")
	})
}

// TestUsageWriteCostMigration upgrades an embedded ledger at schema version
// 8 with usage rows and their rollup: migration 9 (SQLite only) keeps every
// figure, with the rollup clustered on its key and one index on usage_logs,
// and migrating down gives the two indexes and the rowid rollup back.
func TestUsageWriteCostMigration(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dsn := backends[0].dsn(t)
	p, db := gooseProvider(t, dsn)
	_, err := p.UpTo(ctx, 8)
	g.Expect(err).NotTo(HaveOccurred())
	insertRawUsage(t, db, `('a', 7200, 1, 1, 'k', 'chat', 1, 2, 3, 'settled', 10), ('b', 7300, 1, 2, 'l', 'chat', 1, 2, 3, 'settled', 20)`)
	_, err = db.ExecContext(ctx, `INSERT INTO usage_hourly (user_id, hour_start, token_id, model_name, request_count, prompt_tokens, completion_tokens, quota)
		VALUES (1, 7200, 1, 'chat', 1, 1, 2, 10), (1, 7200, 2, 'chat', 1, 1, 2, 20)`)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = p.UpTo(ctx, 9)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sqliteIndexes(t, db, "usage_logs")).To(ConsistOf("usage_logs_user_time"))
	var ddl string
	g.Expect(db.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE name = 'usage_hourly'`).Scan(&ddl)).To(Succeed())
	g.Expect(ddl).To(HaveSuffix("WITHOUT ROWID"))

	s := openStore(t, dsn)
	page, err := s.SummarizeUsage(ctx, UsageQuery{UserID: 1, Start: 0, End: 3 * 3600})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(page.Rows).To(Equal([]UsageSummary{
		{TokenID: 1, RequestCount: 1, PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3, Quota: 10},
		{TokenID: 2, RequestCount: 1, PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3, Quota: 20},
	}))
	list, err := s.ListUsage(ctx, UsageQuery{UserID: 1, TokenID: 2, Start: 0, End: 3 * 3600})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Rows).To(HaveLen(1))
	g.Expect(list.Rows[0].TokenName).To(Equal("l"))
	g.Expect(s.Close()).To(Succeed())

	_, err = p.DownTo(ctx, 8)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sqliteIndexes(t, db, "usage_logs")).To(ConsistOf("usage_logs_user_time", "usage_logs_user_token_time"))
	var n, quota int64
	g.Expect(db.QueryRowContext(ctx, `SELECT COUNT(*), SUM(quota) FROM usage_hourly`).Scan(&n, &quota)).To(Succeed())
	g.Expect([]int64{n, quota}).To(Equal([]int64{2, 30}))
}

// TestRollupSplitMigration upgrades a ledger whose rollup is keyed on the key
// and model together (SQLite 9, PostgreSQL 8): the split (SQLite 10,
// PostgreSQL 9) gives the same summary and the same charts by key and by
// model, and migrating down rebuilds the joint rollup from the rows.
func TestRollupSplitMigration(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		before := int64(9)
		if strings.HasPrefix(dsn, "postgres") {
			before = 8
		}
		p, db := gooseProvider(t, dsn)
		_, err := p.UpTo(ctx, before)
		g.Expect(err).NotTo(HaveOccurred())
		insertRawUsage(t, db, `('a', 7200, 1, 1, 'k', 'chat', 1, 2, 3, 'settled', 10), ('b', 7300, 1, 2, 'l', 'chat', 2, 2, 4, 'settled', 20),
			('c', 7400, 1, 1, 'k', 'image', 1, 1, 2, 'settled', 5), ('d', 10900, 1, 2, 'l', 'image', 3, 3, 6, 'settled', 7),
			('e', 7500, 1, 2, 'l', 'chat', 9, 9, 18, 'pre_consumed', 100)`)
		_, err = db.ExecContext(ctx, `INSERT INTO usage_hourly (user_id, hour_start, token_id, model_name, request_count, prompt_tokens, completion_tokens, quota)
			VALUES (1, 7200, 1, 'chat', 1, 1, 2, 10), (1, 7200, 2, 'chat', 1, 2, 2, 20), (1, 7200, 1, 'image', 1, 1, 1, 5), (1, 10800, 2, 'image', 1, 3, 3, 7)`)
		g.Expect(err).NotTo(HaveOccurred())

		s := openStore(t, dsn) // migrates to the latest version
		page, err := s.SummarizeUsage(ctx, UsageQuery{UserID: 1, Start: 0, End: 4 * 3600})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(page.Rows).To(Equal([]UsageSummary{
			{TokenID: 1, RequestCount: 2, PromptTokens: 2, CompletionTokens: 3, TotalTokens: 5, Quota: 15},
			{TokenID: 2, RequestCount: 2, PromptTokens: 5, CompletionTokens: 5, TotalTokens: 10, Quota: 27},
		}))
		byModel, err := s.UsageSeries(ctx, SeriesQuery{UserID: 1, Start: 0, End: 4 * 3600, Bucket: BucketHour, Split: SplitModel})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(byModel).To(Equal([]SeriesPoint{
			{Bucket: 7200, Model: "chat", RequestCount: 2, Tokens: 7, Quota: 30},
			{Bucket: 7200, Model: "image", RequestCount: 1, Tokens: 2, Quota: 5},
			{Bucket: 10800, Model: "image", RequestCount: 1, Tokens: 6, Quota: 7},
		}))
		byKey, err := s.UsageSeries(ctx, SeriesQuery{UserID: 1, Start: 0, End: 4 * 3600, Bucket: BucketHour, Split: SplitKey})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(byKey).To(Equal([]SeriesPoint{
			{Bucket: 7200, TokenID: 1, RequestCount: 2, Tokens: 5, Quota: 15},
			{Bucket: 7200, TokenID: 2, RequestCount: 1, Tokens: 4, Quota: 20},
			{Bucket: 10800, TokenID: 2, RequestCount: 1, Tokens: 6, Quota: 7},
		}))
		g.Expect(s.Close()).To(Succeed())

		_, err = p.DownTo(ctx, before)
		g.Expect(err).NotTo(HaveOccurred())
		rows, err := db.QueryContext(ctx, `SELECT hour_start, token_id, model_name, request_count, quota FROM usage_hourly ORDER BY 1, 2, 3`)
		g.Expect(err).NotTo(HaveOccurred())
		var pairs []string
		for rows.Next() {
			var hour, token, n, quota int64
			var model string
			g.Expect(rows.Scan(&hour, &token, &model, &n, &quota)).To(Succeed())
			pairs = append(pairs, fmt.Sprintf("%d %d %s %d %d", hour, token, model, n, quota))
		}
		g.Expect(rows.Close()).To(Succeed())
		g.Expect(pairs).To(Equal([]string{"7200 1 chat 1 10", "7200 1 image 1 5", "7200 2 chat 1 20", "10800 2 image 1 7"}),
			"the held reservation (pre_consumed) stays out, as it was")
	})
}

// insertRawUsage writes usage rows straight into a ledger at an older schema
// version; values are (request ID, created at, user, token, token name,
// model, prompt, completion, total, phase, quota) tuples.
func insertRawUsage(t *testing.T, db *sql.DB, values string) {
	t.Helper()
	if _, err := db.Exec(`INSERT INTO usage_logs (request_id, created_at, user_id, token_id, token_name, model_name,
		prompt_tokens, completion_tokens, total_tokens, billing_phase, quota) VALUES ` + values); err != nil {
		t.Fatal(err)
	}
}

// sqliteIndexes names the indexes of table made by CREATE INDEX (not the
// ones SQLite makes for UNIQUE and PRIMARY KEY constraints).
func sqliteIndexes(t *testing.T, db *sql.DB, table string) []string {
	t.Helper()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL`, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	return names
}

// TestReservationHoldUntilMigration upgrades a ledger at schema version 13
// with an open reservation: migration 14 keeps it, not held (hold_until 0,
// so the stale sweep treats it as before), and migrating down drops the
// column again.
func TestReservationHoldUntilMigration(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		p, db := gooseProvider(t, dsn)
		_, err := p.UpTo(ctx, 13)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = db.ExecContext(ctx, `INSERT INTO reservations (request_id, token_id, user_id, amount, state, created_at, updated_at)
			VALUES ('r', 1, 1, 100, 'reserved', 1000, 1000)`)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = p.UpTo(ctx, 14)
		g.Expect(err).NotTo(HaveOccurred())
		var hold int64
		g.Expect(db.QueryRowContext(ctx, `SELECT hold_until FROM reservations WHERE request_id = 'r'`).Scan(&hold)).To(Succeed())
		g.Expect(hold).To(BeZero())

		_, err = p.DownTo(ctx, 13)
		g.Expect(err).NotTo(HaveOccurred())
		var n int64
		g.Expect(db.QueryRowContext(ctx, `SELECT COUNT(*) FROM reservations`).Scan(&n)).To(Succeed())
		g.Expect(n).To(Equal(int64(1)))
		_, err = db.ExecContext(ctx, `SELECT hold_until FROM reservations`)
		g.Expect(err).To(HaveOccurred(), "the column is gone")
	})
}

// gooseProvider opens the raw database behind dsn with the ledger's
// migrations, to move it to a chosen schema version.
func gooseProvider(t *testing.T, dsn string) (*goose.Provider, *sql.DB) {
	t.Helper()
	driver, dir, dialect, raw := "pgx", "migrations/postgres", goose.DialectPostgres, dsn
	if strings.HasPrefix(dsn, "sqlite://") {
		driver, dir, dialect, raw = "sqlite", "migrations/sqlite", goose.DialectSQLite3, "file:"+strings.TrimPrefix(dsn, "sqlite://")
	}
	db, err := sql.Open(driver, raw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	sub, err := fs.Sub(migrations, dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(dialect, db, sub)
	if err != nil {
		t.Fatal(err)
	}
	return p, db
}
