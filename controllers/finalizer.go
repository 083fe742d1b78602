package controllers

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// ensureFinalizer adds the ledger finalizer to a live object that lacks it
// and reports whether it did. The caller then ends the reconcile, as
// cluster-api's reconcilers do: the update's own event starts the next one.
// Going on would act on this reconcile's object while that event is still on
// its way, and the next reconcile, woken by it, could read the cache before
// this one's status write and repeat a side effect (a submission to an
// upstream) that this one already made.
func ensureFinalizer(ctx context.Context, c client.Client, obj client.Object) (bool, error) {
	if !obj.GetDeletionTimestamp().IsZero() || controllerutil.ContainsFinalizer(obj, v1.LedgerFinalizer) {
		return false, nil
	}
	controllerutil.AddFinalizer(obj, v1.LedgerFinalizer)
	if err := c.Update(ctx, obj); err != nil {
		return false, fmt.Errorf("add finalizer: %w", err)
	}
	return true, nil
}

// finalize runs cleanup for a deleted object that still holds the ledger
// finalizer, then removes it. A failed cleanup keeps the finalizer, and the
// reconcile is retried with backoff; cleanups are idempotent.
func finalize(ctx context.Context, c client.Client, obj client.Object, cleanup func(context.Context) error) error {
	if !controllerutil.ContainsFinalizer(obj, v1.LedgerFinalizer) {
		return nil
	}
	if err := cleanup(ctx); err != nil {
		return err
	}
	return removeFinalizer(ctx, c, obj)
}

// removeFinalizer drops the ledger finalizer; a gone object is fine.
func removeFinalizer(ctx context.Context, c client.Client, obj client.Object) error {
	if !controllerutil.RemoveFinalizer(obj, v1.LedgerFinalizer) {
		return nil
	}
	if err := c.Update(ctx, obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	return nil
}
