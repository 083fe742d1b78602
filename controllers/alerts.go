package controllers

import (
	"context"
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers/generationtask"
	"github.com/modelgate/modelgate/controllers/internal/reconciler"
	"github.com/modelgate/modelgate/gateway/budget"
	"github.com/modelgate/modelgate/gateway/platform/metrics"
	"github.com/modelgate/modelgate/gateway/webhook"
)

// defaultAlertAttempts applies when the Tenant's webhook leaves maxAttempts
// unset (the schema defaults it to the same).
const defaultAlertAttempts = 7

// alerter raises the budget alerts of a Tenant or an ApiToken: once per
// crossing of a threshold of spec.alerts, with the state kept in
// status.alerts so that a restarted manager neither repeats a crossing nor
// loses one (docs/billing.md, "Alerts").
//
// A crossing is raised in two passes. The pass that measures it only records
// it (Pending), and the deferred status patch stores that. The next pass
// (the status write wakes it) raises what the API server holds as Pending:
// the Event, the metric and the webhook's first attempt, then Fired. Reading
// the API server rather than the cache there means that a pass reading a
// cache behind this controller's own last write cannot raise a crossing
// again; deciding before storing would let a crash between the two raise it
// twice. What remains is a crash after raising and before Fired is stored:
// the Event and the metric then repeat, and the webhook repeats with the
// same webhook-id, which receivers drop.
type alerter struct {
	client client.Client
	// live reads the object from the API server (mgr.GetAPIReader()).
	live     client.Reader
	events   events.EventRecorder
	webhooks *webhook.Sender
	clock    clock.PassiveClock
	// period is the longest a pass waits before measuring again.
	period time.Duration
}

// newAlerter is the alerter of a reconciler: live nil reads through c, a
// period of 0 is DefaultBalanceSyncPeriod.
func newAlerter(c client.Client, live client.Reader, ev events.EventRecorder, w *webhook.Sender, clk clock.PassiveClock, period time.Duration) *alerter {
	if live == nil {
		live = c
	}
	if period <= 0 {
		period = DefaultBalanceSyncPeriod
	}
	return &alerter{client: c, live: live, events: ev, webhooks: w, clock: clk, period: period}
}

// alertInput is what one pass measures and whom it tells.
type alertInput struct {
	subject    budget.Subject
	thresholds []budget.Threshold
	figures    budget.Figures
	// webhook is the tenant's (nil: none).
	webhook *v1.WebhookSpec
}

// run is one pass over obj's alerts: raise the crossings an earlier pass
// stored, retry the deliveries that are due, then record the crossings of
// these figures for the next pass to raise.
func (a *alerter) run(ctx context.Context, obj client.Object, in alertInput) reconciler.Result {
	now := a.clock.Now()
	alerts := alertsOf(obj)
	if hasWork(*alerts, now) {
		stored, err := a.stored(ctx, obj)
		if err != nil {
			return reconciler.Kept(err)
		}
		*alerts = stored
		for i := range *alerts {
			a.advance(ctx, obj, in, &(*alerts)[i], now)
		}
	}
	*alerts = budget.Next(in.thresholds, *alerts, in.figures, now)
	return reconciler.Done(v1.ReasonReconciled, "budget alerts measured").After(a.nextLook(*alerts, now))
}

// alertsOf is the status.alerts of a Tenant or an ApiToken.
func alertsOf(o client.Object) *[]v1.AlertStatus {
	switch o := o.(type) {
	case *v1.Tenant:
		return &o.Status.Alerts
	case *v1.ApiToken:
		return &o.Status.Alerts
	}
	panic("budget alerts of a kind that has none")
}

// hasWork reports whether a stored crossing waits to be raised or a
// delivery is due.
func hasWork(sts []v1.AlertStatus, now time.Time) bool {
	for _, st := range sts {
		if st.State == v1.AlertPending || due(st.Webhook, now) {
			return true
		}
	}
	return false
}

func due(d *v1.WebhookDelivery, now time.Time) bool {
	return d != nil && d.State == v1.WebhookPending && (d.NextAttemptAt == nil || !now.Before(d.NextAttemptAt.Time))
}

// stored is status.alerts as the API server holds it.
func (a *alerter) stored(ctx context.Context, obj client.Object) ([]v1.AlertStatus, error) {
	fresh := obj.DeepCopyObject().(client.Object)
	if err := a.live.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
		return nil, err
	}
	return *alertsOf(fresh), nil
}

// advance raises a stored crossing and makes the delivery attempt that is due.
func (a *alerter) advance(ctx context.Context, obj client.Object, in alertInput, st *v1.AlertStatus, now time.Time) {
	t, ok := budget.Find(in.thresholds, st.Threshold)
	if !ok {
		return // gone from the spec: Next drops it
	}
	if st.State == v1.AlertPending {
		a.raise(ctx, obj, in, t, st)
	}
	if due(st.Webhook, now) {
		a.deliver(ctx, obj, in, t, st, now)
	}
}

// raise announces a crossing: a Warning Event, the metric, and a delivery
// of its webhook event when the tenant has a webhook.
func (a *alerter) raise(ctx context.Context, obj client.Object, in alertInput, t budget.Threshold, st *v1.AlertStatus) {
	note := budget.Note(t, *st)
	recorder{R: a.events}.Warning(obj, t.Reason(), "RaiseAlert", "%s", note)
	metrics.BudgetAlerts.WithLabelValues(in.subject.Namespace, in.subject.Object, string(t.Kind)).Inc()
	log.FromContext(ctx).Info("budget alert", "threshold", st.Threshold, "crossing", st.Crossings, "note", note)
	st.State, st.Webhook = v1.AlertFired, nil
	if in.webhook != nil {
		st.Webhook = &v1.WebhookDelivery{ID: budget.EventID(in.subject, *st), State: v1.WebhookPending}
	}
}

// deliver makes one attempt to send the crossing's event, and schedules the
// next on failure (the task webhooks' schedule, up to maxAttempts).
func (a *alerter) deliver(ctx context.Context, obj client.Object, in alertInput, t budget.Threshold, st *v1.AlertStatus, now time.Time) {
	d := st.Webhook
	if in.webhook == nil {
		d.State, d.NextAttemptAt, d.LastError = v1.WebhookFailed, nil, "the tenant has no webhook"
		return
	}
	res := a.send(ctx, in, t, *st, now)
	d.Attempts++
	d.LastStatusCode = int32(res.StatusCode)
	if res.Err == nil {
		at := metav1.NewTime(now)
		d.State, d.LastError, d.NextAttemptAt, d.DeliveredAt = v1.WebhookDelivered, "", nil, &at
		return
	}
	d.LastError = res.Err.Error()
	maxAttempts := in.webhook.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = defaultAlertAttempts
	}
	if d.Attempts >= maxAttempts || res.Forbidden { // a forbidden address stays forbidden
		d.State, d.NextAttemptAt = v1.WebhookFailed, nil
		recorder{R: a.events}.Warning(obj, v1.EventWebhookGaveUp, "DeliverWebhook",
			"alert %s (event %s) not delivered after %d attempts: %s", st.Threshold, d.ID, d.Attempts, d.LastError)
		return
	}
	// Status keeps whole seconds: the next attempt is never before the wait.
	next := metav1.NewTime(now.Add(webhook.RetryAfter(d.Attempts)).Truncate(time.Second).Add(time.Second))
	d.NextAttemptAt = &next
}

// send signs and posts the crossing's event.
func (a *alerter) send(ctx context.Context, in alertInput, t budget.Threshold, st v1.AlertStatus, now time.Time) webhook.Result {
	key, err := generationtask.SigningKey(ctx, a.client, in.subject.Namespace, in.webhook.SecretRef)
	if err != nil {
		return webhook.Result{Err: err}
	}
	body, err := json.Marshal(budget.NewEvent(in.subject, t, st))
	if err != nil {
		return webhook.Result{Err: err}
	}
	return a.webhooks.Send(ctx, in.webhook.URL, key, st.Webhook.ID, body, now)
}

// nextLook is when to measure again: within the period, at the next
// delivery that is due, and soon after a crossing was recorded (the status
// write wakes the next pass too; this is the fallback).
func (a *alerter) nextLook(sts []v1.AlertStatus, now time.Time) time.Duration {
	next := a.period
	for _, st := range sts {
		if st.State == v1.AlertPending {
			next = min(next, time.Second)
		}
		if d := st.Webhook; d != nil && d.State == v1.WebhookPending && d.NextAttemptAt != nil {
			next = min(next, max(d.NextAttemptAt.Sub(now), time.Second))
		}
	}
	return next
}
