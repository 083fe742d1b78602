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
)

func TestRateShare(t *testing.T) {
	for _, c := range []struct {
		limit, granted, want, need, grant int64
	}{
		{limit: 600, granted: 0, want: 60, need: 1, grant: 60},       // room: the chunk asked for
		{limit: 600, granted: 500, want: 60, need: 1, grant: 25},     // near the end: a quarter of the rest beyond need
		{limit: 600, granted: 598, want: 60, need: 1, grant: 1},      // the last units one by one
		{limit: 600, granted: 600, want: 60, need: 1, grant: 0},      // spent
		{limit: 600, granted: 700, want: 60, need: 1, grant: 0},      // a lowered limit: spent, not negative
		{limit: 1000, granted: 900, want: 10, need: 300, grant: 100}, // a token debt larger than the rest takes the rest
		{limit: 1000, granted: 0, want: 0, need: 5, grant: 5},        // want below need: need
		{limit: 10, granted: 0, want: 100, need: 1, grant: 3},        // a chunk larger than the limit: a quarter of it
	} {
		if got := rateShare(c.limit, c.granted, c.want, c.need); got != c.grant {
			t.Errorf("rateShare(limit %d, granted %d, want %d, need %d) = %d, want %d", c.limit, c.granted, c.want, c.need, got, c.grant)
		}
	}
}

// Replicas leasing shares of one window concurrently, each on its own
// connection pool, are granted exactly the limit between them: never more,
// and, since they keep asking, not less.
func TestRateWindowSharesNeverExceedTheLimit(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		clock := newFakeClock(time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC))
		const limit, replicas = 600, 3
		stores := make([]*Store, replicas)
		for i := range replicas {
			stores[i] = openStore(t, dsn, WithClock(clock))
		}
		start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		var total atomic.Int64
		var wg sync.WaitGroup
		for w := range 12 {
			wg.Go(func() {
				s := stores[w%replicas]
				for {
					need := int64(1 + rand.IntN(3))
					gr, err := s.LeaseRateWindow(ctx, "req/key/ns/a", start, limit, 20, need)
					if err != nil {
						t.Errorf("lease: %v", err)
						return
					}
					if gr.Granted == 0 {
						return
					}
					total.Add(gr.Granted)
				}
			})
		}
		wg.Wait()
		g.Expect(total.Load()).To(Equal(int64(limit)))
		leased, err := stores[0].RateWindowsTotal(ctx, "req/key/ns/a", start)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(leased).To(Equal(int64(limit)))

		// Windows are separate per subject and per start.
		gr, err := stores[0].LeaseRateWindow(ctx, "req/key/ns/b", start, limit, 20, 1)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(gr.Granted).To(Equal(int64(20)))
		g.Expect(gr.Replicas).To(Equal(1), "no replica holds quota leases: counted as one")
		gr, err = stores[0].LeaseRateWindow(ctx, "req/key/ns/a", start.Add(time.Minute), limit, 20, 1)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(gr.Granted).To(Equal(int64(20)))

		// Housekeeping deletes the windows that ended.
		n, err := stores[0].DeleteRateWindows(ctx, start.Add(time.Minute))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(int64(2)))
		leased, err = stores[0].RateWindowsTotal(ctx, "req/key/ns/a", start.Add(time.Minute))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(leased).To(Equal(int64(20)), "the current window is kept")
	})
}

// The replica count a grant reports is the number of replicas holding live
// quota leases.
func TestRateWindowCountsReplicas(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		clock := newFakeClock(time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC))
		s := openStore(t, dsn, WithClock(clock))
		a := newAccount(t, s, 1_000_000, 1_000_000, TokenLimits{})
		for i := range 3 {
			l := s.NewLeaser(LeaseConfig{ReplicaID: fmt.Sprint("gw-", i), Chunk: 5_000, TTL: time.Minute})
			h, err := l.Reserve(ctx, "", a.tokenID, a.userID, 1)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(l.Release(ctx, h)).To(Succeed())
		}
		gr, err := s.LeaseRateWindow(ctx, "req/tenant/ns", time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), 60, 6, 1)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(gr.Replicas).To(Equal(3))
		clock.Step(2 * time.Minute) // the leases expired
		gr, err = s.LeaseRateWindow(ctx, "req/tenant/ns", time.Date(2026, 3, 1, 12, 2, 0, 0, time.UTC), 60, 6, 1)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(gr.Replicas).To(Equal(1))
	})
}
