package store

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/billing"
)

// A deleted key: its leases come back at once, it reserves nothing more,
// a request already in flight still settles and is charged exactly once,
// and its rows stay.
func TestDisableToken(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		a := newAccount(t, s, 100_000, 10_000, TokenLimits{})
		l := s.NewLeaser(LeaseConfig{ReplicaID: "gw-0", Chunk: 2_000, TTL: time.Minute})
		h, err := l.Reserve(ctx, "", a.tokenID, a.userID, 300) // in flight across the deletion
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tokenBalance(t, s, a.tokenID).Remain).To(Equal(billing.Quota(8_000)))

		returned, err := s.DisableToken(ctx, a.tokenID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(returned).To(Equal(billing.Quota(2_000)))
		g.Expect(tokenBalance(t, s, a.tokenID).Remain).To(Equal(billing.Quota(10_000)))
		disabled, err := s.TokenDisabled(ctx, a.tokenID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(disabled).To(BeTrue())

		_, err = s.NewLeaser(LeaseConfig{ReplicaID: "gw-1", Chunk: 2_000, TTL: time.Minute}).Reserve(ctx, "r-new", a.tokenID, a.userID, 100)
		g.Expect(err).To(MatchError(ErrTokenDisabled))
		g.Expect(err).To(MatchError(ErrInsufficientQuota))
		g.Expect(s.Reserve(ctx, "r-direct", a.tokenID, a.userID, 100)).To(MatchError(ErrTokenDisabled))

		row := UsageRow{RequestID: "in-flight", UserID: a.userID, TokenID: a.tokenID, Quota: 250, Charge: settle(t, l, h, 250)}
		n, err := s.InsertUsage(ctx, []UsageRow{row})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(1))
		b := tokenBalance(t, s, a.tokenID)
		g.Expect(b.Balance).To(Equal(Balance{Remain: 9_750, Used: 250}), "charged once, from the balances")
		g.Expect(usageSum(t, s, a.tokenID)).To(Equal(int64(250)))

		again, err := s.DisableToken(ctx, a.tokenID)
		g.Expect(err).NotTo(HaveOccurred(), "idempotent")
		g.Expect(again).To(BeZero())
	})
}

// A deleted tenant: every key is disabled and every lease returned.
func TestDisableTenantTokens(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		a := newAccount(t, s, 100_000, 10_000, TokenLimits{})
		other, err := s.EnsureToken(ctx, TokenSpec{UID: "uid-second", UserID: a.userID, Name: "second", RemainQuota: 5_000})
		g.Expect(err).NotTo(HaveOccurred())
		l := s.NewLeaser(LeaseConfig{ReplicaID: "gw-0", Chunk: 1_000, TTL: time.Minute})
		for _, tok := range []int64{a.tokenID, other} {
			h, err := l.Reserve(ctx, "", tok, a.userID, 10)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(l.Release(ctx, h)).To(Succeed())
		}
		g.Expect(tenantBalance(t, s, a.userID).Remain).To(Equal(billing.Quota(98_000)))

		returned, err := s.DisableTenantTokens(ctx, a.userID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(returned).To(Equal(billing.Quota(2_000)))
		g.Expect(tenantBalance(t, s, a.userID).Remain).To(Equal(billing.Quota(100_000)))
		for _, tok := range []int64{a.tokenID, other} {
			g.Expect(s.Reserve(ctx, "r", tok, a.userID, 1)).To(MatchError(ErrTokenDisabled))
		}
	})
}

// A restarted replica returns what its dead predecessor (same name) leased,
// and only that: another replica's lease stays.
func TestReturnReplicaLeases(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		a := newAccount(t, s, 100_000, 10_000, TokenLimits{})
		for _, replica := range []string{"gw-0", "gw-1"} {
			l := s.NewLeaser(LeaseConfig{ReplicaID: replica, Chunk: 2_000, TTL: time.Hour})
			h, err := l.Reserve(ctx, "", a.tokenID, a.userID, 100)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(l.Release(ctx, h)).To(Succeed())
		} // both "die" holding their leases
		g.Expect(tokenBalance(t, s, a.tokenID).Remain).To(Equal(billing.Quota(6_000)))

		returned, err := s.ReturnReplicaLeases(ctx, "gw-0")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(returned).To(Equal(billing.Quota(2_000)))
		g.Expect(tokenBalance(t, s, a.tokenID).Remain).To(Equal(billing.Quota(8_000)), "gw-1's lease stays")
		n, held, err := s.LeaseTotals(ctx, a.tokenID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(1))
		g.Expect(held).To(Equal(int64(2_000)))
	})
}
