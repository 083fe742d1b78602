package store

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestFileRecordsPageWithinOneSecondAndAreTenantScoped(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		t0 := time.Unix(1_800_000_000, 0)
		// Four files in the same second: the ID breaks the tie.
		for _, id := range []string{"file-a", "file-b", "file-c", "file-d"} {
			g.Expect(s.CreateFile(ctx, File{ID: id, UserID: 1, Purpose: "batch", Filename: id + ".jsonl", Bytes: 3,
				BlobKey: "files/1/" + id, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)})).To(Succeed())
		}
		g.Expect(s.CreateFile(ctx, File{ID: "file-a", UserID: 2, Purpose: "batch", BlobKey: "k", CreatedAt: t0})).
			To(MatchError(ErrConflict))

		ids := func(fs []File) (out []string) {
			for _, f := range fs {
				out = append(out, f.ID)
			}
			return out
		}
		page, err := s.ListFiles(ctx, 1, FileFilter{Limit: 2})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ids(page)).To(Equal([]string{"file-d", "file-c", "file-b"}), "one more than the limit")
		page, err = s.ListFiles(ctx, 1, FileFilter{Limit: 2, After: "file-c"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ids(page)).To(Equal([]string{"file-b", "file-a"}))
		page, err = s.ListFiles(ctx, 1, FileFilter{Limit: 10, After: "file-b", Ascending: true})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ids(page)).To(Equal([]string{"file-c", "file-d"}))

		got, err := s.GetFile(ctx, 1, "file-a")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Status).To(Equal("processed"))
		g.Expect(got.ExpiresAt).To(Equal(t0.Add(time.Hour)))
		_, err = s.GetFile(ctx, 2, "file-a")
		g.Expect(err).To(MatchError(ErrNotFound))
		_, err = s.ListFiles(ctx, 2, FileFilter{Limit: 1, After: "file-a"})
		g.Expect(err).To(MatchError(ErrNotFound))
		g.Expect(s.DeleteFile(ctx, 2, "file-a")).To(MatchError(ErrNotFound))

		expired, err := s.ListExpiredFiles(ctx, t0.Add(time.Hour), 10)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(expired).To(HaveLen(4))
		g.Expect(s.DeleteFile(ctx, 1, "file-a")).To(Succeed())
		g.Expect(s.DeleteFile(ctx, 1, "file-a")).To(MatchError(ErrNotFound))
	})
}

// TestFileExpiryMoves: a file's expiry can be set after its record (an
// upload's expires_after that came after the file), only by its tenant, and
// the sweep sees the new one.
func TestFileExpiryMoves(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		t0 := time.Unix(1_800_000_000, 0)
		g.Expect(s.CreateFile(ctx, File{ID: "file-x", UserID: 1, Purpose: "batch", Filename: "x.jsonl", Bytes: 3,
			BlobKey: "files/1/file-x", CreatedAt: t0, ExpiresAt: t0.Add(30 * 24 * time.Hour)})).To(Succeed())
		g.Expect(s.SetFileExpiry(ctx, 2, "file-x", t0.Add(time.Hour))).To(MatchError(ErrNotFound), "another tenant's")
		g.Expect(s.SetFileExpiry(ctx, 1, "file-y", t0.Add(time.Hour))).To(MatchError(ErrNotFound))
		g.Expect(s.SetFileExpiry(ctx, 1, "file-x", t0.Add(2*time.Hour))).To(Succeed())
		got, err := s.GetFile(ctx, 1, "file-x")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.ExpiresAt).To(Equal(t0.Add(2 * time.Hour)))
		expired, err := s.ListExpiredFiles(ctx, t0.Add(2*time.Hour), 10)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(expired).To(HaveLen(1))
	})
}
