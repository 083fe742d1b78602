package usagelog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/test/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

var backends = []struct {
	name string
	dsn  func(t testing.TB) string
}{
	{name: "sqlite", dsn: func(t testing.TB) string { return "sqlite://" + filepath.Join(t.TempDir(), "ledger.db") }},
	{name: "postgres", dsn: pgtest.NewDatabase},
}

func eachBackend(t *testing.T, fn func(t *testing.T, s *store.Store)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, openStore(t, b.dsn(t)))
		})
	}
}

func openStore(t testing.TB, dsn string) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// flaky fails every insert while down is set, like an unreachable database.
type flaky struct {
	s    *store.Store
	down atomic.Bool
	hits atomic.Int64
}

func (f *flaky) InsertUsage(ctx context.Context, rows []store.UsageRow) (int, error) {
	f.hits.Add(1)
	if f.down.Load() {
		return 0, errors.New("dial tcp: connection refused")
	}
	return f.s.InsertUsage(ctx, rows)
}

func row(i int) store.UsageRow {
	return store.UsageRow{RequestID: fmt.Sprintf("req-%06d", i), CreatedAt: 1_780_000_000 + int64(i%1000), UserID: 1, TokenID: 1,
		TokenName: "k", ModelName: "m", PromptTokens: 3, CompletionTokens: 4, Quota: 7}
}

// countRows counts the stored rows and distinct request IDs of user 1 via the
// store's public usage summary.
func countRows(t testing.TB, s *store.Store) int64 {
	t.Helper()
	p, err := s.SummarizeUsage(context.Background(), store.UsageQuery{UserID: 1, Start: 1_780_000_000, End: 1_780_001_000})
	if err != nil {
		t.Fatalf("summary: %v", err)
	}
	if len(p.Rows) == 0 {
		return 0
	}
	return p.Rows[0].RequestCount
}

func newWriter(t testing.TB, ins Inserter, cfg Config) *Writer {
	t.Helper()
	if cfg.SpoolPath == "" {
		cfg.SpoolPath = filepath.Join(t.TempDir(), "usage.spool")
	}
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	w, err := New(ins, cfg)
	if err != nil {
		t.Fatalf("new writer: %v", err)
	}
	return w
}

func TestWriterBatchesEveryRowOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *store.Store) {
		g := NewWithT(t)
		ctx := context.Background()
		// A small queue forces back-pressure on the producers, each of
		// which waits for its row to be durable, as a request does.
		w := newWriter(t, s, Config{QueueSize: 16, BatchSize: 10})
		const n, producers = 10_000, 32
		var wg sync.WaitGroup
		for p := range producers {
			wg.Go(func() {
				for i := p; i < n; i += producers {
					if err := w.Write(ctx, row(i)); err != nil {
						t.Errorf("write: %v", err)
					}
				}
			})
		}
		wg.Wait()
		// Duplicates (a retried request) are stored once.
		g.Expect(w.Write(ctx, row(0))).To(Succeed())
		g.Expect(w.Close(ctx)).To(Succeed())
		g.Expect(w.Write(ctx, row(1))).To(MatchError(ErrClosed))
		g.Expect(w.Written()).To(Equal(int64(n)))
		g.Expect(countRows(t, s)).To(Equal(int64(n)))
		g.Expect(w.QueueDepth()).To(BeZero())
	})
}

func TestWriterCloseDrains(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *store.Store) {
		g := NewWithT(t)
		ctx := context.Background()
		// Rows nobody waits for are committed by Close at the latest.
		w := newWriter(t, s, Config{BatchSize: 100})
		for i := range 777 {
			_, err := w.Submit(ctx, row(i))
			g.Expect(err).NotTo(HaveOccurred())
		}
		g.Expect(w.Close(ctx)).To(Succeed())
		g.Expect(countRows(t, s)).To(Equal(int64(777)))
	})
}

func TestWriterSpoolsWhileDatabaseDown(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *store.Store) {
		g := NewWithT(t)
		ctx := context.Background()
		f := &flaky{s: s}
		w := newWriter(t, f, Config{BatchSize: 50, RetryInterval: 20 * time.Millisecond})

		for i := range 100 {
			g.Expect(w.Write(ctx, row(i))).To(Succeed())
		}
		g.Expect(w.Flush(ctx)).To(Succeed())
		g.Expect(countRows(t, s)).To(Equal(int64(100)))

		f.down.Store(true)
		for i := 100; i < 1100; i++ {
			g.Expect(w.Write(ctx, row(i))).To(Succeed())
		}
		// Rows 50..149 are written a second time: a replayed duplicate.
		for i := 50; i < 150; i++ {
			g.Expect(w.Write(ctx, row(i))).To(Succeed())
		}
		g.Expect(w.Flush(ctx)).To(Succeed())
		g.Expect(w.SpoolRows()).To(Equal(int64(1100)))
		g.Expect(w.SpoolBytes()).To(BeNumerically(">", 0))
		g.Expect(countRows(t, s)).To(Equal(int64(100)))
		hits := f.hits.Load()
		time.Sleep(100 * time.Millisecond) // a few retry intervals
		g.Expect(f.hits.Load()-hits).To(BeNumerically("<=", 10), "a down database is retried per interval, not per batch")

		f.down.Store(false)
		g.Eventually(w.SpoolRows).WithTimeout(30 * time.Second).Should(BeZero()) // 1 100 rows in 22 inserts; generous for a loaded machine
		g.Expect(countRows(t, s)).To(Equal(int64(1100)))
		g.Expect(w.Close(ctx)).To(Succeed())
		g.Expect(countRows(t, s)).To(Equal(int64(1100)))
	})
}

func TestWriterReplaysSpoolOfPreviousRun(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := openStore(t, "sqlite://"+filepath.Join(t.TempDir(), "l.db"))
	spool := filepath.Join(t.TempDir(), "usage.spool")
	f := &flaky{s: s}
	f.down.Store(true)
	w := newWriter(t, f, Config{SpoolPath: spool})
	for i := range 300 {
		g.Expect(w.Write(ctx, row(i))).To(Succeed())
	}
	g.Expect(w.Close(ctx)).To(MatchError(ErrSpooled))

	// A torn last record from a crash mid-append is ignored.
	tearLastRecord(t, spool)

	// The next run appends more rows while the database is still down, then
	// it comes back: the torn tail must not corrupt the new rows.
	f2 := &flaky{s: s}
	f2.down.Store(true)
	w2 := newWriter(t, f2, Config{SpoolPath: spool, RetryInterval: 10 * time.Millisecond})
	for i := 300; i < 400; i++ {
		g.Expect(w2.Write(ctx, row(i))).To(Succeed())
	}
	g.Expect(w2.Flush(ctx)).To(Succeed())
	g.Expect(w2.SpoolRows()).To(Equal(int64(400)))
	f2.down.Store(false)
	g.Expect(w2.Close(ctx)).To(Succeed())
	g.Expect(countRows(t, s)).To(Equal(int64(400)))
	g.Expect(spooled(t, spool)).To(BeEmpty(), "stored files are erased")
	files, err := journalPaths(spool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(files)).To(BeNumerically("<=", keepFree+1), "spare files are bounded")
}

// tearLastRecord writes half a record after the last record of the journal
// file of spool that has rows: what a crash in the middle of a write leaves.
func tearLastRecord(t *testing.T, spool string) {
	t.Helper()
	torn := false
	eachJournal(t, spool, func(j *journalFile) bool {
		if j.rows == 0 {
			return true
		}
		j.encode([]store.UsageRow{row(100000)})
		if _, err := j.f.WriteAt(j.buf.Bytes()[:j.buf.Len()/2], j.off); err != nil {
			t.Fatal(err)
		}
		torn = true
		return false
	})
	if !torn {
		t.Fatal("no journal file holds rows")
	}
}

// A spool of the earlier append-only format (a journal at the spool path

func TestWriterBackPressureHonoursContext(t *testing.T) {
	g := NewWithT(t)
	s := openStore(t, "sqlite://"+filepath.Join(t.TempDir(), "l.db"))
	f := &flaky{s: s}
	f.down.Store(true)
	// Neither the journal (read-only) nor the database takes rows: the
	// journal goroutine retries the first commit and the queue fills.
	w := startReadOnly(t, f, Config{QueueSize: 1, RetryInterval: 5 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var err error
	for i := 0; err == nil; i++ {
		_, err = w.Submit(ctx, row(i))
	}
	g.Expect(err).To(MatchError(context.DeadlineExceeded), "a full queue blocks, it never drops")
	f.down.Store(false)
	g.Expect(w.Close(context.Background())).To(Succeed())
	g.Expect(countRows(t, s)).To(BeNumerically(">=", 2), "every queued row is stored")
}

// startReadOnly starts a writer whose journal refuses every append.
func startReadOnly(t *testing.T, ins Inserter, cfg Config) *Writer {
	t.Helper()
	path := filepath.Join(t.TempDir(), "usage.spool")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ro, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.SpoolPath = path
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.defaults()
	w, err := start(ins, cfg, spoolState{free: []*journalFile{{path: path, f: ro}}})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestWriterSurvivesPostgresRestart stops the real PostgreSQL server while
// rows flow and starts it again: every row arrives exactly once.
func TestWriterSurvivesPostgresRestart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	srv := pgtest.Shared(t)
	s := openStore(t, dsn)
	w := newWriter(t, s, Config{BatchSize: 100, RetryInterval: 50 * time.Millisecond, InsertTimeout: 2 * time.Second})
	const n = 3000
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			if err := w.Write(ctx, row(i)); err != nil {
				t.Errorf("write: %v", err)
			}
			if i%100 == 0 {
				time.Sleep(2 * time.Millisecond)
			}
		}
	})
	time.Sleep(20 * time.Millisecond)
	if err := srv.Stop(); err != nil {
		t.Fatalf("stop postgres: %v", err)
	}
	g.Eventually(w.SpoolRows).WithTimeout(10 * time.Second).Should(BeNumerically(">", 0))
	if err := srv.Start(); err != nil {
		t.Fatalf("start postgres: %v", err)
	}
	wg.Wait()
	g.Eventually(func() int64 { _ = w.Flush(ctx); return w.SpoolRows() }).WithTimeout(20 * time.Second).Should(BeZero())
	g.Expect(w.Close(ctx)).To(Succeed())
	g.Expect(countRows(t, s)).To(Equal(int64(n)))
}

// hanging fails fast, then hangs every insert until its context ends (a
// database that accepts connections but never answers), until healed.
type hanging struct {
	s      *store.Store
	calls  atomic.Int64
	healed atomic.Bool
	once   sync.Once
	wake   chan struct{} // closed on heal: hung calls fail, as a broken connection does
}

func newHanging(s *store.Store) *hanging { return &hanging{s: s, wake: make(chan struct{})} }

func (h *hanging) heal() {
	h.healed.Store(true)
	h.once.Do(func() { close(h.wake) })
}

func (h *hanging) InsertUsage(ctx context.Context, rows []store.UsageRow) (int, error) {
	switch {
	case h.healed.Load():
		return h.s.InsertUsage(ctx, rows)
	case h.calls.Add(1) == 1:
		return 0, errors.New("connection reset")
	}
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-h.wake:
		return 0, errors.New("connection reset")
	}
}

// TestWriterDoesNotStallOnHangingDatabase: while a replay hangs on the
// database, new rows keep flowing into the spool and Write never blocks.
func TestWriterDoesNotStallOnHangingDatabase(t *testing.T) {
	g := NewWithT(t)
	s := openStore(t, "sqlite://"+filepath.Join(t.TempDir(), "l.db"))
	h := newHanging(s)
	w := newWriter(t, h, Config{QueueSize: 10, BatchSize: 5, RetryInterval: 5 * time.Millisecond, InsertTimeout: 10 * time.Second})
	// Well under InsertTimeout, and roomy enough for 1 000 spool appends on
	// a loaded 2-core machine (1 s was not).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := range 1000 {
		g.Expect(w.Write(ctx, row(i))).To(Succeed())
	}
	g.Eventually(w.SpoolRows).WithTimeout(20 * time.Second).Should(Equal(int64(1000)))
	g.Expect(h.calls.Load()).To(BeNumerically(">=", 2), "a replay is hanging")
	h.heal()
	g.Expect(w.Close(context.Background())).To(Succeed())
	g.Expect(countRows(t, s)).To(Equal(int64(1000)))
}
