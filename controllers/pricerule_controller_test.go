package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/framework"
)

func priceRule(ns, name string, mutate ...func(*v1.PriceRuleSpec)) *v1.PriceRule {
	out := v1.Decimal("15")
	p := &v1.PriceRule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1.PriceRuleSpec{
		Model: "chat-model", ChargeType: v1.ChargePerToken, PriceBasis: v1.BasisTextInputTokens,
		Unit: v1.Unit1MTokens, UnitPrice: "3", OutputUnitPrice: &out}}
	for _, m := range mutate {
		m(&p.Spec)
	}
	Expect(k8s.Create(ctx, p)).To(Succeed())
	return p
}

// conditionOf waits until obj has condition typ for its current generation and returns it.
func conditionOf(p *v1.PriceRule, typ string) *metav1.Condition {
	var c *metav1.Condition
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		c = meta.FindStatusCondition(p.Status.Conditions, typ)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.ObservedGeneration).To(Equal(p.Generation))
	}, framework.Timeout, framework.Interval).Should(Succeed())
	return c
}

var _ = Describe("PriceRule controller", func() {
	It("accepts a valid rule that an older one shadows, without publishing it", func() {
		ns := newTenantNamespace()
		first := priceRule(ns, "first")
		Expect(conditionOf(first, v1.ConditionPublished).Status).To(Equal(metav1.ConditionTrue))

		second := priceRule(ns, "second")
		published := conditionOf(second, v1.ConditionPublished)
		Expect(published.Status).To(Equal(metav1.ConditionFalse))
		Expect(published.Reason).To(Equal(v1.ReasonConflict))
		Expect(published.Message).To(ContainSubstring(`PriceRule "first" already prices model chat-model`))
		Expect(conditionOf(second, v1.ConditionAccepted).Status).To(Equal(metav1.ConditionTrue), "its spec is valid")
		Expect(second.Status.ConflictsWith).To(Equal("first"))
		ready := conditionOf(second, v1.ConditionReady)
		Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		Expect(ready.Message).To(HavePrefix("Published: "))

		By("deleting the older rule, which publishes the other")
		Expect(k8s.Delete(ctx, first)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(second), second)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(second.Status.Conditions, v1.ConditionPublished)).To(BeTrue())
			g.Expect(second.Status.ConflictsWith).To(BeEmpty())
		}, framework.Timeout, framework.Interval).Should(Succeed())
	})

	It("refuses a spec the evaluator cannot use and does not try to publish it", func() {
		ns := newTenantNamespace()
		bad := priceRule(ns, "bad", func(s *v1.PriceRuleSpec) { s.Timezone = "Mars/Olympus_Mons" })
		accepted := conditionOf(bad, v1.ConditionAccepted)
		Expect(accepted.Status).To(Equal(metav1.ConditionFalse))
		Expect(accepted.Reason).To(Equal(v1.ReasonInvalid))
		published := conditionOf(bad, v1.ConditionPublished)
		Expect(published.Status).To(Equal(metav1.ConditionFalse))
		Expect(published.Reason).To(Equal(v1.ReasonBlocked))
		Expect(published.Message).To(Equal("not attempted: Accepted is False (Invalid)"))
	})
})
