package batches

import (
	"encoding/json"
	"time"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// CancelAnnotation asks the controller to cancel a batch. The spec is
// immutable and the status is the controller's, so the gateway records a
// client's cancel request on the object's metadata: the time it was asked,
// in RFC 3339. The controller stops starting lines once it sees it, writes
// the lines not run to the error file as batch_cancelled, and ends the
// batch cancelled; until then the batch reads as cancelling.
const CancelAnnotation = "modelgate.io/cancel-requested"

// CancelRequestedAt is when a cancel of b was asked; ok is false when none
// was (or the annotation is not a time).
func CancelRequestedAt(b *v1.Batch) (time.Time, bool) {
	s, found := b.Annotations[CancelAnnotation]
	if !found {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s)
	return t, err == nil
}

// State is b's public state: its status's, reported validating before the
// controller reached it and cancelling once a cancel was asked of a batch
// that has not ended.
func State(b *v1.Batch) v1.BatchState {
	s := b.Status.State
	if s == "" {
		s = v1.BatchValidating
	}
	if _, asked := CancelRequestedAt(b); asked && !s.Terminal() {
		return v1.BatchCancelling
	}
	return s
}

// InputErrorAnnotation holds, as JSON ({"code","message","line"}), why the
// gateway refused a batch's input file beyond its format (a model the key
// may not use, or none serves), written with the object: the gateway then
// fails the batch's status, and a controller that reaches the batch first
// fails it with this error instead of running it.
const InputErrorAnnotation = "modelgate.io/input-error"

// InputErrorOf is b's InputErrorAnnotation; ok is false without one (or
// with one that is not an error's JSON).
func InputErrorOf(b *v1.Batch) (v1.BatchError, bool) {
	s, found := b.Annotations[InputErrorAnnotation]
	if !found {
		return v1.BatchError{}, false
	}
	var e v1.BatchError
	if err := json.Unmarshal([]byte(s), &e); err != nil || e.Code == "" {
		return v1.BatchError{}, false
	}
	return e, true
}
