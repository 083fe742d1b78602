package e2e

import (
	"fmt"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/upstream/dashscope"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

var _ = Describe("The DashScope upstream", func() {
	// A single-image edit through the gateway on
	// DashScope's image-synthesis task API (the fake): submitted with two
	// reference images, polled through a throttled query, the result URL
	// downloaded into the blob store and served by the gateway, billed 0.03 +
	// 2 × 0.003 USD; an output refused by content inspection fails with
	// content_policy_violation and is refunded.
	It("DashScope single image", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := fakeupstream.NewDashScope()
		t.Cleanup(fake.Close)
		// A single-image model on the DashScope fake (wan2.5-i2i-preview), 0.03
		// USD per image and 0.003 USD per reference image.
		perRef := v1.Decimal("0.003")
		model := vendorModel{prefix: "wan-edit", provider: "dashscope", baseURL: fake.URL, upstream: "wan2.5-i2i-preview", key: fake.Key(),
			typ: v1.ModelTypeImage, profile: v1.ProfileSingleImage, price: v1.PriceRuleSpec{ChargeType: v1.ChargePerRequest,
				PriceBasis: v1.BasisRequest, Unit: v1.UnitRequest, UnitPrice: "0.03", InputImageUnitPrice: &perRef}}.declare(t)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		body := fmt.Sprintf(`{"model":%q,"prompt":"put the clock by the vase","size":"1280*720",
				"image_urls":["https://img.example/clock.png","https://img.example/table.png"],"metadata":{"prompt_extend":false,"seed":7}}`, model)

		fake.SetPlan(fakeupstream.DashScopePlan{Polls: 2, RateLimited: 1, RetryAfter: "1"})
		task := finalTask(t, acct.Key, "images", body)
		g.Expect(task.Result.Type).To(Equal("image"))
		expectStoredOutput(t, task, fake.URL, "image", "0.036") // one image at 0.03 USD and two references at 0.003 USD
		ledgerUsed(t, acct, 18000)

		sent := fake.Requests()[0]
		g.Expect(sent.Path).To(Equal("/api/v1/services/aigc/image2image/image-synthesis"))
		g.Expect(sent.Header.Get("Authorization")).To(Equal("Bearer " + fake.Key()))
		g.Expect(sent.Header.Get("X-DashScope-Async")).To(Equal("enable"))
		g.Expect(sent.JSON()).To(Equal(map[string]any{"model": "wan2.5-i2i-preview",
			"input": map[string]any{"prompt": "put the clock by the vase",
				"images": []any{"https://img.example/clock.png", "https://img.example/table.png"}},
			"parameters": map[string]any{"size": "1280*720", "n": float64(1), "prompt_extend": false, "watermark": false, "seed": float64(7)}}))
		g.Expect(fake.Count(http.MethodPost, "/api/v1/services/")).To(Equal(1))

		fake.SetPlan(fakeupstream.DashScopePlan{Polls: 1, FailCode: "DataInspectionFailed", FailMessage: "Output data may contain inappropriate content."})
		task = finalTask(t, acct.Key, "images", body)
		g.Expect(task.Status).To(Equal("failed"))
		g.Expect(task.Error.Code).To(Equal("content_policy_violation"))
		g.Expect(task.Error.Message).To(Equal("Output data may contain inappropriate content."))
		g.Expect(task.Billing.Status).To(Equal("refunded"))
		ledgerUsed(t, acct, 18000)
	})

	// A qwen-image-edit model on DashScope's synchronous multimodal-generation
	// service (the backend's api option): the edit completes at submission
	// with no task to poll, the result downloaded into the blob store and
	// billed 0.03 + 2 × 0.003 USD; an edit refused by content inspection
	// is answered 422 content_policy_violation and nothing is charged.
	It("DashScope qwen image edit", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := fakeupstream.NewDashScope()
		t.Cleanup(fake.Close)
		perRef := v1.Decimal("0.003")
		model := vendorModel{prefix: "qwen-edit", provider: "dashscope", baseURL: fake.URL, upstream: "qwen-image-edit-plus", key: fake.Key(),
			options: map[string]string{dashscope.OptionAPI: dashscope.APIMultimodalGeneration},
			typ:     v1.ModelTypeImage, profile: v1.ProfileSingleImage, price: v1.PriceRuleSpec{ChargeType: v1.ChargePerRequest,
				PriceBasis: v1.BasisRequest, Unit: v1.UnitRequest, UnitPrice: "0.03", InputImageUnitPrice: &perRef}}.declare(t)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		body := fmt.Sprintf(`{"model":%q,"prompt":"put the clock by the vase","size":"1280*720",
				"image_urls":["https://img.example/clock.png","https://img.example/table.png"],"metadata":{"negative_prompt":"blur","seed":7}}`, model)

		task := finalTask(t, acct.Key, "images", body)
		expectStoredOutput(t, task, fake.URL, "image", "0.036") // one image at 0.03 USD and two references at 0.003 USD
		ledgerUsed(t, acct, 18000)

		sent := fake.Requests()[0]
		g.Expect(sent.Path).To(Equal(dashscope.PathMultimodalGeneration))
		g.Expect(sent.Header.Get("Authorization")).To(Equal("Bearer " + fake.Key()))
		g.Expect(sent.Header.Get("X-DashScope-Async")).To(BeEmpty())
		g.Expect(sent.JSON()).To(Equal(map[string]any{"model": "qwen-image-edit-plus",
			"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{
				map[string]any{"image": "https://img.example/clock.png"},
				map[string]any{"image": "https://img.example/table.png"},
				map[string]any{"text": "put the clock by the vase"},
			}}}},
			"parameters": map[string]any{"size": "1280*720", "n": float64(1), "negative_prompt": "blur", "seed": float64(7),
				"prompt_extend": true, "watermark": false}})) // the family's defaults
		g.Expect(fake.Count(http.MethodPost, "/api/v1/services/")).To(Equal(1))
		g.Expect(fake.Count(http.MethodGet, "/api/v1/tasks/")).To(Equal(0), "nothing to poll")

		fake.SetPlan(fakeupstream.DashScopePlan{FailCode: "DataInspectionFailed", FailMessage: "Output data may contain inappropriate content."})
		// Refused at submission: the POST itself answers 422 (the submit
		// wait), and the hold is released.
		expectRefusedAtSubmission(t, acct.Key, "/v1/images/generations", body, "Output data may contain inappropriate content.")
		ledgerUsed(t, acct, 18000)
		g.Expect(fake.Count(http.MethodPost, "/api/v1/services/")).To(Equal(2), "a refusal is not retried")
	})
})
