package e2e

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

var _ = Describe("Pricing errors", func() {
	// 403 in the pricing
	// shape, not an empty catalog.
	It("pricing refuses a key of a group its account may not use", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{Group: "gold"})
		code, hdr, body := getJSON(t, "/v1/pricing", acct.Key)
		g.Expect(code).To(Equal(403))
		g.Expect(hdr.Get("Cache-Control")).To(Equal("private, no-store"))
		g.Expect(body["error"]).To(HaveKeyWithValue("code", "group_not_allowed"))

		allowed := newAccount(t, v1.TenantSpec{AllowedGroups: []v1.GroupName{"gold"}}, v1.ApiTokenSpec{Group: "gold"})
		code, _, _ = getJSON(t, "/v1/pricing", allowed.Key)
		g.Expect(code).To(Equal(200))
	})
})
