package upstream_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/platform/netguard"
	"github.com/modelgate/modelgate/gateway/upstream"
)

func TestFetchReference(t *testing.T) {
	g := NewWithT(t)
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/img":
			_, _ = w.Write(png) // no Content-Type: sniffed
		case "/text":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("hello"))
		case "/busy":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()

	// Loopback is refused unless the guard allows it.
	_, err := upstream.FetchReference(ctx, upstream.Egress{}.DownloadsOr(), srv.URL+"/img", 1<<20)
	ue, _ := upstream.As(err)
	g.Expect(ue).NotTo(BeNil())
	g.Expect(ue.Class).To(Equal(upstream.Permanent))
	g.Expect(ue.Message).To(ContainSubstring("not allowed"))

	guard := &netguard.Guard{}
	guard.AllowLoopback()
	downloads := upstream.NewEgress(upstream.EgressOptions{Guard: guard}).Downloads
	ref, err := upstream.FetchReference(ctx, downloads, srv.URL+"/img", 1<<20)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ref).To(Equal(upstream.Reference{Data: png, MIMEType: "image/png"}))

	ref, err = upstream.FetchReference(ctx, downloads, "data:image/png;base64,"+base64.StdEncoding.EncodeToString(png), 1<<20)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ref.Data).To(Equal(png))

	for path, class := range map[string]upstream.Class{"/text": upstream.Permanent, "/missing": upstream.Permanent, "/busy": upstream.Failover} {
		_, err := upstream.FetchReference(ctx, downloads, srv.URL+path, 1<<20)
		ue, _ := upstream.As(err)
		g.Expect(ue).NotTo(BeNil(), path)
		g.Expect(ue.Class).To(Equal(class), path)
	}
	_, err = upstream.FetchReference(ctx, downloads, srv.URL+"/img", 8)
	ue, _ = upstream.As(err)
	g.Expect(ue.Message).To(ContainSubstring("larger than 8 bytes"))
	_, err = upstream.FetchReference(ctx, downloads, "file:///etc/passwd", 8)
	g.Expect(err).To(HaveOccurred())
}
