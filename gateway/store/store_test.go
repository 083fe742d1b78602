package store

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/billing"
)

func TestOpenRejectsUnknownDSN(t *testing.T) {
	g := NewWithT(t)
	_, err := Open(context.Background(), "mysql://x")
	g.Expect(err).To(MatchError(ContainSubstring("unsupported DSN")))
}

func TestMigrationsApplyTwice(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s1 := openStore(t, dsn)
		id, err := s1.EnsureTenant(ctx, "uid-a", "ns-a", "a")
		g.Expect(err).NotTo(HaveOccurred())
		key := s1.cursorKey
		g.Expect(s1.Close()).To(Succeed())

		s2 := openStore(t, dsn) // second start: nothing to migrate, data kept
		again, err := s2.EnsureTenant(ctx, "uid-a", "ns-a", "a")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again).To(Equal(id))
		g.Expect(s2.cursorKey).To(Equal(key), "replicas share one cursor key")
	})
}

func TestMemorySQLite(t *testing.T) {
	g := NewWithT(t)
	s := openStore(t, "sqlite://:memory:")
	a := newAccount(t, s, 100, 100, TokenLimits{})
	g.Expect(s.Reserve(context.Background(), "r1", a.tokenID, a.userID, 10)).To(Succeed())
}

func TestSequencesGiveIntegerIDs(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		a, err := s.EnsureTenant(ctx, "uid-1", "ns-1", "t1")
		g.Expect(err).NotTo(HaveOccurred())
		b, err := s.EnsureTenant(ctx, "uid-2", "ns-2", "t2")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a).To(BeNumerically(">", 0))
		g.Expect(b).To(Equal(a + 1))
		same, err := s.EnsureTenant(ctx, "uid-1", "ns-1", "renamed")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(same).To(Equal(a))

		t1, err := s.EnsureToken(ctx, TokenSpec{UID: "tok-1", UserID: a, Name: "k1", RemainQuota: 10})
		g.Expect(err).NotTo(HaveOccurred())
		t2, err := s.EnsureToken(ctx, TokenSpec{UID: "tok-2", UserID: a, Name: "k2"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(t2).To(Equal(t1 + 1))

		// Re-ensuring does not reset the balance: initial quota is set once.
		g.Expect(s.Reserve(ctx, "r", t1, a, 0)).To(Succeed())
		again, err := s.EnsureToken(ctx, TokenSpec{UID: "tok-1", UserID: a, Name: "k1", RemainQuota: 999})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again).To(Equal(t1))
		g.Expect(tokenBalance(t, s, t1).Remain).To(Equal(billing.Quota(10)))

		_, err = s.EnsureToken(ctx, TokenSpec{UID: "tok-1", UserID: b, Name: "stolen"})
		g.Expect(err).To(MatchError(ErrConflict))
	})
}

func TestGrantAppliesExactlyOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		other := openStore(t, dsn) // a second replica of the controller
		userID, err := s.EnsureTenant(ctx, "uid", "ns", "t")
		g.Expect(err).NotTo(HaveOccurred())

		var applied atomic.Int32
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				st := s
				if i%2 == 1 {
					st = other
				}
				ok, err := st.ApplyGrant(ctx, userID, "grant-2026-11", 1_000_000)
				if err != nil {
					t.Errorf("apply grant: %v", err)
				}
				if ok {
					applied.Add(1)
				}
			})
		}
		wg.Wait()
		g.Expect(applied.Load()).To(Equal(int32(1)))
		g.Expect(tenantBalance(t, s, userID).Remain).To(Equal(billing.Quota(1_000_000)))

		ok, err := s.ApplyGrant(ctx, userID, "grant-2026-12", 5)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeTrue())
		g.Expect(tenantBalance(t, s, userID).Remain).To(Equal(billing.Quota(1_000_005)))

		_, err = s.ApplyGrant(ctx, 999999, "x", 5)
		g.Expect(err).To(HaveOccurred(), "grant for a missing tenant")
	})
}

func TestSetTenantUnlimitedMissing(t *testing.T) {
	g := NewWithT(t)
	s := openStore(t, "sqlite://:memory:")
	g.Expect(s.SetTenantUnlimited(context.Background(), 42, true)).To(MatchError(ErrNotFound))
	_, err := s.TenantBalance(context.Background(), 42)
	g.Expect(err).To(MatchError(ErrNotFound))
	_, err = s.TokenUsage(context.Background(), 42)
	g.Expect(err).To(MatchError(ErrNotFound))
}

// TestSQLiteWriterCommitsDurably: the writer connection syncs the WAL at
// every commit (synchronous=FULL = 2), because the usage writer erases its
// journal once a batch is committed; readers keep NORMAL (1).
func TestSQLiteWriterCommitsDurably(t *testing.T) {
	g := NewWithT(t)
	s := openStore(t, "sqlite://"+t.TempDir()+"/ledger.db")
	var writer, reader int
	g.Expect(s.db.QueryRow("PRAGMA synchronous").Scan(&writer)).To(Succeed())
	g.Expect(s.rdb.QueryRow("PRAGMA synchronous").Scan(&reader)).To(Succeed())
	g.Expect(writer).To(Equal(2), "writer synchronous")
	g.Expect(reader).To(Equal(1), "reader synchronous")
}
