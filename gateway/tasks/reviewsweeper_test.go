package tasks

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/store"
)

func TestReviewSweeperDeletesUnusedRecordsAndUnsharedCopies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ledger, err := store.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "ledger.db"))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = ledger.Close() }()
	blobs, err := blob.OpenLocal(blob.Config{Dir: t.TempDir(), SigningKey: []byte("0123456789abcdef"), BaseURL: func() string { return "http://x" }})
	g.Expect(err).NotTo(HaveOccurred())

	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	copyKey := "tenants/t1/review-assets/abc.png"
	_, err = blobs.Put(ctx, copyKey, "image/png", bytes.NewReader([]byte("png")))
	g.Expect(err).NotTo(HaveOccurred())
	prepare := func(channel, key, blobKey string, at time.Time) {
		_, err := ledger.PrepareReviewAsset(ctx, store.ReviewAsset{UserID: 1, Channel: channel, Type: "image", Key: key, BlobKey: blobKey}, at)
		g.Expect(err).NotTo(HaveOccurred())
	}
	prepare("r/a", "sha256:abc", copyKey, t0)                      // unused for 61 days: goes
	prepare("r/b", "sha256:abc", copyKey, t0.Add(30*24*time.Hour)) // same copy, another channel: stays
	prepare("r/a", "https://cdn.example/x.png", "", t0)            // a URL record: goes

	s := &ReviewSweeper{Records: ledger, Blobs: blobs, Clock: clk}
	clk.SetTime(t0.Add(61 * 24 * time.Hour))
	n, err := s.Sweep(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(2))
	r, err := blobs.Open(ctx, copyKey)
	g.Expect(err).NotTo(HaveOccurred(), "the copy is still named by channel r/b")
	_ = r.Close()

	clk.SetTime(t0.Add(91 * 24 * time.Hour))
	n, err = s.Sweep(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1))
	_, err = blobs.Open(ctx, copyKey)
	g.Expect(err).To(HaveOccurred(), "the last record went, so did the copy")

	// A cleaned asset is prepared again on a later request.
	rec, err := ledger.PrepareReviewAsset(ctx, store.ReviewAsset{UserID: 1, Channel: "r/a", Type: "image", Key: "https://cdn.example/x.png"}, clk.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec.State).To(Equal(store.ReviewPending))
}
