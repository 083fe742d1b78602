package usagelog

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/store"
)

// gate blocks every insert until released, and signals each insert that
// started.
type gate struct {
	s       *store.Store
	entered chan struct{} // one token per insert that started
	release chan struct{}
}

func newGate(s *store.Store) *gate {
	return &gate{s: s, entered: make(chan struct{}, 100), release: make(chan struct{})}
}

func (g *gate) InsertUsage(ctx context.Context, rows []store.UsageRow) (int, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.release
	return g.s.InsertUsage(ctx, rows)
}

func done(a Ack) bool {
	select {
	case <-a.Done():
		return true
	default:
		return false
	}
}

// spooled reads the request IDs in the journal files of path.
func spooled(t *testing.T, path string) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	eachJournal(t, path, func(j *journalFile) bool {
		if _, _, _, err := j.scan(func(r store.UsageRow) error { ids[r.RequestID] = true; return nil }); err != nil {
			t.Fatal(err)
		}
		return true
	})
	return ids
}

// eachJournal opens each journal file of path in turn and calls fn with it
// until fn returns false.
func eachJournal(t *testing.T, path string, fn func(*journalFile) bool) {
	t.Helper()
	paths, err := journalPaths(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		j, err := openJournal(p)
		if err != nil {
			t.Fatal(err)
		}
		more := fn(j)
		_ = j.close()
		if !more {
			return
		}
	}
}

// TestAckWaitsForTheJournal: an ack waits for the journal append and its
// fsync, and the rows that arrive meanwhile go into one next append (group
// commit).
func TestAckWaitsForTheJournal(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := openStore(t, "sqlite://"+filepath.Join(t.TempDir(), "l.db"))
	spool := filepath.Join(t.TempDir(), "usage.spool")
	w := newWriter(t, s, Config{SpoolPath: spool, FlushInterval: 1 << 40}) // no hand-off: rows stay in the journal
	entered, release := make(chan int, 10), make(chan struct{})
	appends := 0
	w.mu.Lock() // the journal goroutine reads beforeAppend after taking mu in commitNext
	w.beforeAppend = func() {
		appends++
		entered <- appends
		<-release
	}
	w.mu.Unlock()

	first, err := w.Submit(ctx, row(0))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(<-entered).To(Equal(1)) // the first append waits there
	const more = 50
	acks := make([]Ack, more)
	for i := range more {
		acks[i], err = w.Submit(ctx, row(1+i))
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(done(first)).To(BeFalse(), "acknowledged before the journal append")
	g.Expect(spooled(t, spool)).To(BeEmpty())

	close(release)
	g.Expect(first.Wait(ctx)).To(Succeed())
	g.Expect(spooled(t, spool)).To(HaveKey(row(0).RequestID), "acknowledged: in the journal")
	for _, a := range acks {
		g.Expect(a.Wait(ctx)).To(Succeed())
	}
	g.Expect(spooled(t, spool)).To(HaveLen(1 + more))
	g.Expect(<-entered).To(Equal(2), "one append for every row that came during the first")
	g.Expect(entered).To(BeEmpty())
	g.Expect(w.Close(ctx)).To(Succeed())
	g.Expect(countRows(t, s)).To(Equal(int64(1 + more)))
}

// TestAckDoesNotWaitForTheDatabase: rows are acknowledged from the journal
// while the database hangs, and inserted once it answers.
func TestAckDoesNotWaitForTheDatabase(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := openStore(t, "sqlite://"+filepath.Join(t.TempDir(), "l.db"))
	gt := newGate(s)
	spool := filepath.Join(t.TempDir(), "usage.spool")
	w := newWriter(t, gt, Config{SpoolPath: spool, FlushInterval: time.Millisecond})
	for i := range 10 {
		g.Expect(w.Write(ctx, row(i))).To(Succeed())
	}
	<-gt.entered // a hand-off is in the database call and stays there
	for i := 10; i < 20; i++ {
		g.Expect(w.Write(ctx, row(i))).To(Succeed(), "acknowledged while the database hangs")
	}
	g.Expect(countRows(t, s)).To(BeZero())
	close(gt.release)
	g.Expect(w.Close(ctx)).To(Succeed())
	g.Expect(countRows(t, s)).To(Equal(int64(20)))
}

// TestAckedRowSurvivesCrash: a row is acknowledged only once it is in the
// journal or the database. The writer is abandoned without Close (a crash:
// nothing in memory is written any more); every acknowledged row is then in
// the ledger or the journal, and the next writer on the same path stores
// them all.
func TestAckedRowSurvivesCrash(t *testing.T) {
	for _, d := range []Durability{DurableDisk, DurableProcess} {
		t.Run(fmt.Sprint("durability=", d), func(t *testing.T) { ackedRowSurvivesCrash(t, d) })
	}
}

// ackedRowSurvivesCrash: with either durability an acknowledged row is in
// the journal file when the writer dies (a process crash keeps what was
// written to the kernel; only DurableDisk also survives the machine's).
func ackedRowSurvivesCrash(t *testing.T, durability Durability) {
	g := NewWithT(t)
	ctx := context.Background()
	s := openStore(t, "sqlite://"+filepath.Join(t.TempDir(), "l.db"))
	spool := filepath.Join(t.TempDir(), "usage.spool")
	// No hand-off on its own: the crashed writer must not move rows after
	// the crash.
	w := newWriter(t, s, Config{SpoolPath: spool, BatchSize: 1 << 20, FlushInterval: 1 << 40, RetryInterval: 1 << 40,
		Durability: durability})
	write := func(from, to int) {
		var wg sync.WaitGroup
		for i := from; i < to; i++ {
			wg.Go(func() {
				if err := w.Write(ctx, row(i)); err != nil {
					t.Errorf("write %d: %v", i, err)
				}
			})
		}
		wg.Wait()
	}
	write(0, 200)
	g.Expect(w.Flush(ctx)).To(Succeed()) // into the database
	write(200, 400)                      // journaled only
	// Crash: w is dropped without Close.

	g.Expect(countRows(t, s)).To(Equal(int64(200)))
	inSpool := spooled(t, spool)
	g.Expect(inSpool).To(HaveLen(200))
	for i := 200; i < 400; i++ {
		g.Expect(inSpool).To(HaveKey(row(i).RequestID), "acknowledged: fsynced to the journal")
	}

	w2 := newWriter(t, s, Config{SpoolPath: spool})
	g.Expect(w2.Close(ctx)).To(Succeed())
	g.Expect(countRows(t, s)).To(Equal(int64(400)), "the restart replays the journal")
}

// TestJournalFailureFallsBackToTheDatabase: when the journal cannot take
// rows the database can; when neither can, the ack reports ErrNotDurable
// instead of leaving the caller waiting, and the row is kept and stored
// once the database is back.
func TestJournalFailureFallsBackToTheDatabase(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := openStore(t, "sqlite://"+filepath.Join(t.TempDir(), "l.db"))
	f := &flaky{s: s}
	w := startReadOnly(t, f, Config{RetryInterval: time.Millisecond})

	g.Expect(w.Write(ctx, row(1))).To(Succeed())
	g.Expect(countRows(t, s)).To(Equal(int64(1)), "acknowledged: committed to the database")

	f.down.Store(true)
	err := w.Write(ctx, row(2))
	g.Expect(errors.Is(err, ErrNotDurable)).To(BeTrue(), "got %v", err)
	g.Expect(countRows(t, s)).To(Equal(int64(1)))
	f.down.Store(false)
	g.Eventually(func() int64 { return countRows(t, s) }).WithTimeout(20*time.Second).Should(Equal(int64(2)), "the row is retried, not dropped")
	g.Expect(w.Close(ctx)).To(Succeed())
}
