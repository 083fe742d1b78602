package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// patchStatusIfChanged writes obj's status when it differs from before's, as a
// merge patch so a concurrent spec change is not overwritten.
func patchStatusIfChanged(ctx context.Context, c client.Client, before, obj client.Object) error {
	if equality.Semantic.DeepEqual(before, obj) {
		return nil
	}
	if err := c.Status().Patch(ctx, obj, client.MergeFrom(before)); err != nil {
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
