package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

// bflModel declares an image-edit model served by a bfl backend on the
// FLUX Kontext fake, priced 0.04 USD per request.
func bflModel(t *testing.T, fake *fakeupstream.BFL) string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	model := uniqueModel("kontext")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "upstream-" + model, Namespace: framework.SystemNamespace},
		StringData: map[string]string{"apiKey": fake.Key()}}
	g.Expect(stack.Client.Create(ctx, secret)).To(Succeed())
	t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), secret) })
	b := sim("bfl", "bfl")
	b.BaseURL, b.UpstreamModel = fake.URL, "flux-kontext-pro"
	b.CredentialSecretRef = &v1.SecretKeyRef{Name: secret.Name, Key: "apiKey"}
	route := &v1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: framework.SystemNamespace},
		Spec: v1.ModelRouteSpec{Model: v1.ModelID(model), Type: v1.ModelTypeImage, ValidationProfile: v1.ProfileImageEdit,
			Backends: []v1.Backend{b}}}
	price := &v1.PriceRule{ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: framework.SystemNamespace},
		Spec: v1.PriceRuleSpec{Model: v1.ModelID(model), ChargeType: v1.ChargePerRequest, PriceBasis: v1.BasisRequest,
			Unit: v1.UnitRequest, UnitPrice: "0.04"}}
	g.Expect(stack.Client.Create(ctx, route)).To(Succeed())
	g.Expect(stack.Client.Create(ctx, price)).To(Succeed())
	t.Cleanup(func() {
		_ = stack.Client.Delete(context.Background(), route)
		_ = stack.Client.Delete(context.Background(), price)
	})
	g.Expect(stack.WaitReady(ctx, route)).To(Succeed())
	g.Expect(stack.WaitReady(ctx, price)).To(Succeed())
	g.Expect(stack.WaitCached(ctx, route)).To(Succeed())
	g.Expect(stack.WaitCached(ctx, price)).To(Succeed())
	return model
}

// finalImageTask submits an image request and polls the task until it is
// final.
func finalImageTask(t *testing.T, key, body string) videoTask {
	t.Helper()
	g := NewWithT(t)
	code, raw := videoCall(t, http.MethodPost, "/v1/images/generations", key, body)
	g.Expect(code).To(Equal(http.StatusOK), "%s", raw)
	var task videoTask
	g.Expect(json.Unmarshal(raw, &task)).To(Succeed())
	g.Expect(task.ID).NotTo(BeEmpty())
	g.Eventually(func(g Gomega) string {
		code, raw := videoCall(t, http.MethodGet, "/v1/images/generations/"+task.ID, key, "")
		g.Expect(code).To(Equal(http.StatusOK), "%s", raw)
		task = videoTask{}
		g.Expect(json.Unmarshal(raw, &task)).To(Succeed())
		return task.Status
	}, 60*time.Second, 200*time.Millisecond).Should(BeElementOf("completed", "failed"))
	return task
}

// TestBFLImageEdit: an image edit through the gateway on Black Forest
// Labs' API (the fake): submitted with x-key, polled through a 429 and
// Pending answers on the polling_url, the signed sample copied into the
// blob store and served by the gateway, billed once at the PriceRule; a
// moderated request fails with content_policy_violation and is refunded.
func TestBFLImageEdit(t *testing.T) {
	g := NewWithT(t)
	fake := fakeupstream.NewBFL()
	t.Cleanup(fake.Close)
	model := bflModel(t, fake)
	acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

	img := fakeupstream.PNG(16, 16, 90)
	fake.SetPlan(fakeupstream.BFLPlan{Polls: 2, RateLimited: 1, RetryAfter: "1", Output: img})
	task := finalImageTask(t, acct.Key, fmt.Sprintf(`{"model":%q,"prompt":"make it snow",
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
	task = finalImageTask(t, acct.Key, fmt.Sprintf(`{"model":%q,"prompt":"something refused","size":"1:1"}`, model))
	g.Expect(task.Status).To(Equal("failed"))
	g.Expect(task.Error.Code).To(Equal("content_policy_violation"))
	g.Expect(task.Billing.Status).To(Equal("refunded"))
	ledgerUsed(t, acct, 20000)
}
