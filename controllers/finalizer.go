package controllers

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// ensureFinalizer adds the ledger finalizer to a live object that lacks it.
// The object is updated in place (new resourceVersion), so the reconcile can
// go on with it.
func ensureFinalizer(ctx context.Context, c client.Client, obj client.Object) error {
	if !obj.GetDeletionTimestamp().IsZero() || controllerutil.ContainsFinalizer(obj, v1.LedgerFinalizer) {
		return nil
	}
	controllerutil.AddFinalizer(obj, v1.LedgerFinalizer)
	if err := c.Update(ctx, obj); err != nil {
		return fmt.Errorf("add finalizer: %w", err)
	}
	return nil
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
