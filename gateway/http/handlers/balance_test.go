package handlers_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

var _ = Describe("balance endpoints", func() {
	It("reports the account balance in USD and credits on both paths, cross-origin", func() {
		acct, err := stack.NewAccount(ctx, v1.TenantSpec{Grants: []v1.Grant{{ID: "g", Credits: credits("1000")}}},
			v1.ApiTokenSpec{Quota: ptr.To[int64](500000)})
		Expect(err).NotTo(HaveOccurred())

		// Spend 0.25 USD through the ledger, as a settled request would.
		Expect(stack.Ledger.Reserve(context.Background(), "bal-1", acct.Token.Status.TokenID, acct.Tenant.Status.UserID, 125000)).To(Succeed())
		Expect(stack.Ledger.Settle(context.Background(), "bal-1", 125000)).To(Succeed())

		for _, path := range []string{"/v1/user/balance", "/user/balance"} {
			code, body, hdr := call("GET", path, bearer(acct.Key), nil)
			Expect(code).To(Equal(200))
			Expect(hdr.Get("Access-Control-Allow-Origin")).To(Equal("*"))
			Expect(body["success"]).To(BeTrue())
			Expect(num(body["remain_balance"])).To(Equal("4.75"))
			Expect(num(body["used_balance"])).To(Equal("0.25"))
			Expect(num(body["remain_credits"])).To(Equal("950"))
			Expect(num(body["used_credits"])).To(Equal("50"))
			Expect(num(body["credits_per_usd"])).To(Equal("200"))
			Expect(body["unlimited_quota"]).To(BeFalse())
		}

		code, _, hdr := call("OPTIONS", "/v1/user/balance", map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "GET"}, nil)
		Expect(code).To(Equal(204))
		Expect(hdr.Get("Access-Control-Allow-Headers")).To(ContainSubstring("Authorization"))

		By("the token balance of the key alone")
		code, body, _ := call("GET", "/v1/balance", bearer(acct.Key), nil)
		Expect(code).To(Equal(200))
		Expect(num(body["remain_quota"])).To(Equal("375000"))
		Expect(num(body["used_quota"])).To(Equal("125000"))
		Expect(num(body["token_id"])).To(Equal(jsonInt(acct.Token.Status.TokenID)))
	})

	It("reports -1 for an unlimited account", func() {
		acct, err := stack.NewAccount(ctx, v1.TenantSpec{UnlimitedQuota: true}, v1.ApiTokenSpec{UnlimitedQuota: true})
		Expect(err).NotTo(HaveOccurred())
		code, body, _ := call("GET", "/v1/user/balance", bearer(acct.Key), nil)
		Expect(code).To(Equal(200))
		Expect(num(body["remain_balance"])).To(Equal("-1"))
		Expect(body["unlimited_quota"]).To(BeTrue())
	})

	It("refuses a missing or unknown key, and x-api-key outside /v1/messages", func() {
		acct, err := stack.NewAccount(ctx, v1.TenantSpec{}, v1.ApiTokenSpec{})
		Expect(err).NotTo(HaveOccurred())
		for _, h := range []map[string]string{nil, bearer("sk-nope"), {"x-api-key": acct.Key}} {
			code, body, _ := call("GET", "/v1/user/balance", h, nil)
			Expect(code).To(Equal(401))
			Expect(body["success"]).To(BeFalse())
			Expect(body["message"]).NotTo(BeEmpty())
		}
	})

	It("refuses a disabled key and an expired key", func() {
		acct, err := stack.NewAccount(ctx, v1.TenantSpec{}, v1.ApiTokenSpec{})
		Expect(err).NotTo(HaveOccurred())
		before := acct.Token.DeepCopy()
		acct.Token.Spec.Disabled = true
		Expect(stack.Client.Patch(ctx, acct.Token, client.MergeFrom(before))).To(Succeed())
		Eventually(func() int {
			code, _, _ := call("GET", "/v1/user/balance", bearer(acct.Key), nil)
			return code
		}).Should(Equal(401))
	})
})
