package media

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/api/v1alpha1"
)

const edit = v1alpha1.ProfileImageEdit

func TestImageEditDefaults(t *testing.T) {
	g := NewWithT(t)
	// Text-to-image: size 16:9.
	n, req := accept(t, edit, `{"model":"d-pro","prompt":"a city"}`, Options{})
	g.Expect(req).To(Equal(map[string]any{
		"model":  "d-pro",
		"prompt": "a city",
		"size":   "16:9",
		"metadata": map[string]any{
			"response_format":   "png",
			"safety_tolerance":  float64(2),
			"prompt_upsampling": false,
		},
	}))
	g.Expect(n.N).To(Equal(1))
	g.Expect(n.MaxOutputs).To(Equal(1))
	g.Expect(n.Size).To(Equal("16:9"))
	g.Expect(n.ReferenceImages).To(BeZero())

	// Editing: size match_input_image.
	n, req = accept(t, edit, `{"prompt":"make it night","image_urls":["https://a.example/x.png"]}`, Options{})
	g.Expect(req["size"]).To(Equal("match_input_image"))
	g.Expect(req["image_urls"]).To(Equal([]any{"https://a.example/x.png"}))
	g.Expect(n.ReferenceImages).To(Equal(1))
}

func TestImageEditAccepted(t *testing.T) {
	cases := []struct {
		name  string
		body  string
		check func(g Gomega, n *Normalized, req map[string]any)
	}{
		{"explicit match_input_image with a reference", `{"prompt":"p","size":"match_input_image","image_urls":["https://a.example/x.png"]}`, func(g Gomega, n *Normalized, _ map[string]any) {
			g.Expect(n.Size).To(Equal("match_input_image"))
		}},
		{"ratio with a reference", `{"prompt":"p","size":"21:9","image_urls":["https://a.example/x.png"]}`, func(g Gomega, n *Normalized, _ map[string]any) {
			g.Expect(n.Size).To(Equal("21:9"))
		}},
		{"9:21 text-to-image", `{"prompt":"p","size":"9:21"}`, func(g Gomega, n *Normalized, _ map[string]any) {
			g.Expect(n.Size).To(Equal("9:21"))
		}},
		{"jpg, tolerance bounds, upsampling", `{"prompt":"p","metadata":{"response_format":"JPG","safety_tolerance":6,"prompt_upsampling":true}}`, func(g Gomega, _ *Normalized, req map[string]any) {
			g.Expect(req["metadata"]).To(Equal(map[string]any{"response_format": "jpg", "safety_tolerance": float64(6), "prompt_upsampling": true}))
		}},
		{"safety_tolerance 0", `{"prompt":"p","metadata":{"safety_tolerance":0}}`, func(g Gomega, _ *Normalized, req map[string]any) {
			g.Expect(req["metadata"].(map[string]any)["safety_tolerance"]).To(Equal(float64(0)))
		}},
		{"n 1 accepted and dropped", `{"prompt":"p","n":1,"seed":3,"client_business_id":"x"}`, func(g Gomega, n *Normalized, req map[string]any) {
			g.Expect(req).NotTo(HaveKey("n"))
			g.Expect(req).NotTo(HaveKey("seed"))
			g.Expect(req).NotTo(HaveKey("client_business_id"))
			g.Expect(n.N).To(Equal(1))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, req := accept(t, edit, tc.body, Options{})
			tc.check(NewWithT(t), n, req)
		})
	}
}

func TestImageEditRejected(t *testing.T) {
	cases := append(commonBodyRejects(), []reject{
		{name: "prompt missing", body: `{"image_urls":["https://a.example/x.png"]}`, param: "prompt", msg: "prompt is required"},
		{name: "two references", body: `{"prompt":"p","image_urls":` + urlsJSON(2) + `}`, param: "image_urls", msg: "image_urls must contain at most 1 image URLs (got 2)"},
		{name: "base64 reference", body: `{"prompt":"p","image_urls":["data:image/png;base64,AAAA"]}`, param: "image_urls[0]", msg: "upload the file first"},
		{name: "match_input_image without a reference", body: `{"prompt":"p","size":"match_input_image"}`, param: "size", msg: "match_input_image is for image editing only and requires an image in image_urls"},
		{name: "size unknown", body: `{"prompt":"p","size":"1024x1024"}`, param: "size", msg: "size must be one of match_input_image, 1:1, 4:3, 3:4, 16:9, 9:16, 3:2, 2:3, 21:9, 9:21"},
		{name: "response_format webp", body: `{"prompt":"p","metadata":{"response_format":"webp"}}`, param: "metadata.response_format", msg: "metadata.response_format must be one of png, jpg"},
		{name: "safety_tolerance 7", body: `{"prompt":"p","metadata":{"safety_tolerance":7}}`, param: "metadata.safety_tolerance", msg: "metadata.safety_tolerance must be between 0 and 6 (got 7)"},
		{name: "safety_tolerance -1", body: `{"prompt":"p","metadata":{"safety_tolerance":-1}}`, param: "metadata.safety_tolerance", msg: "between 0 and 6"},
		{name: "safety_tolerance as string", body: `{"prompt":"p","metadata":{"safety_tolerance":"2"}}`, param: "metadata.safety_tolerance", msg: "must be a JSON number, not a string"},
		{name: "safety_tolerance fractional", body: `{"prompt":"p","metadata":{"safety_tolerance":2.5}}`, param: "metadata.safety_tolerance", msg: "must be an integer"},
		{name: "prompt_upsampling as string", body: `{"prompt":"p","metadata":{"prompt_upsampling":"false"}}`, param: "metadata.prompt_upsampling", msg: "metadata.prompt_upsampling must be a boolean"},
		{name: "n 2", body: `{"prompt":"p","n":2}`, param: "n", msg: "n must be 1 for this model"},
	}...)
	runRejects(t, edit, cases)
}
