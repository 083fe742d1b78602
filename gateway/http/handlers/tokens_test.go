package handlers_test

import (
	"encoding/json"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/keys"
	"github.com/modelgate/modelgate/test/framework"
)

func credits(s string) *v1.Decimal { d := v1.Decimal(s); return &d }

func num(v any) string { return string(v.(json.Number)) }

var _ = Describe("POST /v1/tokens", func() {
	var acct *framework.Account

	BeforeEach(func() {
		var err error
		acct, err = stack.NewAccount(ctx, v1.TenantSpec{
			Grants:        []v1.Grant{{ID: "g", Credits: credits("1000")}},
			AllowedGroups: []v1.GroupName{"vip"},
		}, v1.ApiTokenSpec{Quota: ptr.To[int64](500000)})
		Expect(err).NotTo(HaveOccurred())
	})

	tokensIn := func(ns string) []v1.ApiToken {
		list := &v1.ApiTokenList{}
		Expect(stack.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		return list.Items
	}

	It("creates a key shown once, with the contract's defaults, usable at once", func() {
		code, body, _ := call("POST", "/v1/tokens", bearer(acct.Key), map[string]any{"name": "ci"})
		Expect(code).To(Equal(200))
		Expect(body["success"]).To(BeTrue())
		Expect(body["message"]).To(Equal(""))
		Expect(num(body["credits_per_usd"])).To(Equal("200"))
		data := body["data"].(map[string]any)
		key := data["key"].(string)
		Expect(key).To(HaveLen(48))
		Expect(keys.ValidAPIKey("sk-" + key)).To(BeTrue())
		Expect(num(data["id"])).NotTo(Equal("0"))
		Expect(num(data["user_id"])).To(Equal(jsonInt(acct.Tenant.Status.UserID)))
		Expect(data["name"]).To(Equal("ci"))
		Expect(num(data["status"])).To(Equal("1"))
		Expect(num(data["expired_time"])).To(Equal("-1"))
		Expect(num(data["remain_quota"])).To(Equal("0"))
		Expect(data["unlimited_quota"]).To(BeFalse())
		Expect(data["model_limits_enabled"]).To(BeFalse())
		Expect(data["model_limits"]).To(Equal(""))
		Expect(data["group"]).To(Equal(""))
		Expect(data).To(HaveKey("cross_group_retry"))

		By("storing only the hash: no Secret, no key in the object")
		var created *v1.ApiToken
		for i, t := range tokensIn(acct.Namespace) {
			if t.Spec.DisplayName == "ci" {
				created = &tokensIn(acct.Namespace)[i]
			}
		}
		Expect(created).NotTo(BeNil())
		Expect(created.Spec.KeyHash).To(Equal(keys.Hash("sk-" + key)))
		raw, _ := json.Marshal(created)
		Expect(string(raw)).NotTo(ContainSubstring(key))

		By("authenticating with the new key right away, with or without the sk- prefix")
		for _, k := range []string{"sk-" + key, key} {
			code, body, _ = call("GET", "/v1/user/balance", bearer(k), nil)
			Expect(code).To(Equal(200), "%v", body)
			Expect(body["success"]).To(BeTrue())
		}

		By("the controller registering the same ID")
		Eventually(func(g Gomega) {
			g.Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(created), created)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(created.Status.Conditions, v1.ConditionReady)).To(BeTrue())
			g.Expect(jsonInt(created.Status.TokenID)).To(Equal(num(data["id"])))
			g.Expect(created.Status.SecretName).To(BeEmpty())
		}, framework.Timeout, framework.Interval).Should(Succeed())
	})

	It("converts credits exactly: remain_credits overrides remain_quota", func() {
		expiry := time.Now().Add(48 * time.Hour).Unix()
		code, body, _ := call("POST", "/v1/tokens", bearer(acct.Key), `{"name":"budget","remain_quota":100,
			"remain_credits":2.5,"daily_credits":0.1,"monthly_credits":40,"expired_time":`+jsonInt(expiry)+`,
			"model_limits_enabled":true,"model_limits":"sim-chat, sim-image","group":"vip","unlimited_quota":false}`)
		Expect(code).To(Equal(200))
		Expect(body["success"]).To(BeTrue(), "%v", body)
		data := body["data"].(map[string]any)
		Expect(num(data["remain_quota"])).To(Equal("6250")) // 2.5 credits × 2500
		Expect(num(data["remain_credits"])).To(Equal("2.5"))
		Expect(num(data["daily_credits"])).To(Equal("0.1"))
		Expect(num(data["expired_time"])).To(Equal(jsonInt(expiry)))
		Expect(data["model_limits"]).To(Equal("sim-chat,sim-image"))
		Expect(data["group"]).To(Equal("vip"))

		var tok v1.ApiToken
		for _, t := range tokensIn(acct.Namespace) {
			if t.Spec.DisplayName == "budget" {
				tok = t
			}
		}
		Expect(*tok.Spec.Quota).To(Equal(int64(6250)))
		Expect(tok.Spec.DailyQuota).To(Equal(int64(250)))
		Expect(tok.Spec.MonthlyQuota).To(Equal(int64(100000)))
		Expect(tok.Spec.ModelLimits).To(Equal([]v1.ModelID{"sim-chat", "sim-image"}))
		Expect(tok.Spec.ExpiresAt.Unix()).To(Equal(expiry))
	})

	DescribeTable("refuses bad input with HTTP 200 and {success:false, message}, creating nothing",
		func(body string, message string) {
			before := len(tokensIn(acct.Namespace))
			code, out, _ := call("POST", "/v1/tokens", bearer(acct.Key), body)
			Expect(code).To(Equal(200))
			Expect(out).To(Equal(map[string]any{"success": false, "message": message}))
			Consistently(func() int { return len(tokensIn(acct.Namespace)) }, "300ms").Should(Equal(before))
		},
		Entry("a 51-character name", `{"name":"`+strings.Repeat("n", 51)+`"}`, "令牌名称过长"),
		Entry("a 51-character non-ASCII name", `{"name":"`+strings.Repeat("键", 51)+`"}`, "令牌名称过长"),
		Entry("no name", `{}`, "令牌名称不能为空"),
		Entry("a body that is not JSON", `name=ci`, "无效的参数"),
		Entry("an expiry in the past", `{"name":"x","expired_time":1000}`, "过期时间不能早于当前时间"),
		Entry("a group the tenant may not use", `{"name":"x","group":"gold"}`, "无权使用该分组"),
		Entry("negative credits", `{"name":"x","remain_credits":-1}`, "额度不能为负数"),
	)

	It("accepts a 50-character name", func() {
		code, out, _ := call("POST", "/v1/tokens", bearer(acct.Key), map[string]any{"name": strings.Repeat("键", 50)})
		Expect(code).To(Equal(200))
		Expect(out["success"]).To(BeTrue())
	})

	It("answers 401 {success:false, message} to a bad key", func() {
		code, out, _ := call("POST", "/v1/tokens", bearer("sk-"+strings.Repeat("x", 48)), map[string]any{"name": "x"})
		Expect(code).To(Equal(401))
		Expect(out["success"]).To(BeFalse())
		Expect(out["message"]).To(ContainSubstring("invalid API key"))
	})
})
