package controllers

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers/internal/reconciler"
)

// ensureFinalizer adds the ledger finalizer (reconciler.EnsureFinalizer).
func ensureFinalizer(ctx context.Context, c client.Client, obj client.Object) (bool, error) {
	return reconciler.EnsureFinalizer(ctx, c, obj, v1.LedgerFinalizer)
}

// finalize runs cleanup and drops the ledger finalizer (reconciler.Finalize).
func finalize(ctx context.Context, c client.Client, obj client.Object, cleanup func(context.Context) error) error {
	return reconciler.Finalize(ctx, c, obj, v1.LedgerFinalizer, cleanup)
}

// removeFinalizer drops the ledger finalizer; a gone object is fine.
func removeFinalizer(ctx context.Context, c client.Client, obj client.Object) error {
	return reconciler.RemoveFinalizer(ctx, c, obj, v1.LedgerFinalizer)
}
