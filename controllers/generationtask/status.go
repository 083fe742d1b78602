package generationtask

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/tasks"
)

// The conditions of a task are pure functions of its status and of what
// the pass learned that status does not hold (Facts): one per step of its
// life, summarised into Ready. They are computed after every pass, so they
// always describe where the task stands, whichever step moved it.

// Facts are what a pass learned beyond the task's status.
type Facts struct {
	// Archived: the task's final state is in the ledger archive (this
	// pass wrote it, or Settled was already True).
	Archived bool
	// ArchiveErr is why writing the final state to the archive failed.
	ArchiveErr error
	// Webhook reports whether the tenant configures a task webhook; nil
	// when the pass could not tell (Delivered is kept as it was).
	Webhook *bool
}

// SetConditions computes every step condition and Ready from t and f.
func SetConditions(t *v1.GenerationTask, f Facts) {
	conds := &t.Status.Conditions
	gen := t.Generation
	for _, c := range []metav1.Condition{Admitted(t), Reviewed(t), Submitted(t), Settled(t, f)} {
		set(conds, gen, c)
	}
	if f.Webhook != nil || meta.FindStatusCondition(*conds, v1.ConditionDelivered) == nil {
		set(conds, gen, Delivered(t, f))
	}
	set(conds, gen, Ready(t, *conds))
}

func set(conds *[]metav1.Condition, gen int64, c metav1.Condition) {
	c.ObservedGeneration = gen
	meta.SetStatusCondition(conds, c)
}

func cond(typ string, ok bool, reason, format string, args ...any) metav1.Condition {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Admitted is True once the controller took the task in: queued, its
// reservation listed as a pre_consumed usage row.
func Admitted(t *v1.GenerationTask) metav1.Condition {
	if t.Status.Phase == "" {
		return cond(v1.ConditionAdmitted, false, v1.ReasonPending, "the controller has not taken the task in yet")
	}
	return cond(v1.ConditionAdmitted, true, v1.ReasonAdmitted, "%d quota reserved at submission", t.Spec.ReservedQuota)
}

// Reviewed follows the last private asset review round; True when review
// passed or does not apply.
func Reviewed(t *v1.GenerationTask) metav1.Condition {
	st := &t.Status
	n := len(st.ReviewRounds)
	if n == 0 {
		if t.Spec.PrivateAssetReview && (st.Phase == "" || st.Phase == v1.TaskQueued) {
			return cond(v1.ConditionReviewed, false, v1.ReasonPending, "private asset review starts when the task is submitted")
		}
		return cond(v1.ConditionReviewed, true, v1.ReasonNotRequired, "no private asset review applies to this task")
	}
	r := st.ReviewRounds[n-1]
	switch r.Outcome {
	case v1.ReviewPassed:
		return cond(v1.ConditionReviewed, true, v1.ReasonReviewPassed, "round %d on backend %s: every asset passed", r.Round, r.Backend)
	case v1.ReviewRejected:
		return cond(v1.ConditionReviewed, false, v1.ReasonReviewRejected, "round %d on backend %s: %s", r.Round, r.Backend, errorMessage(t))
	case v1.ReviewExpired:
		return cond(v1.ConditionReviewed, false, v1.ReasonReviewExpired, "round %d on backend %s did not finish before %s",
			r.Round, r.Backend, r.Deadline.UTC().Format("15:04:05Z"))
	}
	passed := 0
	for _, a := range r.Assets {
		if a.State == v1.ReviewPassed {
			passed++
		}
	}
	return cond(v1.ConditionReviewed, false, v1.ReasonReviewing, "round %d on backend %s: %d of %d assets passed; deadline %s",
		r.Round, r.Backend, passed, len(r.Assets), r.Deadline.UTC().Format("15:04:05Z"))
}

// Submitted is True once an upstream accepted the task.
func Submitted(t *v1.GenerationTask) metav1.Condition {
	st := &t.Status
	switch {
	case st.UpstreamTaskID != "":
		return cond(v1.ConditionSubmitted, true, v1.ReasonAccepted, "backend %s accepted it as %s (attempt %d)", st.Backend, st.UpstreamTaskID, st.Attempts)
	case st.Phase == v1.TaskInProgress || st.Phase == v1.TaskCompleted:
		return cond(v1.ConditionSubmitted, true, v1.ReasonAccepted, "backend %s accepted it (attempt %d)", st.Backend, st.Attempts)
	case st.Phase == v1.TaskFailed:
		return cond(v1.ConditionSubmitted, false, failureReason(st.Error), "%s", errorMessage(t))
	case st.Attempts > 0:
		return cond(v1.ConditionSubmitted, false, v1.ReasonPending, "to be submitted to backend %s (%d attempts so far)", st.Backend, st.Attempts)
	}
	return cond(v1.ConditionSubmitted, false, v1.ReasonPending, "not submitted to an upstream yet")
}

// Settled is True once the charge is final (settled or refunded) and the
// final state is archived in the ledger.
func Settled(t *v1.GenerationTask, f Facts) metav1.Condition {
	b := t.Status.Billing
	switch {
	case b == nil || b.Status == v1.BillingPending || !tasks.Final(t.Status.Phase):
		return cond(v1.ConditionSettled, false, v1.ReasonHeld, "%d quota reserved until the task ends", t.Spec.ReservedQuota)
	case f.ArchiveErr != nil:
		return cond(v1.ConditionSettled, false, v1.ReasonLedgerUnavailable, "archive the final state: %s", f.ArchiveErr.Error())
	case !f.Archived:
		return cond(v1.ConditionSettled, false, v1.ReasonPending, "the final state is not archived in the ledger yet")
	case b.Status == v1.BillingRefunded:
		return cond(v1.ConditionSettled, true, v1.ReasonRefunded, "the reservation was refunded; nothing is charged")
	}
	return cond(v1.ConditionSettled, true, v1.ReasonSettled, "charged %s credits (%s USD)", deref(b.Credits), deref(b.CostUSD))
}

// Delivered follows status.webhook, which the webhook controller owns.
func Delivered(t *v1.GenerationTask, f Facts) metav1.Condition {
	d := t.Status.Webhook
	switch {
	case d == nil && (f.Webhook == nil || !*f.Webhook):
		return cond(v1.ConditionDelivered, true, v1.ReasonNoWebhook, "the tenant configures no task webhook")
	case d == nil:
		return cond(v1.ConditionDelivered, false, v1.ReasonWaiting, "the final-state event is sent once the task is settled")
	case d.State == v1.WebhookDelivered:
		return cond(v1.ConditionDelivered, true, v1.ReasonDelivered, "event %s delivered after %d attempt(s)", d.ID, d.Attempts)
	case d.State == v1.WebhookFailed:
		return cond(v1.ConditionDelivered, false, v1.ReasonWebhookGaveUp, "event %s not delivered after %d attempt(s): %s", d.ID, d.Attempts, d.LastError)
	case d.Attempts == 0:
		return cond(v1.ConditionDelivered, false, v1.ReasonDelivering, "event %s: first attempt due", d.ID)
	}
	return cond(v1.ConditionDelivered, false, v1.ReasonDelivering, "event %s: attempt %d failed (%s); retried", d.ID, d.Attempts, d.LastError)
}

// Ready is True when nothing is left to do: the task is final, settled and
// archived, and its webhook delivered or given up. Otherwise it names the
// first step that is not done.
func Ready(t *v1.GenerationTask, conds []metav1.Condition) metav1.Condition {
	for _, typ := range []string{v1.ConditionAdmitted, v1.ConditionReviewed, v1.ConditionSubmitted, v1.ConditionSettled, v1.ConditionDelivered} {
		c := meta.FindStatusCondition(conds, typ)
		if c == nil || c.Status == metav1.ConditionTrue || finishedStep(t, c) {
			continue
		}
		return cond(v1.ConditionReady, false, c.Reason, "%s: %s", c.Type, c.Message)
	}
	return cond(v1.ConditionReady, true, v1.ReasonTaskArchived, "the task is %s and archived in the ledger", t.Status.Phase)
}

// finishedStep reports a False condition that leaves nothing to do: a
// step of a failed task (the failure is the task's outcome, and Settled
// says whether it is refunded and archived), or a webhook given up.
func finishedStep(t *v1.GenerationTask, c *metav1.Condition) bool {
	switch c.Type {
	case v1.ConditionDelivered:
		return c.Reason == v1.ReasonWebhookGaveUp
	case v1.ConditionSettled:
		return false
	}
	return t.Status.Phase == v1.TaskFailed
}

// failureReason is the Submitted reason of a failed task's error.
func failureReason(e *v1.TaskError) string {
	switch {
	case e == nil:
		return v1.ReasonUpstreamFailed
	case e.Code == v1.CodeDeleted:
		return v1.ReasonDeleted
	case e.Code == v1.CodeContentPolicy:
		return v1.ReasonContentPolicy
	}
	return v1.ReasonUpstreamFailed
}

func errorMessage(t *v1.GenerationTask) string {
	if e := t.Status.Error; e != nil {
		return e.Message
	}
	return "the task failed"
}

func deref(d *v1.Decimal) string {
	if d == nil {
		return "0"
	}
	return string(*d)
}
