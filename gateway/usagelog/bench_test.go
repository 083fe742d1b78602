package usagelog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/modelgate/modelgate/gateway/store"
)

// BenchmarkWriter measures rows per second from Write to committed rows,
// with 4×GOMAXPROCS producers that each wait for their row to be durable
// (as requests do), default batch size and queue.
//
//	go test -run '^$' -bench Writer ./gateway/usagelog/
func BenchmarkWriter(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			s := openStore(b, be.dsn(b))
			w := newWriter(b, s, Config{})
			ctx := context.Background()
			start := time.Now()
			b.SetParallelism(4)
			b.ResetTimer()
			next := make(chan int64, 1024)
			go func() {
				defer close(next)
				for i := range int64(b.N) {
					next <- i
				}
			}()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := <-next
					r := store.UsageRow{RequestID: fmt.Sprint("bench-", i), CreatedAt: 1_780_000_000 + i%86400, UserID: 1, TokenID: 1 + i%10,
						TokenName: "k", ModelName: "m", PromptTokens: 100, CompletionTokens: 50, Quota: 1234}
					if err := w.Write(ctx, r); err != nil {
						b.Error(err)
						return
					}
				}
			})
			if err := w.Close(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "rows/s")
		})
	}
}
