package usagelog

import (
	"path/filepath"
	"runtime"
	"testing"

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
