package media

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/api/v1alpha1"
)

const single = v1alpha1.ProfileSingleImage

func TestSingleImageDefaults(t *testing.T) {
	g := NewWithT(t)
	n, req := accept(t, single, `{"model":"c-image","prompt":"a dog"}`, Options{})
	g.Expect(req).To(Equal(map[string]any{
		"model":      "c-image",
		"prompt":     "a dog",
		"n":          float64(1),
		"resolution": "1K",
		"metadata": map[string]any{
			"prompt_extend":      true,
			"prompt_extend_mode": "direct",
			"watermark":          false,
		},
	}))
	g.Expect(n.N).To(Equal(1))
	g.Expect(n.MaxOutputs).To(Equal(1))
	g.Expect(n.Size).To(BeEmpty()) // the model chooses
	g.Expect(n.Width).To(BeZero())
	g.Expect(n.Resolution).To(Equal("1K"))
	g.Expect(n.ReferenceImages).To(BeZero())
}

func TestSingleImageAccepted(t *testing.T) {
	cases := []struct {
		name  string
		body  string
		check func(g Gomega, n *Normalized, req map[string]any)
	}{
		{"n 1 explicit", `{"prompt":"p","n":1}`, func(g Gomega, n *Normalized, _ map[string]any) { g.Expect(n.N).To(Equal(1)) }},
		{"ratio at default 1K", `{"prompt":"p","size":"16:9"}`, func(g Gomega, n *Normalized, req map[string]any) {
			g.Expect(req["size"]).To(Equal("16:9"))
			g.Expect([]int{n.Width, n.Height}).To(Equal([]int{1280, 720}))
		}},
		{"ratio at 2K", `{"prompt":"p","size":"3:2","resolution":"2K"}`, func(g Gomega, n *Normalized, req map[string]any) {
			g.Expect(req["resolution"]).To(Equal("2K"))
			g.Expect([]int{n.Width, n.Height}).To(Equal([]int{1728, 1152}))
		}},
		{"metadata.resolution accepted", `{"prompt":"p","size":"1:1","metadata":{"resolution":"2k"}}`, func(g Gomega, n *Normalized, req map[string]any) {
			g.Expect(req["resolution"]).To(Equal("2K"))
			g.Expect(req["metadata"]).NotTo(HaveKey("resolution"))
			g.Expect(n.Resolution).To(Equal("2K"))
			g.Expect(n.Width).To(Equal(2048))
		}},
		{"both resolutions agreeing", `{"prompt":"p","resolution":"2K","metadata":{"resolution":"2K"}}`, func(g Gomega, n *Normalized, _ map[string]any) {
			g.Expect(n.Resolution).To(Equal("2K"))
		}},
		{"explicit WIDTH*HEIGHT", `{"prompt":"p","size":"1024*768"}`, func(g Gomega, n *Normalized, req map[string]any) {
			g.Expect(req["size"]).To(Equal("1024x768"))
			g.Expect([]int{n.Width, n.Height}).To(Equal([]int{1024, 768}))
		}},
		{"explicit WIDTHxHEIGHT at the minimum area", `{"prompt":"p","size":"512x512"}`, func(g Gomega, n *Normalized, _ map[string]any) {
			g.Expect(n.Width * n.Height).To(Equal(512 * 512))
		}},
		{"explicit at the maximum area", `{"prompt":"p","size":"2048X2048"}`, func(g Gomega, n *Normalized, req map[string]any) {
			g.Expect(req["size"]).To(Equal("2048x2048"))
		}},
		{"explicit aspect exactly 8:1", `{"prompt":"p","size":"2048*256"}`, func(g Gomega, n *Normalized, _ map[string]any) {
			g.Expect(n.Width).To(Equal(2048))
		}},
		{"explicit aspect exactly 1:8", `{"prompt":"p","size":"256x2048"}`, func(g Gomega, n *Normalized, _ map[string]any) {
			g.Expect(n.Height).To(Equal(2048))
		}},
		{"3 references", `{"prompt":"p","image_urls":` + urlsJSON(3) + `}`, func(g Gomega, n *Normalized, req map[string]any) {
			g.Expect(n.ReferenceImages).To(Equal(3))
			g.Expect(req["image_urls"]).To(HaveLen(3))
		}},
		{"agent kept for text-to-image", `{"prompt":"p","metadata":{"prompt_extend_mode":"agent"}}`, func(g Gomega, _ *Normalized, req map[string]any) {
			g.Expect(req["metadata"].(map[string]any)["prompt_extend_mode"]).To(Equal("agent"))
		}},
		{"agent changed to direct with references", `{"prompt":"p","image_urls":["https://a.example/x.png"],"metadata":{"prompt_extend_mode":"agent"}}`, func(g Gomega, _ *Normalized, req map[string]any) {
			g.Expect(req["metadata"].(map[string]any)["prompt_extend_mode"]).To(Equal("direct"))
		}},
		{"every metadata field", `{"prompt":"p","metadata":{"prompt_extend":false,"negative_prompt":"blur","seed":42,"watermark":true,"junk":1}}`, func(g Gomega, _ *Normalized, req map[string]any) {
			g.Expect(req["metadata"]).To(Equal(map[string]any{
				"prompt_extend": false, "prompt_extend_mode": "direct", "negative_prompt": "blur", "seed": float64(42), "watermark": true,
			}))
		}},
		{"client_business_id", `{"prompt":"p","client_business_id":" order-1 "}`, func(g Gomega, n *Normalized, req map[string]any) {
			g.Expect(n.ClientBusinessID).To(Equal("order-1"))
			g.Expect(req["client_business_id"]).To(Equal("order-1"))
		}},
		{"client_business_id of 128 characters", `{"prompt":"p","client_business_id":"` + strings.Repeat("é", 128) + `"}`, func(g Gomega, n *Normalized, _ map[string]any) {
			g.Expect(n.ClientBusinessID).To(HaveLen(256))
		}},
		{"empty client_business_id is absent", `{"prompt":"p","client_business_id":""}`, func(g Gomega, n *Normalized, req map[string]any) {
			g.Expect(n.ClientBusinessID).To(BeEmpty())
			g.Expect(req).NotTo(HaveKey("client_business_id"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, req := accept(t, single, tc.body, Options{})
			tc.check(NewWithT(t), n, req)
		})
	}
}

func TestSingleImageRejected(t *testing.T) {
	cases := append(commonBodyRejects(), []reject{
		{name: "prompt missing", body: `{"n":1}`, param: "prompt", msg: "prompt is required"},
		{name: "prompt empty", body: `{"prompt":""}`, param: "prompt", msg: "prompt is required"},
		{name: "n 2", body: `{"prompt":"p","n":2}`, param: "n", msg: "n must be 1 for this model"},
		{name: "n 0", body: `{"prompt":"p","n":0}`, param: "n", msg: "n must be 1"},
		{name: "n as a string", body: `{"prompt":"p","n":"1"}`, param: "n", msg: "n must be a JSON number, not a string"},
		{name: "4 references", body: `{"prompt":"p","image_urls":` + urlsJSON(4) + `}`, param: "image_urls", msg: "image_urls must contain at most 3 image URLs (got 4)"},
		{name: "data URI reference", body: `{"prompt":"p","image_urls":["data:image/jpeg;base64,/9j/4AAQ"]}`, param: "image_urls[0]", msg: "upload the file first"},
		{name: "size unknown ratio", body: `{"prompt":"p","size":"21:9"}`, param: "size", msg: "size must be one of 1:1, 4:3, 3:4, 16:9, 9:16, 3:2, 2:3, or explicit pixels as WIDTH*HEIGHT or WIDTHxHEIGHT"},
		{name: "size garbage", body: `{"prompt":"p","size":"big"}`, param: "size", msg: "size must be one of"},
		{name: "size with zero side", body: `{"prompt":"p","size":"0x1024"}`, param: "size", msg: "size must be one of"},
		{name: "size negative", body: `{"prompt":"p","size":"-512x512"}`, param: "size", msg: "size must be one of"},
		{name: "size area too small", body: `{"prompt":"p","size":"511x512"}`, param: "size", msg: "pixel area must be between 512*512 (262144) and 2048*2048 (4194304)"},
		{name: "size area too large", body: `{"prompt":"p","size":"2049*2048"}`, param: "size", msg: "pixel area must be between 512*512"},
		{name: "size huge sides", body: `{"prompt":"p","size":"9999999x9999999"}`, param: "size", msg: "pixel area must be between"},
		{name: "size wider than 8:1", body: `{"prompt":"p","size":"2049x256"}`, param: "size", msg: "aspect ratio outside 1:8 to 8:1"},
		{name: "size taller than 1:8", body: `{"prompt":"p","size":"256*2049"}`, param: "size", msg: "aspect ratio outside 1:8 to 8:1"},
		{name: "size not a string", body: `{"prompt":"p","size":1024}`, param: "size", msg: "size must be a string"},
		{name: "resolution 4K", body: `{"prompt":"p","resolution":"4K"}`, param: "resolution", msg: "resolution must be one of 1K, 2K"},
		{name: "metadata.resolution 4K", body: `{"prompt":"p","metadata":{"resolution":"4K"}}`, param: "metadata.resolution", msg: "metadata.resolution must be one of 1K, 2K"},
		{name: "resolutions disagree", body: `{"prompt":"p","resolution":"1K","metadata":{"resolution":"2K"}}`, param: "resolution", msg: "resolution (1K) and metadata.resolution (2K) disagree"},
		{name: "prompt_extend as string", body: `{"prompt":"p","metadata":{"prompt_extend":"yes"}}`, param: "metadata.prompt_extend", msg: "metadata.prompt_extend must be a boolean"},
		{name: "prompt_extend_mode unknown", body: `{"prompt":"p","metadata":{"prompt_extend_mode":"smart"}}`, param: "metadata.prompt_extend_mode", msg: "must be one of direct, agent"},
		{name: "negative_prompt not a string", body: `{"prompt":"p","metadata":{"negative_prompt":["x"]}}`, param: "metadata.negative_prompt", msg: "metadata.negative_prompt must be a string"},
		{name: "seed fractional", body: `{"prompt":"p","metadata":{"seed":1.5}}`, param: "metadata.seed", msg: "metadata.seed must be an integer"},
		{name: "seed as string", body: `{"prompt":"p","metadata":{"seed":"42"}}`, param: "metadata.seed", msg: "metadata.seed must be a JSON number, not a string"},
		{name: "watermark as number", body: `{"prompt":"p","metadata":{"watermark":1}}`, param: "metadata.watermark", msg: "metadata.watermark must be a boolean"},
		{name: "client_business_id over 128 characters", body: `{"prompt":"p","client_business_id":"` + strings.Repeat("a", 129) + `"}`, param: "client_business_id", msg: "client_business_id must be at most 128 characters (got 129)"},
		{name: "client_business_id not a string", body: `{"prompt":"p","client_business_id":7}`, param: "client_business_id", msg: "client_business_id must be a string"},
		{name: "client_business_id with control characters", body: `{"prompt":"p","client_business_id":"a\nb"}`, param: "client_business_id", msg: "control characters"},
	}...)
	runRejects(t, single, cases)
}

func TestSingleImagePixelMapping(t *testing.T) {
	g := NewWithT(t)
	want := map[string][2][2]int{
		"1:1":  {{1024, 1024}, {2048, 2048}},
		"4:3":  {{1152, 864}, {1600, 1200}},
		"3:4":  {{864, 1152}, {1200, 1600}},
		"16:9": {{1280, 720}, {1920, 1080}},
		"9:16": {{720, 1280}, {1080, 1920}},
		"3:2":  {{1152, 768}, {1728, 1152}},
		"2:3":  {{768, 1152}, {1152, 1728}},
	}
	for ratio, sizes := range want {
		for i, res := range []string{"1K", "2K"} {
			w, h, ok := SingleImagePixelSize(ratio, res)
			g.Expect(ok).To(BeTrue())
			g.Expect([2]int{w, h}).To(Equal(sizes[i]), "%s %s", ratio, res)
			// Every mapped size is itself a valid explicit size.
			area := w * h
			g.Expect(area).To(BeNumerically(">=", SingleImageMinArea))
			g.Expect(area).To(BeNumerically("<=", SingleImageMaxArea))
		}
	}
	_, _, ok := SingleImagePixelSize("21:9", "1K")
	g.Expect(ok).To(BeFalse())
	_, _, ok = SingleImagePixelSize("1:1", "4K")
	g.Expect(ok).To(BeFalse())
}

func TestParsePixelSize(t *testing.T) {
	g := NewWithT(t)
	for in, want := range map[string][3]int{
		"1024*768": {1024, 768, 1}, "1024x768": {1024, 768, 1}, "1024X768": {1024, 768, 1}, " 800 * 600 ": {800, 600, 1},
		"x768": {0, 0, 0}, "1024x": {0, 0, 0}, "1024": {0, 0, 0}, "a*b": {0, 0, 0}, "1e3x1e3": {0, 0, 0}, "+5x5": {0, 0, 0},
		"12345678x1": {0, 0, 0}, "0x5": {0, 0, 0},
	} {
		w, h, ok := ParsePixelSize(in)
		okInt := 0
		if ok {
			okInt = 1
		} else {
			w, h = 0, 0
		}
		g.Expect([3]int{w, h, okInt}).To(Equal(want), in)
	}
}
