package blob

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	. "github.com/onsi/gomega"
)

// TestS3CompatibleStoreByURL runs the store against an in-process
// S3-compatible server (the far side of the network in production): put,
// a presigned URL that serves the bytes, delete.
func TestS3CompatibleStoreByURL(t *testing.T) {
	g := NewWithT(t)
	backend := s3mem.New()
	g.Expect(backend.CreateBucket("assets")).To(Succeed())
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")

	ctx := context.Background()
	s, err := OpenURL(ctx, "s3://assets?endpoint="+srv.URL+"&use_path_style=true&region=us-east-1", "")
	g.Expect(err).NotTo(HaveOccurred())
	defer s.Close()
	g.Expect(s.Local()).To(BeFalse())

	payload := bytes.Repeat([]byte("GIF89a"), 500)
	n, err := s.Put(ctx, "u/1/a.gif", "image/gif", bytes.NewReader(payload))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(int64(len(payload))))

	signed, err := s.SignedURL(ctx, "u/1/a.gif", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(signed).To(HavePrefix(srv.URL + "/assets/u/1/a.gif?"))
	g.Expect(signed).To(ContainSubstring("X-Amz-Signature="))
	resp, err := http.Get(signed)
	g.Expect(err).NotTo(HaveOccurred())
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(200))
	g.Expect(body).To(Equal(payload))

	g.Expect(s.Delete(ctx, "u/1/a.gif")).To(Succeed())
	_, err = s.Open(ctx, "u/1/a.gif")
	g.Expect(err).To(MatchError(ErrNotFound))

	// A public base URL (a public bucket or CDN) replaces signing.
	pub, err := OpenURL(ctx, "s3://assets?endpoint="+srv.URL+"&use_path_style=true&region=us-east-1", "https://cdn.example.com/assets/")
	g.Expect(err).NotTo(HaveOccurred())
	defer pub.Close()
	u, err := pub.SignedURL(ctx, "u/1/b.png", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(u).To(Equal("https://cdn.example.com/assets/u/1/b.png"))

	_, err = OpenURL(ctx, "nonsense", "")
	g.Expect(err).To(HaveOccurred())
	_, err = OpenURL(ctx, "s3://assets?endpoint=x&secret=hunter2&bogus=1", "")
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).NotTo(ContainSubstring("hunter2"), "no credential in errors")
}
