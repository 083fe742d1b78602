package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

var _ = Describe("The OpenAI images upstream", func() {
	// A gpt-image answer that reports part of its input as cached, split
	// into text and image tokens: each part is billed at its published
	// price (cached image tokens at cached_image_input, not image_input),
	// and the task's usage shows the split.
	It("bills cached image tokens at the cached image price and reports the split", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := fakeupstream.NewOpenAIImages()
		t.Cleanup(fake.Close)
		fake.SetUsage(map[string]any{"input_tokens": 120, "output_tokens": 1056, "total_tokens": 1176,
			"input_tokens_details": map[string]any{"text_tokens": 40, "image_tokens": 80, "cached_tokens": 30,
				"cached_tokens_details": map[string]any{"text_tokens": 10, "image_tokens": 20}}})
		// gpt-image-1's list prices per 1M tokens.
		text, cachedText, image, cachedImage, imageOut := v1.Decimal("5"), v1.Decimal("1.25"), v1.Decimal("10"), v1.Decimal("2.5"), v1.Decimal("40")
		model := vendorModel{prefix: "gpt-image", provider: "openai", baseURL: fake.URL + "/v1", upstream: "gpt-image-1", key: fake.Key(),
			typ: v1.ModelTypeImage, profile: v1.ProfileMultiImage, price: v1.PriceRuleSpec{ChargeType: v1.ChargePerToken,
				PriceBasis: v1.BasisTextInputTokens, Unit: v1.Unit1MTokens, UnitPrice: "5", OutputUnitPrice: &imageOut,
				ImageTokenPrices: &v1.ImageTokenPrices{TextInput: &text, CachedTextInput: &cachedText, ImageInput: &image,
					CachedImageInput: &cachedImage, ImageOutput: &imageOut}}}.declare(t)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

		task := finalTask(t, acct.Key, "images", fmt.Sprintf(`{"model":%q,"prompt":"a lighthouse"}`, model))
		g.Expect(task.Status).To(Equal("completed"), "%+v", task.Error)
		g.Expect(task.Billing.Status).To(Equal("settled"))
		// (30 text × 5 + 10 cached text × 1.25 + 60 image × 10 + 20 cached
		// image × 2.5 + 1056 output × 40) / 1M = 0.0430525 USD, 21526.25
		// quota, rounded half up.
		ledgerUsed(t, acct, 21526)

		code, raw := videoCall(t, http.MethodGet, "/v1/images/generations/"+task.ID, acct.Key, "")
		g.Expect(code).To(Equal(http.StatusOK), "%s", raw)
		var got struct {
			Usage struct {
				InputTokens        int64 `json:"input_tokens"`
				InputTokensDetails struct {
					CachedTokens        int64 `json:"cached_tokens"`
					CachedTokensDetails *struct {
						TextTokens  int64 `json:"text_tokens"`
						ImageTokens int64 `json:"image_tokens"`
					} `json:"cached_tokens_details"`
				} `json:"input_tokens_details"`
			} `json:"usage"`
		}
		g.Expect(json.Unmarshal(raw, &got)).To(Succeed())
		g.Expect(got.Usage.InputTokens).To(Equal(int64(120)), "%s", raw)
		g.Expect(got.Usage.InputTokensDetails.CachedTokens).To(Equal(int64(30)))
		g.Expect(got.Usage.InputTokensDetails.CachedTokensDetails).NotTo(BeNil(), "%s", raw)
		g.Expect(got.Usage.InputTokensDetails.CachedTokensDetails.TextTokens).To(Equal(int64(10)))
		g.Expect(got.Usage.InputTokensDetails.CachedTokensDetails.ImageTokens).To(Equal(int64(20)))
	})
})
