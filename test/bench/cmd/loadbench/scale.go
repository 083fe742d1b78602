package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/modelgate/modelgate/test/bench"
	"github.com/modelgate/modelgate/test/pgtest"
)

// runScale is the -scale mode: the usage reads and the ingest rate with
// millions rows (in millions) in usage_logs.
func runScale(millions float64, dsn string, tenants int) error {
	if dsn != "" && !strings.HasPrefix(dsn, "postgres") {
		return fmt.Errorf("-scale needs PostgreSQL; -dsn is %q", dsn)
	}
	if dsn == "" {
		srv, err := pgtest.StartServer()
		if err != nil {
			return fmt.Errorf("start PostgreSQL: %w", err)
		}
		defer func() {
			if err := srv.Destroy(); err != nil {
				log.Printf("scale: remove PostgreSQL: %v", err)
			}
		}()
		if dsn, err = srv.CreateDatabase(fmt.Sprintf("scale_%d", os.Getpid())); err != nil {
			return err
		}
	}
	o := bench.ScaleOptions{Rows: int64(millions * 1e6), Days: 90, Tenants: tenants, Keys: 10, Rounds: 3,
		IngestRows: 200_000, IngestBatch: 500, Now: time.Now()}
	log.Printf("scale: %d rows over %d days, %d tenants × %d keys", o.Rows, o.Days, o.Tenants, o.Keys)
	r, err := bench.Scale(context.Background(), dsn, o, log.Writer())
	if err != nil {
		return err
	}
	fmt.Printf("usage_logs rows            %d (seeded with rollups in %s)\n", r.Rows, r.Seed.Round(time.Second))
	fmt.Printf("requests listing, 31 days  p50 %s  max %s\n", r.Requests.P50.Round(10*time.Microsecond), r.Requests.Max.Round(10*time.Microsecond))
	fmt.Printf("summary, 31 days           p50 %s  max %s\n", r.Summary.P50.Round(10*time.Microsecond), r.Summary.Max.Round(10*time.Microsecond))
	fmt.Printf("console usage page (ledger) p50 %s  max %s\n", r.ConsolePage.P50.Round(10*time.Microsecond), r.ConsolePage.Max.Round(10*time.Microsecond))
	fmt.Printf("ingest (batches of %d)    %.0f rows/s\n", o.IngestBatch, r.IngestRowsPerSecond)
	return nil
}
