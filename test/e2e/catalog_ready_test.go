package e2e

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("The model catalog", func() {
	// A price whose only backend stops being
	// ready leaves the catalog (the model stays, with no prices) and comes back
	// when the backend is ready again.
	It("catalog follows backend readiness", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		model := uniqueModel("ready")
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: model + "-cred", Namespace: framework.SystemNamespace},
			StringData: map[string]string{"apiKey": "upstream-key"}}
		g.Expect(stack.Client.Create(ctx, secret)).To(Succeed())
		route := &v1.ModelRoute{
			ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: framework.SystemNamespace},
			Spec: v1.ModelRouteSpec{Model: v1.ModelID(model), Type: v1.ModelTypeImage, ValidationProfile: v1.ProfileSingleImage,
				Backends: []v1.Backend{{Name: "remote", Provider: "openai", BaseURL: "https://upstream.invalid/v1",
					CredentialSecretRef: &v1.SecretKeyRef{Name: secret.Name, Key: "apiKey"}}}},
		}
		g.Expect(stack.Client.Create(ctx, route)).To(Succeed())
		t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), route) })
		price := perRequest("0.04")
		price.Model = v1.ModelID(model)
		rule := &v1.PriceRule{ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: framework.SystemNamespace}, Spec: *price}
		g.Expect(stack.Client.Create(ctx, rule)).To(Succeed())
		t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), rule) })
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

		prices := func() []any {
			code, _, body := getJSON(t, "/v1/pricing?model="+model, acct.Key)
			if code != 200 {
				return nil
			}
			return body["data"].([]any)[0].(map[string]any)["prices"].([]any)
		}
		g.Eventually(prices, framework.Timeout, framework.Interval).Should(HaveLen(1))

		g.Expect(stack.Client.Delete(ctx, secret)).To(Succeed()) // the only backend loses its credential
		g.Eventually(prices, framework.Timeout, framework.Interval).Should(BeEmpty())

		secret.ResourceVersion = ""
		g.Expect(stack.Client.Create(ctx, secret)).To(Succeed())
		g.Eventually(prices, framework.Timeout, framework.Interval).Should(HaveLen(1))
	})
})
