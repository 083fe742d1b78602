package generationtask

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers/internal/reconciler"
	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/tasks"
	"github.com/modelgate/modelgate/gateway/webhook"
)

// defaultWebhookAttempts applies when the Tenant leaves maxAttempts unset.
const defaultWebhookAttempts = 7

// WebhookEvent is the body of a task webhook: an event envelope in the
// OpenAI webhook style whose data is the task exactly as the task query
// returns it, billing included (data.billing).
type WebhookEvent struct {
	Object    string     `json:"object"`
	ID        string     `json:"id"`
	Type      string     `json:"type"`
	CreatedAt int64      `json:"created_at"`
	Data      tasks.View `json:"data"`
}

// EventID is a task's webhook-id: stable across retries so receivers can
// drop duplicates.
func EventID(taskID string) string { return "evt_" + strings.TrimPrefix(taskID, "task_") }

// WebhookReconciler delivers the final-state event of a task to its
// tenant's webhook. It owns status.webhook and writes nothing else: the
// delivery state lives there, so a restarted manager continues the
// schedule instead of starting over, and the task controller (which keeps
// the object until the event is delivered or given up) reads it.
type WebhookReconciler struct {
	Client client.Client
	Blobs  *blob.Store
	Clock  clock.PassiveClock
	// Events records a webhook that gave up (nil: none).
	Events events.EventRecorder
	// Webhooks sends the events (the zero value is ready to use).
	Webhooks webhook.Sender
	// Workers is the number of concurrent reconciles.
	Workers int
}

// Reconcile makes the next delivery attempt of a settled task's event when
// one is due.
func (r *WebhookReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	t := &v1.GenerationTask{}
	if err := r.Client.Get(ctx, req.NamespacedName, t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// The event carries the final, settled state: sent once the task
	// controller archived it (Settled), never for a task being deleted.
	if !t.DeletionTimestamp.IsZero() || !meta.IsStatusConditionTrue(t.Status.Conditions, v1.ConditionSettled) {
		return ctrl.Result{}, nil
	}
	before := t.DeepCopy()
	defer func() {
		if perr := reconciler.PatchStatusIfChanged(ctx, r.Client, before, t); perr != nil {
			err = perr
		}
	}()
	return ctrl.Result{RequeueAfter: r.deliver(ctx, t, r.Clock.Now())}, nil
}

// deliver makes the next attempt when one is due and reports when to come
// back (0: nothing left to do).
func (r *WebhookReconciler) deliver(ctx context.Context, t *v1.GenerationTask, now time.Time) time.Duration {
	d := t.Status.Webhook
	if d != nil && d.State != v1.WebhookPending {
		return 0
	}
	spec, err := WebhookOf(ctx, r.Client, t)
	if err != nil {
		log.FromContext(ctx).Error(err, "find the task's tenant for its webhook", "task", t.Spec.TaskID)
		return maxPoll
	}
	if spec == nil {
		return 0 // no webhook configured
	}
	if d == nil {
		d = &v1.WebhookDelivery{ID: EventID(t.Spec.TaskID), State: v1.WebhookPending}
		t.Status.Webhook = d
	}
	if at := d.NextAttemptAt; at != nil && now.Before(at.Time) {
		return at.Sub(now)
	}
	maxAttempts := spec.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = defaultWebhookAttempts
	}
	res := r.send(ctx, t, spec, d.ID, now)
	d.Attempts++
	d.LastStatusCode = int32(res.StatusCode)
	if res.Err == nil {
		at := metav1.NewTime(now)
		d.State, d.LastError, d.NextAttemptAt, d.DeliveredAt = v1.WebhookDelivered, "", nil, &at
		return 0
	}
	d.LastError = res.Err.Error()
	if d.Attempts >= maxAttempts || res.Forbidden { // a forbidden address stays forbidden
		d.State, d.NextAttemptAt = v1.WebhookFailed, nil
		log.FromContext(ctx).Info("webhook gave up", "task", t.Spec.TaskID, "attempts", d.Attempts, "reason", d.LastError)
		reconciler.Recorder{R: r.Events}.Warning(t, v1.EventWebhookGaveUp, "DeliverWebhook", "event %s not delivered after %d attempts: %s", d.ID, d.Attempts, d.LastError)
		return 0
	}
	wait := roundUp(webhook.RetryAfter(d.Attempts))
	next := metav1.NewTime(now.Add(wait))
	d.NextAttemptAt = &next
	return wait
}

// send builds, signs and posts the event.
func (r *WebhookReconciler) send(ctx context.Context, t *v1.GenerationTask, spec *v1.WebhookSpec, id string, now time.Time) webhook.Result {
	key, err := SigningKey(ctx, r.Client, t.Namespace, spec.SecretRef)
	if err != nil {
		return webhook.Result{Err: err}
	}
	ev := WebhookEvent{Object: "event", ID: id, Type: v1.WebhookEventTaskCompleted, CreatedAt: now.Unix(),
		Data: tasks.Render(ctx, t, r.Blobs, now)}
	if t.Status.CompletedAt != nil {
		ev.CreatedAt = t.Status.CompletedAt.Unix() // the same body on every retry
	}
	if t.Status.Phase == v1.TaskFailed {
		ev.Type = v1.WebhookEventTaskFailed
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return webhook.Result{Err: err}
	}
	return r.Webhooks.Send(ctx, spec.URL, key, id, body, now)
}

// SigningKey reads a tenant's webhook signing key from the Secret its
// spec.webhook.secretRef names in namespace ns.
func SigningKey(ctx context.Context, c client.Reader, ns string, ref v1.SecretKeyRef) ([]byte, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("webhook signing secret %s does not exist", ref.Name)
		}
		return nil, fmt.Errorf("webhook signing secret %s: %w", ref.Name, err)
	}
	raw, ok := s.Data[ref.Key]
	if !ok {
		return nil, fmt.Errorf("webhook signing secret %s has no key %q", ref.Name, ref.Key)
	}
	return webhook.Key(string(raw))
}

// WebhookOf is the webhook of the Tenant whose account owns the task (the
// one in the task's namespace with the task's ledger user ID); nil when
// it configures none.
func WebhookOf(ctx context.Context, c client.Reader, t *v1.GenerationTask) (*v1.WebhookSpec, error) {
	var list v1.TenantList
	if err := c.List(ctx, &list, client.InNamespace(t.Namespace)); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if list.Items[i].Status.UserID == t.Spec.UserID {
			return list.Items[i].Spec.Webhook, nil
		}
	}
	return nil, nil
}

// SetupWithManager registers the webhook controller next to the task
// controller: both watch GenerationTasks, each writes its own part of status.
func (r *WebhookReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.GenerationTask{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Named("generationtask-webhook").
		Complete(r)
}
