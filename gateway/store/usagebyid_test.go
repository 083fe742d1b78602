package store

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/billing"
)

func TestUsageQuotasAnswersThePresentRows(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		a := newAccount(t, s, 1_000_000, 1_000_000, TokenLimits{})
		var rows []UsageRow
		var ids []string
		for i := range 600 { // more than one query's chunk
			id := fmt.Sprint("line-", i)
			ids = append(ids, id)
			if i%2 == 0 {
				rows = append(rows, UsageRow{RequestID: id, UserID: a.userID, TokenID: a.tokenID, TokenName: "k",
					ModelName: "m", BillingPhase: PhaseSettled, Quota: billing.Quota(i + 1)})
			}
		}
		_, err := s.InsertUsage(ctx, rows)
		g.Expect(err).NotTo(HaveOccurred())

		got, err := s.UsageQuotas(ctx, append(ids, "never-ran"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(HaveLen(300))
		g.Expect(got).To(HaveKeyWithValue("line-0", billing.Quota(1)))
		g.Expect(got).To(HaveKeyWithValue("line-598", billing.Quota(599)))
		g.Expect(got).NotTo(HaveKey("line-1"))
		g.Expect(got).NotTo(HaveKey("never-ran"))

		none, err := s.UsageQuotas(ctx, nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(none).To(BeEmpty())
	})
}
