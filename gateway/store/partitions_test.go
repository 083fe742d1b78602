package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/modelgate/modelgate/test/pgtest"
	. "github.com/onsi/gomega"
)

// legacyEnd is where migration 00012 ends the legacy partition: the start
// of the month after the one it runs in (the real clock's).
func legacyEnd() time.Time { return utcMonthStart(time.Now()).AddDate(0, 1, 0) }

func usageRowAt(a account, id string, at time.Time) UsageRow {
	return UsageRow{RequestID: id, CreatedAt: at.Unix(), UserID: a.userID, TokenID: a.tokenID, TokenName: "k",
		ModelName: "m", PromptTokens: 1, CompletionTokens: 2, BillingPhase: PhaseSettled, Quota: 10}
}

func countUsage(t *testing.T, s *Store, id string) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM usage_logs WHERE request_id = $1`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestUsagePartitionMigration upgrades a PostgreSQL ledger at schema
// version 11 that has usage rows: after migration 12 every row is readable
// from the partitioned usage_logs, a replay of a legacy row's request ID
// (dated into a new month's partition) is skipped, and so is a replay
// across a month boundary.
func TestUsagePartitionMigration(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	p, db := gooseProvider(t, dsn)
	_, err := p.UpTo(ctx, 11)
	g.Expect(err).NotTo(HaveOccurred())
	recent := legacyEnd().AddDate(0, 0, -3).Unix()
	insertRawUsage(t, db, fmt.Sprintf(`('a', 7200, 1, 1, 'k', 'm', 1, 2, 3, 'settled', 10), ('b', %d, 1, 1, 'k', 'm', 1, 2, 3, 'settled', 20)`, recent))

	s := openStore(t, dsn, WithClock(newFakeClock(legacyEnd().Add(10*24*time.Hour))))
	var partitioned bool
	g.Expect(s.db.QueryRow(`SELECT relkind = 'p' FROM pg_class WHERE relname = 'usage_logs'`).Scan(&partitioned)).To(Succeed())
	g.Expect(partitioned).To(BeTrue())
	for _, w := range [][2]int64{{0, 3600 * 3}, {recent - 3600, recent + 1}} {
		page, err := s.ListUsage(ctx, UsageQuery{UserID: 1, Start: w[0], End: w[1]})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(page.Rows).To(HaveLen(1))
	}

	a := newAccount(t, s, 1_000_000, 1_000_000, TokenLimits{})
	n, err := s.InsertUsage(ctx, []UsageRow{usageRowAt(a, "a", legacyEnd().Add(5*24*time.Hour)), usageRowAt(a, "c", legacyEnd().Add(5*24*time.Hour))})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1), "the legacy row's request ID is still taken")
	g.Expect(countUsage(t, s, "a")).To(Equal(1))

	lastSecond := legacyEnd().AddDate(0, 1, 0).Add(-time.Second)
	n, err = s.InsertUsage(ctx, []UsageRow{usageRowAt(a, "edge", lastSecond)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1))
	n, err = s.InsertUsage(ctx, []UsageRow{usageRowAt(a, "edge", lastSecond.Add(time.Second)), usageRowAt(a, "edge", lastSecond.Add(2*time.Second))})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(BeZero(), "a replay in the next month's partition is skipped")
	g.Expect(countUsage(t, s, "edge")).To(Equal(1))

	// Log IDs go on after the legacy rows' ones.
	var minNew, maxOld int64
	g.Expect(s.db.QueryRow(`SELECT MIN(log_id) FROM usage_logs WHERE request_id IN ('c', 'edge')`).Scan(&minNew)).To(Succeed())
	g.Expect(s.db.QueryRow(`SELECT MAX(log_id) FROM usage_logs_legacy`).Scan(&maxOld)).To(Succeed())
	g.Expect(minNew).To(BeNumerically(">", maxOld))

	// Migrating down gives one table with every row and a unique request_id.
	g.Expect(s.Close()).To(Succeed())
	_, err = p.DownTo(ctx, 11)
	g.Expect(err).NotTo(HaveOccurred())
	var rows int
	g.Expect(db.QueryRow(`SELECT COUNT(*) FROM usage_logs`).Scan(&rows)).To(Succeed())
	g.Expect(rows).To(Equal(4))
	_, err = db.Exec(`INSERT INTO usage_logs (request_id, created_at, user_id, token_id, token_name, model_name,
		prompt_tokens, completion_tokens, total_tokens, billing_phase, quota) VALUES ('a', 1, 1, 1, 'k', 'm', 1, 1, 2, 'settled', 1)`)
	g.Expect(err).To(HaveOccurred())
	insertRawUsage(t, db, `('z', 1, 1, 1, 'k', 'm', 1, 1, 2, 'settled', 1)`)
}

// TestUsageRetentionDropsPartitions: on PostgreSQL a retention pass drops
// the whole months before its cutoff as partitions (the legacy one too,
// once it lies wholly before), counting them and their rows, and keeps the
// months after; an expired request ID may be written again.
func TestUsageRetentionDropsPartitions(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	first := legacyEnd() // the first month with a partition of its own
	clk := newFakeClock(first.Add(24 * time.Hour))
	s := openStore(t, pgtest.NewDatabase(t), WithClock(clk))
	a := newAccount(t, s, 1_000_000, 1_000_000, TokenLimits{})
	var rows []UsageRow
	for i := range 3 {
		rows = append(rows, usageRowAt(a, fmt.Sprint("first-", i), first.Add(time.Duration(i)*time.Hour)))
	}
	rows = append(rows, usageRowAt(a, "legacy", first.Add(-time.Hour)), usageRowAt(a, "second", first.AddDate(0, 1, 1)))
	n, err := s.InsertUsage(ctx, rows)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(5))

	// Cutoff = first: only the legacy partition lies wholly before it.
	clk.Set(first.AddDate(0, 13, 5))
	got, err := s.ApplyRetention(ctx, Retention{Usage: first.AddDate(0, 13, 5).Sub(first) - time.Hour})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Partitions[TableUsageLogs]).To(Equal(int64(1)))
	g.Expect(got.Rows[TableUsageLogs]).To(Equal(int64(1)))

	// Cutoff = first + 1 month: the first month goes whole.
	got, err = s.ApplyRetention(ctx, Retention{Usage: first.AddDate(0, 13, 5).Sub(first.AddDate(0, 1, 0)) - time.Hour})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Partitions[TableUsageLogs]).To(Equal(int64(1)))
	g.Expect(got.Rows[TableUsageLogs]).To(Equal(int64(3)))
	var tables []string
	res, err := s.db.Query(`SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'usage_logs'::regclass ORDER BY 1`)
	g.Expect(err).NotTo(HaveOccurred())
	for res.Next() {
		var name string
		g.Expect(res.Scan(&name)).To(Succeed())
		tables = append(tables, name)
	}
	g.Expect(tables).NotTo(ContainElement("usage_logs_" + first.Format("200601")))
	g.Expect(tables).To(ContainElement("usage_logs_" + first.AddDate(0, 1, 0).Format("200601")))
	// Months ahead of the clock were made by the pass.
	g.Expect(tables).To(ContainElement("usage_logs_" + first.AddDate(0, 15, 0).Format("200601")))
	g.Expect(countUsage(t, s, "second")).To(Equal(1))

	n, err = s.InsertUsage(ctx, []UsageRow{usageRowAt(a, "first-0", first.AddDate(0, 13, 5))})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1), "an expired request ID's claim went with its row")

	// A row dated in a month no partition covers yet makes its partition.
	far := first.AddDate(0, 30, 3)
	n, err = s.InsertUsage(ctx, []UsageRow{usageRowAt(a, "far", far), usageRowAt(a, "near", first.AddDate(0, 13, 6))})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(2))
	g.Expect(countUsage(t, s, "far")).To(Equal(1))
}
