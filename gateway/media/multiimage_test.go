package media

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/api/v1alpha1"
)

const multi = v1alpha1.ProfileMultiImage

func urlsJSON(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"https://img.example.com/%d.png"`, i)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func TestMultiImageDefaults(t *testing.T) {
	g := NewWithT(t)
	n, req := accept(t, multi, `{"model":"m-1","prompt":"a cat"}`, Options{})
	g.Expect(req).To(Equal(map[string]any{
		"model":  "m-1",
		"prompt": "a cat",
		"n":      float64(1),
		"size":   "1:1",
		"metadata": map[string]any{
			"resolution":                  "2K",
			"optimize_prompt_options":     map[string]any{"mode": "standard"},
			"sequential_image_generation": "disabled",
			"watermark":                   true,
		},
	}))
	g.Expect(n.Model).To(Equal("m-1"))
	g.Expect(n.N).To(Equal(1))
	g.Expect(n.MaxOutputs).To(Equal(1))
	g.Expect(n.ReferenceImages).To(Equal(0))
	g.Expect(n.Size).To(Equal("1:1"))
	g.Expect(n.Resolution).To(Equal("2K"))
	g.Expect(n.Width).To(Equal(2048))
	g.Expect(n.Height).To(Equal(2048))
	g.Expect(n.ClientBusinessID).To(BeEmpty())
	g.Expect(n.PrivateAssetReview).To(BeFalse())
	g.Expect(n.Duration).To(Equal(0))
}

func TestMultiImageAccepted(t *testing.T) {
	cases := []struct {
		name  string
		body  string
		check func(g Gomega, n *Normalized, req map[string]any)
	}{
		{"n>1 turns sequential generation on with max_images n", `{"prompt":"p","n":4}`, func(g Gomega, n *Normalized, req map[string]any) {
			meta := req["metadata"].(map[string]any)
			g.Expect(meta["sequential_image_generation"]).To(Equal("auto"))
			g.Expect(meta["sequential_image_generation_options"]).To(Equal(map[string]any{"max_images": float64(4)}))
			g.Expect(n.N).To(Equal(4))
			g.Expect(n.MaxOutputs).To(Equal(4))
		}},
		{"n 15 without references", `{"prompt":"p","n":15}`, func(g Gomega, n *Normalized, _ map[string]any) {
			g.Expect(n.N).To(Equal(15))
		}},
		{"n written 2.0 is an integer", `{"prompt":"p","n":2.0}`, func(g Gomega, n *Normalized, _ map[string]any) {
			g.Expect(n.N).To(Equal(2))
		}},
		{"10 references + n 5 = 15", `{"prompt":"p","n":5,"image_urls":` + urlsJSON(10) + `}`, func(g Gomega, n *Normalized, req map[string]any) {
			g.Expect(n.ReferenceImages).To(Equal(10))
			g.Expect(req["image_urls"]).To(HaveLen(10))
		}},
		{"size auto with references", `{"prompt":"p","size":"auto","image_urls":["https://a.example/x.png"]}`, func(g Gomega, n *Normalized, req map[string]any) {
			g.Expect(req["size"]).To(Equal("auto"))
			g.Expect(n.Width).To(Equal(0))
		}},
		{"every ratio: 9:21", `{"prompt":"p","size":"9:21"}`, func(g Gomega, n *Normalized, req map[string]any) {
			g.Expect(req["size"]).To(Equal("9:21"))
		}},
		{"16:9 at 4K has the documented pixels", `{"prompt":"p","size":"16:9","metadata":{"resolution":"4K"}}`, func(g Gomega, n *Normalized, _ map[string]any) {
			g.Expect([]int{n.Width, n.Height}).To(Equal([]int{5404, 3040}))
		}},
		{"enum values ignore case and spaces", `{"prompt":"p","metadata":{"resolution":" 1k ","optimize_prompt_options":{"mode":"FAST"}}}`, func(g Gomega, n *Normalized, req map[string]any) {
			meta := req["metadata"].(map[string]any)
			g.Expect(meta["resolution"]).To(Equal("1K"))
			g.Expect(meta["optimize_prompt_options"]).To(Equal(map[string]any{"mode": "fast"}))
			g.Expect([]int{n.Width, n.Height}).To(Equal([]int{1024, 1024}))
		}},
		{"explicit auto with n 1 and max_images", `{"prompt":"p","image_urls":` + urlsJSON(3) + `,"metadata":{"sequential_image_generation":"auto","sequential_image_generation_options":{"max_images":12}}}`, func(g Gomega, n *Normalized, req map[string]any) {
			meta := req["metadata"].(map[string]any)
			g.Expect(meta["sequential_image_generation_options"]).To(Equal(map[string]any{"max_images": float64(12)}))
			g.Expect(n.N).To(Equal(1))
			g.Expect(n.MaxOutputs).To(Equal(12))
		}},
		{"max_images is dropped when sequential generation is disabled", `{"prompt":"p","metadata":{"sequential_image_generation_options":{"max_images":3}}}`, func(g Gomega, n *Normalized, req map[string]any) {
			meta := req["metadata"].(map[string]any)
			g.Expect(meta).NotTo(HaveKey("sequential_image_generation_options"))
			g.Expect(n.MaxOutputs).To(Equal(1))
		}},
		{"watermark false", `{"prompt":"p","metadata":{"watermark":false}}`, func(g Gomega, _ *Normalized, req map[string]any) {
			g.Expect(req["metadata"].(map[string]any)["watermark"]).To(BeFalse())
		}},
		{"unknown fields are dropped", `{"prompt":"p","style":"x","user":"u","client_business_id":"b","metadata":{"foo":1}}`, func(g Gomega, n *Normalized, req map[string]any) {
			g.Expect(req).NotTo(HaveKey("style"))
			g.Expect(req).NotTo(HaveKey("user"))
			g.Expect(req).NotTo(HaveKey("client_business_id"))
			g.Expect(req["metadata"]).NotTo(HaveKey("foo"))
			g.Expect(n.ClientBusinessID).To(BeEmpty())
		}},
		{"null values count as absent", `{"prompt":"p","n":null,"size":null,"image_urls":null,"metadata":null}`, func(g Gomega, n *Normalized, req map[string]any) {
			g.Expect(n.N).To(Equal(1))
			g.Expect(req["size"]).To(Equal("1:1"))
		}},
		{"URLs are trimmed", `{"prompt":"p","image_urls":["  https://a.example/x.png  "]}`, func(g Gomega, _ *Normalized, req map[string]any) {
			g.Expect(req["image_urls"]).To(Equal([]any{"https://a.example/x.png"}))
		}},
		{"prompt of 1000 multi-byte characters", `{"prompt":"` + strings.Repeat("猫", 1000) + `"}`, func(g Gomega, _ *Normalized, req map[string]any) {
			g.Expect(req["prompt"]).To(HaveLen(3000)) // bytes
		}},
		{"empty image_urls", `{"prompt":"p","image_urls":[]}`, func(g Gomega, n *Normalized, req map[string]any) {
			g.Expect(req).NotTo(HaveKey("image_urls"))
			g.Expect(n.ReferenceImages).To(Equal(0))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, req := accept(t, multi, tc.body, Options{})
			tc.check(NewWithT(t), n, req)
		})
	}
}

func TestMultiImageRejected(t *testing.T) {
	cases := append(commonBodyRejects(), []reject{
		{name: "prompt missing", body: `{}`, param: "prompt", msg: "prompt is required"},
		{name: "prompt blank", body: `{"prompt":"  "}`, param: "prompt", msg: "prompt is required"},
		{name: "prompt not a string", body: `{"prompt":3}`, param: "prompt", msg: "prompt must be a string"},
		{name: "prompt over 1000 characters", body: `{"prompt":"` + strings.Repeat("猫", 1001) + `"}`, param: "prompt", msg: "prompt must be at most 1000 characters (got 1001)"},
		{name: "n as a string", body: `{"prompt":"p","n":"2"}`, param: "n", msg: "n must be a JSON number, not a string"},
		{name: "n zero", body: `{"prompt":"p","n":0}`, param: "n", msg: "n must be between 1 and 15"},
		{name: "n negative", body: `{"prompt":"p","n":-1}`, param: "n", msg: "n must be between 1 and 15"},
		{name: "n 16", body: `{"prompt":"p","n":16}`, param: "n", msg: "n must be between 1 and 15"},
		{name: "n fractional", body: `{"prompt":"p","n":1.5}`, param: "n", msg: "n must be an integer"},
		{name: "n boolean", body: `{"prompt":"p","n":true}`, param: "n", msg: "n must be an integer"},
		{name: "n huge", body: `{"prompt":"p","n":1e300}`, param: "n", msg: "n must be an integer"},
		{name: "references + n over 15", body: `{"prompt":"p","n":6,"image_urls":` + urlsJSON(10) + `}`, param: "n", msg: "must total at most 15 (image_urls has 10, n is 6)"},
		{name: "11 references", body: `{"prompt":"p","image_urls":` + urlsJSON(11) + `}`, param: "image_urls", msg: "image_urls must contain at most 10 image URLs (got 11)"},
		{name: "image_urls not an array", body: `{"prompt":"p","image_urls":"https://a.example/x.png"}`, param: "image_urls", msg: "image_urls must be an array"},
		{name: "image_urls item not a string", body: `{"prompt":"p","image_urls":[1]}`, param: "image_urls[0]", msg: "image_urls[0] must be a string"},
		{name: "data URI", body: `{"prompt":"p","image_urls":["data:image/png;base64,iVBORw0KGgo="]}`, param: "image_urls[0]", msg: "upload the file first"},
		{name: "raw base64", body: `{"prompt":"p","image_urls":["https://a.example/ok.png","iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="]}`, param: "image_urls[1]", msg: "base64 data and data URIs are not accepted"},
		{name: "ftp URL", body: `{"prompt":"p","image_urls":["ftp://a.example/x.png"]}`, param: "image_urls[0]", msg: "must be an http or https URL"},
		{name: "local path", body: `{"prompt":"p","image_urls":["/tmp/cat.png"]}`, param: "image_urls[0]", msg: "local files are not accepted"},
		{name: "file URL", body: `{"prompt":"p","image_urls":["file:///tmp/cat.png"]}`, param: "image_urls[0]", msg: "local files are not accepted"},
		{name: "asset reference", body: `{"prompt":"p","image_urls":["asset://abc"]}`, param: "image_urls[0]", msg: "asset:// references are not accepted"},
		{name: "URL without host", body: `{"prompt":"p","image_urls":["https:///x.png"]}`, param: "image_urls[0]", msg: "with a host"},
		{name: "empty URL", body: `{"prompt":"p","image_urls":[" "]}`, param: "image_urls[0]", msg: "image_urls[0] must not be empty"},
		{name: "URL over 2048 bytes", body: `{"prompt":"p","image_urls":["https://a.example/` + strings.Repeat("a", 2040) + `"]}`, param: "image_urls[0]", msg: "at most 2048 bytes"},
		{name: "size unknown", body: `{"prompt":"p","size":"5:4"}`, param: "size", msg: "size must be one of 1:1, 4:3, 3:4, 16:9, 9:16, 3:2, 2:3, 21:9, 9:21, auto"},
		{name: "size explicit pixels", body: `{"prompt":"p","size":"1024x1024"}`, param: "size", msg: "size must be one of"},
		{name: "size not a string", body: `{"prompt":"p","size":1}`, param: "size", msg: "size must be a string"},
		{name: "size auto without references", body: `{"prompt":"p","size":"auto"}`, param: "size", msg: "size auto matches the reference image ratio and requires image_urls"},
		{name: "metadata not an object", body: `{"prompt":"p","metadata":"x"}`, param: "metadata", msg: "metadata must be an object"},
		{name: "resolution 8K", body: `{"prompt":"p","metadata":{"resolution":"8K"}}`, param: "metadata.resolution", msg: "metadata.resolution must be one of 1K, 2K, 4K"},
		{name: "optimize_prompt_options not an object", body: `{"prompt":"p","metadata":{"optimize_prompt_options":"fast"}}`, param: "metadata.optimize_prompt_options", msg: "must be an object"},
		{name: "optimize mode unknown", body: `{"prompt":"p","metadata":{"optimize_prompt_options":{"mode":"turbo"}}}`, param: "metadata.optimize_prompt_options.mode", msg: "metadata.optimize_prompt_options.mode must be one of standard, fast"},
		{name: "sequential unknown", body: `{"prompt":"p","metadata":{"sequential_image_generation":"on"}}`, param: "metadata.sequential_image_generation", msg: "must be one of disabled, auto"},
		{name: "max_images 0", body: `{"prompt":"p","metadata":{"sequential_image_generation":"auto","sequential_image_generation_options":{"max_images":0}}}`, param: "metadata.sequential_image_generation_options.max_images", msg: "must be between 1 and 15"},
		{name: "max_images 16", body: `{"prompt":"p","metadata":{"sequential_image_generation":"auto","sequential_image_generation_options":{"max_images":16}}}`, param: "metadata.sequential_image_generation_options.max_images", msg: "must be between 1 and 15"},
		{name: "max_images as string", body: `{"prompt":"p","metadata":{"sequential_image_generation_options":{"max_images":"3"}}}`, param: "metadata.sequential_image_generation_options.max_images", msg: "must be a JSON number, not a string"},
		{name: "references + max_images over 15", body: `{"prompt":"p","image_urls":` + urlsJSON(5) + `,"metadata":{"sequential_image_generation":"auto","sequential_image_generation_options":{"max_images":11}}}`, param: "metadata.sequential_image_generation_options.max_images", msg: "must total at most 15"},
		{name: "watermark as string", body: `{"prompt":"p","metadata":{"watermark":"true"}}`, param: "metadata.watermark", msg: "metadata.watermark must be a boolean"},
	}...)
	runRejects(t, multi, cases)
}

// fakeProbe answers from a table keyed by URL.
type probeAnswer struct {
	w, h   int
	format string
	size   int64
	err    error
}

func fakeProbe(answers map[string]probeAnswer, calls *atomic.Int32) ImageProbe {
	return func(_ context.Context, url string) (int, int, string, int64, error) {
		if calls != nil {
			calls.Add(1)
		}
		a, ok := answers[url]
		if !ok {
			return 0, 0, "", 0, errors.New("HTTP 404")
		}
		return a.w, a.h, a.format, a.size, a.err
	}
}

func TestMultiImageReferenceProbe(t *testing.T) {
	ok := probeAnswer{w: 1024, h: 768, format: "jpeg", size: 200_000}
	cases := []struct {
		name   string
		answer probeAnswer
		msg    string // "" = accepted
	}{
		{"jpeg accepted", ok, ""},
		{"png accepted", probeAnswer{w: 15, h: 15, format: "png", size: 100}, ""},
		{"ratio exactly 3", probeAnswer{w: 3000, h: 1000, format: "png", size: 1}, ""},
		{"ratio exactly 1/3", probeAnswer{w: 1000, h: 3000, format: "png", size: 1}, ""},
		{"exactly 10MB", probeAnswer{w: 100, h: 100, format: "png", size: 10 << 20}, ""},
		{"exactly 6000x6000", probeAnswer{w: 6000, h: 6000, format: "png", size: 1}, ""},
		{"gif", probeAnswer{w: 100, h: 100, format: "gif", size: 1}, "image_urls[1] must be a jpeg or png image (got gif)"},
		{"unknown format", probeAnswer{format: ""}, "must be a jpeg or png image (got unknown)"},
		{"too wide", probeAnswer{w: 3001, h: 1000, format: "png", size: 1}, "width/height ratio must be between 1/3 and 3 (got 3001x1000)"},
		{"too tall", probeAnswer{w: 1000, h: 3001, format: "png", size: 1}, "width/height ratio must be between 1/3 and 3"},
		{"14 px wide", probeAnswer{w: 14, h: 20, format: "png", size: 1}, "width and height must be greater than 14 px (got 14x20)"},
		{"14 px high", probeAnswer{w: 20, h: 14, format: "jpeg", size: 1}, "width and height must be greater than 14 px"},
		{"over 10MB", probeAnswer{w: 100, h: 100, format: "png", size: 10<<20 + 1}, "image_urls[1] must be at most 10MB (got 10.0MB)"},
		{"over 6000x6000 pixels", probeAnswer{w: 6001, h: 6000, format: "png", size: 1}, "must be at most 6000x6000 pixels in total (got 6001x6000)"},
		{"download failure", probeAnswer{err: errors.New("HTTP 404")}, "image_urls[1] could not be downloaded or read as an image: HTTP 404"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var calls atomic.Int32
			probe := fakeProbe(map[string]probeAnswer{
				"https://a.example/0.png": ok,
				"https://a.example/1.png": tc.answer,
				"https://a.example/2.png": ok,
			}, &calls)
			body := `{"prompt":"p","image_urls":["https://a.example/0.png","https://a.example/1.png","https://a.example/2.png"]}`
			n, err := Validate(multi, []byte(body), Options{ImageProbe: probe})
			g.Expect(calls.Load()).To(BeEquivalentTo(3))
			if tc.msg == "" {
				g.Expect(err).To(BeNil())
				g.Expect(n.ReferenceImages).To(Equal(3))
				return
			}
			g.Expect(n).To(BeNil())
			g.Expect(err).NotTo(BeNil())
			g.Expect(err.Status).To(Equal(400))
			g.Expect(err.Type).To(Equal("invalid_request"))
			g.Expect(err.Param).To(Equal("image_urls[1]"))
			g.Expect(err.Message).To(ContainSubstring(tc.msg))
		})
	}
}

func TestMultiImageProbeDetails(t *testing.T) {
	g := NewWithT(t)
	// The lowest failing index is reported.
	probe := fakeProbe(map[string]probeAnswer{
		"https://a.example/0.png": {w: 100, h: 100, format: "png"},
		"https://a.example/1.png": {format: "gif"},
		"https://a.example/2.png": {format: "webp"},
	}, nil)
	_, err := Validate(multi, []byte(`{"prompt":"p","image_urls":["https://a.example/2.png","https://a.example/1.png","https://a.example/0.png"]}`), Options{ImageProbe: probe})
	g.Expect(err.Param).To(Equal("image_urls[0]"))
	g.Expect(err.Message).To(ContainSubstring("got webp"))

	// No references: the probe is not called; nil probe: remote checks skipped.
	var calls atomic.Int32
	_, err = Validate(multi, []byte(`{"prompt":"p"}`), Options{ImageProbe: fakeProbe(nil, &calls)})
	g.Expect(err).To(BeNil())
	g.Expect(calls.Load()).To(BeZero())
	_, err = Validate(multi, []byte(`{"prompt":"p","image_urls":["https://a.example/missing.gif"]}`), Options{})
	g.Expect(err).To(BeNil())

	// A panicking probe is a validation error, not a crash.
	panicky := func(context.Context, string) (int, int, string, int64, error) { panic("boom") }
	_, err = Validate(multi, []byte(`{"prompt":"p","image_urls":["https://a.example/x.png"]}`), Options{ImageProbe: panicky})
	g.Expect(err.Param).To(Equal("image_urls[0]"))

	// The probe is not called when the body is already invalid.
	calls.Store(0)
	_, err = Validate(multi, []byte(`{"prompt":"p","n":"2","image_urls":["https://a.example/0.png"]}`), Options{ImageProbe: fakeProbe(nil, &calls)})
	g.Expect(err.Param).To(Equal("n"))
	g.Expect(calls.Load()).To(BeZero())

	// The context reaches the probe.
	type ctxKey struct{}
	ctx := context.WithValue(context.Background(), ctxKey{}, "v")
	seen := ""
	_, err = ValidateContext(ctx, multi, []byte(`{"prompt":"p","image_urls":["https://a.example/0.png"]}`), Options{
		ImageProbe: func(ctx context.Context, _ string) (int, int, string, int64, error) {
			seen, _ = ctx.Value(ctxKey{}).(string)
			return 100, 100, "png", 10, nil
		},
	})
	g.Expect(err).To(BeNil())
	g.Expect(seen).To(Equal("v"))
}

func TestMultiImagePixelSize(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct {
		ratio, res string
		w, h       int
		ok         bool
	}{
		{"1:1", "1K", 1024, 1024, true}, {"16:9", "1K", 1280, 720, true},
		{"1:1", "2K", 2048, 2048, true}, {"16:9", "2K", 2560, 1440, true},
		{"1:1", "4K", 4096, 4096, true}, {"16:9", "4K", 5404, 3040, true},
		{"4:3", "2K", 0, 0, false}, {"auto", "2K", 0, 0, false}, {"1:1", "8K", 0, 0, false},
	} {
		w, h, ok := MultiImagePixelSize(tc.ratio, tc.res)
		g.Expect([]any{w, h, ok}).To(Equal([]any{tc.w, tc.h, tc.ok}), "%s %s", tc.ratio, tc.res)
	}
}

func TestMultiImageProbeDeduplicates(t *testing.T) {
	g := NewWithT(t)
	var calls atomic.Int32
	probe := fakeProbe(map[string]probeAnswer{
		"https://a.example/0.png": {w: 100, h: 100, format: "png"},
		"https://a.example/1.png": {w: 100, h: 100, format: "gif"},
	}, &calls)
	_, err := Validate(multi, []byte(`{"prompt":"p","image_urls":["https://a.example/0.png"," https://a.example/0.png","https://a.example/1.png","https://a.example/1.png"]}`), Options{ImageProbe: probe})
	g.Expect(calls.Load()).To(BeEquivalentTo(2))
	g.Expect(err.Param).To(Equal("image_urls[2]"))
}
