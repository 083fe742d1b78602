package e2e

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

// referenceServer serves one PNG on loopback (reachable in the test
// stack) as a tenant's reference image.
func referenceServer(t testing.TB) (string, []byte) {
	t.Helper()
	img := fakeupstream.PNG(32, 32, 120)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(img)
	}))
	t.Cleanup(s.Close)
	return s.URL + "/fox.png", img
}

// fetch reads a result URL the gateway serves.
func fetch(t testing.TB, u string) []byte {
	t.Helper()
	g := NewWithT(t)
	resp, err := http.Get(u)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	data, _ := io.ReadAll(resp.Body)
	return data
}

var _ = Describe("The Gemini media upstream", func() {
	// TestGeminiImages: a multi-image request through the gateway on a Gemini
	// image model (the fake's gemini-3-pro-image-preview): the reference image
	// sent inline, the image returned inline stored and served byte for byte,
	// billed per token from usageMetadata exactly (text and thinking output at
	// the output price, image output at the image price); a prompt blocked for
	// its content fails with content_policy_violation and is refunded.
	It("generates images on a Gemini image model billed from usageMetadata", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := fakeupstream.NewGeminiMedia()
		t.Cleanup(fake.Close)
		// Google's list prices of gemini-3-pro-image-preview: input 2 USD per
		// 1M tokens, text and thinking output 12, image output 120.
		out, imgIn, imgOut := v1.Decimal("12"), v1.Decimal("2"), v1.Decimal("120")
		model := vendorModel{prefix: "nano-pro", provider: "gemini", baseURL: fake.URL, upstream: "gemini-3-pro-image-preview", key: fake.Key(),
			typ: v1.ModelTypeImage, profile: v1.ProfileMultiImage, price: v1.PriceRuleSpec{ChargeType: v1.ChargePerToken,
				PriceBasis: v1.BasisTextInputTokens, Unit: v1.Unit1MTokens, UnitPrice: "2", OutputUnitPrice: &out,
				ImageTokenPrices: &v1.ImageTokenPrices{ImageInput: &imgIn, ImageOutput: &imgOut}}}.declare(t)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		ref, refPNG := referenceServer(t)
		const prompt = "a red fox in the snow" // 21 bytes: 6 tokens in the fake
		body := fmt.Sprintf(`{"model":%q,"prompt":%q,"size":"16:9","image_urls":[%q],"metadata":{"resolution":"4K"}}`, model, prompt, ref)

		task := finalTask(t, acct.Key, "images", body)
		g.Expect(task.Status).To(Equal("completed"), "%+v", task.Error)
		g.Expect(task.Result.Data).To(HaveLen(1))
		want, _ := fakeupstream.DefaultOutput("image", 0)
		g.Expect(fetch(t, task.Result.Data[0].URL)).To(Equal(want), "the gateway serves the stored copy")
		g.Expect(task.Billing.Status).To(Equal("settled"))
		// 6 text + 258 image input tokens at 2 USD, 8 text + 180 thinking
		// tokens at 12, 2000 image tokens (4K) at 120, per 1M.
		g.Expect(task.Billing.CostUSD).To(Equal("0.242784"))
		ledgerUsed(t, acct, 121392)
		row := usageRows(t, acct, 1)[0]
		g.Expect(row.PromptTokens).To(Equal(int64(6 + fakeupstream.GeminiImageInputTokens)))
		g.Expect(row.CompletionTokens).To(Equal(int64(8 + fakeupstream.GeminiProThoughtTokens + fakeupstream.GeminiPro4KImageTokens)))

		sent := fake.Requests()[0]
		g.Expect(sent.Path).To(Equal("/v1beta/models/gemini-3-pro-image-preview:generateContent"))
		g.Expect(sent.Header.Get("x-goog-api-key")).To(Equal(fake.Key()))
		g.Expect(sent.JSON()).To(Equal(map[string]any{
			"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": prompt},
				map[string]any{"inlineData": map[string]any{"mimeType": "image/png", "data": base64.StdEncoding.EncodeToString(refPNG)}}}}},
			"generationConfig": map[string]any{"responseModalities": []any{"TEXT", "IMAGE"},
				"imageConfig": map[string]any{"aspectRatio": "16:9", "imageSize": "4K"}}}))

		fake.SetImagePlan(fakeupstream.GeminiImagePlan{BlockReason: "PROHIBITED_CONTENT"})
		task = finalTask(t, acct.Key, "images", body)
		g.Expect(task.Status).To(Equal("failed"))
		g.Expect(task.Error.Code).To(Equal("content_policy_violation"))
		g.Expect(task.Error.Message).To(ContainSubstring("PROHIBITED_CONTENT"))
		g.Expect(task.Billing.Status).To(Equal("refunded"))
		ledgerUsed(t, acct, 121392)
	})

	// TestGeminiVeo: a video task through the gateway on Veo (the fake's
	// veo-3.1-generate-preview): submitted with its first frame inline, polled
	// through a rate-limited and a running operation, the video downloaded
	// with the key into the blob store and served byte for byte, billed by its
	// 6 seconds; a failed operation and one filtered by Google's safety checks
	// are refunded.
	It("runs a Veo video billed per second, refunding failed and filtered ones", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := fakeupstream.NewGeminiMedia()
		t.Cleanup(fake.Close)
		// Veo 3.1's list price, 0.40 USD per second of video.
		model := vendorModel{prefix: "veo", provider: "gemini", baseURL: fake.URL, upstream: "veo-3.1-generate-preview", key: fake.Key(),
			typ: v1.ModelTypeVideo, profile: v1.ProfileAllInOneVideo, price: v1.PriceRuleSpec{ChargeType: v1.ChargePerSecond,
				PriceBasis: v1.BasisOutputSeconds, Unit: v1.UnitSecond, UnitPrice: "0.40"}}.declare(t)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		ref, refPNG := referenceServer(t)
		body := fmt.Sprintf(`{"model":%q,"prompt":"the fox runs off","duration":6,"ratio":"16:9","resolution":"720p",
			"image_with_roles":[{"url":%q,"role":"first_frame"}]}`, model, ref)

		mp4 := append([]byte("\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom"), []byte("veo frames for the e2e")...)
		fake.SetVideoPlan(fakeupstream.VeoPlan{Polls: 2, RateLimited: 1, RetryDelay: "1s", Output: mp4})
		task := finalTask(t, acct.Key, "videos", body)
		g.Expect(task.Status).To(Equal("completed"), "%+v", task.Error)
		g.Expect(task.Progress).To(Equal(100))
		g.Expect(task.Result.Type).To(Equal("video"))
		g.Expect(fetch(t, task.Result.Data[0].URL)).To(Equal(mp4), "the gateway serves the stored copy")
		g.Expect(task.Billing.Status).To(Equal("settled"))
		g.Expect(task.Billing.CostUSD).To(Equal("2.4"), "6 s at 0.40 USD")
		ledgerUsed(t, acct, 1200000)

		sent := fake.Requests()[0]
		g.Expect(sent.Path).To(Equal("/v1beta/models/veo-3.1-generate-preview:predictLongRunning"))
		g.Expect(sent.JSON()).To(Equal(map[string]any{
			"instances": []any{map[string]any{"prompt": "the fox runs off",
				"image": map[string]any{"bytesBase64Encoded": base64.StdEncoding.EncodeToString(refPNG), "mimeType": "image/png"}}},
			"parameters": map[string]any{"aspectRatio": "16:9", "durationSeconds": float64(6), "resolution": "720p", "sampleCount": float64(1)}}))
		g.Expect(fake.Count(http.MethodGet, "/operations/")).To(BeNumerically(">=", 4), "a 429, two running answers, done")
		g.Expect(fake.Count(http.MethodGet, "/v1beta/files/")).To(Equal(1))

		fake.SetVideoPlan(fakeupstream.VeoPlan{FailCode: 13, FailMessage: "Internal error encountered."})
		task = finalTask(t, acct.Key, "videos", body)
		g.Expect(task.Status).To(Equal("failed"))
		g.Expect(task.Error.Code).To(Equal("generation_failed"))
		g.Expect(task.Error.Message).To(Equal("Internal error encountered."))
		g.Expect(task.Billing.Status).To(Equal("refunded"))

		fake.SetVideoPlan(fakeupstream.VeoPlan{Filtered: []string{"The video could not be generated because it violates the safety policy."}})
		task = finalTask(t, acct.Key, "videos", body)
		g.Expect(task.Status).To(Equal("failed"))
		g.Expect(task.Error.Code).To(Equal("content_policy_violation"))
		g.Expect(task.Billing.Status).To(Equal("refunded"))
		ledgerUsed(t, acct, 1200000)
	})
})
