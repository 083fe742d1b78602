package batch

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers/internal/reconciler"
)

// Finalizer holds a Batch whose lines run on an upstream's batch API from
// its first job's submission until it ends. Deleted before then (kubectl
// delete, the tenant's namespace going away), the batch first stops its open
// job upstream and bills the lines the upstream ran; without it the job
// would run on at the platform's expense, billed to no one.
const Finalizer = "modelgate.io/upstream-job"

// releaseGrace bounds how long a deleted batch waits for its upstream job to
// end after the cancel (OpenAI's take up to 10 minutes). Past it the batch
// goes, and the job's reservation is left to the stale-reservation sweep.
const releaseGrace = time.Hour

// release is a deleted batch's last work: with the finalizer and an
// upstream job open, the job goes the way a cancelled batch's does (a
// deleted batch is stopping: runUpstream refunds a job never submitted,
// cancels a running one once, polls it and bills its answered lines when it
// ends); with none open, the finalizer goes and the API server removes the
// batch.
func (r *Reconciler) release(ctx context.Context, b *v1.Batch) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(b, Finalizer) {
		return ctrl.Result{}, nil
	}
	if !b.Status.State.Terminal() && r.Upstream != nil {
		ctx := context.WithoutCancel(ctx)
		p, err := r.loadProgress(ctx, b)
		var res ctrl.Result
		open := true
		if err == nil {
			res, open, _, err = r.runUpstream(ctx, b, p)
		}
		if open || err != nil {
			if r.Clock.Since(b.DeletionTimestamp.Time) < releaseGrace {
				return res, err
			}
			log.FromContext(ctx).Error(err, "the deleted batch's upstream job did not end; the batch is removed, its reservation is left to the sweep",
				"batch", b.Spec.BatchID, "grace", releaseGrace)
		}
	}
	return ctrl.Result{}, r.dropFinalizer(ctx, b)
}

// dropFinalizer takes Finalizer off b (reconciler.RemoveFinalizer: a JSON
// patch that keeps what others added): it ended, or was deleted and
// released. A reconcile that reads b from a cache still showing the
// finalizer finds no open job and removes nothing twice.
func (r *Reconciler) dropFinalizer(ctx context.Context, b *v1.Batch) error {
	return reconciler.RemoveFinalizer(ctx, r.Client, b, Finalizer)
}
