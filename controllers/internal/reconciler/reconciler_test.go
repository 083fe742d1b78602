package reconciler

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// The whole Reconcile against controller-runtime's fake client: no API
// server, but the same Get, Update and status Patch calls.

const finalizer = "modelgate.io/test"

type fixture struct {
	client.Client
	patches int
}

func newFixture(t *testing.T, objs ...client.Object) *fixture {
	scheme := runtime.NewScheme()
	NewWithT(t).Expect(v1.AddToScheme(scheme)).To(Succeed())
	f := &fixture{}
	f.Client = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&v1.Tenant{}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				f.patches++
				return c.SubResource(sub).Patch(ctx, obj, p, opts...)
			},
		}).Build()
	return f
}

func tenantReconciler(c client.Client, steps ...Step[*v1.Tenant]) *Reconciler[*v1.Tenant] {
	return &Reconciler[*v1.Tenant]{
		Client: c, New: func() *v1.Tenant { return &v1.Tenant{} },
		Finalizer: finalizer, Finalize: func(context.Context, *v1.Tenant) error { return nil },
		Steps: steps, ReadyMessage: func(*v1.Tenant) string { return "ready" },
	}
}

var key = types.NamespacedName{Namespace: "acme", Name: "acme"}

func TestReconcileNotFoundIsDone(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t)
	res, err := tenantReconciler(f).Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(ctrl.Result{}))
}

func TestReconcileAddsTheFinalizerAndStops(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Generation: 1}})
	ran := false
	_, err := tenantReconciler(f, Step[*v1.Tenant]{Run: func(context.Context, *v1.Tenant) Result { ran = true; return Done("Ok", "") }}).
		Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	g.Expect(err).NotTo(HaveOccurred())
	got := &v1.Tenant{}
	g.Expect(f.Get(context.Background(), key, got)).To(Succeed())
	g.Expect(got.Finalizers).To(ConsistOf(finalizer))
	g.Expect(ran).To(BeFalse(), "the update's own event starts the next reconcile")
	g.Expect(f.patches).To(BeZero())
}

func TestReconcilePatchesOnceAndOnlyWhenStatusChanged(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Generation: 2, Finalizers: []string{finalizer}}})
	r := tenantReconciler(f,
		Step[*v1.Tenant]{Condition: "A", Run: func(_ context.Context, t *v1.Tenant) Result {
			t.Status.UserID = 7
			return Done("Ok", "a").After(time.Minute)
		}},
		Step[*v1.Tenant]{Condition: "B", Run: func(context.Context, *v1.Tenant) Result { return Done("Ok", "b").After(time.Second) }},
	)
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(Equal(time.Second))
	g.Expect(f.patches).To(Equal(1))
	got := &v1.Tenant{}
	g.Expect(f.Get(context.Background(), key, got)).To(Succeed())
	g.Expect(got.Status.UserID).To(Equal(int64(7)))
	g.Expect(got.Status.ObservedGeneration).To(Equal(int64(2)))
	g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionReady)).To(BeTrue())

	_, err = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.patches).To(Equal(1), "nothing changed: no write, no watch event")
}

func TestReconcileMovesObservedGenerationOnlyOnACleanPass(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Generation: 3, Finalizers: []string{finalizer}},
		Status: v1.TenantStatus{ObservedGeneration: 2}})
	boom := errors.New("ledger down")
	_, err := tenantReconciler(f,
		Step[*v1.Tenant]{Condition: "A", Run: func(context.Context, *v1.Tenant) Result { return Failed("LedgerUnavailable", boom) }},
		Step[*v1.Tenant]{Condition: "B", Run: func(context.Context, *v1.Tenant) Result { return Done("Ok", "b") }},
	).Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	g.Expect(err).To(MatchError(boom))
	got := &v1.Tenant{}
	g.Expect(f.Get(context.Background(), key, got)).To(Succeed())
	g.Expect(got.Status.ObservedGeneration).To(Equal(int64(2)))
	ready := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionReady)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Message).To(Equal("A: ledger down"))
	g.Expect(meta.FindStatusCondition(got.Status.Conditions, "B").Reason).To(Equal(v1.ReasonBlocked))
}

func TestReconcileFinalizesADeletedObject(t *testing.T) {
	g := NewWithT(t)
	now := metav1.Now()
	f := newFixture(t, &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
		Finalizers: []string{finalizer}, DeletionTimestamp: &now}})
	r := tenantReconciler(f)
	cleanups := 0
	r.Finalize = func(context.Context, *v1.Tenant) error {
		cleanups++
		if cleanups == 1 {
			return errors.New("ledger down")
		}
		return nil
	}
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	g.Expect(err).To(MatchError("ledger down"), "a failed cleanup keeps the finalizer and is retried")
	g.Expect(f.Get(context.Background(), key, &v1.Tenant{})).To(Succeed())

	_, err = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(apierrors.IsNotFound(f.Get(context.Background(), key, &v1.Tenant{}))).To(BeTrue(), "the finalizer went, and with it the object")
	g.Expect(f.patches).To(BeZero())
}

// A reconcile's copy is often older than the object (a status write since,
// a cache that lags): dropping the finalizer must not depend on its
// resourceVersion, or the cleanup runs again on the retry. What another
// controller added meanwhile stays.
func TestRemoveFinalizerFromAStaleCopy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
		Finalizers: []string{finalizer}}})
	stale := &v1.Tenant{}
	g.Expect(f.Get(ctx, key, stale)).To(Succeed())

	fresh := stale.DeepCopy()
	fresh.Finalizers = append(fresh.Finalizers, "example.com/other")
	g.Expect(f.Update(ctx, fresh)).To(Succeed())
	g.Expect(fresh.ResourceVersion).NotTo(Equal(stale.ResourceVersion))

	g.Expect(RemoveFinalizer(ctx, f, stale, finalizer)).To(Succeed())
	got := &v1.Tenant{}
	g.Expect(f.Get(ctx, key, got)).To(Succeed())
	g.Expect(got.Finalizers).To(Equal([]string{"example.com/other"}))

	// The list changed under the copy's index: refused, not a wrong removal.
	moved := got.DeepCopy()
	moved.Finalizers = []string{"example.com/first", "example.com/other", finalizer}
	g.Expect(f.Update(ctx, moved)).To(Succeed())
	staleAgain := got.DeepCopy()
	staleAgain.Finalizers = []string{finalizer}
	g.Expect(RemoveFinalizer(ctx, f, staleAgain, finalizer)).NotTo(Succeed())
	g.Expect(f.Get(ctx, key, got)).To(Succeed())
	g.Expect(got.Finalizers).To(Equal([]string{"example.com/first", "example.com/other", finalizer}))
}
