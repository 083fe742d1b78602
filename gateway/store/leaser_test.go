package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/billing"
)

func TestLeaseReservesLocally(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		clock := newFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
		s := openStore(t, dsn, WithClock(clock))
		a := newAccount(t, s, 1_000_000, 1_000_000, TokenLimits{})
		l := s.NewLeaser(LeaseConfig{ReplicaID: "gw-0", Chunk: 10_000, TTL: time.Minute})

		var rows []UsageRow
		for i := range 100 {
			h, err := l.Reserve(ctx, "", a.tokenID, a.userID, 100)
			g.Expect(err).NotTo(HaveOccurred())
			ch := settle(t, l, h, 90)
			g.Expect(settle(t, l, h, 85)).To(Equal(ch), "a second settle is ignored")
			rows = append(rows, UsageRow{RequestID: fmt.Sprint("l-", i), UserID: a.userID, TokenID: a.tokenID, Quota: 90, Charge: ch})
		}
		g.Expect(l.Takes()).To(BeNumerically("<=", 2), "one chunk serves many requests")
		_, held, err := s.LeaseTotals(ctx, a.tokenID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(held).To(BeNumerically(">=", 9000))

		n, err := s.InsertUsage(ctx, rows)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(100))
		n, err = s.InsertUsage(ctx, rows) // replay: no duplicate, no second charge
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(BeZero())
		g.Expect(tokenBalance(t, s, a.tokenID).Used).To(Equal(billing.Quota(9000)))

		h, err := l.Reserve(ctx, "", a.tokenID, a.userID, 500)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(l.Release(ctx, h)).To(Succeed())
		g.Expect(l.Close(ctx)).To(Succeed())
		_, err = l.Reserve(ctx, "", a.tokenID, a.userID, 1)
		g.Expect(err).To(MatchError(ErrLeaserClosed))

		count, held, err := s.LeaseTotals(ctx, a.tokenID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(count).To(BeZero())
		g.Expect(held).To(BeZero())
		g.Expect(tokenBalance(t, s, a.tokenID).Balance).To(Equal(Balance{Remain: 1_000_000 - 9000, Used: 9000}))
		g.Expect(tenantBalance(t, s, a.userID)).To(Equal(Balance{Remain: 1_000_000 - 9000, Used: 9000}))
	})
}

func TestLeaseInsufficientAndUnbounded(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		a := newAccount(t, s, 250, 1_000_000, TokenLimits{})
		l := s.NewLeaser(LeaseConfig{ReplicaID: "gw-0", Chunk: 10_000})
		h1, err := l.Reserve(ctx, "", a.tokenID, a.userID, 200)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = l.Reserve(ctx, "", a.tokenID, a.userID, 100)
		g.Expect(err).To(MatchError(ErrInsufficientQuota))
		g.Expect(l.Release(ctx, h1)).To(Succeed())
		_, err = l.Reserve(ctx, "", a.tokenID, a.userID, 250)
		g.Expect(err).NotTo(HaveOccurred(), "a released hold is reusable locally")

		// Unlimited token, limited tenant: the lease takes from the tenant only.
		c := newAccount(t, s, 10_000, 0, TokenLimits{Unlimited: true})
		hc, err := l.Reserve(ctx, "", c.tokenID, c.userID, 100)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tokenBalance(t, s, c.tokenID).Remain).To(BeZero())
		g.Expect(tenantBalance(t, s, c.userID).Remain).To(BeNumerically("<=", 10_000-100))
		_, err = s.InsertUsage(ctx, []UsageRow{{RequestID: "c-1", UserID: c.userID, TokenID: c.tokenID, Quota: 60, Charge: settle(t, l, hc, 60)}})
		g.Expect(err).NotTo(HaveOccurred())

		// Both sides unlimited, no window cap: nothing to lease, rows charge used only.
		b := newAccount(t, s, 0, 0, TokenLimits{Unlimited: true})
		g.Expect(s.SetTenantUnlimited(ctx, b.userID, true)).To(Succeed())
		h, err := l.Reserve(ctx, "", b.tokenID, b.userID, 9_999)
		g.Expect(err).NotTo(HaveOccurred())
		ch := settle(t, l, h, 7)
		g.Expect(ch).To(Equal(Charge{Apply: true}))
		_, err = s.InsertUsage(ctx, []UsageRow{{RequestID: "u-1", UserID: b.userID, TokenID: b.tokenID, Quota: 7, Charge: ch}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tenantBalance(t, s, b.userID)).To(Equal(Balance{Used: 7, Unlimited: true}))
		g.Expect(l.Close(ctx)).To(Succeed())
		g.Expect(tokenBalance(t, s, c.tokenID).Balance).To(Equal(Balance{Remain: 0, Used: 60, Unlimited: true}))
		g.Expect(tenantBalance(t, s, c.userID)).To(Equal(Balance{Remain: 10_000 - 60, Used: 60}))
	})
}

// TestLeaseInvariantAcrossReplicas runs several replicas (separate Store
// instances on one database) that lease from one token and tenant while many
// goroutines reserve and settle through them. One replica dies without
// returning its lease; the sweeper returns it after expiry. In the end every
// unit of the grant is either still in the balance or in used quota, used
// quota equals the usage rows, no lease is left and no balance went negative.
func TestLeaseInvariantAcrossReplicas(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		clock := newFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
		const grant = 80_000 // less than the workers want: the balance runs out
		const replicas = 3
		stores := make([]*Store, replicas)
		leasers := make([]*Leaser, replicas)
		for i := range replicas {
			stores[i] = openStore(t, dsn, WithClock(clock))
			leasers[i] = stores[i].NewLeaser(LeaseConfig{ReplicaID: fmt.Sprint("gw-", i), Chunk: 5_000, TTL: time.Minute})
		}
		s := stores[0]
		a := newAccount(t, s, grant, grant, TokenLimits{})

		for _, l := range leasers { // every replica holds a lease from the start
			h, err := l.Reserve(ctx, "", a.tokenID, a.userID, 1)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(l.Release(ctx, h)).To(Succeed())
		}

		var (
			negative atomic.Bool
			stop     = make(chan struct{})
			watcher  sync.WaitGroup
		)
		watcher.Go(func() { // balances must never go below zero
			for {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				if tokenBalance(t, s, a.tokenID).Remain < 0 || tenantBalance(t, s, a.userID).Remain < 0 {
					negative.Store(true)
				}
			}
		})

		var seq atomic.Int64
		var wg sync.WaitGroup
		for w := range 24 {
			wg.Go(func() {
				r := w % replicas
				var batch []UsageRow
				for range 40 {
					est := billing.Quota(100 + rand.IntN(400))
					h, err := leasers[r].Reserve(ctx, "", a.tokenID, a.userID, est)
					if err != nil {
						if !isInsufficient(err) {
							t.Errorf("reserve: %v", err)
						}
						continue
					}
					if rand.IntN(10) == 0 {
						g.Expect(leasers[r].Release(ctx, h)).To(Succeed()) // upstream failed before any charge
						continue
					}
					actual := billing.Quota(rand.Int64N(int64(est) + 1))
					batch = append(batch, UsageRow{RequestID: fmt.Sprint("inv-", seq.Add(1)), UserID: a.userID, TokenID: a.tokenID,
						Quota: actual, Charge: settle(t, leasers[r], h, actual)})
					if len(batch) == 10 {
						if _, err := stores[r].InsertUsage(ctx, batch); err != nil {
							t.Errorf("usage: %v", err)
						}
						batch = nil
					}
				}
				if _, err := stores[r].InsertUsage(ctx, batch); err != nil {
					t.Errorf("usage: %v", err)
				}
			})
		}
		wg.Wait()
		close(stop)
		watcher.Wait()

		// Replica 2 dies: no Close. Its lease expires and is swept.
		count, _, err := s.LeaseTotals(ctx, a.tokenID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(count).To(Equal(replicas))
		g.Expect(leasers[0].Close(ctx)).To(Succeed())
		g.Expect(leasers[1].Close(ctx)).To(Succeed())
		n, err := s.SweepExpiredLeases(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n.Leases).To(BeZero(), "the dead replica's lease has not expired yet")
		// What the dead replica's lease holds (the balance may have run out
		// into it, or out of it: the workers want more than the grant).
		_, deadHeld, err := s.LeaseTotals(ctx, a.tokenID)
		g.Expect(err).NotTo(HaveOccurred())
		clock.Step(61 * time.Second)
		n, err = s.SweepExpiredLeases(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n.Leases).To(Equal(1))
		g.Expect(n.Quota).To(BeEquivalentTo(deadHeld), "the sweep returns what the dead replica's lease held")

		count, held, err := s.LeaseTotals(ctx, a.tokenID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(count).To(BeZero())
		g.Expect(held).To(BeZero())
		tok := tokenBalance(t, s, a.tokenID)
		ten := tenantBalance(t, s, a.userID)
		g.Expect(negative.Load()).To(BeFalse())
		g.Expect(int64(tok.Remain + tok.Used)).To(Equal(int64(grant)))
		g.Expect(int64(ten.Remain + ten.Used)).To(Equal(int64(grant)))
		g.Expect(usageSum(t, s, a.tokenID)).To(Equal(int64(tok.Used)))
		g.Expect(tok.Used).To(BeNumerically(">", 0))
		t.Logf("used %d of %d through %d takes", tok.Used, grant, leasers[0].Takes()+leasers[1].Takes()+leasers[2].Takes())
	})
}

func TestLeaseNeverOutlivesWindow(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		clock := newFakeClock(time.Date(2026, 3, 1, 23, 59, 30, 0, time.UTC))
		s := openStore(t, dsn, WithClock(clock))
		a := newAccount(t, s, 100_000, 100_000, TokenLimits{DailyLimit: 1000})
		l := s.NewLeaser(LeaseConfig{ReplicaID: "gw-0", Chunk: 10_000, TTL: time.Hour})
		h, err := l.Reserve(ctx, "", a.tokenID, a.userID, 100)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tokenBalance(t, s, a.tokenID).DailyUsed).To(BeNumerically("<=", 1000), "the lease counts in the daily window")
		row := UsageRow{RequestID: "w-1", UserID: a.userID, TokenID: a.tokenID, Quota: 100, Charge: settle(t, l, h, 100)}

		clock.Step(time.Minute) // the day (and the lease) ended
		n, err := s.SweepExpiredLeases(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n.Leases).To(Equal(1))
		// The row arrives after its lease was swept: charged directly, exactly once.
		_, err = s.InsertUsage(ctx, []UsageRow{row, row})
		g.Expect(err).NotTo(HaveOccurred())
		tok := tokenBalance(t, s, a.tokenID)
		g.Expect(tok.Balance).To(Equal(Balance{Remain: 100_000 - 100, Used: 100}))
		g.Expect(tok.DailyUsed).To(BeZero())
		h, err = l.Reserve(ctx, "", a.tokenID, a.userID, 1000)
		g.Expect(err).NotTo(HaveOccurred(), "a fresh lease in the new day")
		g.Expect(l.Release(ctx, h)).To(Succeed())
		g.Expect(l.Close(ctx)).To(Succeed())
		g.Expect(tokenBalance(t, s, a.tokenID).DailyUsed).To(BeZero())
	})
}

func settle(t testing.TB, l *Leaser, h *Hold, actual billing.Quota) Charge {
	t.Helper()
	ch, err := l.Settle(context.Background(), h, actual)
	if err != nil {
		t.Fatalf("settle: %v", err)
	}
	return ch
}

func TestLeaserFallsBackToDirectReservation(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		a := newAccount(t, s, 100_000, 100_000, TokenLimits{})
		l := s.NewLeaser(LeaseConfig{ReplicaID: "gw-0", Chunk: 1000})
		h, err := l.Reserve(ctx, "big-1", a.tokenID, a.userID, 50_000)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(h.Direct()).To(BeTrue())
		count, _, err := s.LeaseTotals(ctx, a.tokenID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(count).To(BeZero(), "no lease for a direct reservation")
		ch := settle(t, l, h, 40_000)
		g.Expect(ch).To(Equal(Charge{}), "already charged: the usage row must not charge again")
		g.Expect(settle(t, l, h, 40_000)).To(Equal(Charge{}))
		_, err = s.InsertUsage(ctx, []UsageRow{{RequestID: "big-1", UserID: a.userID, TokenID: a.tokenID, Quota: 40_000, Charge: ch}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tokenBalance(t, s, a.tokenID).Balance).To(Equal(Balance{Remain: 60_000, Used: 40_000}))

		h, err = l.Reserve(ctx, "big-2", a.tokenID, a.userID, 60_000)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(l.Release(ctx, h)).To(Succeed())
		_, err = l.Reserve(ctx, "big-3", a.tokenID, a.userID, 60_001)
		g.Expect(err).To(MatchError(ErrInsufficientQuota))
		g.Expect(tokenBalance(t, s, a.tokenID).Balance).To(Equal(Balance{Remain: 60_000, Used: 40_000}))
	})
}

func TestRefundStale(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		clock := newFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
		s := openStore(t, dsn, WithClock(clock))
		a := newAccount(t, s, 1000, 1000, TokenLimits{})
		g.Expect(s.Reserve(ctx, "old-open", a.tokenID, a.userID, 100)).To(Succeed())
		g.Expect(s.Reserve(ctx, "old-settled", a.tokenID, a.userID, 100)).To(Succeed())
		g.Expect(s.Settle(ctx, "old-settled", 100)).To(Succeed())
		clock.Step(time.Hour)
		g.Expect(s.Reserve(ctx, "new-open", a.tokenID, a.userID, 100)).To(Succeed())
		n, err := s.RefundStale(ctx, 30*time.Minute)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(StaleRefund{Reservations: 1, Quota: 100}))
		g.Expect(tokenBalance(t, s, a.tokenID).Balance).To(Equal(Balance{Remain: 800, Used: 100}))
	})
}

// A generation task can run for longer than any stale age: its reservation
// stays while the task is unfinished and is swept like any other after.
func TestRefundStaleSparesUnfinishedTasks(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		clock := newFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
		s := openStore(t, dsn, WithClock(clock))
		a := newAccount(t, s, 1000, 1000, TokenLimits{})
		g.Expect(s.Reserve(ctx, "req-task", a.tokenID, a.userID, 300)).To(Succeed())
		task := TaskRecord{TaskID: "task-1", UserID: a.userID, TokenID: a.tokenID, RequestID: "req-task",
			Kind: "video", Model: "m", Status: "in_progress", CreatedAt: clock.Now().Unix()}
		_, err := s.InsertTask(ctx, task)
		g.Expect(err).NotTo(HaveOccurred())
		clock.Step(48 * time.Hour)

		n, err := s.RefundStale(ctx, time.Hour)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n.Reservations).To(BeZero(), "the task is still running")

		task.Status, task.CompletedAt = "failure", clock.Now().Unix()
		g.Expect(s.UpsertTask(ctx, task)).To(Succeed())
		n, err = s.RefundStale(ctx, time.Hour)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(StaleRefund{Reservations: 1, Quota: 300}))
		g.Expect(tokenBalance(t, s, a.tokenID).Balance).To(Equal(Balance{Remain: 1000, Used: 0}))
	})
}

func TestLeasePrefetchesBeforeRunningOut(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		clock := newFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
		s := openStore(t, dsn, WithClock(clock))
		a := newAccount(t, s, 1_000_000, 1_000_000, TokenLimits{})
		l := s.NewLeaser(LeaseConfig{ReplicaID: "gw-0", Chunk: 1000, TTL: time.Minute})
		h, err := l.Reserve(ctx, "", a.tokenID, a.userID, 100) // first take: 1000
		g.Expect(err).NotTo(HaveOccurred())
		settle(t, l, h, 100)
		g.Expect(l.Takes()).To(Equal(int64(1)))
		for range 7 { // 800 of 1000 used: below a quarter chunk left
			h, err := l.Reserve(ctx, "", a.tokenID, a.userID, 100)
			g.Expect(err).NotTo(HaveOccurred())
			settle(t, l, h, 100)
		}
		g.Eventually(l.Takes).Should(Equal(int64(2)), "a background take tops the lease up")
		// Up to a whole chunk unspent: 200 were left, 800 more. (The row
		// still counts the 800 spent until their usage rows arrive.)
		leased := func() int64 { _, held, _ := s.LeaseTotals(ctx, a.tokenID); return held }
		g.Eventually(leased).Should(Equal(int64(1800)))

		clock.Step(30 * time.Second) // within 2×TTL/3 of expiry: renewed in the background
		h, err = l.Reserve(ctx, "", a.tokenID, a.userID, 100)
		g.Expect(err).NotTo(HaveOccurred())
		settle(t, l, h, 100)
		g.Eventually(l.Takes).Should(Equal(int64(3)))
		g.Expect(leased()).To(Equal(int64(1900)), "a renewal tops up only what the lease lacks (100), it does not add a chunk")
		clock.Step(40 * time.Second) // past the original expiry
		n, err := s.SweepExpiredLeases(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n.Leases).To(BeZero(), "the renewed lease is alive")
		g.Expect(l.Close(ctx)).To(Succeed())
	})
}

// TestTwoLeasingReplicasSpendExactlyASmallBalance: 200 goroutines on two
// replicas, each with its own Leaser, race for a balance worth 50 requests.
// Below DirectBelow no lease strands quota in one replica: exactly 50 win,
// the balance ends at zero and the usage rows equal the used quota.
func TestTwoLeasingReplicasSpendExactlyASmallBalance(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		const price = 1000
		stores := []*Store{openStore(t, dsn), openStore(t, dsn)}
		a := newAccount(t, stores[0], 50*price, 100*price, TokenLimits{})
		leasers := make([]*Leaser, len(stores))
		for i, s := range stores {
			leasers[i] = s.NewLeaser(LeaseConfig{ReplicaID: fmt.Sprintf("r%d", i), Chunk: 100 * price, DirectBelow: 200 * price})
		}
		var won atomic.Int32
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Go(func() {
				l, s := leasers[i%2], stores[i%2]
				id := fmt.Sprintf("lease-race-%d", i)
				h, err := l.Reserve(ctx, id, a.tokenID, a.userID, price)
				if err != nil {
					if !isInsufficient(err) {
						t.Errorf("reserve: %v", err)
					}
					return
				}
				won.Add(1)
				charge, err := l.Settle(ctx, h, price)
				if err != nil {
					t.Errorf("settle: %v", err)
				}
				if _, err := s.InsertUsage(ctx, []UsageRow{{RequestID: id, UserID: a.userID, TokenID: a.tokenID, Quota: price, Charge: charge}}); err != nil {
					t.Errorf("usage: %v", err)
				}
			})
		}
		wg.Wait()
		for _, l := range leasers {
			g.Expect(l.Close(ctx)).To(Succeed())
		}
		g.Expect(won.Load()).To(Equal(int32(50)))
		ten := tenantBalance(t, stores[0], a.userID)
		g.Expect(ten).To(Equal(Balance{Remain: 0, Used: 50 * price}))
		g.Expect(usageSum(t, stores[0], a.tokenID)).To(Equal(int64(ten.Used)))
	})
}

// One batch mixes a row paid by a live lease with rows no lease paid for,
// one of an unlimited key: each is charged from the right place. On SQLite
// the unlimited flags are read only for the rows no lease paid for.
func TestInsertUsageMixedCharges(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		l := s.NewLeaser(LeaseConfig{ReplicaID: "gw-0", Chunk: 10_000})
		leased := newAccount(t, s, 1_000_000, 100_000, TokenLimits{})
		unlimited := newAccount(t, s, 1_000_000, 0, TokenLimits{Unlimited: true})
		direct := newAccount(t, s, 1_000_000, 100_000, TokenLimits{})
		h, err := l.Reserve(ctx, "", leased.tokenID, leased.userID, 100)
		g.Expect(err).NotTo(HaveOccurred())
		ch := settle(t, l, h, 50)
		g.Expect(ch.LeaseID).NotTo(BeZero())
		tokBefore, tenBefore := tokenBalance(t, s, leased.tokenID).Remain, tenantBalance(t, s, leased.userID).Remain

		n, err := s.InsertUsage(ctx, []UsageRow{
			{RequestID: "mix-leased", UserID: leased.userID, TokenID: leased.tokenID, Quota: 50, Charge: ch},
			{RequestID: "mix-unlimited", UserID: unlimited.userID, TokenID: unlimited.tokenID, Quota: 30, Charge: Charge{Apply: true}},
			{RequestID: "mix-direct", UserID: direct.userID, TokenID: direct.tokenID, Quota: 40, Charge: Charge{Apply: true}},
		})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(3))

		g.Expect(tokenBalance(t, s, leased.tokenID).Balance).To(Equal(Balance{Remain: tokBefore, Used: 50}), "the lease paid")
		g.Expect(tenantBalance(t, s, leased.userID)).To(Equal(Balance{Remain: tenBefore, Used: 50}))
		g.Expect(tokenBalance(t, s, unlimited.tokenID).Balance).To(Equal(Balance{Used: 30, Unlimited: true}))
		g.Expect(tenantBalance(t, s, unlimited.userID)).To(Equal(Balance{Remain: 1_000_000 - 30, Used: 30}))
		g.Expect(tokenBalance(t, s, direct.tokenID).Balance).To(Equal(Balance{Remain: 100_000 - 40, Used: 40}))
		g.Expect(tenantBalance(t, s, direct.userID)).To(Equal(Balance{Remain: 1_000_000 - 40, Used: 40}))
		g.Expect(l.Close(ctx)).To(Succeed())
	})
}
