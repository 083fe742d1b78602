package store

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/billing"
)

// TestPlatformReads: the platform series and totals sum every tenant's
// rollup rows of the window (and only those), split by tenant, model or
// key, the largest first, and agree with the tenants' own series.
func TestPlatformReads(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		const day0 = 20000 * 86400 // a UTC midnight
		a := newAccount(t, s, 0, 0, TokenLimits{})
		b := newAccount(t, s, 0, 0, TokenLimits{})
		b2, err := s.EnsureToken(ctx, TokenSpec{UID: "uid-b2", UserID: b.userID, Name: "batch"})
		g.Expect(err).NotTo(HaveOccurred())
		n := 0
		row := func(acct account, token int64, model string, at int64, quota billing.Quota) UsageRow {
			n++
			return UsageRow{RequestID: fmt.Sprintf("r%d", n), CreatedAt: at, UserID: acct.userID, TokenID: token, TokenName: "k",
				ModelName: model, PromptTokens: 10, CompletionTokens: 5, BillingPhase: PhaseSettled, Quota: quota}
		}
		held := row(a, a.tokenID, "chat", day0+70, 5000)
		held.BillingPhase = PhasePreConsumed // a held reservation is not spent
		_, err = s.InsertUsage(ctx, []UsageRow{
			row(a, a.tokenID, "chat", day0+60, 100),
			row(a, a.tokenID, "image", day0+3600+1, 200),
			row(a, a.tokenID, "chat", day0+86400+5, 400),
			row(b, b.tokenID, "chat", day0+120, 1000),
			row(b, b2, "video", day0+86400+60, 3000),
			row(b, b2, "video", day0+2*86400, 9999), // the day after the window
			held,
		})
		g.Expect(err).NotTo(HaveOccurred())
		window := PlatformQuery{Start: day0, End: day0 + 2*86400, Bucket: BucketDay}
		with := func(split SeriesSplit, limit int) PlatformQuery {
			q := window
			q.Split, q.Limit = split, limit
			return q
		}

		series, err := s.PlatformSeries(ctx, window)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(series).To(Equal([]SeriesPoint{
			{Bucket: day0, RequestCount: 3, Tokens: 45, Quota: 1300},
			{Bucket: day0 + 86400, RequestCount: 2, Tokens: 30, Quota: 3400},
		}))
		// The platform's days are the sum of the tenants' own series.
		var own []SeriesPoint
		for _, acct := range []account{a, b} {
			p, err := s.UsageSeries(ctx, SeriesQuery{UserID: acct.userID, Start: window.Start, End: window.End, Bucket: BucketDay})
			g.Expect(err).NotTo(HaveOccurred())
			own = append(own, p...)
		}
		var ownQuota, platformQuota billing.Quota
		for _, p := range own {
			ownQuota += p.Quota
		}
		for _, p := range series {
			platformQuota += p.Quota
		}
		g.Expect(platformQuota).To(Equal(ownQuota))

		series, err = s.PlatformSeries(ctx, with(SplitModel, 0))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(series).To(Equal([]SeriesPoint{
			{Bucket: day0, Model: "chat", RequestCount: 2, Tokens: 30, Quota: 1100},
			{Bucket: day0, Model: "image", RequestCount: 1, Tokens: 15, Quota: 200},
			{Bucket: day0 + 86400, Model: "chat", RequestCount: 1, Tokens: 15, Quota: 400},
			{Bucket: day0 + 86400, Model: "video", RequestCount: 1, Tokens: 15, Quota: 3000},
		}))
		hourly := with(SplitTenant, 0)
		hourly.Bucket, hourly.End = BucketHour, day0+86400
		series, err = s.PlatformSeries(ctx, hourly)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(series).To(Equal([]SeriesPoint{
			{Bucket: day0, UserID: a.userID, RequestCount: 1, Tokens: 15, Quota: 100},
			{Bucket: day0, UserID: b.userID, RequestCount: 1, Tokens: 15, Quota: 1000},
			{Bucket: day0 + 3600, UserID: a.userID, RequestCount: 1, Tokens: 15, Quota: 200},
		}))

		totals, err := s.PlatformTotals(ctx, with(SplitTenant, 10))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(totals).To(Equal([]SpendTotal{
			{UserID: b.userID, RequestCount: 2, Tokens: 30, Quota: 4000},
			{UserID: a.userID, RequestCount: 3, Tokens: 45, Quota: 700},
		}))
		totals, err = s.PlatformTotals(ctx, with(SplitModel, 10))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(totals).To(Equal([]SpendTotal{
			{Model: "video", RequestCount: 1, Tokens: 15, Quota: 3000},
			{Model: "chat", RequestCount: 3, Tokens: 45, Quota: 1500},
			{Model: "image", RequestCount: 1, Tokens: 15, Quota: 200},
		}))
		totals, err = s.PlatformTotals(ctx, with(SplitKey, 2))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(totals).To(Equal([]SpendTotal{
			{UserID: b.userID, TokenID: b2, TokenName: "batch", RequestCount: 1, Tokens: 15, Quota: 3000},
			{UserID: b.userID, TokenID: b.tokenID, TokenName: "key", RequestCount: 1, Tokens: 15, Quota: 1000},
		}))

		for name, q := range map[string]PlatformQuery{
			"a series by key":     with(SplitKey, 0),
			"hourly over 8 days":  {Start: day0, End: day0 + 8*86400, Bucket: BucketHour},
			"daily over 40 days":  {Start: day0, End: day0 + 40*86400, Bucket: BucketDay},
			"an unknown split":    with("colour", 0),
			"an empty window":     {Start: day0, End: day0, Bucket: BucketDay},
			"totals of no group":  with(SplitNone, 10),
			"totals of no limit":  with(SplitTenant, 0),
			"totals over the cap": with(SplitTenant, MaxPlatformTotals+1),
		} {
			var err error
			if strings.HasPrefix(name, "totals") {
				_, err = s.PlatformTotals(ctx, q)
			} else {
				_, err = s.PlatformSeries(ctx, q)
			}
			g.Expect(err).To(MatchError(ErrInvalidQuery), name)
		}
	})
}

// TestPlatformQueryPlan: on PostgreSQL, a platform read of a week out of
// months of rollup rows seeks the rollup's primary key tenant by tenant
// instead of scanning it, so its cost follows the window, not the retention.
func TestPlatformQueryPlan(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		g := NewWithT(t)
		s := openStore(t, backends[0].dsn(t))
		rows, err := s.rdb.QueryContext(context.Background(), `EXPLAIN QUERY PLAN SELECT user_id, SUM(quota) FROM usage_hourly
			WHERE `+s.everyTenant()+` AND hour_start >= ? AND hour_start < ? GROUP BY 1`, 0, 1)
		g.Expect(err).NotTo(HaveOccurred())
		defer rows.Close()
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			g.Expect(rows.Scan(&id, &parent, &unused, &detail)).To(Succeed())
			plan = append(plan, detail)
		}
		g.Expect(rows.Err()).NotTo(HaveOccurred())
		g.Expect(plan).To(ContainElement("SEARCH usage_hourly USING PRIMARY KEY (user_id=? AND hour_start>? AND hour_start<?)"), strings.Join(plan, "\n"))
	})
	t.Run("postgres", testPlatformPlanPostgres)
}

func testPlatformPlanPostgres(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := openStore(t, backends[1].dsn(t))
	const (
		tenants = 300
		keys    = 1
		days    = 60
		end     = 20000 * 86400
	)
	// Generated server-side, as the summary benchmark does: 432 000 rollup
	// rows through the driver would dominate the test.
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO tenants (uid, namespace, name, created_at)
			SELECT 'u' || i, 'ns' || i, 'tenant', 0 FROM generate_series(1, %d) AS i`, tenants),
		fmt.Sprintf(`INSERT INTO usage_hourly (user_id, hour_start, token_id, request_count, prompt_tokens, completion_tokens, quota)
			SELECT t.user_id, %d - h * 3600, t.user_id * 10 + k, 1, 10, 5, 100
			FROM tenants t, generate_series(1, %d) AS h, generate_series(1, %d) AS k`, end, days*24, keys),
		`ANALYZE`,
	} {
		_, err := s.db.ExecContext(ctx, q)
		g.Expect(err).NotTo(HaveOccurred())
	}
	q := PlatformQuery{Start: end - 7*86400, End: end, Bucket: BucketDay, Split: SplitTenant, Limit: 10}
	totals, err := s.PlatformTotals(ctx, q)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(totals).To(HaveLen(10))
	g.Expect(totals[0].Quota).To(Equal(billing.Quota(7 * 24 * keys * 100)))

	sqlText := `EXPLAIN (ANALYZE, BUFFERS) SELECT user_id, CAST(SUM(quota) AS BIGINT) FROM usage_hourly
		WHERE ` + s.everyTenant() + ` AND hour_start >= $1 AND hour_start < $2 GROUP BY 1`
	rows, err := s.db.QueryContext(ctx, sqlText, q.Start, q.End)
	g.Expect(err).NotTo(HaveOccurred())
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		g.Expect(rows.Scan(&line)).To(Succeed())
		plan = append(plan, line)
	}
	g.Expect(rows.Err()).NotTo(HaveOccurred())
	text := strings.Join(plan, "\n")
	var pages int64
	g.Expect(s.db.QueryRowContext(ctx, `SELECT relpages FROM pg_class WHERE relname = 'usage_hourly'`).Scan(&pages)).To(Succeed())
	t.Logf("usage_hourly: %d pages; plan:\n%s", pages, text)
	// The rollup's primary key (renamed with its table by migration 9).
	g.Expect(text).To(MatchRegexp(`Index Scan on usage_hourly_key_pkey|Index Scan using usage_hourly_key_pkey`))
	g.Expect(text).To(MatchRegexp(`Index Cond: \(\(user_id = ANY \(\$0\)\) AND \(hour_start >= `))
	g.Expect(text).NotTo(ContainSubstring("Seq Scan on usage_hourly"))
}
