package handlers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// A key that creates keys: none of them may be stronger than the key itself.
var _ = Describe("POST /v1/tokens by a limited key", func() {
	var (
		parentExpiry time.Time
		key          string
		namespace    string
	)

	BeforeEach(func() {
		parentExpiry = time.Now().Add(72 * time.Hour).Truncate(time.Second)
		acct, err := stack.NewAccount(ctx, v1.TenantSpec{
			Grants:        []v1.Grant{{ID: "g", Credits: credits("1000")}},
			AllowedGroups: []v1.GroupName{"vip"},
		}, v1.ApiTokenSpec{
			Quota:              ptr.To[int64](1000),
			DailyQuota:         500,
			MonthlyQuota:       800,
			ExpiresAt:          &metav1.Time{Time: parentExpiry},
			ModelLimitsEnabled: true,
			ModelLimits:        []v1.ModelID{"sim-image"},
		})
		Expect(err).NotTo(HaveOccurred())
		key, namespace = acct.Key, acct.Namespace
	})

	count := func() int {
		list := &v1.ApiTokenList{}
		Expect(stack.Client.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
		return len(list.Items)
	}

	DescribeTable("refuses a looser limit, naming the field, creating nothing",
		func(body map[string]any, field string) {
			before := count()
			body["name"] = "escalated"
			code, out, _ := call("POST", "/v1/tokens", bearer(key), body)
			Expect(code).To(Equal(200))
			Expect(out["success"]).To(BeFalse())
			Expect(out["message"]).To(ContainSubstring(field))
			Expect(out).NotTo(HaveKey("data"))
			Consistently(count, "300ms").Should(Equal(before))
		},
		Entry("unlimited quota", map[string]any{"unlimited_quota": true}, "unlimited_quota"),
		Entry("more quota than the key has left", map[string]any{"remain_quota": 1001}, "remain_quota"),
		Entry("more credits than the key has left", map[string]any{"remain_credits": 0.5}, "remain_quota"), // 1250 quota
		Entry("a larger daily limit", map[string]any{"daily_credits": 0.3}, "daily_credits"),               // 750 quota
		Entry("a larger monthly limit", map[string]any{"monthly_credits": 0.4}, "monthly_credits"),         // 1000 quota
		Entry("a later expiry", map[string]any{"expired_time": time.Now().Add(96 * time.Hour).Unix()}, "expired_time"),
		Entry("a model outside the allow-list", map[string]any{"model_limits_enabled": true, "model_limits": "sim-image,sim-chat"}, "model_limits"),
	)

	It("passes its own limits on to a key that asks for none", func() {
		code, out, _ := call("POST", "/v1/tokens", bearer(key), map[string]any{"name": "child", "expired_time": -1})
		Expect(code).To(Equal(200))
		Expect(out["success"]).To(BeTrue(), "%v", out)
		data := out["data"].(map[string]any)
		Expect(data["unlimited_quota"]).To(BeFalse())
		Expect(data["model_limits_enabled"]).To(BeTrue())
		Expect(data["model_limits"]).To(Equal("sim-image"))
		Expect(num(data["expired_time"])).To(Equal(jsonInt(parentExpiry.Unix())))
		Expect(num(data["daily_credits"])).To(Equal("0.2"))    // 500 quota
		Expect(num(data["monthly_credits"])).To(Equal("0.32")) // 800 quota

		By("the child key cannot reach a text model")
		childKey := "sk-" + data["key"].(string)
		code, body, _ := call("POST", "/v1/chat/completions", bearer(childKey),
			map[string]any{"model": "sim-chat", "messages": []map[string]any{{"role": "user", "content": "hi"}}})
		Expect(code).To(BeNumerically(">=", 400), "%v", body)
	})

	It("creates a key within its limits", func() {
		code, out, _ := call("POST", "/v1/tokens", bearer(key), map[string]any{
			"name": "smaller", "remain_quota": 1000, "daily_credits": 0.2, "monthly_credits": 0.1,
			"expired_time": parentExpiry.Unix(), "model_limits_enabled": true, "model_limits": "sim-image",
		})
		Expect(code).To(Equal(200))
		Expect(out["success"]).To(BeTrue(), "%v", out)
		data := out["data"].(map[string]any)
		Expect(num(data["remain_quota"])).To(Equal("1000"))
		Expect(num(data["monthly_credits"])).To(Equal("0.1"))
	})
})
