package store

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestReviewAssetsAreSharedReusedAndCleaned(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		t0 := time.UnixMilli(1_800_000_000_123)
		url := ReviewAsset{UserID: 7, Channel: "ns/route/a", Type: "image", Key: "https://cdn.example/a.png"}

		// Concurrent requests for the same user, asset and channel share one preparation.
		const n = 16
		var wg sync.WaitGroup
		got := make([]ReviewAsset, n)
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], errs[i] = s.PrepareReviewAsset(ctx, url, t0.Add(time.Duration(i)*time.Millisecond))
			}()
		}
		wg.Wait()
		for i := range n {
			g.Expect(errs[i]).NotTo(HaveOccurred())
			g.Expect(got[i].State).To(Equal(ReviewPending))
			g.Expect(got[i].PreparedAt).To(Equal(got[0].PreparedAt), "one preparation, started once")
		}

		// Decided once: a second decision does not overwrite the first.
		d, err := s.DecideReviewAsset(ctx, url, ReviewPassed, t0.Add(time.Second))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.State).To(Equal(ReviewPassed))
		d, err = s.DecideReviewAsset(ctx, url, ReviewRejected, t0.Add(2*time.Second))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.State).To(Equal(ReviewPassed))
		g.Expect(d.DecidedAt).To(Equal(t0.Add(time.Second)))

		// A later request reuses the passed record and counts as use.
		later := t0.Add(24 * time.Hour)
		r, err := s.PrepareReviewAsset(ctx, url, later)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.State).To(Equal(ReviewPassed))
		g.Expect(r.LastUsedAt).To(Equal(later))

		// The match is per user, channel and type.
		for _, other := range []ReviewAsset{
			{UserID: 8, Channel: url.Channel, Type: url.Type, Key: url.Key},
			{UserID: 7, Channel: "ns/route/b", Type: url.Type, Key: url.Key},
		} {
			o, err := s.PrepareReviewAsset(ctx, other, later)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(o.State).To(Equal(ReviewPending), "%+v", other)
		}

		// A rejected record is prepared again.
		inline := ReviewAsset{UserID: 7, Channel: "ns/route/a", Type: "image", Key: "sha256:abc", BlobKey: "tenants/t/review-assets/abc.png"}
		_, err = s.PrepareReviewAsset(ctx, inline, t0)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = s.DecideReviewAsset(ctx, inline, ReviewRejected, t0.Add(time.Second))
		g.Expect(err).NotTo(HaveOccurred())
		again, err := s.PrepareReviewAsset(ctx, inline, t0.Add(time.Minute))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again.State).To(Equal(ReviewPending))
		g.Expect(again.PreparedAt).To(Equal(t0.Add(time.Minute)))
		g.Expect(again.DecidedAt.IsZero()).To(BeTrue())
		g.Expect(again.BlobKey).To(Equal(inline.BlobKey))

		// Cleanup: only records unused since the cut-off, and not one used meanwhile.
		cut := t0.Add(time.Hour)
		old, err := s.UnusedReviewAssets(ctx, cut, 10)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(old).To(HaveLen(1))
		g.Expect(old[0].Key).To(Equal(inline.Key))
		g.Expect(s.ReviewBlobInUse(ctx, inline.BlobKey)).To(BeTrue())
		_, err = s.PrepareReviewAsset(ctx, inline, cut) // used again before the sweep deletes it
		g.Expect(err).NotTo(HaveOccurred())
		gone, err := s.DeleteReviewAsset(ctx, old[0], cut)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(gone).To(BeFalse())
		gone, err = s.DeleteReviewAsset(ctx, old[0], cut.Add(time.Millisecond))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(gone).To(BeTrue())
		g.Expect(s.ReviewBlobInUse(ctx, inline.BlobKey)).To(BeFalse())
	})
}

// TestReviewAssetUpstreamRef: a library reference is recorded once per
// preparation (the first wins), kept by the decision and by later reuse,
// and forgotten when a rejected record is prepared again.
func TestReviewAssetUpstreamRef(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		t0 := time.UnixMilli(1_800_000_000_000)
		a := ReviewAsset{UserID: 9, Channel: "ns/seedance/ark", Type: "video", Key: "https://cdn.example/clip.mp4"}
		r, err := s.PrepareReviewAsset(ctx, a, t0)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.UpstreamRef).To(BeEmpty())

		r, err = s.RecordReviewRef(ctx, a, "asset://asset-1")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.UpstreamRef).To(Equal("asset://asset-1"))
		r, err = s.RecordReviewRef(ctx, a, "asset://asset-2")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.UpstreamRef).To(Equal("asset://asset-1"), "the first reference recorded is the one every task uses")

		d, err := s.DecideReviewAsset(ctx, a, ReviewPassed, t0.Add(time.Second)) // no reference given: the recorded one stays
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.State).To(Equal(ReviewPassed))
		g.Expect(d.UpstreamRef).To(Equal("asset://asset-1"))
		reused, err := s.PrepareReviewAsset(ctx, a, t0.Add(time.Hour))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(reused.UpstreamRef).To(Equal("asset://asset-1"), "a reused record brings its reference")
		_, err = s.RecordReviewRef(ctx, a, "asset://asset-3")
		g.Expect(err).NotTo(HaveOccurred())
		reused, err = s.PrepareReviewAsset(ctx, a, t0.Add(2*time.Hour))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(reused.UpstreamRef).To(Equal("asset://asset-1"), "a decided record's reference is not replaced")

		b := ReviewAsset{UserID: 9, Channel: a.Channel, Type: "image", Key: "https://cdn.example/reject.png"}
		_, err = s.PrepareReviewAsset(ctx, b, t0)
		g.Expect(err).NotTo(HaveOccurred())
		b.UpstreamRef = "asset://asset-4"
		d, err = s.DecideReviewAsset(ctx, b, ReviewRejected, t0.Add(time.Second))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.UpstreamRef).To(Equal("asset://asset-4"), "a decision records the reference it was about")
		again, err := s.PrepareReviewAsset(ctx, b, t0.Add(time.Minute))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again.State).To(Equal(ReviewPending))
		g.Expect(again.UpstreamRef).To(BeEmpty(), "a new preparation creates a new library asset")

		_, err = s.RecordReviewRef(ctx, a, "")
		g.Expect(err).To(HaveOccurred())
	})
}
