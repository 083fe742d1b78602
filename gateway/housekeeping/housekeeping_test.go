package housekeeping_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/utils/clock"

	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/housekeeping"
	"github.com/modelgate/modelgate/gateway/platform/metrics"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/test/pgtest"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

var backends = []struct {
	name string
	dsn  func(t testing.TB) string
}{
	{"sqlite", func(t testing.TB) string { return "sqlite://" + filepath.Join(t.TempDir(), "ledger.db") }},
	{"postgres", pgtest.NewDatabase},
}

// account makes a tenant with tenantQuota and a key limited to tokenQuota.
func account(t *testing.T, s *store.Store, tenantQuota, tokenQuota billing.Quota) (userID, tokenID int64) {
	g := NewWithT(t)
	ctx := context.Background()
	userID, err := s.EnsureTenant(ctx, "uid-tenant", "ns", "tenant")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.ApplyGrant(ctx, userID, "initial", tenantQuota)
	g.Expect(err).NotTo(HaveOccurred())
	tokenID, err = s.EnsureToken(ctx, store.TokenSpec{UID: "uid-token", UserID: userID, Name: "key", RemainQuota: tokenQuota})
	g.Expect(err).NotTo(HaveOccurred())
	return userID, tokenID
}

// The keeper runs both jobs on their intervals: a replica that died holding
// a lease gives its quota back within TTL + interval, and a reservation a
// dead gateway left open is refunded once it is stale. The figures also
// reach the metrics.
func TestKeeperReturnsWhatDeadReplicasHeld(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, err := store.Open(ctx, b.dsn(t))
			g.Expect(err).NotTo(HaveOccurred())
			defer s.Close()
			userID, tokenID := account(t, s, 100_000, 10_000)

			const ttl = 500 * time.Millisecond
			dead := s.NewLeaser(store.LeaseConfig{ReplicaID: "gw-dead", Chunk: 2_000, TTL: ttl})
			_, err = dead.Reserve(ctx, "", tokenID, userID, 300) // takes a 2 000 lease; the replica then dies: no Close
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Reserve(ctx, "orphan", tokenID, userID, 700)).To(Succeed())
			held, err := s.TokenUsage(ctx, tokenID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(held.Remain).To(Equal(billing.Quota(10_000 - 2_000 - 700)))

			swept := testutil.ToFloat64(metrics.LeaseQuotaReturned)
			refunded := testutil.ToFloat64(metrics.StaleQuotaRefunded)
			k := housekeeping.New(s, clock.RealClock{})
			k.LeaseSweepInterval, k.StaleRefundInterval, k.StaleAge = 100*time.Millisecond, 100*time.Millisecond, time.Second
			started := time.Now()
			go func() { _ = k.Start(ctx) }()

			g.Eventually(func() billing.Quota {
				b, err := s.TokenUsage(ctx, tokenID)
				g.Expect(err).NotTo(HaveOccurred())
				return b.Remain
			}, 5*time.Second, 50*time.Millisecond).Should(Equal(billing.Quota(10_000)))
			g.Expect(time.Since(started)).To(BeNumerically("<", 3*time.Second), "stale age (1 s, counted in whole seconds) + interval")
			tenant, err := s.TenantBalance(ctx, userID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(tenant.Remain).To(Equal(billing.Quota(100_000)))
			g.Expect(testutil.ToFloat64(metrics.LeaseQuotaReturned) - swept).To(Equal(2_000.0))
			g.Expect(testutil.ToFloat64(metrics.StaleQuotaRefunded) - refunded).To(Equal(700.0))
			g.Expect(s.Settle(ctx, "orphan", 700)).NotTo(Succeed(), "a refunded reservation cannot be charged afterwards")
		})
	}
}

func TestKeeperRunsOnTheLeaderOnly(t *testing.T) {
	g := NewWithT(t)
	g.Expect(housekeeping.New(nil, clock.RealClock{}).NeedLeaderElection()).To(BeTrue())
}

// The lease sweep also deletes the rate windows that ended before the
// previous minute; the current and the previous one stay (replicas' clocks
// differ a little).
func TestKeeperDeletesEndedRateWindows(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, err := store.Open(ctx, b.dsn(t))
			g.Expect(err).NotTo(HaveOccurred())
			defer s.Close()
			now := time.Now().Truncate(time.Minute)
			for _, start := range []time.Time{now.Add(-10 * time.Minute), now.Add(-time.Minute), now} {
				_, err := s.LeaseRateWindow(ctx, "req/ns/key", start, 60, 6, 1)
				g.Expect(err).NotTo(HaveOccurred())
			}
			k := housekeeping.New(s, clock.RealClock{})
			k.LeaseSweepInterval = 50 * time.Millisecond
			go func() { _ = k.Start(ctx) }()
			g.Eventually(func() int64 {
				n, err := s.RateWindowsTotal(ctx, "req/ns/key", now.Add(-10*time.Minute))
				g.Expect(err).NotTo(HaveOccurred())
				return n
			}, 5*time.Second, 50*time.Millisecond).Should(BeZero())
			if time.Now().Truncate(time.Minute) != now {
				return // a minute passed: the previous window is old now
			}
			for _, start := range []time.Time{now.Add(-time.Minute), now} {
				n, err := s.RateWindowsTotal(ctx, "req/ns/key", start)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(n).To(Equal(int64(6)))
			}
		})
	}
}

// The keeper's retention pass removes what the retention flags say has
// expired, and the metrics count the rows by table. Sequential subtests: the
// metrics are process-wide.
func TestKeeperRemovesExpiredRecords(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			clk := clocktesting.NewFakePassiveClock(time.Date(2025, 10, 20, 12, 0, 0, 0, time.UTC))
			s, err := store.Open(ctx, b.dsn(t), store.WithClock(clk))
			g.Expect(err).NotTo(HaveOccurred())
			defer s.Close()
			userID, tokenID := account(t, s, 100_000, 10_000)
			_, err = s.InsertUsage(ctx, []store.UsageRow{{RequestID: "old", UserID: userID, TokenID: tokenID, TokenName: "key",
				ModelName: "m", PromptTokens: 1, CompletionTokens: 1, BillingPhase: store.PhaseSettled, Quota: 5}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.SaveResponse(ctx, "resp_old", userID, "m", []byte(`{"input":[],"output":[]}`))).To(Succeed())
			clk.SetTime(time.Date(2026, 12, 15, 12, 0, 0, 0, time.UTC))
			g.Expect(s.SaveResponse(ctx, "resp_new", userID, "m", []byte(`{"input":[],"output":[]}`))).To(Succeed())

			removed := func(table string) float64 {
				return testutil.ToFloat64(metrics.RetentionRowsRemoved.WithLabelValues(table))
			}
			usageBefore, responsesBefore := removed(store.TableUsageLogs), removed(store.TableResponses)
			k := housekeeping.New(s, clock.RealClock{})
			g.Expect(k.Retention).To(Equal(housekeeping.DefaultRetention()))
			k.RetentionInterval = 100 * time.Millisecond
			go func() { _ = k.Start(ctx) }()

			g.Eventually(func() float64 { return removed(store.TableResponses) - responsesBefore },
				5*time.Second, 50*time.Millisecond).Should(Equal(1.0))
			g.Eventually(func() float64 { return removed(store.TableUsageLogs) - usageBefore },
				5*time.Second, 50*time.Millisecond).Should(Equal(1.0))
			_, err = s.LoadResponse(ctx, "resp_old", userID)
			g.Expect(err).To(MatchError(store.ErrNotFound))
			_, err = s.LoadResponse(ctx, "resp_new", userID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Consistently(func() float64 { return removed(store.TableResponses) - responsesBefore },
				300*time.Millisecond, 50*time.Millisecond).Should(Equal(1.0), "later passes find nothing more")
		})
	}
}

// On PostgreSQL the keeper drops the usage months wholly before the cutoff
// as partitions, and the metrics count them.
func TestKeeperDropsExpiredUsagePartitions(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Migration 00012 ends the legacy partition at the start of next month.
	now := time.Now().UTC()
	first := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(first.Add(24 * time.Hour))
	s, err := store.Open(ctx, pgtest.NewDatabase(t), store.WithClock(clk))
	g.Expect(err).NotTo(HaveOccurred())
	defer s.Close()
	userID, tokenID := account(t, s, 100_000, 10_000)
	var rows []store.UsageRow
	for _, at := range []time.Time{first.Add(-time.Hour), first.Add(time.Hour)} {
		rows = append(rows, store.UsageRow{RequestID: at.String(), CreatedAt: at.Unix(), UserID: userID, TokenID: tokenID,
			TokenName: "key", ModelName: "m", PromptTokens: 1, CompletionTokens: 1, BillingPhase: store.PhaseSettled, Quota: 5})
	}
	_, err = s.InsertUsage(ctx, rows)
	g.Expect(err).NotTo(HaveOccurred())
	later := first.AddDate(0, 2, 10)
	clk.SetTime(later)

	dropped := func() float64 {
		return testutil.ToFloat64(metrics.RetentionPartitionsRemoved.WithLabelValues(store.TableUsageLogs))
	}
	before := dropped()
	k := housekeeping.New(s, clock.RealClock{})
	// The cutoff is first: the legacy partition (everything before it) goes,
	// the first month stays.
	k.Retention = store.Retention{Usage: later.Sub(first) - time.Hour}
	k.RetentionInterval = 100 * time.Millisecond
	go func() { _ = k.Start(ctx) }()
	g.Eventually(func() float64 { return dropped() - before }, 5*time.Second, 50*time.Millisecond).Should(Equal(1.0))
	g.Consistently(func() float64 { return dropped() - before }, 300*time.Millisecond, 50*time.Millisecond).Should(Equal(1.0))
}
