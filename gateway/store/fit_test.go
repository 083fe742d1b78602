package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/billing"
)

// linearFit is a text request of 20 quota of input and up to 64 output
// tokens at 1 quota each: it fits any budget of at least 21.
func linearFit(budget billing.Quota) (billing.Quota, bool) {
	if budget < 21 {
		return 0, false
	}
	return min(budget, 84), true
}

func TestReserveUpToLowersWhatTheBalanceCannotCover(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		a := newAccount(t, s, 1000, 120, TokenLimits{})

		got, err := s.ReserveUpTo(ctx, "f-1", a.tokenID, a.userID, 84, linearFit)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(billing.Quota(84)), "covered: reserved in full")
		got, err = s.ReserveUpTo(ctx, "f-2", a.tokenID, a.userID, 84, linearFit)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(billing.Quota(36)), "lowered to what is left")
		g.Expect(tokenBalance(t, s, a.tokenID).Remain).To(BeZero())
		got, err = s.ReserveUpTo(ctx, "f-2", a.tokenID, a.userID, 84, linearFit)
		g.Expect([]any{got, err}).To(Equal([]any{billing.Quota(36), error(nil)}), "a repeat reports what it holds")

		_, err = s.ReserveUpTo(ctx, "f-3", a.tokenID, a.userID, 84, linearFit)
		g.Expect(err).To(MatchError(ErrInsufficientQuota), "nothing left")
		// Refund returns the lowered amount, not the estimate.
		g.Expect(s.Refund(ctx, "f-2")).To(Succeed())
		g.Expect(tokenBalance(t, s, a.tokenID).Remain).To(Equal(billing.Quota(36)))
		got, err = s.ReserveUpTo(ctx, "f-4", a.tokenID, a.userID, 84, nil)
		g.Expect(err).To(MatchError(ErrInsufficientQuota), "without a fit the estimate is all or nothing")
		g.Expect(got).To(BeZero())

		// The tenant and the token's daily window bound it the same way.
		b := newAccount(t, s, 50, 1000, TokenLimits{})
		got, err = s.ReserveUpTo(ctx, "f-5", b.tokenID, b.userID, 84, linearFit)
		g.Expect([]any{got, err}).To(Equal([]any{billing.Quota(50), error(nil)}))
		c := newAccount(t, s, 1000, 1000, TokenLimits{DailyLimit: 30})
		got, err = s.ReserveUpTo(ctx, "f-6", c.tokenID, c.userID, 84, linearFit)
		g.Expect([]any{got, err}).To(Equal([]any{billing.Quota(30), error(nil)}))
		g.Expect(tenantBalance(t, s, c.userID).Remain).To(Equal(billing.Quota(970)))
	})
}

// TestConcurrentFittedReservationsNeverOverspend: 100 requests at once on a
// key worth about ten (556 quota, 84 each in full) through a leasing
// replica: some are served, lowered ones included, and the key never goes
// below zero; usage rows add up to used quota.
func TestConcurrentFittedReservationsNeverOverspend(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		for _, cfg := range []LeaseConfig{{ReplicaID: "r-lease", Chunk: 400}, {ReplicaID: "r-direct", Chunk: 400, DirectBelow: 800}} {
			a := newAccount(t, s, 1_000_000, 556, TokenLimits{})
			l := s.NewLeaser(cfg)
			var served, lowered atomic.Int64
			var reservedSum atomic.Int64
			var wg sync.WaitGroup
			var mu sync.Mutex
			var rows []UsageRow
			errs := make(chan error, 100)
			for i := range 100 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					id := fmt.Sprintf("%s-%d", cfg.ReplicaID, i)
					h, err := l.ReserveUpTo(ctx, id, a.tokenID, a.userID, 84, linearFit)
					if isInsufficient(err) {
						return
					}
					if err != nil {
						errs <- err
						return
					}
					served.Add(1)
					if h.Amount() < 84 {
						lowered.Add(1)
					}
					reservedSum.Add(int64(h.Amount()))
					ch, err := l.Settle(ctx, h, h.Amount()) // the whole lowered cap used
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					rows = append(rows, UsageRow{RequestID: id, UserID: a.userID, TokenID: a.tokenID, Quota: h.Amount(), Charge: ch})
					mu.Unlock()
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				g.Expect(err).NotTo(HaveOccurred())
			}
			_, err := s.InsertUsage(ctx, rows)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(l.Close(ctx)).To(Succeed())
			g.Expect(served.Load()).To(BeNumerically(">", 0), cfg.ReplicaID)
			tok := tokenBalance(t, s, a.tokenID)
			g.Expect(tok.Remain).To(BeNumerically(">=", 0), cfg.ReplicaID)
			g.Expect(int64(tok.Used)).To(Equal(usageSum(t, s, a.tokenID)))
			g.Expect(int64(tok.Remain + tok.Used)).To(Equal(int64(556)))
			g.Expect(reservedSum.Load()).To(BeNumerically("<=", 556))
			g.Expect(tok.Remain).To(BeNumerically("<", 21), "%s: only what cannot pay one request's input and token is left", cfg.ReplicaID)
			g.Expect(lowered.Load()).To(BeNumerically(">", 0), "%s: the last requests were lowered, not refused", cfg.ReplicaID)
		}
	})
}

// TestCreditLine: a tenant's balance goes down to -creditLimit and no
// further, on the direct path, with a fit and through leases.
func TestCreditLine(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		a := newAccount(t, s, 100, 10_000, TokenLimits{})
		g.Expect(s.SetTenantCreditLimit(ctx, a.userID, 50)).To(Succeed())
		g.Expect(s.SetTenantCreditLimit(ctx, 424242, 50)).To(MatchError(ErrNotFound))
		g.Expect(tenantBalance(t, s, a.userID)).To(Equal(Balance{Remain: 100, CreditLimit: 50}))

		g.Expect(s.Reserve(ctx, "c-1", a.tokenID, a.userID, 130)).To(Succeed(), "30 on credit")
		g.Expect(s.Reserve(ctx, "c-2", a.tokenID, a.userID, 21)).To(MatchError(ErrInsufficientQuota), "20 of credit left")
		_, err := s.ReserveUpTo(ctx, "c-3", a.tokenID, a.userID, 84, linearFit)
		g.Expect(err).To(MatchError(ErrInsufficientQuota), "nor below the 21 a fit needs")
		g.Expect(s.Refund(ctx, "c-1")).To(Succeed())
		got, err := s.ReserveUpTo(ctx, "c-4", a.tokenID, a.userID, 200, linearFit)
		g.Expect([]any{got, err}).To(Equal([]any{billing.Quota(84), error(nil)}))
		got, err = s.ReserveUpTo(ctx, "c-5", a.tokenID, a.userID, 84, linearFit)
		g.Expect([]any{got, err}).To(Equal([]any{billing.Quota(66), error(nil)}), "fitted into the balance and the credit line")
		g.Expect(tenantBalance(t, s, a.userID).Remain).To(Equal(billing.Quota(-50)))

		// Through a leasing replica: many requests, never below -creditLimit.
		b := newAccount(t, s, 300, 10_000, TokenLimits{})
		g.Expect(s.SetTenantCreditLimit(ctx, b.userID, 200)).To(Succeed())
		l := s.NewLeaser(LeaseConfig{ReplicaID: "credit", Chunk: 100})
		var rows []UsageRow
		for i := range 20 {
			id := fmt.Sprintf("cl-%d", i)
			h, err := l.ReserveUpTo(ctx, id, b.tokenID, b.userID, 84, linearFit)
			if isInsufficient(err) {
				continue
			}
			g.Expect(err).NotTo(HaveOccurred())
			ch, err := l.Settle(ctx, h, h.Amount())
			g.Expect(err).NotTo(HaveOccurred())
			rows = append(rows, UsageRow{RequestID: id, UserID: b.userID, TokenID: b.tokenID, Quota: h.Amount(), Charge: ch})
			g.Expect(tenantBalance(t, s, b.userID).Remain).To(BeNumerically(">=", -200))
		}
		_, err = s.InsertUsage(ctx, rows)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(l.Close(ctx)).To(Succeed())
		ten := tenantBalance(t, s, b.userID)
		g.Expect(ten.Remain).To(BeNumerically(">=", -200))
		g.Expect(ten.Remain).To(BeNumerically("<", -200+21), "the credit line was used up to the last request that fits")
		g.Expect(int64(ten.Used)).To(Equal(usageSum(t, s, b.tokenID)))
		g.Expect(ten.Remain + ten.Used).To(Equal(billing.Quota(300)))
	})
}
