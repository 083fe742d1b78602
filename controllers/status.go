package controllers

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// patchStatusIfChanged writes obj's status when it differs from before's, as a
// merge patch so a concurrent spec change is not overwritten.
func patchStatusIfChanged(ctx context.Context, c client.Client, before, obj client.Object) error {
	if equality.Semantic.DeepEqual(before, obj) {
		return nil
	}
	// A gone object (deleted once its finalizer went) has no status to keep.
	if err := c.Status().Patch(ctx, obj, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("patch status: %w", err)
	}
	return nil
}

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

// ConditionLedgerSynced is False while the ledger cannot be reached for an
// object that is already registered in it.
const ConditionLedgerSynced = "LedgerSynced"

// markFailure records a failed reconcile step. A ledger outage does not
// make an object that is already registered unusable: gateways go on
// serving its keys from their leases and the durable usage journal. So for a
// registered object a ledger error leaves Ready as it was and sets
// LedgerSynced=False; any other failure (or an object never registered)
// sets Ready=False as before.
func markFailure(conds *[]metav1.Condition, gen int64, registered bool, err error) {
	var le ledgerError
	if registered && errors.As(err, &le) && meta.IsStatusConditionTrue(*conds, v1.ConditionReady) {
		setCondition(conds, gen, ConditionLedgerSynced, false, v1.ReasonLedgerUnavailable, err.Error())
		return
	}
	setCondition(conds, gen, v1.ConditionReady, false, reasonFor(err), err.Error())
}

// markSynced clears a ledger outage once a reconcile reached the ledger.
func markSynced(conds *[]metav1.Condition, gen int64) {
	if meta.FindStatusCondition(*conds, ConditionLedgerSynced) != nil {
		setCondition(conds, gen, ConditionLedgerSynced, true, v1.ReasonReconciled, "the ledger answers")
	}
}
