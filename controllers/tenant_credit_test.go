package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("Tenant credit line", func() {
	It("puts spec.creditLimit in the ledger and in status, and follows a change", func() {
		ns := newTenantNamespace()
		t := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "acct", Namespace: ns},
			Spec: v1.TenantSpec{CreditLimit: credits("40")}} // 40 credits = 100 000 quota
		Expect(k8s.Create(ctx, t)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			g.Expect(t.Status.CreditLimitQuota).To(Equal(int64(100000)))
			b, err := ledger.TenantBalance(ctx, t.Status.UserID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(int64(b.CreditLimit)).To(Equal(int64(100000)))
		}, framework.Timeout, framework.Interval).Should(Succeed())

		t.Spec.CreditLimit = nil
		Expect(k8s.Update(ctx, t)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			g.Expect(t.Status.CreditLimitQuota).To(BeZero())
			b, err := ledger.TenantBalance(ctx, t.Status.UserID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(b.CreditLimit).To(BeZero())
		}, framework.Timeout, framework.Interval).Should(Succeed())

		bad := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "neg", Namespace: newTenantNamespace()},
			Spec: v1.TenantSpec{CreditLimit: credits("-5")}}
		Expect(k8s.Create(ctx, bad)).NotTo(Succeed(), "the schema refuses a negative credit line")
	})
})
