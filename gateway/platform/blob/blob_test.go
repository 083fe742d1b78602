package blob

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestSignedLocalURLsServeTheBytesAndRefuseTampering(t *testing.T) {
	g := NewWithT(t)
	var base string
	s, err := OpenLocal(Config{Dir: t.TempDir(), SigningKey: []byte("0123456789abcdef0123"), BaseURL: func() string { return base }})
	g.Expect(err).NotTo(HaveOccurred())
	defer s.Close()
	mux := http.NewServeMux()
	mux.Handle(FilesPath, s.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	base = srv.URL

	ctx := context.Background()
	payload := bytes.Repeat([]byte{0x89, 'P', 'N', 'G'}, 1000)
	n, err := s.Put(ctx, "t1/img.png", "image/png", bytes.NewReader(payload))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(int64(len(payload))))

	signed, err := s.SignedURL(ctx, "t1/img.png", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(signed).To(HavePrefix(srv.URL + FilesPath))

	get := func(u string) (int, []byte, string) {
		resp, err := http.Get(u)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b, resp.Header.Get("Content-Type")
	}
	code, body, ctype := get(signed)
	g.Expect(code).To(Equal(200))
	g.Expect(body).To(Equal(payload))
	g.Expect(ctype).To(Equal("image/png"))

	u, _ := url.Parse(signed)
	q := u.Query()
	for param, value := range map[string]string{"obj": "t1/other.png", "expiry": "9999999999"} {
		tampered := *u
		tq := url.Values{}
		for k, v := range q {
			tq[k] = v
		}
		tq.Set(param, value)
		tampered.RawQuery = tq.Encode()
		code, _, _ = get(tampered.String())
		g.Expect(code).To(Equal(http.StatusForbidden), "altered %s", param)
	}

	expired, err := s.SignedURL(ctx, "t1/img.png", -time.Minute)
	if err == nil {
		code, _, _ = get(expired)
		g.Expect(code).To(Equal(http.StatusForbidden), "expired")
	}

	g.Expect(s.Delete(ctx, "t1/img.png")).To(Succeed())
	g.Expect(s.Delete(ctx, "t1/img.png")).To(Succeed(), "deleting twice is fine")
	code, _, _ = get(signed)
	g.Expect(code).To(Equal(http.StatusNotFound))
}

func TestKeyOfLink(t *testing.T) {
	g := NewWithT(t)
	s, err := OpenLocal(Config{Dir: t.TempDir(), SigningKey: []byte("0123456789abcdef0123"),
		BaseURL: func() string { return "http://gw.test" }})
	g.Expect(err).NotTo(HaveOccurred())
	defer s.Close()
	ctx := context.Background()
	signed, err := s.SignedURL(ctx, "uploads/1/video/v.mp4", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())

	key, ok := s.KeyOfLink(ctx, signed)
	g.Expect(ok).To(BeTrue())
	g.Expect(key).To(Equal("uploads/1/video/v.mp4"))
	u, _ := url.Parse(signed)
	q := u.Query()
	q.Set("signature", "x"+q.Get("signature"))
	u.RawQuery = q.Encode()
	for _, other := range []string{u.String(), "https://cdn.example/v.mp4", "http://gw.test/elsewhere/v.mp4"} {
		_, ok := s.KeyOfLink(ctx, other)
		g.Expect(ok).To(BeFalse(), other)
	}
}
