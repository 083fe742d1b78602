package wire

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/platform/kubescheme"
	"github.com/modelgate/modelgate/gateway/pricing"
)

// A price that reached the cache before the event that marks the table
// stale is found by Recheck, and Recheck rebuilds at most once per interval.
func TestPriceBookRecheckSeesTheCacheBeforeTheEvent(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(kubescheme.New()).Build()
	book := &priceBook{cache: c, system: "sys"}
	if _, err := book.Table().Select("sys", "m", "default", pricing.Facts{}); !errors.Is(err, pricing.ErrNoPrice) {
		t.Fatalf("before the rule: %v, want ErrNoPrice", err)
	}
	rule := &v1.PriceRule{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "sys", Generation: 1},
		Spec: v1.PriceRuleSpec{Model: "m", ChargeType: v1.ChargePerRequest, PriceBasis: v1.BasisRequest,
			Unit: v1.UnitRequest, UnitPrice: "0.03"},
		Status: v1.PriceRuleStatus{Conditions: []metav1.Condition{{Type: v1.ConditionPublished, Status: metav1.ConditionTrue,
			ObservedGeneration: 1, Reason: "Published", LastTransitionTime: metav1.Now()}}}}
	if err := c.Create(ctx, rule); err != nil {
		t.Fatal(err)
	}
	// No event has marked the table dirty: Table still has no price.
	if _, err := book.Table().Select("sys", "m", "default", pricing.Facts{}); !errors.Is(err, pricing.ErrNoPrice) {
		t.Fatalf("stale table: %v, want ErrNoPrice", err)
	}
	time.Sleep(recheckEvery)
	if _, err := book.Recheck().Select("sys", "m", "default", pricing.Facts{}); err != nil {
		t.Fatalf("Recheck: %v", err)
	}
	// A second recheck within the interval does not rebuild.
	if err := c.Delete(ctx, rule); err != nil {
		t.Fatal(err)
	}
	if _, err := book.Recheck().Select("sys", "m", "default", pricing.Facts{}); err != nil {
		t.Fatalf("a recheck within the interval rebuilt the table: %v", err)
	}
}
