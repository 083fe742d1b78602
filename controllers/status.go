package controllers

import (
	"errors"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers/internal/reconciler"
)

// setCondition sets one condition, stamped with the generation it describes.
func setCondition(conds *[]metav1.Condition, generation int64, typ string, ok bool, reason, message string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: generation,
	})
}

// stepFailed is the Result of a step that failed with err. A spec the
// controller cannot use is not retried (a spec change wakes the
// reconciler). A ledger outage does not make an object that is already
// registered (and Ready) unusable: gateways go on serving its keys from
// their leases and the durable usage journal, so the step keeps its
// condition and setLedgerSynced reports the outage instead.
func stepFailed(obj reconciler.Object, registered bool, err error) reconciler.Result {
	var se specError
	if errors.As(err, &se) {
		return reconciler.NotDone(v1.ReasonInvalidSpec, "%s", err.Error())
	}
	var le ledgerError
	if registered && errors.As(err, &le) && meta.IsStatusConditionTrue(obj.GetConditions(), v1.ConditionReady) {
		return reconciler.Kept(err)
	}
	return reconciler.Failed(reasonFor(err), err)
}

// setLedgerSynced computes LedgerSynced from a pass: False with the error
// while a step kept its condition through a ledger outage, True again at
// the first pass that reached the ledger. Objects that never saw an outage
// do not carry it.
func setLedgerSynced(conds *[]metav1.Condition, gen int64, rep reconciler.Report) {
	for _, o := range rep.Outcomes {
		var le ledgerError
		if o.Status == "" && errors.As(o.Err, &le) {
			setCondition(conds, gen, v1.ConditionLedgerSynced, false, v1.ReasonLedgerUnavailable, o.Err.Error())
			return
		}
	}
	if rep.Err == nil && meta.FindStatusCondition(*conds, v1.ConditionLedgerSynced) != nil {
		setCondition(conds, gen, v1.ConditionLedgerSynced, true, v1.ReasonReconciled, "the ledger answers")
	}
}

// retryLater is the Result of a step the API server failed: retried, and
// for an object that is Ready the condition stays as it was, so that a
// moment's API trouble does not take working keys offline.
func retryLater(obj reconciler.Object, reason string, err error) reconciler.Result {
	if meta.IsStatusConditionTrue(obj.GetConditions(), v1.ConditionReady) {
		return reconciler.Kept(err)
	}
	return reconciler.Failed(reason, err)
}
