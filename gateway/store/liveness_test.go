package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/billing"
)

// TestSmallBalanceLiveness: N concurrent requests on a key whose balance
// covers k < N calls serve at least one and never charge more than the
// balance, whether the key is fresh (no lease anywhere yet) or warm (every
// replica already holds a lease on it), with one replica or three. The
// leasers use the gateway's configuration (1 USD chunks, direct
// reservations below 2 USD).
func TestSmallBalanceLiveness(t *testing.T) {
	const (
		estimate = 495 // max_tokens 64 on a small model
		cost     = 53  // what a call is charged
		balance  = 556 // about ten calls' cost, one reservation
		warmups  = 2   // calls per replica before the burst on a warm key
		burst    = 100
	)
	for _, replicas := range []int{1, 3} {
		for _, warm := range []bool{false, true} {
			t.Run(fmt.Sprintf("replicas=%d/warm=%v", replicas, warm), func(t *testing.T) {
				eachBackend(t, func(t *testing.T, dsn string) {
					g := NewWithT(t)
					ctx := context.Background()
					leasers := make([]*Leaser, replicas)
					for i := range leasers {
						leasers[i] = openStore(t, dsn).NewLeaser(LeaseConfig{ReplicaID: fmt.Sprint("gw-", i),
							Chunk: billing.QuotaPerUSD, DirectBelow: 2 * billing.QuotaPerUSD, TTL: 10 * time.Minute})
					}
					s := openStore(t, dsn)
					start := billing.Quota(balance)
					if warm {
						start += billing.Quota(warmups * replicas * cost)
					}
					a := newAccount(t, s, 10*billing.QuotaPerUSD, start, TokenLimits{})

					var mu sync.Mutex
					var rows []UsageRow
					call := func(l *Leaser, id string) error {
						h, err := l.Reserve(ctx, id, a.tokenID, a.userID, estimate)
						if err != nil {
							return err
						}
						ch, err := l.Settle(ctx, h, cost)
						if err != nil {
							return err
						}
						row := UsageRow{RequestID: id, UserID: a.userID, TokenID: a.tokenID, Quota: cost, Charge: ch}
						if _, err := s.InsertUsage(ctx, []UsageRow{row}); err != nil {
							return err
						}
						mu.Lock()
						rows = append(rows, row)
						mu.Unlock()
						return nil
					}
					if warm {
						for i, l := range leasers {
							for w := range warmups {
								g.Expect(call(l, fmt.Sprintf("warm-%d-%d", i, w))).To(Succeed())
							}
						}
					}
					rows = nil

					var wg sync.WaitGroup
					gate := make(chan struct{})
					for i := range burst {
						wg.Go(func() {
							<-gate
							if err := call(leasers[i%replicas], fmt.Sprint("burst-", i)); err != nil && !isInsufficient(err) {
								t.Errorf("request %d: %v", i, err)
							}
						})
					}
					close(gate)
					wg.Wait()
					for _, l := range leasers {
						g.Expect(l.Close(ctx)).To(Succeed())
					}

					served := len(rows)
					t.Logf("served %d of %d", served, burst)
					g.Expect(served).To(BeNumerically(">=", 1), "a reservation fits the balance")
					g.Expect(served*cost).To(BeNumerically("<=", balance), "never more than the balance covers")
					b := tokenBalance(t, s, a.tokenID)
					g.Expect(b.Remain).To(Equal(billing.Quota(balance-served*cost)), "every served call charged once, the rest back")
				})
			})
		}
	}
}
