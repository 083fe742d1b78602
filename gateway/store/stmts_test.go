package store

import (
	"context"
	"testing"
)

func TestEachChunkCoversEveryItemOnce(t *testing.T) {
	for n := range 500 {
		next, calls := 0, 0
		err := eachChunk(n, func(lo, hi int) error {
			if lo != next || hi <= lo {
				t.Fatalf("n=%d: chunk [%d,%d) after %d", n, lo, hi, next)
			}
			ok := false
			for _, s := range chunkSizes {
				ok = ok || hi-lo == s
			}
			if !ok {
				t.Fatalf("n=%d: chunk of %d rows", n, hi-lo)
			}
			next, calls = hi, calls+1
			return nil
		})
		if err != nil || next != n {
			t.Fatalf("n=%d: covered %d, err %v", n, next, err)
		}
		if n == 400 && calls != 7 {
			t.Fatalf("400 rows in %d statements, want 7", calls)
		}
	}
}

// TestUsageStatementsArePrepared: after a batch, the usage writer's
// statements run prepared (the fallback to unprepared text is for a
// database that is down).
func TestUsageStatementsArePrepared(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		s := openStore(t, dsn)
		a := newAccount(t, s, 1000, 1000, TokenLimits{})
		if _, err := s.InsertUsage(context.Background(), []UsageRow{{RequestID: NewRequestID(), UserID: a.userID, TokenID: a.tokenID,
			TokenName: "k", ModelName: "m", Quota: 1, Charge: Charge{Apply: true}}}); err != nil {
			t.Fatal(err)
		}
		for _, q := range s.usageQueries() {
			if s.stmts.get(q) == nil {
				t.Fatalf("not prepared: %.80s", q)
			}
		}
	})
}
