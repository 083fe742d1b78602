package e2e

import (
	"fmt"
	"io"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

var _ = Describe("The BFL upstream", func() {
	// An image edit through the gateway on Black Forest
	// Labs' API (the fake): submitted with x-key, polled through a 429 and
	// Pending answers on the polling_url, the signed sample copied into the
	// blob store and served by the gateway, billed once at the PriceRule; a
	// moderated request fails with content_policy_violation and is refunded.
	It("BFL image edit", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := fakeupstream.NewBFL()
		t.Cleanup(fake.Close)
		// An image-edit model on the FLUX Kontext fake, 0.04 USD per request.
		model := vendorModel{prefix: "kontext", provider: "bfl", baseURL: fake.URL, upstream: "flux-kontext-pro", key: fake.Key(),
			typ: v1.ModelTypeImage, profile: v1.ProfileImageEdit, price: v1.PriceRuleSpec{ChargeType: v1.ChargePerRequest,
				PriceBasis: v1.BasisRequest, Unit: v1.UnitRequest, UnitPrice: "0.04"}}.declare(t)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

		img := fakeupstream.PNG(16, 16, 90)
		fake.SetPlan(fakeupstream.BFLPlan{Polls: 2, RateLimited: 1, RetryAfter: "1", Output: img})
		task := finalTask(t, acct.Key, "images", fmt.Sprintf(`{"model":%q,"prompt":"make it snow",
				"image_urls":["https://img.example/house.png"],"metadata":{"response_format":"jpg","safety_tolerance":3}}`, model))
		g.Expect(task.Status).To(Equal("completed"), "%+v", task.Error)
		g.Expect(task.Progress).To(Equal(100))
		g.Expect(task.Result.Type).To(Equal("image"))
		g.Expect(task.Result.Data).To(HaveLen(1))
		resp, err := http.Get(task.Result.Data[0].URL)
		g.Expect(err).NotTo(HaveOccurred())
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		g.Expect(got).To(Equal(img), "the gateway serves the stored copy")
		g.Expect(task.Result.Data[0].URL).NotTo(HavePrefix(fake.URL), "the upstream's signed link never reaches the client")
		g.Expect(task.Billing.Status).To(Equal("settled"))
		g.Expect(task.Billing.CostUSD).To(Equal("0.04"))
		ledgerUsed(t, acct, 20000) // 0.04 USD at 500000 quota units per USD

		sent := fake.Requests()[0]
		g.Expect(sent.Method + " " + sent.Path).To(Equal("POST /v1/flux-kontext-pro"))
		g.Expect(sent.Header.Get("x-key")).To(Equal(fake.Key()))
		g.Expect(sent.JSON()).To(Equal(map[string]any{"prompt": "make it snow", "input_image": "https://img.example/house.png",
			"output_format": "jpeg", "safety_tolerance": float64(3), "prompt_upsampling": false}))
		g.Expect(fake.Count(http.MethodPost, "/v1/flux-kontext-pro")).To(Equal(1))
		g.Expect(fake.Count(http.MethodGet, "/v1/get_result")).To(Equal(4), "a 429, two Pending, Ready")

		fake.SetPlan(fakeupstream.BFLPlan{Polls: 1, Final: "Content Moderated"})
		task = finalTask(t, acct.Key, "images", fmt.Sprintf(`{"model":%q,"prompt":"something refused","size":"1:1"}`, model))
		g.Expect(task.Status).To(Equal("failed"))
		g.Expect(task.Error.Code).To(Equal("content_policy_violation"))
		g.Expect(task.Billing.Status).To(Equal("refunded"))
		ledgerUsed(t, acct, 20000)
	})
})
