// Package tasktest submits GenerationTasks in controller tests the way the
// gateway does, so reconciler specs start from the same state as production.
package tasktest

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/tasks"
)

// Task is an image submission priced per output image at UnitPrice USD
// (route "img" and rule "img-price" in RouteNamespace).
type Task struct {
	Namespace, RouteNamespace string
	Request                   string // the validated request body
	N                         int64  // outputs, reserved at 20 000 quota each
	UnitPrice                 string
	Backends                  []string
	TokenID, UserID           int64
	Accepted                  time.Time
}

// Submit reserves the estimate in the ledger and creates the task with its
// submission record.
func Submit(ctx context.Context, c client.Client, ledger *store.Store, s Task) (*v1.GenerationTask, error) {
	taskID := tasks.NewTaskID()
	requestID := "req-" + taskID
	estimate := billing.Quota(s.N * 20000)
	if err := ledger.Reserve(ctx, requestID, s.TokenID, s.UserID, estimate); err != nil {
		return nil, err
	}
	sub := &tasks.Submission{AcceptedAt: s.Accepted.UnixMilli(), RouteNamespace: s.RouteNamespace, RouteName: "img",
		Backends: s.Backends, PriceNamespace: s.RouteNamespace, PriceName: "img-price", TokenDisplay: "key", Outputs: s.N,
		Price: v1.PriceRuleSpec{Model: "img", ChargeType: v1.ChargePerRequest, PriceBasis: v1.BasisRequest,
			Unit: v1.UnitRequest, UnitPrice: v1.Decimal(s.UnitPrice)}}
	t := &v1.GenerationTask{
		// With the ledger finalizer, as the gateway creates tasks.
		ObjectMeta: metav1.ObjectMeta{Name: tasks.ObjectName(taskID), Namespace: s.Namespace, Finalizers: []string{v1.LedgerFinalizer},
			CreationTimestamp: metav1.NewTime(s.Accepted)},
		Spec: v1.GenerationTaskSpec{TaskID: taskID, Model: "img", Type: v1.ModelTypeImage, Profile: v1.ProfileMultiImage,
			Request: runtime.RawExtension{Raw: []byte(s.Request)}, TokenName: "key", TokenID: s.TokenID, UserID: s.UserID,
			ReservedQuota: int64(estimate), RequestID: requestID, Submission: sub},
	}
	return t, c.Create(ctx, t)
}

// Step runs one reconcile of t and reads t back (it may be gone: deleted
// after its retention).
func Step(ctx context.Context, r reconcile.Reconciler, c client.Client, t *v1.GenerationTask) (reconcile.Result, error) {
	res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(t)})
	if err != nil {
		return res, err
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(t), t); !apierrors.IsNotFound(err) {
		return res, err
	}
	return res, nil
}
