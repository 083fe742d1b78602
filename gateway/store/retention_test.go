package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/billing"
)

// A retention pass removes, in batches, exactly what has expired: usage rows
// of whole months that ended more than the usage retention ago together with
// their rollup hours (so the summary and the console series agree with the
// rows that remain), old conversations, closed reservations that closed long
// ago and finished tasks that finished long ago. Open reservations and
// unfinished tasks stay however old.
func TestApplyRetentionRemovesExpiredRecords(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		clk := newFakeClock(time.Date(2025, 10, 20, 12, 0, 0, 0, time.UTC))
		s := openStore(t, dsn, WithClock(clk))
		s.retentionBatch = 4 // several batches per table
		a := newAccount(t, s, 10_000_000, 10_000_000, TokenLimits{})

		usage := func(prefix string, at time.Time, n int) {
			var rows []UsageRow
			for i := range n {
				rows = append(rows, UsageRow{RequestID: fmt.Sprint(prefix, i), CreatedAt: at.Unix() + int64(i), UserID: a.userID,
					TokenID: a.tokenID, TokenName: "k", ModelName: "m", PromptTokens: 1, CompletionTokens: 2,
					BillingPhase: PhaseSettled, Quota: 10})
			}
			_, err := s.InsertUsage(ctx, rows)
			g.Expect(err).NotTo(HaveOccurred())
		}
		october := time.Date(2025, 10, 20, 10, 0, 0, 0, time.UTC)
		november := time.Date(2025, 11, 5, 10, 0, 0, 0, time.UTC)
		usage("old-", october, 11)
		usage("edge-", november, 3)

		// Written in October 2025: old conversations, reservations, tasks.
		for i := range 9 {
			g.Expect(s.SaveResponse(ctx, fmt.Sprint("resp_old_", i), a.userID, "m", []byte(`{"input":[],"output":[]}`))).To(Succeed())
			id := fmt.Sprint("res-old-", i)
			g.Expect(s.Reserve(ctx, id, a.tokenID, a.userID, 5)).To(Succeed())
			if i%2 == 0 {
				g.Expect(s.Settle(ctx, id, 3)).To(Succeed())
			} else {
				g.Expect(s.Refund(ctx, id)).To(Succeed())
			}
			g.Expect(s.UpsertTask(ctx, TaskRecord{TaskID: fmt.Sprint("task-old-", i), UserID: a.userID, TokenID: a.tokenID,
				RequestID: "t" + id, Kind: "video", Model: "m", Status: "succeeded", CreatedAt: clk.Now().Unix(), CompletedAt: clk.Now().Unix()})).To(Succeed())
		}
		g.Expect(s.Reserve(ctx, "res-open", a.tokenID, a.userID, 5)).To(Succeed())
		g.Expect(s.UpsertTask(ctx, TaskRecord{TaskID: "task-running", UserID: a.userID, TokenID: a.tokenID,
			RequestID: "res-open", Kind: "video", Model: "m", Status: "running", CreatedAt: clk.Now().Unix()})).To(Succeed())
		// A reservation made in October that closed recently stays.
		g.Expect(s.Reserve(ctx, "res-late", a.tokenID, a.userID, 5)).To(Succeed())

		clk.Set(time.Date(2026, 12, 15, 12, 0, 0, 0, time.UTC))
		g.Expect(s.Settle(ctx, "res-late", 5)).To(Succeed())
		g.Expect(s.SaveResponse(ctx, "resp_new", a.userID, "m", []byte(`{"input":[],"output":[]}`))).To(Succeed())
		usage("new-", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), 2)

		got, err := s.ApplyRetention(ctx, Retention{Usage: 400 * 24 * time.Hour, Responses: 30 * 24 * time.Hour,
			Reservations: 7 * 24 * time.Hour, Tasks: 400 * 24 * time.Hour})
		g.Expect(err).NotTo(HaveOccurred())
		// 400 days before 2026-12-15 is 2025-11-10: October 2025 has
		// ended longer ago than that, November 2025 has not.
		g.Expect(got.Rows).To(Equal(map[string]int64{
			TableUsageLogs: 11, TableUsageHourly: 1, TableUsageHourlyModel: 1,
			TableResponses: 9, TableReservations: 9, TableTasks: 9,
		}))

		count := func(q string) int64 {
			var n int64
			g.Expect(s.db.QueryRowContext(ctx, s.q(q), a.userID).Scan(&n)).To(Succeed())
			return n
		}
		g.Expect(count(`SELECT COUNT(*) FROM usage_logs WHERE user_id = ?`)).To(Equal(int64(5)))
		g.Expect(count(`SELECT COALESCE(SUM(request_count), 0) FROM usage_hourly WHERE user_id = ?`)).To(Equal(int64(5)))
		g.Expect(count(`SELECT COALESCE(SUM(request_count), 0) FROM usage_hourly_model WHERE user_id = ?`)).To(Equal(int64(5)))
		g.Expect(count(`SELECT COUNT(*) FROM reservations WHERE user_id = ?`)).To(Equal(int64(2)), "res-open and res-late")
		g.Expect(count(`SELECT COUNT(*) FROM tasks WHERE user_id = ?`)).To(Equal(int64(1)), "task-running")
		g.Expect(count(`SELECT COUNT(*) FROM responses WHERE user_id = ?`)).To(Equal(int64(1)), "resp_new")
		_, err = s.LoadResponse(ctx, "resp_old_0", a.userID)
		g.Expect(err).To(MatchError(ErrNotFound))

		// The summary of a window across the cutoff counts the rows that remain.
		sum, err := s.SummarizeUsage(ctx, UsageQuery{UserID: a.userID,
			Start: time.Date(2025, 10, 15, 0, 0, 0, 0, time.UTC).Unix(), End: time.Date(2025, 11, 15, 0, 0, 0, 0, time.UTC).Unix()})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(sum.Rows).To(HaveLen(1))
		g.Expect(sum.Rows[0].RequestCount).To(Equal(int64(3)))
		g.Expect(sum.Rows[0].Quota).To(Equal(billing.Quota(30)))
		series, err := s.UsageSeries(ctx, SeriesQuery{UserID: a.userID, Bucket: BucketDay,
			Start: time.Date(2025, 10, 15, 0, 0, 0, 0, time.UTC).Unix(), End: time.Date(2025, 11, 15, 0, 0, 0, 0, time.UTC).Unix()})
		g.Expect(err).NotTo(HaveOccurred())
		var inSeries int64
		for _, p := range series {
			inSeries += p.RequestCount
		}
		g.Expect(inSeries).To(Equal(int64(3)))

		again, err := s.ApplyRetention(ctx, Retention{Usage: 400 * 24 * time.Hour, Responses: 30 * 24 * time.Hour,
			Reservations: 7 * 24 * time.Hour, Tasks: 400 * 24 * time.Hour})
		g.Expect(err).NotTo(HaveOccurred())
		for table, n := range again.Rows {
			g.Expect(n).To(BeZero(), table)
		}
	})
}

func TestUsageCutoffIsAMonthStart(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 12, 15, 12, 0, 0, 0, time.UTC)
	g.Expect(UsageCutoff(now, 400*24*time.Hour)).To(Equal(time.Date(2025, 11, 1, 0, 0, 0, 0, time.UTC)))
	g.Expect(UsageCutoff(now, 14*24*time.Hour)).To(Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)))
}
