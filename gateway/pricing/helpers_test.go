package pricing

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

const sysNS = "modelgate-system"

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func dec(s string) *v1.Decimal { d := v1.Decimal(s); return &d }
func i32(n int32) *int32       { return &n }

func res(r string) *v1.PriceConditions { return &v1.PriceConditions{Resolution: r} }
func vid(b bool) *v1.PriceConditions   { return &v1.PriceConditions{HasVideoInput: &b} }
func resVid(r string, b bool) *v1.PriceConditions {
	return &v1.PriceConditions{Resolution: r, HasVideoInput: &b}
}

func perRequest(model, price string) v1.PriceRuleSpec {
	return v1.PriceRuleSpec{Model: v1.ModelID(model), ChargeType: v1.ChargePerRequest,
		PriceBasis: v1.BasisRequest, Unit: v1.UnitRequest, UnitPrice: v1.Decimal(price)}
}

func perSecond(model, price string) v1.PriceRuleSpec {
	return v1.PriceRuleSpec{Model: v1.ModelID(model), ChargeType: v1.ChargePerSecond,
		PriceBasis: v1.BasisOutputSeconds, Unit: v1.UnitSecond, UnitPrice: v1.Decimal(price)}
}

func perToken(model, basis, price string) v1.PriceRuleSpec {
	return v1.PriceRuleSpec{Model: v1.ModelID(model), ChargeType: v1.ChargePerToken,
		PriceBasis: v1.PriceBasis(basis), Unit: v1.Unit1MTokens, UnitPrice: v1.Decimal(price)}
}

// published wraps a spec into a published PriceRule object created age
// minutes after t0.
func published(ns, name string, age int, spec v1.PriceRuleSpec) v1.PriceRule {
	return v1.PriceRule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1,
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Minute))},
		Spec: spec,
		Status: v1.PriceRuleStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{
			{Type: v1.ConditionAccepted, Status: metav1.ConditionTrue, ObservedGeneration: 1},
			{Type: v1.ConditionPublished, Status: metav1.ConditionTrue, ObservedGeneration: 1},
		}},
	}
}

func mustCompile(t *testing.T, spec v1.PriceRuleSpec) *Rule {
	t.Helper()
	pr := published(sysNS, "r", 0, spec)
	r, err := Compile(&pr, sysNS)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return r
}
