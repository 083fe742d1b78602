package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// Result is how one step went.
type Result struct {
	// Status is the step's condition: True done, False not done (Reason and
	// Message say what and why). Empty keeps the condition as it was: a
	// transient failure (Err) of work that was done before, which must not
	// make a working object look broken.
	Status  metav1.ConditionStatus
	Reason  string
	Message string
	// Err is a retryable failure; the reconcile returns it so that
	// controller-runtime backs off and tries again.
	Err error
	// RequeueAfter asks to look again after this long (time-driven work).
	RequeueAfter time.Duration
	// Absent removes the step's condition: it does not apply to the object.
	Absent bool
}

// Done is a step that did its work.
func Done(reason, format string, args ...any) Result {
	return Result{Status: metav1.ConditionTrue, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// NotDone is a step that cannot do its work until something changes (the
// spec, a Secret): nothing to retry, a watch wakes the reconciler.
func NotDone(reason, format string, args ...any) Result {
	return Result{Status: metav1.ConditionFalse, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Failed is a step that is not done because of a retryable error.
func Failed(reason string, err error) Result {
	return Result{Status: metav1.ConditionFalse, Reason: reason, Message: err.Error(), Err: err}
}

// Kept is a retryable failure that leaves the step's condition as it was.
func Kept(err error) Result { return Result{Err: err} }

// NotApplicable removes the step's condition.
func NotApplicable() Result { return Result{Absent: true} }

// After asks for another look after d.
func (r Result) After(d time.Duration) Result {
	r.RequeueAfter = d
	return r
}

// done reports whether later steps may build on this one.
func (r Result) done() bool { return r.Absent || r.Status == metav1.ConditionTrue }

// Step is one ordered piece of a reconcile.
type Step[T any] struct {
	// Condition is the condition type the step reports; empty for a step
	// whose failure shows on Ready only.
	Condition string
	// Independent steps do not hold up later ones: those run even when this
	// one is not done.
	Independent bool
	// Informational steps report something a user may want to know without
	// making the object unusable: Ready does not count them, and they hold
	// nothing up.
	Informational bool
	// Run does the step's work on obj (its status in memory) and says how it went.
	Run func(context.Context, T) Result
}

// Outcome is a step's Result under its condition type.
type Outcome struct {
	Condition     string
	Informational bool
	// Skipped: the step was not run because an earlier one is not done.
	Skipped bool
	Result
}

// Report is one pass over the steps.
type Report struct {
	Outcomes []Outcome
	// Err joins every step's error.
	Err error
	// RequeueAfter is the smallest delay a step asked for (0: none).
	RequeueAfter time.Duration
}

// Clean reports whether every step ran and none failed with an error: only
// then has the whole spec generation been observed.
func (rep Report) Clean() bool {
	if rep.Err != nil {
		return false
	}
	for _, o := range rep.Outcomes {
		if o.Skipped {
			return false
		}
	}
	return true
}

// Run runs steps in order. A step that is not done holds up every later
// step, which is reported blocked by it (or, when it kept its condition
// through a transient failure, kept as it was too); independent and
// informational steps hold nothing up.
func Run[T any](ctx context.Context, obj T, steps []Step[T]) Report {
	var rep Report
	var errs []error
	var blocker *Outcome
	for _, s := range steps {
		if blocker != nil {
			rep.Outcomes = append(rep.Outcomes, blocked(s, *blocker))
			continue
		}
		res := s.Run(ctx, obj)
		o := Outcome{Condition: s.Condition, Informational: s.Informational, Result: res}
		rep.Outcomes = append(rep.Outcomes, o)
		if res.Err != nil {
			errs = append(errs, res.Err)
		}
		if d := res.RequeueAfter; d > 0 && (rep.RequeueAfter == 0 || d < rep.RequeueAfter) {
			rep.RequeueAfter = d
		}
		if !res.done() && !s.Independent && !s.Informational {
			blocker = &o
		}
	}
	rep.Err = errors.Join(errs...)
	return rep
}

// blocked is the outcome of a step not run because of by.
func blocked[T any](s Step[T], by Outcome) Outcome {
	o := Outcome{Condition: s.Condition, Informational: s.Informational, Skipped: true}
	switch {
	case by.Status == "":
		// A transient failure of work done before: what follows it stands too.
	case by.Condition == "":
		o.Result = NotDone(v1.ReasonBlocked, "not attempted: %s", by.Message)
	default:
		o.Result = NotDone(v1.ReasonBlocked, "not attempted: %s is %s (%s)", by.Condition, by.Status, by.Reason)
	}
	return o
}
