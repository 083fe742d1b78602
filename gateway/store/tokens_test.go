package store

import (
	"context"
	"fmt"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/billing"
)

// tokenRegistration is what EnsureToken stored for a token apart from its
// balance: name and limits.
type tokenRegistration struct {
	name                     string
	unlimited                bool
	dailyLimit, monthlyLimit int64
}

func readRegistration(t *testing.T, s *Store, tokenID int64) tokenRegistration {
	t.Helper()
	var r tokenRegistration
	err := s.db.QueryRowContext(context.Background(), s.q(`SELECT name, unlimited, daily_limit, monthly_limit FROM tokens WHERE token_id = ?`), tokenID).
		Scan(&r.name, &r.unlimited, &r.dailyLimit, &r.monthlyLimit)
	if err != nil {
		t.Fatalf("read token %d: %v", tokenID, err)
	}
	return r
}

// The first registration of a token fixes its starting balance and limits: a
// later one with another quota (an incomplete view, or a spec edited after
// the registration) gets the same ID and changes neither; only the name
// follows.
func TestEnsureTokenKeepsTheFirstRegistration(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		other := openStore(t, dsn) // another writer: the gateway, or a second controller replica
		userID, err := s.EnsureTenant(ctx, "uid-tenant", "ns", "t")
		g.Expect(err).NotTo(HaveOccurred())
		_, err = s.ApplyGrant(ctx, userID, "g", 1_000_000)
		g.Expect(err).NotTo(HaveOccurred())

		first := TokenSpec{UID: "uid-tok", UserID: userID, Name: "ci key", RemainQuota: 7_500,
			TokenLimits: TokenLimits{DailyLimit: 1_000, MonthlyLimit: 20_000}}
		id, err := s.EnsureToken(ctx, first)
		g.Expect(err).NotTo(HaveOccurred())

		// An identical re-registration returns the same ID and changes nothing.
		again, err := other.EnsureToken(ctx, first)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again).To(Equal(id))
		g.Expect(tokenBalance(t, s, id).Remain).To(Equal(billing.Quota(7_500)))

		// A different later registration returns the same ID and keeps the starting balance and limits.
		later := TokenSpec{UID: "uid-tok", UserID: userID, Name: "ci key renamed", RemainQuota: 0,
			TokenLimits: TokenLimits{Unlimited: true}}
		again, err = other.EnsureToken(ctx, later)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again).To(Equal(id))
		b := tokenBalance(t, s, id)
		g.Expect(b.Remain).To(Equal(billing.Quota(7_500)))
		g.Expect(b.Unlimited).To(BeFalse())
		g.Expect(readRegistration(t, s, id)).To(Equal(tokenRegistration{
			name: "ci key renamed", dailyLimit: 1_000, monthlyLimit: 20_000}))

		// After spending, a re-registration does not restore the starting balance.
		g.Expect(s.Reserve(ctx, "r1", id, userID, 500)).To(Succeed())
		g.Expect(s.Settle(ctx, "r1", 500)).To(Succeed())
		again, err = other.EnsureToken(ctx, first)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again).To(Equal(id))
		b = tokenBalance(t, s, id)
		g.Expect(b.Remain).To(Equal(billing.Quota(7_000)))
		g.Expect(b.Used).To(Equal(billing.Quota(500)))

		// The same UID for another tenant is a conflict.
		stranger, err := s.EnsureTenant(ctx, "uid-tenant-2", "ns-2", "t2")
		g.Expect(err).NotTo(HaveOccurred())
		_, err = other.EnsureToken(ctx, TokenSpec{UID: "uid-tok", UserID: stranger, Name: "x", RemainQuota: 7_500})
		g.Expect(err).To(MatchError(ErrConflict))
		g.Expect(tokenBalance(t, s, id).UserID).To(Equal(userID))
	})
}

// Registrations racing from several writers (the controller, the gateway's
// authenticator, POST /v1/tokens on two stores) create one row and all get
// its ID.
func TestEnsureTokenConcurrentRegistrationsGetOneID(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		stores := []*Store{openStore(t, dsn), openStore(t, dsn)}
		userID, err := stores[0].EnsureTenant(ctx, "uid-tenant", "ns", "t")
		g.Expect(err).NotTo(HaveOccurred())
		spec := TokenSpec{UID: "uid-tok", UserID: userID, Name: "k", RemainQuota: 7_500}

		ids := make([]int64, 16)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Go(func() {
				id, err := stores[i%2].EnsureToken(ctx, spec)
				if err != nil {
					t.Errorf("ensure token: %v", err)
				}
				ids[i] = id
			})
		}
		wg.Wait()
		for _, id := range ids {
			g.Expect(id).To(Equal(ids[0]))
		}
		var n int
		g.Expect(stores[0].db.QueryRowContext(ctx, `SELECT COUNT(*) FROM tokens`).Scan(&n)).To(Succeed())
		g.Expect(n).To(Equal(1))
		g.Expect(tokenBalance(t, stores[0], ids[0]).Remain).To(Equal(billing.Quota(7_500)))
	})
}

// A registration that cannot be a token's first is refused and writes nothing.
func TestEnsureTokenRefusesAnIncompleteRegistration(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		userID, err := s.EnsureTenant(ctx, "uid-tenant", "ns", "t")
		g.Expect(err).NotTo(HaveOccurred())
		for i, spec := range []TokenSpec{
			{UserID: userID, Name: "no uid", RemainQuota: 1},
			{UID: "uid-a", Name: "no owner", RemainQuota: 1},
			{UID: "uid-b", UserID: userID, Name: "negative", RemainQuota: -1},
			{UID: "uid-c", UserID: userID, Name: "negative cap", TokenLimits: TokenLimits{DailyLimit: -1}},
		} {
			_, err := s.EnsureToken(ctx, spec)
			g.Expect(err).To(HaveOccurred(), fmt.Sprint("case ", i))
		}
		var n int
		g.Expect(s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM tokens`).Scan(&n)).To(Succeed())
		g.Expect(n).To(BeZero())
	})
}
