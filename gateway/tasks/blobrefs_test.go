package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

type fakeSigner struct{ fail bool }

func (f fakeSigner) SignedURL(_ context.Context, key string, ttl time.Duration) (string, error) {
	if f.fail {
		return "", errors.New("no signing key")
	}
	return "https://files.example/" + key + "?ttl=" + ttl.String(), nil
}

func TestResolveBlobRefs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	plain := []byte(`{"prompt":"p","reference_images":["https://a.example/1.png"]}`)
	out, err := ResolveBlobRefs(ctx, plain, fakeSigner{fail: true}, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal(plain), "nothing to sign: untouched")

	stored := []byte(`{"prompt":"blob: is fine in a prompt","image_with_roles":[{"url":"blob:tenants/t/review-assets/ab.png","role":"first_frame"}],"reference_images":["blob:tenants/t/review-assets/cd.png"]}`)
	out, err = ResolveBlobRefs(ctx, stored, fakeSigner{}, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	var got map[string]any
	g.Expect(json.Unmarshal(out, &got)).To(Succeed())
	g.Expect(got["image_with_roles"]).To(Equal([]any{map[string]any{"url": "https://files.example/tenants/t/review-assets/ab.png?ttl=1h0m0s", "role": "first_frame"}}))
	g.Expect(got["reference_images"]).To(Equal([]any{"https://files.example/tenants/t/review-assets/cd.png?ttl=1h0m0s"}))
	g.Expect(got["prompt"]).To(Equal("blob: is fine in a prompt"), "only whole values that are references")

	_, err = ResolveBlobRefs(ctx, stored, fakeSigner{fail: true}, time.Hour)
	g.Expect(err).To(MatchError(ContainSubstring("sign stored asset")))
}
