package media

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func encodePNG(t *testing.T, w, h int, noise bool) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewPCG(1, 2))
	for y := range h {
		for x := range w {
			c := color.NRGBA{R: uint8(x), G: uint8(y), B: 100, A: 255}
			if noise {
				c = color.NRGBA{R: uint8(r.IntN(256)), G: uint8(r.IntN(256)), B: uint8(r.IntN(256)), A: 255}
			}
			img.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func encodeJPEG(t *testing.T, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, image.NewRGBA(image.Rect(0, 0, w, h)), nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func encodeGIF(t *testing.T, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := gif.Encode(&buf, image.NewPaletted(image.Rect(0, 0, w, h), color.Palette{color.Black, color.White}), nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func imageServer(t *testing.T) *httptest.Server {
	t.Helper()
	files := map[string][]byte{
		"/a.png":       encodePNG(t, 100, 50, false),
		"/b.jpg":       encodeJPEG(t, 30, 40),
		"/c.gif":       encodeGIF(t, 20, 20),
		"/text":        []byte("hello, this is not an image at all"),
		"/broken.png":  append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0}, 40)...),
		"/tiny.png":    encodePNG(t, 10, 10, false),
		"/big.png":     encodePNG(t, 200, 200, true), // ~120 KB of noise
		"/wide.png":    encodePNG(t, 400, 100, false),
		"/empty":       {},
		"/square.jpeg": encodeJPEG(t, 64, 64),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		_, _ = w.Write(b)
	})
	mux.HandleFunc("/chunked/big.png", func(w http.ResponseWriter, _ *http.Request) {
		b := files["/big.png"]
		// Flushing before the end forces chunked encoding: no Content-Length.
		_, _ = w.Write(b[:1024])
		w.(http.Flusher).Flush()
		_, _ = w.Write(b[1024:])
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/a.png", http.StatusFound)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestHTTPImageProbe(t *testing.T) {
	srv := imageServer(t)
	p := &HTTPImageProbe{AllowPrivateNetworks: true, MaxBytes: 64 << 10, Timeout: 2 * time.Second}
	bigLen := int64(len(encodePNG(t, 200, 200, true)))
	if bigLen <= 64<<10 {
		t.Fatalf("noise png too small for the test: %d", bigLen)
	}
	cases := []struct {
		path   string
		w, h   int
		format string
		size   int64 // -1: above MaxBytes
		errSub string
	}{
		{path: "/a.png", w: 100, h: 50, format: "png", size: int64(len(encodePNG(t, 100, 50, false)))},
		{path: "/b.jpg", w: 30, h: 40, format: "jpeg", size: int64(len(encodeJPEG(t, 30, 40)))},
		{path: "/redirect", w: 100, h: 50, format: "png", size: int64(len(encodePNG(t, 100, 50, false)))},
		{path: "/c.gif", w: -1, format: "gif", size: int64(len(encodeGIF(t, 20, 20)))},
		{path: "/text", format: "unknown", size: 34},
		{path: "/big.png", w: 200, h: 200, format: "png", size: bigLen},
		{path: "/chunked/big.png", w: 200, h: 200, format: "png", size: -1},
		{path: "/broken.png", errSub: "invalid png image"},
		{path: "/missing.png", errSub: "HTTP 404"},
		{path: "/empty", errSub: "empty"},
		{path: "/slow", errSub: "did not answer in time"},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			g := NewWithT(t)
			if tc.path == "/slow" {
				_, _, _, _, err := (&HTTPImageProbe{AllowPrivateNetworks: true, Timeout: 100 * time.Millisecond}).Probe(context.Background(), srv.URL+tc.path)
				g.Expect(err).To(MatchError(ContainSubstring(tc.errSub)))
				return
			}
			w, h, format, size, err := p.Probe(context.Background(), srv.URL+tc.path)
			if tc.errSub != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.errSub)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			if tc.w >= 0 { // gif dimensions depend on whether a gif decoder is linked in
				g.Expect([]int{w, h}).To(Equal([]int{tc.w, tc.h}))
			}
			g.Expect(format).To(Equal(tc.format))
			if tc.size == -1 {
				g.Expect(size).To(BeNumerically(">", p.MaxBytes))
			} else {
				g.Expect(size).To(Equal(tc.size))
			}
		})
	}
}

func TestHTTPImageProbeRefusesInternalAddresses(t *testing.T) {
	g := NewWithT(t)
	srv := imageServer(t)
	_, _, _, _, err := (&HTTPImageProbe{}).Probe(context.Background(), srv.URL+"/a.png")
	g.Expect(err).To(MatchError(ContainSubstring("address not allowed")))
	_, _, _, _, err = (&HTTPImageProbe{}).Probe(context.Background(), "ftp://example.com/a.png")
	g.Expect(err).To(MatchError(ContainSubstring("not an http or https URL")))
	// A name that resolves inside is refused when dialed, and the client is
	// not told what it resolved to (the message goes into a 400 answer).
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
	_, _, _, _, err = (&HTTPImageProbe{}).Probe(context.Background(), "http://localhost:"+port+"/a.png")
	g.Expect(err).To(MatchError(ErrAddressNotAllowed))
	g.Expect(err).To(MatchError(ContainSubstring("address not allowed")))
	g.Expect(err.Error()).NotTo(ContainSubstring("127.0.0.1"))
	g.Expect(err.Error()).NotTo(ContainSubstring("::1"))
	// The ranges themselves are gateway/platform/netguard's tests.
}

// TestMultiImageWithHTTPProbe runs the multi-image family against real
// images served over HTTP.
func TestMultiImageWithHTTPProbe(t *testing.T) {
	srv := imageServer(t)
	opts := Options{ImageProbe: (&HTTPImageProbe{AllowPrivateNetworks: true, Timeout: 2 * time.Second}).Probe}
	cases := []struct {
		path  string
		msg   string
		param string
	}{
		{path: "/a.png"},
		{path: "/square.jpeg"},
		{path: "/tiny.png", msg: "width and height must be greater than 14 px (got 10x10)"},
		{path: "/wide.png", msg: "width/height ratio must be between 1/3 and 3 (got 400x100)"},
		{path: "/c.gif", msg: "must be a jpeg or png image (got gif)"},
		{path: "/missing.png", msg: "could not be downloaded or read as an image: download failed: HTTP 404"},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			g := NewWithT(t)
			body := `{"prompt":"p","image_urls":["` + srv.URL + `/a.png","` + srv.URL + tc.path + `"]}`
			n, err := Validate(multi, []byte(body), opts)
			if tc.msg == "" {
				g.Expect(err).To(BeNil())
				g.Expect(n.ReferenceImages).To(Equal(2))
				return
			}
			g.Expect(err).NotTo(BeNil())
			g.Expect(err.Param).To(Equal("image_urls[1]"))
			g.Expect(err.Message).To(ContainSubstring(tc.msg))
		})
	}
}

func TestHTTPImageProbeStalledBody(t *testing.T) {
	g := NewWithT(t)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	_, _, _, _, err := (&HTTPImageProbe{AllowPrivateNetworks: true, Timeout: 150 * time.Millisecond}).Probe(context.Background(), srv.URL)
	g.Expect(err).To(MatchError(ContainSubstring("download failed")))
}

// The gateway's own file links are probed in process: no network (the
// host does not even resolve), while every other URL keeps the guard.
func TestHTTPImageProbeServesOwnLinksInProcess(t *testing.T) {
	g := NewWithT(t)
	srv := imageServer(t)
	p := &HTTPImageProbe{LocalPrefix: func() string { return "http://gateway.invalid/" }, Local: srv.Config.Handler,
		MaxBytes: 64 << 10, Timeout: 2 * time.Second}
	ctx := context.Background()
	w, h, format, size, err := p.Probe(ctx, "http://gateway.invalid/a.png")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]any{w, h, format}).To(Equal([]any{100, 50, "png"}))
	g.Expect(size).To(BeNumerically(">", 0))
	_, _, _, _, err = p.Probe(ctx, "http://gateway.invalid/missing.png")
	g.Expect(err).To(MatchError(ContainSubstring("HTTP 404")))
	_, _, _, size, err = p.Probe(ctx, "http://gateway.invalid/chunked/big.png")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(size).To(BeNumerically(">", 64<<10), "a body over the cap is cut off, not read whole")
	_, _, _, _, err = p.Probe(ctx, srv.URL+"/a.png")
	g.Expect(err).To(MatchError(ContainSubstring("address not allowed")), "other URLs still go through the guard")
}
