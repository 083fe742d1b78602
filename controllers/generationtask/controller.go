package generationtask

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers/internal/reconciler"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/tasks"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// Defaults.
const (
	// DefaultRetention is how long a final task object stays before it is
	// deleted (the ledger archive keeps answering queries).
	DefaultRetention = time.Hour
	// ResultValidity is how long generated URLs are valid (expires_at).
	ResultValidity = 24 * time.Hour
	// DefaultReviewDeadline is the private asset review deadline per round.
	DefaultReviewDeadline = 20 * time.Minute

	minPoll = 250 * time.Millisecond
	maxPoll = 10 * time.Second
)

// Ledger is the part of the ledger the task controller uses; *store.Store
// implements it.
type Ledger interface {
	Settle(ctx context.Context, requestID string, actual billing.Quota) error
	Refund(ctx context.Context, requestID string) error
	RecordTaskUsage(ctx context.Context, row store.UsageRow) (bool, error)
	UpsertTask(ctx context.Context, rec store.TaskRecord) error
	PrepareReviewAsset(ctx context.Context, a store.ReviewAsset, now time.Time) (store.ReviewAsset, error)
	DecideReviewAsset(ctx context.Context, a store.ReviewAsset, state string, now time.Time) (store.ReviewAsset, error)
	RecordReviewRef(ctx context.Context, a store.ReviewAsset, ref string) (store.ReviewAsset, error)
}

var _ Ledger = (*store.Store)(nil)

// Reconciler advances image and video tasks: queued → in_progress →
// completed | failed. It settles or refunds their reservation, writes the
// usage row and is the only writer of the ledger archive row, and deletes
// the object after its retention once the webhook controller is done.
type Reconciler struct {
	Client client.Client
	// APIReader reads from the API server, not the cache (the manager's
	// GetAPIReader); nil reads through Client.
	APIReader client.Reader
	Ledger    Ledger
	// Upstreams are the adapters tasks run on (built once per process by builtin.Registry); the
	// simulated backend is one of them.
	Upstreams *upstream.Registry
	// Blobs receives generated assets; nil fails every task.
	Blobs *blob.Store
	// Downloads fetches the output URLs an upstream names (the process's
	// upstream.Egress.Downloads; nil: public addresses only).
	Downloads *http.Client
	Clock     clock.PassiveClock
	// Retention keeps a final task object this long; default DefaultRetention.
	Retention time.Duration
	// ReviewDeadline bounds one private asset review round; default
	// DefaultReviewDeadline (the contract's 20 minutes).
	ReviewDeadline time.Duration
	// Events records each task's end (nil: none).
	Events events.EventRecorder
	// Workers is the number of concurrent reconciles.
	Workers int
	// Copier copies URL assets under private asset review into the blob
	// store before the review service sees them; nil copies into Blobs
	// through the guarded dialer (assetcopy.Copier).
	Copier AssetCopier
}

// +kubebuilder:rbac:groups=modelgate.io,resources=generationtasks,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=modelgate.io,resources=generationtasks/finalizers,verbs=update
// +kubebuilder:rbac:groups=modelgate.io,resources=generationtasks/status,verbs=get;update;patch

// Reconcile advances one GenerationTask by one pass.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &pass{Reconciler: r, now: r.Clock.Now()}
	return p.skeleton().Reconcile(ctx, req)
}

// pass is one reconcile: the steps share what they learn in it.
type pass struct {
	*Reconciler
	now   time.Time
	facts Facts
}

// skeleton is the task's reconcile. Each step ends the pass when it moved
// the task (its status write wakes the next one), so every pass does one
// transition, as an upstream is charged once per submission.
func (p *pass) skeleton() *reconciler.Reconciler[*v1.GenerationTask] {
	return &reconciler.Reconciler[*v1.GenerationTask]{
		Client:    p.Client,
		New:       func() *v1.GenerationTask { return &v1.GenerationTask{} },
		Finalizer: v1.LedgerFinalizer,
		Finalize:  p.abandon, // cancels at the vendor: on the object the API server holds
		APIReader: p.apiReader(),
		Steps: []reconciler.Step[*v1.GenerationTask]{
			{Run: p.admit},   // Admitted
			{Run: p.execute}, // Reviewed, Submitted, and the charge of Settled
			{Run: p.archive}, // Settled: the final state in the archive
			{Run: p.lookUpWebhook},
			{Run: p.retain}, // delete after delivery and retention
		},
		Status: func(t *v1.GenerationTask, _ reconciler.Report) { SetConditions(t, p.facts) },
	}
}

// moved ends a pass that changed the task: later steps wait for the next.
func moved(what string) reconciler.Result { return reconciler.NotDone("Moved", "%s", what) }

// admit takes a new task in: queued, its reservation listed as a
// pre_consumed usage row, and its first archive row (a query finds it even
// once the object is gone).
func (p *pass) admit(ctx context.Context, t *v1.GenerationTask) reconciler.Result {
	if t.Status.Phase != "" {
		return reconciler.Done("Admitted", "")
	}
	t.Status.Phase, t.Status.Progress = v1.TaskQueued, 0
	t.Status.Billing = &v1.TaskBilling{Status: v1.BillingPending}
	if err := p.preConsumed(ctx, t); err != nil {
		return reconciler.Kept(err)
	}
	if err := p.writeArchive(ctx, t); err != nil {
		return reconciler.Kept(err)
	}
	return moved("admitted")
}

// execute runs an unfinished task one step on: review, submission, a
// poll, or its end (settled or refunded).
func (p *pass) execute(ctx context.Context, t *v1.GenerationTask) reconciler.Result {
	if tasks.Final(t.Status.Phase) {
		return reconciler.Done("Final", "")
	}
	res, err := p.run(ctx, t)
	if err != nil {
		return reconciler.Kept(err)
	}
	return moved("executed").After(res.RequeueAfter)
}

// archive writes a final task's state to the ledger archive once.
func (p *pass) archive(ctx context.Context, t *v1.GenerationTask) reconciler.Result {
	if meta.IsStatusConditionTrue(t.Status.Conditions, v1.ConditionSettled) {
		p.facts.Archived = true
		return reconciler.Done("Archived", "")
	}
	if err := p.writeArchive(ctx, t); err != nil {
		p.facts.ArchiveErr = err
		return reconciler.Kept(err)
	}
	p.facts.Archived = true
	return reconciler.Done("Archived", "")
}

// lookUpWebhook learns whether the tenant configures a webhook: the object
// stays until the webhook controller delivered its event or gave up.
func (p *pass) lookUpWebhook(ctx context.Context, t *v1.GenerationTask) reconciler.Result {
	spec, err := WebhookOf(ctx, p.Client, t)
	if err != nil {
		return reconciler.Kept(fmt.Errorf("find the task's tenant: %w", err))
	}
	configured := spec != nil
	p.facts.Webhook = &configured
	if d := t.Status.Webhook; configured && (d == nil || d.State == v1.WebhookPending) {
		return moved("webhook pending") // its status write wakes us
	}
	return reconciler.Done("Delivered", "")
}

// retain deletes a final, archived, delivered task after its retention.
func (p *pass) retain(ctx context.Context, t *v1.GenerationTask) reconciler.Result {
	retention := p.Retention
	if retention <= 0 {
		retention = DefaultRetention
	}
	final := t.CreationTimestamp.Time
	if t.Status.CompletedAt != nil {
		final = t.Status.CompletedAt.Time
	}
	if left := final.Add(retention).Sub(p.now); left > 0 {
		return reconciler.Done("Retained", "").After(left)
	}
	// Nothing is left for the finalizer.
	if err := reconciler.RemoveFinalizer(ctx, p.Client, t, v1.LedgerFinalizer); err != nil {
		return reconciler.Kept(err)
	}
	if err := p.Client.Delete(ctx, t); client.IgnoreNotFound(err) != nil {
		return reconciler.Kept(fmt.Errorf("delete after retention: %w", err))
	}
	return reconciler.Done("Deleted", "")
}

// writeArchive writes the task's current state to the ledger archive.
func (p *pass) writeArchive(ctx context.Context, t *v1.GenerationTask) error {
	rec, err := tasks.Record(t)
	if err != nil {
		return err
	}
	return p.Ledger.UpsertTask(ctx, rec)
}

// abandon is what deleting an unfinished task does: the upstream is asked
// to cancel where its adapter can, the reservation is refunded, and the
// task is archived as failed with code "deleted" (nothing is charged). A
// final task has nothing left to settle.
func (p *pass) abandon(ctx context.Context, t *v1.GenerationTask) error {
	if tasks.Final(t.Status.Phase) {
		return nil
	}
	p.cancelUpstream(ctx, t)
	if err := p.failWith(ctx, t, v1.CodeDeleted, "the task was deleted before it finished"); err != nil {
		return err
	}
	if err := p.writeArchive(ctx, t); err != nil {
		return fmt.Errorf("archive the deleted task: %w", err)
	}
	log.FromContext(ctx).Info("deleted task refunded and archived as failed", "task", t.Spec.TaskID)
	return nil
}

// apiReader reads past the cache (see Reconciler.APIReader).
func (r *Reconciler) apiReader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.GenerationTask{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Named("generationtask").
		Complete(r)
}
