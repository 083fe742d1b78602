package assetcopy_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/assetcopy"
	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/platform/netguard"
	"github.com/modelgate/modelgate/gateway/uploads/uploadstest"
)

// memBlobs keeps what was put.
type memBlobs map[string][]byte

func (m memBlobs) Put(_ context.Context, key, _ string, r io.Reader) (int64, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	m[key] = b
	return int64(len(b)), nil
}

func TestCopy(t *testing.T) {
	files := map[string]func(w http.ResponseWriter){
		"/cat.png":   func(w http.ResponseWriter) { _, _ = w.Write(uploadstest.PNG(4, 4)) },
		"/clip.mp4":  func(w http.ResponseWriter) { _, _ = w.Write(uploadstest.MP4("isom", 64)) },
		"/voice.mp3": func(w http.ResponseWriter) { _, _ = w.Write(uploadstest.MP3(4)) },
		"/empty.png": func(http.ResponseWriter) {},
		"/text.png":  func(w http.ResponseWriter) { _, _ = w.Write([]byte("<html>not an image</html>")) },
		"/big.png": func(w http.ResponseWriter) { // no Content-Length: the cap stops the stream
			_, _ = io.Copy(w, uploadstest.Endless(uploadstest.PNG(4, 4), assetcopy.MaxImageBytes+1))
		},
		"/declared.wav": func(w http.ResponseWriter) {
			w.Header().Set("Content-Length", strconv.Itoa(assetcopy.MaxMediaBytes+1))
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f, ok := files[r.URL.Path]; ok {
			f(w)
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	loopback := &netguard.Guard{}
	loopback.AllowLoopback()

	tests := []struct {
		name, typ, path string
		refusal         string // "" = copied
		mime            string
	}{
		{name: "image", typ: "image", path: "/cat.png", mime: "image/png"},
		{name: "video", typ: "video", path: "/clip.mp4", mime: "video/mp4"},
		{name: "audio", typ: "audio", path: "/voice.mp3", mime: "audio/mpeg"},
		{name: "empty", typ: "image", path: "/empty.png", refusal: "the image asset is empty"},
		{name: "typed by bytes, not by name", typ: "image", path: "/text.png", refusal: "is not a supported image (JPEG, PNG, WebP or GIF)"},
		{name: "an image is not a video", typ: "video", path: "/cat.png", refusal: "is not a supported video (MP4, MOV or WebM)"},
		{name: "over 20 MiB while streaming", typ: "image", path: "/big.png", refusal: "the image asset is larger than 20 MiB"},
		{name: "over 100 MiB by its length", typ: "audio", path: "/declared.wav", refusal: "the audio asset is larger than 100 MiB"},
		{name: "not found", typ: "image", path: "/missing.png", refusal: "could not be downloaded: HTTP 404"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			blobs := memBlobs{}
			c := &assetcopy.Copier{Blobs: blobs, Client: loopback.Client(netguard.ClientOptions{})}
			obj, err := c.Copy(context.Background(), tc.typ, srv.URL+tc.path, "k")
			if tc.refusal == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(obj.MimeType).To(Equal(tc.mime))
				g.Expect(blobs).To(HaveKey(obj.Key))
				return
			}
			ref, ok := errors.AsType[*assetcopy.Refusal](err)
			g.Expect(ok).To(BeTrue(), "%v", err)
			g.Expect(ref.Message).To(ContainSubstring(tc.refusal))
			g.Expect(blobs).To(BeEmpty(), "nothing is stored")
		})
	}

	t.Run("the guard refuses loopback without an allow-list entry", func(t *testing.T) {
		g := NewWithT(t)
		c := &assetcopy.Copier{Blobs: memBlobs{}, Client: (&netguard.Guard{}).Client(netguard.ClientOptions{})}
		_, err := c.Copy(context.Background(), "image", srv.URL+"/cat.png", "k")
		ref, ok := errors.AsType[*assetcopy.Refusal](err)
		g.Expect(ok).To(BeTrue(), "%v", err)
		g.Expect(ref.Message).To(Equal("the image asset could not be downloaded: address not allowed: not a public internet address"))
		g.Expect(ref.Message).NotTo(ContainSubstring("127.0.0.1"))
	})

	t.Run("one key per tenant, type and URL", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(assetcopy.Key("t1", "image", "https://a/x")).To(Equal(assetcopy.Key("t1", "image", "https://a/x")))
		g.Expect(assetcopy.Key("t1", "image", "https://a/x")).NotTo(Equal(assetcopy.Key("t2", "image", "https://a/x")))
		g.Expect(bytes.HasPrefix([]byte(assetcopy.Key("t1", "video", "u")), []byte("tenants/t1/review-assets/video-"))).To(BeTrue())
	})
}

// A URL of the gateway's own store (a file uploaded through
// POST /v1/uploads/images) is read from the store, never fetched: the
// client here refuses every address, as the egress guard refuses the
// gateway's own. Its content is checked as a download's is.
func TestCopyReadsOwnLinksFromTheStore(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	own, err := blob.OpenLocal(blob.Config{Dir: t.TempDir(), SigningKey: []byte("assetcopy-test-signing-key"),
		BaseURL: func() string { return "http://10.0.0.1:8080" }})
	g.Expect(err).NotTo(HaveOccurred())
	png := uploadstest.PNG(4, 4)
	_, err = own.Put(ctx, "uploads/7/cat.png", "image/png", bytes.NewReader(png))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = own.Put(ctx, "uploads/7/page.png", "image/png", bytes.NewReader([]byte("<html>not an image</html>")))
	g.Expect(err).NotTo(HaveOccurred())
	link := func(key string) string {
		u, err := own.SignedURL(ctx, key, time.Hour)
		g.Expect(err).NotTo(HaveOccurred())
		return u
	}
	dst := memBlobs{}
	c := &assetcopy.Copier{Blobs: dst, Own: own, Client: (&netguard.Guard{}).Client(netguard.ClientOptions{})}

	obj, err := c.Copy(ctx, "image", link("uploads/7/cat.png"), "tenants/t/review-assets/image-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(obj.MimeType).To(Equal("image/png"))
	g.Expect(dst[obj.Key]).To(Equal(png))

	_, err = c.Copy(ctx, "image", link("uploads/7/page.png"), "tenants/t/review-assets/image-2")
	var r *assetcopy.Refusal
	g.Expect(errors.As(err, &r)).To(BeTrue(), "%v", err)
	g.Expect(r.Message).To(ContainSubstring("not a supported image"))

	_, err = c.Copy(ctx, "image", link("uploads/7/gone.png"), "tenants/t/review-assets/image-3")
	g.Expect(errors.As(err, &r)).To(BeTrue(), "%v", err)
	g.Expect(r.Message).To(ContainSubstring("no longer exists"))

	// Without Own the same link goes to the network, and the guard refuses it.
	c.Own = nil
	_, err = c.Copy(ctx, "image", link("uploads/7/cat.png"), "tenants/t/review-assets/image-4")
	g.Expect(errors.As(err, &r)).To(BeTrue(), "%v", err)
	g.Expect(r.Message).To(ContainSubstring("could not be downloaded"))
}
