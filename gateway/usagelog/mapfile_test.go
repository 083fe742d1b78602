package usagelog

import (
	"context"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/store"
)

// TestProcessJournalAppendsThroughTheMapping: with DurableProcess a journal
// file is mapped (on Linux) and its appends are copies into the mapping; a
// second handle on the file, as the next process after a SIGKILL has, reads
// every record without the first one having closed, synced or unmapped it.
// A block past the mapping goes through pwrite and reads back too, and an
// erased file reads as empty.
func TestProcessJournalAppendsThroughTheMapping(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "usage.spool.journal-000000")
	j, err := createJournal(path, false)
	g.Expect(err).NotTo(HaveOccurred())
	defer j.close()
	j.activate(7, true)
	if runtime.GOOS == "linux" {
		g.Expect(j.mem).To(HaveLen(fileSize), "a process-durable journal is mapped")
	}

	var want []string
	appendBlock := func(rows []store.UsageRow) {
		j.encode(rows)
		g.Expect(j.write(len(rows))).To(Succeed())
		for _, r := range rows {
			want = append(want, r.RequestID)
		}
	}
	for i := range 100 {
		appendBlock([]store.UsageRow{row(i)})
	}
	// Fill the mapping up to a few bytes short of its end, then append a
	// block that crosses it: written with pwrite, past the mapped bytes.
	long := row(1000)
	long.TokenName = string(make([]byte, 1000))
	for j.off+4000 < fileSize {
		appendBlock([]store.UsageRow{long})
	}
	big := make([]store.UsageRow, 20)
	for i := range big {
		big[i] = row(2000 + i)
	}
	appendBlock(big)
	g.Expect(j.off).To(BeNumerically(">", fileSize), "the last block ends past the mapping")

	var got []string
	other, err := openJournal(path)
	g.Expect(err).NotTo(HaveOccurred())
	rows, end, epoch, err := other.scan(func(r store.UsageRow) error { got = append(got, r.RequestID); return nil })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(other.close()).To(Succeed())
	g.Expect(epoch).To(Equal(uint64(7)))
	g.Expect(rows).To(Equal(int64(len(want))))
	g.Expect(end).To(Equal(j.off))
	g.Expect(got).To(Equal(want))

	g.Expect(j.erase()).To(Succeed())
	other, err = openJournal(path)
	g.Expect(err).NotTo(HaveOccurred())
	defer other.close()
	g.Expect(other.rows).To(BeZero(), "an erased file reads as empty")
}

// TestProcessAckIsDoneOnReturn: with DurableProcess, Submit appends the row
// to the journal itself, so its Ack is done when Submit returns and the row
// is in the journal file; full batches still reach the database without
// the flush interval, and every row of many concurrent writers is stored
// once.
func TestProcessAckIsDoneOnReturn(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := openStore(t, "sqlite://"+filepath.Join(t.TempDir(), "l.db"))
	spool := filepath.Join(t.TempDir(), "usage.spool")
	w := newWriter(t, s, Config{SpoolPath: spool, Durability: DurableProcess, BatchSize: 100, FlushInterval: 1 << 40})

	a, err := w.Submit(ctx, row(0))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(done(a)).To(BeTrue(), "durable when Submit returns")
	// In the journal, or already handed on from it: the writer's first
	// hand-off (of what an earlier run left) may take it.
	g.Expect(spooled(t, spool)[row(0).RequestID] || countRows(t, s) == 1).To(BeTrue(), "the row is in the journal or the ledger")

	const n = 2000
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Go(func() {
			if err := w.Write(ctx, row(i)); err != nil {
				t.Errorf("write %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	// A liveness bound, not a speed: 19 inserts, generous for a loaded
	// machine and the race detector.
	g.Eventually(func() int64 { return countRows(t, s) }).WithTimeout(30*time.Second).Should(BeNumerically(">=", n-100),
		"every full batch is handed to the database without waiting for the flush interval")
	g.Expect(w.Close(ctx)).To(Succeed())
	g.Expect(countRows(t, s)).To(Equal(int64(n)))
}
