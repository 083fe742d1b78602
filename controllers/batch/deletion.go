package batch

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers/internal/reconciler"
	"github.com/modelgate/modelgate/gateway/upstream"
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
// upstream job open, the job is cancelled, polled to its end and its
// answered lines billed; then the finalizer goes and the API server removes
// the batch.
func (r *Reconciler) release(ctx context.Context, b *v1.Batch) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(b, Finalizer) {
		return ctrl.Result{}, nil
	}
	if !b.Status.State.Terminal() && r.Upstream != nil {
		res, open, err := r.stopOpenJob(context.WithoutCancel(ctx), b)
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

// stopOpenJob moves the deleted batch's open upstream job toward its end:
// an unsubmitted one is refunded, a running one is cancelled (once) and
// polled, an ended one is collected and billed as a cancelled batch's is.
// open reports that the job still runs upstream.
func (r *Reconciler) stopOpenJob(ctx context.Context, b *v1.Batch) (res ctrl.Result, open bool, err error) {
	p, err := r.loadProgress(ctx, b)
	if err != nil {
		return res, true, err
	}
	j := &job{}
	found, err := r.readJSON(ctx, jobKey(b, p.Next), j)
	switch {
	case err != nil:
		return res, true, fmt.Errorf("read batch job: %w", err)
	case !found:
		return res, false, nil
	case j.ID == "":
		if j.Reservation == "" {
			return res, false, nil
		}
		return res, false, r.abandonJob(ctx, b, j)
	}
	state, err := r.Upstream.Status(ctx, b, j.Target, j.ID)
	if err != nil {
		return res, true, fmt.Errorf("read the upstream batch job: %w", err)
	}
	switch state.State {
	case upstream.BatchJobEnded:
		return res, false, r.collectJob(ctx, b, p, j)
	case upstream.BatchJobFailed:
		return res, false, r.Upstream.Refund(ctx, j.Reservation)
	}
	if !j.CancelSent {
		if err := r.Upstream.Cancel(ctx, b, j.Target, j.ID); err != nil {
			return res, true, fmt.Errorf("cancel the upstream batch job: %w", err)
		}
		j.CancelSent = true
		if err := r.writeJSON(ctx, jobKey(b, j.Start), j); err != nil {
			return res, true, fmt.Errorf("store batch job: %w", err)
		}
	}
	return ctrl.Result{RequeueAfter: r.pollInterval()}, true, nil
}

// holdFinalizer puts Finalizer on b. It is a merge patch of the finalizers
// alone, under b's resourceVersion (a stale b is a conflict, and the pass is
// retried), not an Update: an Update sends the whole spec back, and a spec
// the API server defaulted ("24h") comes back as Go writes it ("24h0m0s"),
// which the spec's immutability rule refuses.
func (r *Reconciler) holdFinalizer(ctx context.Context, b *v1.Batch) error {
	if controllerutil.ContainsFinalizer(b, Finalizer) {
		return nil
	}
	cp := b.DeepCopy()
	controllerutil.AddFinalizer(cp, Finalizer)
	if err := r.Client.Patch(ctx, cp, client.MergeFromWithOptions(b, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("add finalizer: %w", err)
	}
	// The patch answered the whole object; b keeps the pass's status, and
	// its resourceVersion, so that the pass's status patch (which ignores
	// the finalizers it then also carries) is not a conflict.
	b.Finalizers = cp.Finalizers
	return nil
}

// dropFinalizer takes Finalizer off b (reconciler.RemoveFinalizer: a JSON
// patch that keeps what others added): it ended, or was deleted and
// released. A reconcile that reads b from a cache still showing the
// finalizer finds no open job and removes nothing twice.
func (r *Reconciler) dropFinalizer(ctx context.Context, b *v1.Batch) error {
	return reconciler.RemoveFinalizer(ctx, r.Client, b, Finalizer)
}
