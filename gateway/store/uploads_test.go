package store

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestUploadRecordsAreTenantScopedAndExpire(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		a := newAccount(t, s, 0, 0, TokenLimits{})
		b := newAccount(t, s, 0, 0, TokenLimits{})
		t0 := time.Unix(1_800_000_000, 0)

		up := Upload{ID: "upl_a1", UserID: a.userID, TokenID: a.tokenID, BlobKey: "uploads/1/upl_a1.png",
			URL: "http://x/files/uploads/1/upl_a1.png?sig", MimeType: "image/png", Size: 42,
			CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
		g.Expect(s.CreateUpload(ctx, up)).To(Succeed())
		g.Expect(s.CreateUpload(ctx, up)).To(MatchError(ErrConflict), "IDs are unique")

		got, err := s.GetUpload(ctx, a.userID, "upl_a1")
		g.Expect(err).NotTo(HaveOccurred())
		up.Purpose = "generation" // the default
		g.Expect(got).To(Equal(up))

		// Another tenant can neither see it nor delete it.
		_, err = s.GetUpload(ctx, b.userID, "upl_a1")
		g.Expect(errors.Is(err, ErrNotFound)).To(BeTrue(), "%v", err)
		_, err = s.GetUpload(ctx, a.userID, "upl_missing")
		g.Expect(errors.Is(err, ErrNotFound)).To(BeTrue(), "%v", err)
		g.Expect(s.DeleteUpload(ctx, b.userID, "upl_a1")).To(Succeed())
		_, err = s.GetUpload(ctx, a.userID, "upl_a1")
		g.Expect(err).NotTo(HaveOccurred())

		g.Expect(s.CreateUpload(ctx, Upload{ID: "upl_b1", UserID: b.userID, TokenID: b.tokenID, BlobKey: "k/b1",
			MimeType: "audio/wav", Size: 7, Purpose: "voice", CreatedAt: t0, ExpiresAt: t0.Add(2 * time.Hour)})).To(Succeed())
		g.Expect(s.CreateUpload(ctx, Upload{ID: "upl_b2", UserID: b.userID, BlobKey: "k/b2",
			MimeType: "audio/wav", Size: 7, CreatedAt: t0, ExpiresAt: t0.Add(3 * time.Hour)})).To(Succeed())

		ids := func(now time.Time, limit int) []string {
			list, err := s.ListExpiredUploads(ctx, now, limit)
			g.Expect(err).NotTo(HaveOccurred())
			var out []string
			for _, u := range list {
				out = append(out, u.ID)
			}
			return out
		}
		g.Expect(ids(t0.Add(59*time.Minute), 10)).To(BeEmpty())
		g.Expect(ids(t0.Add(time.Hour), 10)).To(Equal([]string{"upl_a1"}), "expiry is inclusive")
		g.Expect(ids(t0.Add(5*time.Hour), 10)).To(Equal([]string{"upl_a1", "upl_b1", "upl_b2"}), "oldest expiry first")
		g.Expect(ids(t0.Add(5*time.Hour), 2)).To(Equal([]string{"upl_a1", "upl_b1"}))

		g.Expect(s.DeleteUpload(ctx, a.userID, "upl_a1")).To(Succeed())
		g.Expect(s.DeleteUpload(ctx, a.userID, "upl_a1")).To(Succeed(), "deleting twice is fine")
		_, err = s.GetUpload(ctx, a.userID, "upl_a1")
		g.Expect(errors.Is(err, ErrNotFound)).To(BeTrue())
		g.Expect(ids(t0.Add(5*time.Hour), 10)).To(Equal([]string{"upl_b1", "upl_b2"}))
	})
}
