package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Object is a kind the skeleton reconciles: its status carries conditions
// and an observedGeneration.
type Object interface {
	client.Object
	GetConditions() []metav1.Condition
	SetConditions([]metav1.Condition)
	SetObservedGeneration(int64)
}

// Reconciler is one kind's Reconcile: Get (NotFound = done) → finalizer →
// the steps in order → conditions from their outcomes → one status patch,
// deferred so that it happens whatever the steps did, and only when the
// status changed (every write is a watch event for every gateway).
type Reconciler[T Object] struct {
	Client client.Client
	// New returns an empty object of the kind.
	New func() T
	// Finalizer, when set, is held on live objects and removed once
	// Finalize has cleaned up after a deleted one.
	Finalizer string
	Finalize  func(context.Context, T) error
	// APIReader, when set, reads a deleted object again from the API
	// server (not the cache) before Finalize, for a kind whose cleanup is
	// not idempotent (a cancel at a vendor): a reconcile woken while the
	// previous one ran can read a cache that still holds the object with
	// its finalizer after that one removed it, and would clean up twice.
	// Gone, or without the finalizer, means done.
	APIReader client.Reader
	Steps     []Step[T]
	// ReadyMessage is Ready's message when every gating step is done.
	ReadyMessage func(T) string
	// MoreConditions sets conditions computed from the whole pass rather
	// than from one step (LedgerSynced); optional.
	MoreConditions func(conds *[]metav1.Condition, gen int64, rep Report)
	// Status, when set, replaces the conditions computed from the steps'
	// outcomes: for a kind whose conditions describe where the object
	// stands (a state machine that takes several passes), computed from
	// the object after the steps ran. observedGeneration moves after a pass
	// without error.
	Status func(obj T, rep Report)
}

// Reconcile runs one pass over the object named by req.
func (r *Reconciler[T]) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, err error) {
	obj := r.New()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		if r.Finalizer == "" {
			return ctrl.Result{}, nil
		}
		if r.APIReader != nil {
			if err := r.APIReader.Get(ctx, req.NamespacedName, obj); err != nil {
				return ctrl.Result{}, client.IgnoreNotFound(err)
			}
		}
		return ctrl.Result{}, Finalize(ctx, r.Client, obj, r.Finalizer, func(ctx context.Context) error { return r.Finalize(ctx, obj) })
	}
	if r.Finalizer != "" {
		if added, err := EnsureFinalizer(ctx, r.Client, obj, r.Finalizer); added || err != nil {
			return ctrl.Result{}, err
		}
	}
	before := obj.DeepCopyObject().(T)
	defer func() {
		if perr := PatchStatusIfChanged(ctx, r.Client, before, obj); perr != nil {
			err = errors.Join(err, perr)
		}
	}()
	rep := Run(ctx, obj, r.Steps)
	r.setStatus(obj, rep)
	return ctrl.Result{RequeueAfter: rep.RequeueAfter}, rep.Err
}

// setStatus computes the conditions from the pass; observedGeneration moves
// only after a clean one.
func (r *Reconciler[T]) setStatus(obj T, rep Report) {
	gen := obj.GetGeneration()
	if r.Status != nil {
		r.Status(obj, rep)
		if rep.Err == nil {
			obj.SetObservedGeneration(gen)
		}
		return
	}
	conds := obj.GetConditions()
	SetConditions(&conds, gen, rep.Outcomes)
	msg := "reconciled"
	if r.ReadyMessage != nil {
		msg = r.ReadyMessage(obj)
	}
	SetReady(&conds, gen, rep.Outcomes, msg)
	if r.MoreConditions != nil {
		r.MoreConditions(&conds, gen, rep)
	}
	obj.SetConditions(conds)
	if rep.Clean() {
		obj.SetObservedGeneration(gen)
	}
}

// PatchStatusIfChanged writes obj's status when it differs from before's, as
// a merge patch so a concurrent spec change is not overwritten.
func PatchStatusIfChanged(ctx context.Context, c client.Client, before, obj client.Object) error {
	if equality.Semantic.DeepEqual(before, obj) {
		return nil
	}
	// A gone object (deleted once its finalizer went) has no status to keep.
	if err := c.Status().Patch(ctx, obj, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("patch status: %w", err)
	}
	return nil
}

// EnsureFinalizer adds finalizer to a live object that lacks it and reports
// whether it did. The caller then ends the reconcile, as cluster-api's
// reconcilers do: the update's own event starts the next one. Going on
// would act on this reconcile's object while that event is still on its
// way, and the next reconcile, woken by it, could read the cache before
// this one's status write and repeat a side effect that this one already
// made.
//
// It is a merge patch of the finalizers under the object's resourceVersion
// (a stale object is a conflict, and the reconcile is retried), not an
// Update: an Update sends the whole spec back, and a field the API server
// defaulted in a form Go writes differently (a duration "24h" comes back as
// "24h0m0s") breaks a spec immutability rule.
func EnsureFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) (bool, error) {
	if !obj.GetDeletionTimestamp().IsZero() || controllerutil.ContainsFinalizer(obj, finalizer) {
		return false, nil
	}
	before, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return false, fmt.Errorf("add finalizer: %T is not a client.Object", obj)
	}
	controllerutil.AddFinalizer(obj, finalizer)
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, fmt.Errorf("add finalizer: %w", err)
	}
	return true, nil
}

// Finalize runs cleanup for a deleted object that still holds finalizer,
// then removes it. A failed cleanup keeps the finalizer, and the reconcile
// is retried with backoff; cleanups are idempotent.
func Finalize(ctx context.Context, c client.Client, obj client.Object, finalizer string, cleanup func(context.Context) error) error {
	if !controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	if err := cleanup(ctx); err != nil {
		return err
	}
	return RemoveFinalizer(ctx, c, obj, finalizer)
}

// RemoveFinalizer drops finalizer; a gone object is fine.
//
// It is a JSON patch that tests the finalizer's place in the list and
// removes it there, not an Update: an Update carries the resourceVersion
// this reconcile read, and a status write since (the task's own poll, or
// a cache that lags) makes it a conflict, so the next reconcile runs the
// cleanup again after it already ran (a second cancel at the vendor). The
// test keeps what a merge patch of the whole list would not: a finalizer
// another controller adds meanwhile, and a list that changed under the
// index (the patch then fails and the reconcile is retried).
func RemoveFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) error {
	at := slices.Index(obj.GetFinalizers(), finalizer)
	if at < 0 {
		return nil
	}
	path := fmt.Sprintf("/metadata/finalizers/%d", at)
	ops, err := json.Marshal([]map[string]string{
		{"op": "test", "path": path, "value": finalizer},
		{"op": "remove", "path": path},
	})
	if err != nil {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	if err := c.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, ops)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	controllerutil.RemoveFinalizer(obj, finalizer)
	return nil
}
