package store

import (
	"context"
	"database/sql"
	"io/fs"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/pressly/goose/v3"
)

// TestHourlyRollupBackfill upgrades a ledger that has usage rows from
// schema version 1: migration 2 must build the rollup from them.
func TestHourlyRollupBackfill(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		driver, dir, dialect, raw := "pgx", "migrations/postgres", goose.DialectPostgres, dsn
		if strings.HasPrefix(dsn, "sqlite://") {
			driver, dir, dialect, raw = "sqlite", "migrations/sqlite", goose.DialectSQLite3, "file:"+strings.TrimPrefix(dsn, "sqlite://")
		}
		db, err := sql.Open(driver, raw)
		g.Expect(err).NotTo(HaveOccurred())
		defer db.Close()
		sub, err := fs.Sub(migrations, dir)
		g.Expect(err).NotTo(HaveOccurred())
		p, err := goose.NewProvider(dialect, db, sub)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = p.UpTo(ctx, 1)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = db.ExecContext(ctx, `INSERT INTO usage_logs (request_id, created_at, user_id, token_id, token_name, model_name,
			prompt_tokens, completion_tokens, total_tokens, billing_phase, quota)
			VALUES ('a', 7200, 1, 1, 'k', 'm', 1, 2, 3, 'settled', 10), ('b', 7300, 1, 1, 'k', 'm', 1, 2, 3, 'settled', 20)`)
		g.Expect(err).NotTo(HaveOccurred())

		s := openStore(t, dsn)
		page, err := s.SummarizeUsage(ctx, UsageQuery{UserID: 1, Start: 0, End: 3 * 3600})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(page.Rows).To(Equal([]UsageSummary{{TokenID: 1, RequestCount: 2, PromptTokens: 2, CompletionTokens: 4, TotalTokens: 6, Quota: 30}}))
	})
}
