package handlers_test

import (
	"fmt"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/framework"
)

func jsonInt(v int64) string { return strconv.FormatInt(v, 10) }

// pricedTextRoute declares a text model served by one backend of provider
// for groups, priced 3 / 15 USD per million input / output tokens, in the
// system namespace; it returns the model once the gateway's own cache has
// the route ready and the price published. Both go at the spec's cleanup.
func pricedTextRoute(prefix, provider string, groups ...v1.GroupName) string {
	model := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
	route := &v1.ModelRoute{
		ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: framework.SystemNamespace},
		Spec: v1.ModelRouteSpec{Model: v1.ModelID(model), Type: v1.ModelTypeText, MaxOutputTokens: 4096,
			Backends: []v1.Backend{{Name: "sim", Provider: provider, Weight: 1, Groups: groups}}},
	}
	Expect(stack.Client.Create(ctx, route)).To(Succeed())
	DeferCleanup(func() { _ = stack.Client.Delete(ctx, route) })
	out := v1.Decimal("15")
	rule := &v1.PriceRule{ObjectMeta: metav1.ObjectMeta{GenerateName: "price-", Namespace: framework.SystemNamespace},
		Spec: v1.PriceRuleSpec{Model: v1.ModelID(model), ChargeType: v1.ChargePerToken, PriceBasis: v1.BasisTextInputTokens,
			Unit: v1.Unit1MTokens, UnitPrice: "3", OutputUnitPrice: &out}}
	Expect(stack.Client.Create(ctx, rule)).To(Succeed())
	DeferCleanup(func() { _ = stack.Client.Delete(ctx, rule) })
	Expect(stack.WaitCached(ctx, route)).To(Succeed())
	Expect(stack.WaitCached(ctx, rule)).To(Succeed(), "published")
	return model
}
