package wire

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/platform/blob"
)

// An uploaded reference image (a signed link to this gateway, on an address
// the network guard refuses) is probed in process; a tampered link is not.
func TestImageProbeReadsOwnLinksInProcess(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	blobs, err := blob.OpenLocal(blob.Config{Dir: t.TempDir(), SigningKey: []byte("0123456789abcdef0123"),
		BaseURL: func() string { return "http://127.0.0.1:1" }}) // nothing listens there
	g.Expect(err).NotTo(HaveOccurred())
	var buf bytes.Buffer
	g.Expect(png.Encode(&buf, image.NewNRGBA(image.Rect(0, 0, 120, 90)))).To(Succeed())
	_, err = blobs.Put(ctx, "uploads/1/ref.png", "image/png", bytes.NewReader(buf.Bytes()))
	g.Expect(err).NotTo(HaveOccurred())
	link, err := blobs.SignedURL(ctx, "uploads/1/ref.png", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())

	probe := imageProbe(blobs, nil, false)
	w, h, format, size, err := probe(ctx, link)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]any{w, h, format, size}).To(Equal([]any{120, 90, "png", int64(buf.Len())}))

	_, _, _, _, err = probe(ctx, strings.Replace(link, "signature=", "signature=x", 1))
	g.Expect(err).To(MatchError(ContainSubstring("HTTP 403")))
	_, _, _, _, err = probe(ctx, "http://127.0.0.1:1/elsewhere.png")
	g.Expect(err).To(MatchError(ContainSubstring("address not allowed")))

	g.Expect(imageProbe(blobs, nil, true)).To(BeNil())
}
