package store

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/billing"
)

// A batch that repeats rows the ledger holds, and repeats rows within
// itself, across several chunk sizes: each request is stored, counted in the
// rollup and charged once. On SQLite this is the fallback from the plain
// insert of new rows (which rolls back the whole transaction, chunks it had
// inserted included) to the insert that skips present ones.
func TestInsertUsageStoresEachRequestOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		a := newAccount(t, s, 1_000_000, 1_000_000, TokenLimits{})
		row := func(i int) UsageRow {
			return UsageRow{RequestID: fmt.Sprint("once-", i), UserID: a.userID, TokenID: a.tokenID, TokenName: "k",
				ModelName: "m", PromptTokens: 3, CompletionTokens: 4, BillingPhase: PhaseSettled, Quota: 10,
				Charge: Charge{Apply: true}}
		}
		var first []UsageRow
		for i := range 70 {
			first = append(first, row(i))
		}
		n, err := s.InsertUsage(ctx, first)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(70))

		var second []UsageRow // 50..119: 20 present, 50 new
		for i := 50; i < 120; i++ {
			second = append(second, row(i))
		}
		second = append(second, row(100), row(119), row(60)) // repeated in the batch
		n, err = s.InsertUsage(ctx, second)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(50))

		n, err = s.InsertUsage(ctx, []UsageRow{row(121), row(121)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(1), "a request repeated in a chunk that is otherwise new")

		var third []UsageRow // a new chunk of 64, then a present row and a new one
		for i := 122; i < 186; i++ {
			third = append(third, row(i))
		}
		third = append(third, row(5), row(186))
		n, err = s.InsertUsage(ctx, third)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(65), "the chunk inserted before the present row is counted once")

		var rows, counted int64
		g.Expect(s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM usage_logs WHERE user_id = $1`, a.userID).Scan(&rows)).To(Succeed())
		g.Expect(s.db.QueryRowContext(ctx, `SELECT SUM(request_count) FROM usage_hourly WHERE user_id = $1`, a.userID).Scan(&counted)).To(Succeed())
		g.Expect(rows).To(Equal(int64(186)))
		g.Expect(counted).To(Equal(int64(186)))
		g.Expect(tokenBalance(t, s, a.tokenID).Balance).To(Equal(Balance{Remain: 1_000_000 - 1860, Used: 1860}))
		g.Expect(tenantBalance(t, s, a.userID)).To(Equal(Balance{Remain: 1_000_000 - 1860, Used: billing.Quota(1860)}))
	})
}
