package store

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/billing"
)

func TestLeasedQuotaStillBelongsToTheAccount(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		s := openStore(t, dsn)
		ctx := context.Background()
		a := newAccount(t, s, 1_000_000, 400_000, TokenLimits{})
		l := s.NewLeaser(LeaseConfig{ReplicaID: "r1", Chunk: 100_000})
		h, err := l.Reserve(ctx, "req-held", a.tokenID, a.userID, 1000)
		g.Expect(err).NotTo(HaveOccurred())

		tenantLeased, err := s.TenantLeased(ctx, a.userID)
		g.Expect(err).NotTo(HaveOccurred())
		tokenLeased, err := s.TokenLeased(ctx, a.tokenID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tenantLeased).To(BeNumerically(">", 0))
		g.Expect(tokenLeased).To(Equal(tenantLeased))
		// Remain + leased is the whole balance while nothing is spent.
		g.Expect(tenantBalance(t, s, a.userID).Remain + tenantLeased).To(Equal(billing.Quota(1_000_000)))
		g.Expect(tokenBalance(t, s, a.tokenID).Remain + tokenLeased).To(Equal(billing.Quota(400_000)))

		_, err = l.Settle(ctx, h, 0)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(l.Close(ctx)).To(Succeed())
		tenantLeased, _ = s.TenantLeased(ctx, a.userID)
		g.Expect(tenantLeased).To(BeZero())
	})
}
