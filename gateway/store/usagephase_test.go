package store

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
)

// A task's held reservation is listed as pre_consumed while it runs, the
// settled row takes its place (same log ID, dated at billing), a refund
// removes it, and only settled rows are summarized.
func TestTaskUsagePhases(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		a := newAccount(t, s, 1_000_000, 1_000_000, TokenLimits{})
		const start = 1_780_000_000
		q := UsageQuery{UserID: a.userID, Start: start, End: start + 86400}
		list := func() []UsageRecord {
			p, err := s.ListUsage(ctx, q)
			g.Expect(err).NotTo(HaveOccurred())
			return p.Rows
		}
		summary := func() []UsageSummary {
			p, err := s.SummarizeUsage(ctx, q)
			g.Expect(err).NotTo(HaveOccurred())
			return p.Rows
		}
		held := func(id string) UsageRow {
			g.Expect(s.Reserve(ctx, id, a.tokenID, a.userID, 5000)).To(Succeed())
			return UsageRow{RequestID: id, CreatedAt: start + 10, UserID: a.userID, TokenID: a.tokenID, TokenName: "key",
				ModelName: "video-x", TaskID: "task-" + id, BillingPhase: PhasePreConsumed, Quota: 5000}
		}

		row := held("r1")
		for range 2 { // written once
			_, err := s.RecordTaskUsage(ctx, row)
			g.Expect(err).NotTo(HaveOccurred())
		}
		rows := list()
		g.Expect(rows).To(HaveLen(1))
		g.Expect(rows[0].BillingPhase).To(Equal(PhasePreConsumed))
		g.Expect(int64(rows[0].Quota)).To(Equal(int64(5000)))
		logID := rows[0].LogID
		g.Expect(summary()).To(BeEmpty(), "a held reservation is not a charged request")

		g.Expect(s.Settle(ctx, "r1", 3000)).To(Succeed())
		settled := row
		settled.BillingPhase, settled.Quota, settled.CreatedAt = PhaseSettled, 3000, start+70
		written, err := s.RecordTaskUsage(ctx, settled)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(written).To(BeTrue())
		rows = list()
		g.Expect(rows).To(HaveLen(1))
		g.Expect(rows[0]).To(Equal(UsageRecord{LogID: logID, CreatedAt: start + 70, TokenID: a.tokenID, TokenName: "key",
			ModelName: "video-x", TaskID: "task-r1", BillingPhase: PhaseSettled, Quota: 3000}))
		g.Expect(summary()).To(Equal([]UsageSummary{{TokenID: a.tokenID, RequestCount: 1, Quota: 3000}}))
		written, err = s.RecordTaskUsage(ctx, settled)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(written).To(BeFalse(), "a settled row is written once")

		// A refund removes the pre_consumed row: an unbilled request is not listed.
		row = held("r2")
		_, err = s.RecordTaskUsage(ctx, row)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(list()).To(HaveLen(2))
		g.Expect(s.Refund(ctx, "r2")).To(Succeed())
		g.Expect(list()).To(HaveLen(1))

		// A row written without a phase is unknown.
		_, err = s.InsertUsage(ctx, []UsageRow{{RequestID: "legacy", CreatedAt: start + 5, UserID: a.userID, TokenID: a.tokenID, Quota: 7}})
		g.Expect(err).NotTo(HaveOccurred())
		rows = list()
		g.Expect(rows[len(rows)-1].BillingPhase).To(Equal(PhaseUnknown))
	})
}
