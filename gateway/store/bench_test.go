package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/modelgate/gateway/billing"
)

// BenchmarkLeaseReserveSettle measures the hot path: reserve from the
// replica's lease and settle, in parallel on one token. Only the rare chunk
// refill touches the database.
//
//	go test -run '^$' -bench LeaseReserveSettle ./gateway/store/
func BenchmarkLeaseReserveSettle(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			ctx := context.Background()
			s := openStore(b, be.dsn(b))
			a := newAccount(b, s, 1<<60, 1<<60, TokenLimits{})
			l := s.NewLeaser(LeaseConfig{ReplicaID: "bench", Chunk: 10_000_000, TTL: time.Hour})
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					h, err := l.Reserve(ctx, "", a.tokenID, a.userID, 100)
					if err != nil {
						b.Error(err)
						return
					}
					if _, err := l.Settle(ctx, h, 90); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(l.Takes()), "takes")
			_ = l.Close(ctx)
		})
	}
}

// BenchmarkDirectReserveSettle is the same through the database (two
// transactions per request), for comparison.
func BenchmarkDirectReserveSettle(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			ctx := context.Background()
			s := openStore(b, be.dsn(b))
			a := newAccount(b, s, 1<<60, 1<<60, TokenLimits{})
			var seq atomic.Int64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := strconv.FormatInt(seq.Add(1), 10)
					if err := s.Reserve(ctx, id, a.tokenID, a.userID, 100); err != nil {
						b.Error(err)
						return
					}
					if err := s.Settle(ctx, id, 90); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkSummarize31Days runs the summary query of a 31-day window over
// MODELGATE_BENCH_USAGE_ROWS rows (default 200000; 10000000 must summarise
// in under a second) of one user spread over 20 tokens, on PostgreSQL.
//
//	MODELGATE_BENCH_USAGE_ROWS=10000000 go test -run '^$' -bench Summarize31Days -benchtime 5x -timeout 30m ./gateway/store/
func BenchmarkSummarize31Days(b *testing.B) {
	rows := 200_000
	if v := os.Getenv("MODELGATE_BENCH_USAGE_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("MODELGATE_BENCH_USAGE_ROWS: %v", err)
		}
		rows = n
	}
	ctx := context.Background()
	s := openStore(b, backends[1].dsn(b))
	const start = 1_780_000_000
	const window = 31 * 86400
	// Generated server-side: loading 10M rows through the driver would
	// dominate the run.
	_, err := s.db.ExecContext(ctx, fmt.Sprintf(`
		INSERT INTO usage_logs (request_id, created_at, user_id, token_id, token_name, model_name, prompt_tokens,
			completion_tokens, total_tokens, billing_phase, quota)
		SELECT 'r' || i, %d + (i * 7919) %% %d, 1, 1 + i %% 20, 'k', 'm', 100, 50, 150, 'settled', 1000 + i %% 97
		FROM generate_series(1::bigint, %d) AS i`, start, window, rows))
	if err != nil {
		b.Fatalf("load: %v", err)
	}
	// Bulk-loaded rows bypass InsertUsage, so build the rollup as the
	// migration's backfill does.
	if _, err := s.db.ExecContext(ctx, `
		INSERT INTO usage_hourly (user_id, hour_start, token_id, request_count, prompt_tokens, completion_tokens, quota)
		SELECT user_id, created_at - created_at % 3600, token_id, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(quota)
		FROM usage_logs GROUP BY 1, 2, 3`); err != nil {
		b.Fatalf("rollup: %v", err)
	}
	if _, err := s.db.ExecContext(ctx, `VACUUM ANALYZE`); err != nil {
		b.Fatalf("vacuum: %v", err)
	}
	b.ResetTimer()
	for b.Loop() {
		p, err := s.SummarizeUsage(ctx, UsageQuery{UserID: 1, Start: start, End: start + window, PageSize: 100})
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Rows) != 20 || p.Rows[0].Quota == billing.Quota(0) {
			b.Fatalf("unexpected summary: %+v", p.Rows)
		}
	}
	b.ReportMetric(float64(rows), "rows")
}

// BenchmarkInsertUsage measures InsertUsage with 1000-row batches (rows over
// 10 tokens and 24 hours), reported per row.
func BenchmarkInsertUsage(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			ctx := context.Background()
			s := openStore(b, be.dsn(b))
			batch := make([]UsageRow, 1000)
			var seq int64
			b.ResetTimer()
			for b.Loop() {
				for i := range batch {
					seq++
					batch[i] = UsageRow{RequestID: "r" + strconv.FormatInt(seq, 10), CreatedAt: 1_780_000_000 + seq%86400, UserID: 1,
						TokenID: 1 + seq%10, TokenName: "k", ModelName: "m", PromptTokens: 100, CompletionTokens: 50, Quota: 1234}
				}
				if _, err := s.InsertUsage(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkInsertUsageCharged is the usage writer's load in the gateway
// under make bench: batches of 5 000 lease-charged rows (the writer's
// BatchSize), each for a random pair of tokens (1 000, or make bench's
// default 10 000) of 10 tenants and 100 models, with request IDs as the
// gateway makes them. Reported per row.
//
//	go test -run '^$' -bench InsertUsageCharged ./gateway/store/
func BenchmarkInsertUsageCharged(b *testing.B) {
	for _, be := range backends {
		for _, tokens := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("%s/tokens=%d", be.name, tokens), func(b *testing.B) {
				benchInsertCharged(b, openStore(b, be.dsn(b)), tokens)
			})
		}
	}
}

func benchInsertCharged(b *testing.B, s *Store, tokens int) {
	const tenants, models, batchRows = 10, 100, 5000
	ctx := context.Background()
	names := make([]string, models)
	for i := range names {
		names[i] = fmt.Sprintf("model-%03d", i)
	}
	l := s.NewLeaser(LeaseConfig{ReplicaID: "bench", Chunk: 500_000, TTL: time.Hour})
	type tok struct{ id, user, lease int64 }
	toks := make([]tok, tokens)
	users := make([]int64, tenants)
	for i := range users {
		a := newAccount(b, s, 1<<50, 0, TokenLimits{})
		users[i] = a.userID
	}
	for i := range toks {
		u := users[i%tenants]
		id, err := s.EnsureToken(ctx, TokenSpec{UID: fmt.Sprint("bench-tok-", i), UserID: u, Name: "k", RemainQuota: 1 << 40})
		if err != nil {
			b.Fatal(err)
		}
		h, err := l.Reserve(ctx, "", id, u, 1)
		if err != nil {
			b.Fatal(err)
		}
		toks[i] = tok{id, u, h.leaseID}
	}
	batch := make([]UsageRow, batchRows)
	rng := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	for b.Loop() {
		for i := range batch {
			t := toks[rng.IntN(tokens)]
			batch[i] = UsageRow{RequestID: NewRequestID(), UserID: t.user, TokenID: t.id, TokenName: "k", ModelName: names[rng.IntN(models)],
				PromptTokens: 12, CompletionTokens: 20, Quota: 100, Charge: Charge{Apply: true, LeaseID: t.lease}}
		}
		if _, err := s.InsertUsage(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "rows/s")
}
