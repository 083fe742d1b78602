package store

import (
	"context"
	"testing"
	"time"

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

// TestTokenHoldsAndGrantsMeasureWhatAlertsNeed: a token's quota is its
// balance plus what is spent and held (leases, open reservations), its
// window use less what leases hold in the window, and a tenant's grants sum
// to what it was given.
func TestTokenHoldsAndGrantsMeasureWhatAlertsNeed(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		clk := newFakeClock(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
		s := openStore(t, dsn, WithClock(clk))
		ctx := context.Background()
		a := newAccount(t, s, 1_000_000, 400_000, TokenLimits{DailyLimit: 300_000})

		for id, amount := range map[string]billing.Quota{"bonus": 500, "correction": -100} {
			_, err := s.ApplyGrant(ctx, a.userID, id, amount)
			g.Expect(err).NotTo(HaveOccurred())
		}
		granted, err := s.TenantGranted(ctx, a.userID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(granted).To(Equal(billing.Quota(1_000_400)))

		l := s.NewLeaser(LeaseConfig{ReplicaID: "r1", Chunk: 100_000})
		h, err := l.Reserve(ctx, "req-leased", a.tokenID, a.userID, 1000)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = l.Settle(ctx, h, 700)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Reserve(ctx, "req-direct", a.tokenID, a.userID, 2000)).To(Succeed())
		g.Expect(s.Reserve(ctx, "req-settled", a.tokenID, a.userID, 3000)).To(Succeed())
		g.Expect(s.Settle(ctx, "req-settled", 2500)).To(Succeed())

		holds, err := s.TokenHolds(ctx, a.tokenID)
		g.Expect(err).NotTo(HaveOccurred())
		leased, err := s.TokenLeased(ctx, a.tokenID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(holds.Leased).To(Equal(leased))
		g.Expect(holds.Leased).To(BeNumerically(">", 0))
		g.Expect(holds.DayLeased).To(Equal(holds.Leased))
		g.Expect(holds.MonthLeased).To(Equal(holds.Leased))
		g.Expect(holds.Reserved).To(Equal(billing.Quota(2000)), "the open reservation, not the settled one")
		b := tokenBalance(t, s, a.tokenID)
		g.Expect(b.Remain+holds.Leased+holds.Reserved+b.Used).To(Equal(billing.Quota(400_000)), "the key's quota")
		// The lease's 700 is not charged until its usage row arrives, so the
		// day's use less what leases hold is what requests took directly.
		g.Expect(b.DailyUsed - holds.DayLeased).To(Equal(billing.Quota(2000 + 2500)))

		// A lease taken yesterday holds nothing in today's window.
		clk.Step(24 * time.Hour)
		holds, err = s.TokenHolds(ctx, a.tokenID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(holds.Leased).To(Equal(leased))
		g.Expect(holds.DayLeased).To(BeZero())
		g.Expect(holds.MonthLeased).To(Equal(leased))
	})
}

// TestStandingsReadBalanceAndHoldsTogether: the one-statement standings give
// the figures the separate reads give, an unknown account is ErrNotFound,
// and a settle moves quota between the figures without changing their sum.
func TestStandingsReadBalanceAndHoldsTogether(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		s := openStore(t, dsn)
		ctx := context.Background()
		a := newAccount(t, s, 1_000_000, 400_000, TokenLimits{DailyLimit: 300_000})
		_, err := s.ApplyGrant(ctx, a.userID, "bonus", 500)
		g.Expect(err).NotTo(HaveOccurred())
		l := s.NewLeaser(LeaseConfig{ReplicaID: "r1", Chunk: 100_000})
		h, err := l.Reserve(ctx, "req-leased", a.tokenID, a.userID, 1000)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Reserve(ctx, "req-direct", a.tokenID, a.userID, 2000)).To(Succeed())

		tb, holds, err := s.TokenStanding(ctx, a.tokenID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tb).To(Equal(tokenBalance(t, s, a.tokenID)))
		leased, err := s.TokenLeased(ctx, a.tokenID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(holds.Leased).To(Equal(leased))
		g.Expect(holds.Reserved).To(Equal(billing.Quota(2000)))

		b, tenantLeased, granted, err := s.TenantStanding(ctx, a.userID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(b).To(Equal(tenantBalance(t, s, a.userID)))
		wantLeased, err := s.TenantLeased(ctx, a.userID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tenantLeased).To(Equal(wantLeased))
		g.Expect(tenantLeased).To(BeNumerically(">", 0))
		wantGranted, err := s.TenantGranted(ctx, a.userID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(granted).To(Equal(wantGranted))

		// The key's quota is the sum of its figures before and after the
		// open reservation settles for less than it held.
		total := func() billing.Quota {
			tb, holds, err := s.TokenStanding(ctx, a.tokenID)
			g.Expect(err).NotTo(HaveOccurred())
			return tb.Remain + tb.Used + holds.Leased + holds.Reserved
		}
		g.Expect(total()).To(Equal(billing.Quota(400_000)))
		g.Expect(s.Settle(ctx, "req-direct", 1500)).To(Succeed())
		g.Expect(total()).To(Equal(billing.Quota(400_000)))
		_, err = l.Settle(ctx, h, 0)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(l.Close(ctx)).To(Succeed())
		g.Expect(total()).To(Equal(billing.Quota(400_000)))

		_, _, err = s.TokenStanding(ctx, a.tokenID+1000)
		g.Expect(err).To(MatchError(ErrNotFound))
		_, _, _, err = s.TenantStanding(ctx, a.userID+1000)
		g.Expect(err).To(MatchError(ErrNotFound))
	})
}
