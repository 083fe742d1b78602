package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/test/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// backend makes a fresh, empty ledger database and returns its DSN.
type backend struct {
	name string
	dsn  func(t testing.TB) string
}

var backends = []backend{
	{name: "sqlite", dsn: func(t testing.TB) string { return "sqlite://" + filepath.Join(t.TempDir(), "ledger.db") }},
	{name: "postgres", dsn: pgtest.NewDatabase},
}

// eachBackend runs fn as a parallel subtest against SQLite and PostgreSQL.
func eachBackend(t *testing.T, fn func(t *testing.T, dsn string)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, b.dsn(t))
		})
	}
}

func openStore(t testing.TB, dsn string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn, opts...)
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// fakeClock is a settable Clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{now: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// account is a tenant with one token, funded by a grant.
type account struct {
	userID, tokenID int64
}

var accountSeq sync.Map

// newAccount creates a tenant funded with tenantQuota and a token holding
// tokenQuota.
func newAccount(t testing.TB, s *Store, tenantQuota, tokenQuota billing.Quota, limits TokenLimits) account {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	n, _ := accountSeq.LoadOrStore(t.Name(), new(int))
	*(n.(*int))++
	tag := fmt.Sprintf("%s-%d", t.Name(), *(n.(*int)))
	userID, err := s.EnsureTenant(ctx, "uid-tenant-"+tag, "ns-"+tag, "tenant")
	g.Expect(err).NotTo(HaveOccurred())
	if tenantQuota != 0 {
		_, err = s.ApplyGrant(ctx, userID, "initial", tenantQuota)
		g.Expect(err).NotTo(HaveOccurred())
	}
	tokenID, err := s.EnsureToken(ctx, TokenSpec{UID: "uid-token-" + tag, UserID: userID, Name: "key", RemainQuota: tokenQuota, TokenLimits: limits})
	g.Expect(err).NotTo(HaveOccurred())
	return account{userID: userID, tokenID: tokenID}
}

func tokenBalance(t testing.TB, s *Store, id int64) TokenBalance {
	t.Helper()
	b, err := s.TokenUsage(context.Background(), id)
	if err != nil {
		t.Fatalf("token usage: %v", err)
	}
	return b
}

func tenantBalance(t testing.TB, s *Store, id int64) Balance {
	t.Helper()
	b, err := s.TenantBalance(context.Background(), id)
	if err != nil {
		t.Fatalf("tenant balance: %v", err)
	}
	return b
}

// usageSum is the sum of the quota of a token's usage rows.
func usageSum(t testing.TB, s *Store, tokenID int64) int64 {
	t.Helper()
	var sum int64
	if err := s.rdb.QueryRow(s.q(`SELECT COALESCE(SUM(quota), 0) FROM usage_logs WHERE token_id = ?`), tokenID).Scan(&sum); err != nil {
		t.Fatalf("usage sum: %v", err)
	}
	return sum
}

func isInsufficient(err error) bool { return errors.Is(err, ErrInsufficientQuota) }
