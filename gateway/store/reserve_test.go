package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/billing"
)

func TestReserveSettleRefund(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		a := newAccount(t, s, 1000, 600, TokenLimits{})

		// Reserve holds the estimate on token and tenant.
		g.Expect(s.Reserve(ctx, "req-1", a.tokenID, a.userID, 100)).To(Succeed())
		g.Expect(tokenBalance(t, s, a.tokenID).Remain).To(Equal(billing.Quota(500)))
		g.Expect(tenantBalance(t, s, a.userID).Remain).To(Equal(billing.Quota(900)))

		// Settle below the estimate returns the difference.
		g.Expect(s.Settle(ctx, "req-1", 30)).To(Succeed())
		tok := tokenBalance(t, s, a.tokenID)
		g.Expect(tok.Remain).To(Equal(billing.Quota(570)))
		g.Expect(tok.Used).To(Equal(billing.Quota(30)))
		g.Expect(tenantBalance(t, s, a.userID)).To(Equal(Balance{Remain: 970, Used: 30}))

		// Settling again, even with another amount, charges once.
		g.Expect(s.Settle(ctx, "req-1", 30)).To(Succeed())
		g.Expect(s.Settle(ctx, "req-1", 500)).To(Succeed())
		g.Expect(tokenBalance(t, s, a.tokenID).Used).To(Equal(billing.Quota(30)))
		// Reserving a settled request again is a no-op.
		g.Expect(s.Reserve(ctx, "req-1", a.tokenID, a.userID, 100)).To(Succeed())
		g.Expect(tokenBalance(t, s, a.tokenID).Remain).To(Equal(billing.Quota(570)))
		g.Expect(s.Refund(ctx, "req-1")).To(MatchError(ErrReservationClosed))

		// Settle above the estimate takes the extra.
		g.Expect(s.Reserve(ctx, "req-2", a.tokenID, a.userID, 100)).To(Succeed())
		g.Expect(s.Settle(ctx, "req-2", 250)).To(Succeed())
		g.Expect(tokenBalance(t, s, a.tokenID).Balance).To(Equal(Balance{Remain: 320, Used: 280}))
		g.Expect(tenantBalance(t, s, a.userID)).To(Equal(Balance{Remain: 720, Used: 280}))

		// Refund returns everything, twice is a no-op, settle after is refused.
		g.Expect(s.Reserve(ctx, "req-3", a.tokenID, a.userID, 300)).To(Succeed())
		g.Expect(tokenBalance(t, s, a.tokenID).Remain).To(Equal(billing.Quota(20)))
		g.Expect(s.Refund(ctx, "req-3")).To(Succeed())
		g.Expect(s.Refund(ctx, "req-3")).To(Succeed())
		g.Expect(s.Settle(ctx, "req-3", 1)).To(MatchError(ErrReservationClosed))
		g.Expect(s.Reserve(ctx, "req-3", a.tokenID, a.userID, 1)).To(MatchError(ErrReservationClosed))
		g.Expect(tokenBalance(t, s, a.tokenID).Balance).To(Equal(Balance{Remain: 320, Used: 280}))

		// Insufficient: token short, then tenant short; nothing changes.
		g.Expect(s.Reserve(ctx, "req-4", a.tokenID, a.userID, 321)).To(MatchError(ErrInsufficientQuota))
		g.Expect(s.Settle(ctx, "req-4", 1)).To(MatchError(ErrNotFound), "a refused reservation leaves no row")
		b := newAccount(t, s, 50, 1000, TokenLimits{})
		g.Expect(s.Reserve(ctx, "req-5", b.tokenID, b.userID, 51)).To(MatchError(ErrInsufficientQuota))
		g.Expect(s.Reserve(ctx, "req-5", b.tokenID, b.userID, 50)).To(Succeed(), "the request ID is free again after a refusal")
		g.Expect(tokenBalance(t, s, b.tokenID).Remain).To(Equal(billing.Quota(950)))

		// A token used with the wrong tenant is refused.
		g.Expect(s.Reserve(ctx, "req-6", a.tokenID, b.userID, 1)).To(MatchError(ErrConflict))
		g.Expect(s.Reserve(ctx, "req-7", 424242, a.userID, 1)).To(MatchError(ErrNotFound))
	})
}

func TestUnlimited(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)

		// Unlimited token, limited tenant: only the tenant is checked and debited.
		a := newAccount(t, s, 100, 0, TokenLimits{Unlimited: true})
		g.Expect(s.Reserve(ctx, "a1", a.tokenID, a.userID, 101)).To(MatchError(ErrInsufficientQuota))
		g.Expect(s.Reserve(ctx, "a2", a.tokenID, a.userID, 80)).To(Succeed())
		g.Expect(s.Settle(ctx, "a2", 60)).To(Succeed())
		g.Expect(tokenBalance(t, s, a.tokenID).Balance).To(Equal(Balance{Remain: 0, Used: 60, Unlimited: true}))
		g.Expect(tenantBalance(t, s, a.userID)).To(Equal(Balance{Remain: 40, Used: 60}))

		// Unlimited tenant too: nothing is checked, used still counts.
		g.Expect(s.SetTenantUnlimited(ctx, a.userID, true)).To(Succeed())
		g.Expect(s.Reserve(ctx, "a3", a.tokenID, a.userID, 1_000_000)).To(Succeed())
		g.Expect(s.Settle(ctx, "a3", 2_000_000)).To(Succeed())
		g.Expect(tenantBalance(t, s, a.userID)).To(Equal(Balance{Remain: 40, Used: 2_000_060, Unlimited: true}))

		// Limits can change after creation.
		g.Expect(s.UpdateTokenLimits(ctx, a.tokenID, TokenLimits{})).To(Succeed())
		g.Expect(s.Reserve(ctx, "a4", a.tokenID, a.userID, 1)).To(MatchError(ErrInsufficientQuota))
		g.Expect(s.UpdateTokenLimits(ctx, 424242, TokenLimits{})).To(MatchError(ErrNotFound))
	})
}

func TestDailyAndMonthlyWindows(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		clock := newFakeClock(time.Date(2026, 1, 30, 23, 0, 0, 0, time.UTC))
		s := openStore(t, dsn, WithClock(clock))
		a := newAccount(t, s, 10_000, 10_000, TokenLimits{DailyLimit: 100, MonthlyLimit: 250})

		g.Expect(s.Reserve(ctx, "d1", a.tokenID, a.userID, 60)).To(Succeed())
		g.Expect(s.Reserve(ctx, "d2", a.tokenID, a.userID, 41)).To(MatchError(ErrInsufficientQuota), "daily cap")
		g.Expect(s.Settle(ctx, "d1", 50)).To(Succeed()) // frees 10 of the day
		g.Expect(s.Reserve(ctx, "d2", a.tokenID, a.userID, 50)).To(Succeed())
		g.Expect(tokenBalance(t, s, a.tokenID).DailyUsed).To(Equal(billing.Quota(100)))

		clock.Step(2 * time.Hour) // Jan 31: a new day, same month
		g.Expect(tokenBalance(t, s, a.tokenID).DailyUsed).To(BeZero())
		g.Expect(s.Reserve(ctx, "d3", a.tokenID, a.userID, 100)).To(Succeed())
		// Settling d2 (counted yesterday) does not touch today's window.
		g.Expect(s.Settle(ctx, "d2", 0)).To(Succeed())
		tok := tokenBalance(t, s, a.tokenID)
		g.Expect(tok.DailyUsed).To(Equal(billing.Quota(100)))
		g.Expect(tok.MonthlyUsed).To(Equal(billing.Quota(150)), "50 + 0 + 100: d2's settle corrected the month")

		clock.Step(24 * time.Hour) // Feb 1: new day and new month
		g.Expect(s.Reserve(ctx, "d4", a.tokenID, a.userID, 100)).To(Succeed())
		clock.Step(24 * time.Hour)
		g.Expect(s.Reserve(ctx, "d5", a.tokenID, a.userID, 100)).To(Succeed())
		clock.Step(24 * time.Hour)
		g.Expect(s.Reserve(ctx, "d6", a.tokenID, a.userID, 51)).To(MatchError(ErrInsufficientQuota), "monthly cap: 200 of 250 used")
		g.Expect(s.Reserve(ctx, "d6", a.tokenID, a.userID, 50)).To(Succeed())
	})
}

// TestConcurrentReservationsNeverOverdraw: 200 goroutines race to spend a
// balance worth 50 requests; exactly 50 win, the balance ends at zero and the
// usage rows add up to the used quota.
func TestConcurrentReservationsNeverOverdraw(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		replica := openStore(t, dsn)
		const price = 1000
		a := newAccount(t, s, 50*price, 100*price, TokenLimits{})

		var won atomic.Int32
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Go(func() {
				st := s
				if i%2 == 1 {
					st = replica
				}
				id := fmt.Sprintf("race-%d", i)
				err := st.Reserve(ctx, id, a.tokenID, a.userID, price)
				if err != nil {
					if !isInsufficient(err) {
						t.Errorf("reserve: %v", err)
					}
					return
				}
				won.Add(1)
				if err := st.Settle(ctx, id, price); err != nil {
					t.Errorf("settle: %v", err)
				}
				if _, err := st.InsertUsage(ctx, []UsageRow{{RequestID: id, UserID: a.userID, TokenID: a.tokenID, Quota: price}}); err != nil {
					t.Errorf("usage: %v", err)
				}
			})
		}
		wg.Wait()
		g.Expect(won.Load()).To(Equal(int32(50)))
		ten := tenantBalance(t, s, a.userID)
		g.Expect(ten).To(Equal(Balance{Remain: 0, Used: 50 * price}))
		g.Expect(usageSum(t, s, a.tokenID)).To(Equal(int64(ten.Used)))
	})
}

// A batch line waiting on an upstream batch job can wait longer than any
// stale age: its held reservation stays until its hold passes, while an
// ordinary one of the same age is swept.
func TestRefundStaleSparesHeldReservations(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		clock := newFakeClock(start)
		s := openStore(t, dsn, WithClock(clock))
		a := newAccount(t, s, 1000, 1000, TokenLimits{})
		holdUntil := start.Add(24 * time.Hour)

		got, err := s.ReserveHeld(ctx, "held", a.tokenID, a.userID, 300, nil, holdUntil)
		g.Expect([]any{got, err}).To(Equal([]any{billing.Quota(300), error(nil)}))
		g.Expect(s.Reserve(ctx, "plain", a.tokenID, a.userID, 100)).To(Succeed())
		g.Expect(tokenBalance(t, s, a.tokenID).Remain).To(Equal(billing.Quota(600)))
		clock.Step(2 * time.Hour)

		n, err := s.RefundStale(ctx, time.Hour)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(StaleRefund{Reservations: 1, Quota: 100}), "only the ordinary one is stale")
		g.Expect(tokenBalance(t, s, a.tokenID).Balance).To(Equal(Balance{Remain: 700, Used: 0}))
		g.Expect(tenantBalance(t, s, a.userID)).To(Equal(Balance{Remain: 700, Used: 0}))

		// A repeat is idempotent: it reports what the reservation holds.
		got, err = s.ReserveHeld(ctx, "held", a.tokenID, a.userID, 300, nil, holdUntil)
		g.Expect([]any{got, err}).To(Equal([]any{billing.Quota(300), error(nil)}))
		g.Expect(tokenBalance(t, s, a.tokenID).Remain).To(Equal(billing.Quota(700)))

		clock.Set(holdUntil.Add(-time.Second))
		n, err = s.RefundStale(ctx, time.Hour)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n.Reservations).To(BeZero(), "still held")
		g.Expect(tokenBalance(t, s, a.tokenID).Remain).To(Equal(billing.Quota(700)))

		clock.Set(holdUntil.Add(time.Second))
		n, err = s.RefundStale(ctx, time.Hour)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(StaleRefund{Reservations: 1, Quota: 300}), "the hold has passed")
		g.Expect(tokenBalance(t, s, a.tokenID).Balance).To(Equal(Balance{Remain: 1000, Used: 0}))
		g.Expect(tenantBalance(t, s, a.userID)).To(Equal(Balance{Remain: 1000, Used: 0}))
	})
}

// A held reservation settles and refunds like an ordinary one, and is
// lowered by a fit the same way.
func TestHeldReservationSettlesAndRefunds(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		clock := newFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
		s := openStore(t, dsn, WithClock(clock))
		a := newAccount(t, s, 1000, 1000, TokenLimits{})
		holdUntil := clock.Now().Add(24 * time.Hour)

		_, err := s.ReserveHeld(ctx, "h-settle", a.tokenID, a.userID, 100, nil, holdUntil)
		g.Expect(err).NotTo(HaveOccurred())
		clock.Step(2 * time.Hour)
		g.Expect(s.Settle(ctx, "h-settle", 30)).To(Succeed())
		g.Expect(s.Settle(ctx, "h-settle", 500)).To(Succeed(), "settling again charges once")
		g.Expect(tokenBalance(t, s, a.tokenID).Balance).To(Equal(Balance{Remain: 970, Used: 30}))
		g.Expect(tenantBalance(t, s, a.userID)).To(Equal(Balance{Remain: 970, Used: 30}))
		g.Expect(s.Refund(ctx, "h-settle")).To(MatchError(ErrReservationClosed))

		_, err = s.ReserveHeld(ctx, "h-refund", a.tokenID, a.userID, 200, nil, holdUntil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tokenBalance(t, s, a.tokenID).Remain).To(Equal(billing.Quota(770)))
		g.Expect(s.Refund(ctx, "h-refund")).To(Succeed())
		g.Expect(s.Refund(ctx, "h-refund")).To(Succeed())
		g.Expect(s.Settle(ctx, "h-refund", 1)).To(MatchError(ErrReservationClosed))
		_, err = s.ReserveHeld(ctx, "h-refund", a.tokenID, a.userID, 200, nil, holdUntil)
		g.Expect(err).To(MatchError(ErrReservationClosed))
		g.Expect(tokenBalance(t, s, a.tokenID).Balance).To(Equal(Balance{Remain: 970, Used: 30}))
		g.Expect(tenantBalance(t, s, a.userID)).To(Equal(Balance{Remain: 970, Used: 30}))

		b := newAccount(t, s, 1000, 50, TokenLimits{})
		got, err := s.ReserveHeld(ctx, "h-fit", b.tokenID, b.userID, 84, linearFit, holdUntil)
		g.Expect([]any{got, err}).To(Equal([]any{billing.Quota(50), error(nil)}), "lowered to what is left")

		clock.Set(holdUntil.Add(time.Hour))
		n, err := s.RefundStale(ctx, time.Hour)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(StaleRefund{Reservations: 1, Quota: 50}), "closed reservations are not swept")
	})
}
