package ratelimit

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/modelgate/modelgate/gateway/store"
)

func TestChunkSize(t *testing.T) {
	for _, c := range []struct {
		name                  string
		limit, prevUsed, used int64
		elapsed               time.Duration
		chunk                 int64
	}{
		{"nothing seen yet: one", 600, 0, 0, 0, 1},
		{"10/s in this window: two seconds of it", 600, 0, 100, 10 * time.Second, 21},
		{"early in a window the previous one's rate counts", 600, 300, 1, 100 * time.Millisecond, 11},
		{"capped at a tenth of the limit", 600, 0, 600, time.Second, 60},
		{"a tiny limit still leases one", 5, 0, 5, time.Second, 1},
	} {
		if got := chunkSize(c.limit, c.prevUsed, c.used, c.elapsed); got != c.chunk {
			t.Errorf("%s: chunkSize = %d, want %d", c.name, got, c.chunk)
		}
	}
	if got := fallbackShare(600, 3); got != 200 {
		t.Errorf("fallbackShare(600, 3) = %d", got)
	}
	if got := fallbackShare(10, 3); got != 4 {
		t.Errorf("fallbackShare(10, 3) = %d, want 4 (rounded up: a limit never falls to 0)", got)
	}
	if got := fallbackShare(10, 0); got != 10 {
		t.Errorf("fallbackShare(10, 0) = %d", got)
	}
}

func TestRollCarriesTokenDebtOnly(t *testing.T) {
	g := NewWithT(t)
	w0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := &share{}
	s.roll(w0.Add(10*time.Second), 100, true)
	g.Expect(s.window).To(Equal(w0))
	s.allowance, s.used, s.exhausted = 100, 350, true
	s.roll(w0.Add(70*time.Second), 100, true)
	g.Expect(s.window).To(Equal(w0.Add(time.Minute)))
	g.Expect(s.used).To(Equal(int64(100)), "the debt carried, at most one limit's worth")
	g.Expect(s.prevUsed).To(Equal(int64(350)))
	g.Expect(s.allowance).To(BeZero())
	g.Expect(s.exhausted).To(BeFalse())

	r := &share{window: w0, allowance: 5, used: 9}
	r.roll(w0.Add(3*time.Minute), 5, false)
	g.Expect(r.used).To(BeZero(), "requests carry nothing")
	g.Expect(r.prevUsed).To(BeZero(), "a window in between was idle: no rate from before it")
}

func sqliteLedger(t *testing.T, clk store.Clock) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "ledger.db"), store.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Three replicas' limiters on one ledger admit a key's limit between them
// in a window, however the requests are spread, and refuse the rest until
// the window's end.
func TestClusterLimitHoldsAcrossReplicas(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 3, 1, 12, 0, 10, 0, time.UTC))
	ledger := sqliteLedger(t, clk)
	replicas := make([]*Limiter, 3)
	for i := range replicas {
		replicas[i] = &Limiter{Clock: clk, Windows: ledger}
	}
	admitted := 0
	for i := range 3 * 60 {
		l := replicas[i%3]
		ok, wait := l.Allow(Token("ns", "key"), 60)
		l.Wait()
		if ok {
			admitted++
			continue
		}
		g.Expect(wait).To(Equal(50*time.Second), "refused until the window's end")
	}
	g.Expect(admitted).To(Equal(60))
	ok, _ := replicas[0].Allow(Tenant("ns"), 60)
	g.Expect(ok).To(BeTrue(), "the tenant's window is its own")

	clk.SetTime(clk.Now().Add(50 * time.Second))
	ok, _ = replicas[1].Allow(Token("ns", "key"), 60)
	g.Expect(ok).To(BeTrue(), "the next window")
	replicas[1].Wait()
}

// Concurrent requests on three replicas, racing their background and
// foreground leases, are admitted exactly the limit between them.
func TestClusterLimitUnderConcurrency(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 3, 1, 12, 0, 10, 0, time.UTC))
	ledger := sqliteLedger(t, clk)
	replicas := make([]*Limiter, 3)
	for i := range replicas {
		replicas[i] = &Limiter{Clock: clk, Windows: ledger}
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for w := range 30 {
		wg.Go(func() {
			for range 20 {
				if ok, _ := replicas[w%3].Allow(Tenant("ns"), 200); ok {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	for _, l := range replicas {
		l.Wait()
	}
	g.Expect(admitted.Load()).To(Equal(int64(200)))
}

// A token limit admits while the subject is out of debt; a charge beyond
// the window's limit refuses until the window's end and its debt carries
// into the next window.
func TestClusterTokensGoIntoDebt(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC))
	ledger := sqliteLedger(t, clk)
	a, b := &Limiter{Clock: clk, Windows: ledger}, &Limiter{Clock: clk, Windows: ledger}
	ok, _ := a.TokensAvailable(Tenant("t"), 100)
	g.Expect(ok).To(BeTrue())
	a.ChargeTokens(Tenant("t"), 100, 150)
	a.Wait()
	ok, wait := a.TokensAvailable(Tenant("t"), 100)
	g.Expect(ok).To(BeFalse())
	g.Expect(wait).To(Equal(30 * time.Second))
	ok, _ = b.TokensAvailable(Tenant("t"), 100)
	g.Expect(ok).To(BeFalse(), "the other replica finds the window spent")

	clk.SetTime(clk.Now().Add(30 * time.Second))
	ok, _ = a.TokensAvailable(Tenant("t"), 100)
	g.Expect(ok).To(BeTrue(), "50 tokens of debt carried, 50 of the new window left")
	a.Wait()
	ok, _ = b.TokensAvailable(Tenant("t"), 100)
	g.Expect(ok).To(BeTrue())
	b.ChargeTokens(Tenant("t"), 100, 10)
	b.Wait()
	ok, _ = a.TokensAvailable(Tenant("t"), 0)
	g.Expect(ok).To(BeTrue(), "no limit")
}

// When the ledger fails, a replica limits itself to its part of the limit
// (here the only replica it knows of: all of it) for the rest of the window,
// without asking the ledger again.
func TestClusterFallsBackWhenTheLedgerFails(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 3, 1, 12, 0, 45, 0, time.UTC))
	ledger := sqliteLedger(t, clk)
	g.Expect(ledger.Close()).To(Succeed())
	l := &Limiter{Clock: clk, Windows: ledger}
	for range 5 {
		ok, _ := l.Allow(Token("ns", "key"), 5)
		g.Expect(ok).To(BeTrue())
	}
	ok, wait := l.Allow(Token("ns", "key"), 5)
	g.Expect(ok).To(BeFalse())
	g.Expect(wait).To(Equal(15 * time.Second))
	l.Wait()
	g.Expect(l.Leases()).To(Equal(int64(1)), "one failed lease, then the local share")
}

// BenchmarkClusterAllow is the admission hot path of a cluster-wide limit:
// requests are admitted from the replica's share in memory, and the ledger
// (a real SQLite one here) is asked once per chunk. leases/op reports it.
func BenchmarkClusterAllow(b *testing.B) {
	ledger, err := store.Open(context.Background(), "sqlite://"+filepath.Join(b.TempDir(), "ledger.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ledger.Close() }()
	l := &Limiter{Clock: clock.RealClock{}, Windows: ledger}
	key := Token("ns", "key")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if ok, _ := l.Allow(key, 1<<30); !ok {
			b.Fatal("refused")
		}
	}
	b.StopTimer()
	l.Wait()
	b.ReportMetric(float64(l.Leases())/float64(b.N), "leases/op")
}
