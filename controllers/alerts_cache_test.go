package controllers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/budget"
	"github.com/modelgate/modelgate/gateway/platform/metrics"
	"github.com/modelgate/modelgate/gateway/webhook"
)

// A pass that reads a cache behind the controller's own last write (the
// crossing still Pending there, Fired on the API server) raises nothing;
// a crossing the API server holds as Pending is raised once.
func TestAnAlertIsRaisedOnlyAsTheAPIServerHoldsIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	scheme := runtime.NewScheme()
	g.Expect(v1.AddToScheme(scheme)).To(Succeed())
	g.Expect(corev1.AddToScheme(scheme)).To(Succeed())

	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	pending := v1.AlertStatus{Threshold: "remainingPercent=20", State: v1.AlertPending, Crossings: 1,
		CrossedAt: metav1.NewTime(now.Add(-time.Second)), Quota: 100, OfQuota: 1000}
	fired := *pending.DeepCopy()
	fired.State = v1.AlertFired
	fired.Webhook = &v1.WebhookDelivery{ID: "evt_1", State: v1.WebhookDelivered, Attempts: 1}
	stored := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "acct", Namespace: "cache-lag", UID: "uid-1"},
		Spec: v1.TenantSpec{Alerts: []v1.TenantAlert{{RemainingPercent: ptr.To[int32](20)}},
			Webhook: &v1.WebhookSpec{URL: srv.URL, SecretRef: v1.SecretKeyRef{Name: "hook", Key: "secret"}}},
		Status: v1.TenantStatus{UserID: 8, Alerts: []v1.AlertStatus{fired}}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: "cache-lag"},
		Data: map[string][]byte{"secret": []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(stored, secret).WithStatusSubresource(&v1.Tenant{}).Build()

	rec := events.NewFakeRecorder(10)
	a := newAlerter(c, c, rec, &webhook.Sender{Client: srv.Client()}, clocktesting.NewFakePassiveClock(now), time.Second)
	in := alertInput{
		subject:    budget.Subject{Object: budget.ObjectTenant, UID: "uid-1", Namespace: "cache-lag", Name: "acct", UserID: 8},
		thresholds: budget.ForTenant(stored.Spec.Alerts),
		figures:    budget.Figures{Remain: 100, Total: 1000},
		webhook:    stored.Spec.Webhook,
	}
	raisedCount := func() float64 {
		return testutil.ToFloat64(metrics.BudgetAlerts.WithLabelValues("cache-lag", budget.ObjectTenant, string(budget.RemainingPercent)))
	}

	// The cache still shows the crossing Pending; the API server has it Fired.
	stale := stored.DeepCopy()
	stale.Status.Alerts = []v1.AlertStatus{pending}
	a.run(ctx, stale, in)
	g.Expect(hits.Load()).To(BeZero(), "no second webhook")
	g.Expect(rec.Events).To(BeEmpty(), "no second Event")
	g.Expect(raisedCount()).To(BeZero())
	g.Expect(equality.Semantic.DeepEqual(stale.Status.Alerts, []v1.AlertStatus{fired})).To(BeTrue(),
		"the pass goes on from what the API server holds: %v", stale.Status.Alerts)

	// The API server holds it Pending: raised once.
	live := &v1.Tenant{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(stored), live)).To(Succeed())
	live.Status.Alerts = []v1.AlertStatus{pending}
	g.Expect(c.Status().Update(ctx, live)).To(Succeed())
	a.run(ctx, live, in)
	g.Expect(hits.Load()).To(Equal(int32(1)))
	g.Expect(rec.Events).To(HaveLen(1))
	g.Expect(<-rec.Events).To(HavePrefix("Warning " + v1.EventBalanceLow))
	g.Expect(raisedCount()).To(Equal(1.0))
	g.Expect(live.Status.Alerts[0].State).To(Equal(v1.AlertFired))
	g.Expect(live.Status.Alerts[0].Webhook.State).To(Equal(v1.WebhookDelivered))
}
