package reconciler

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// SetConditions writes each outcome's condition, stamped with the
// generation it describes. Kept outcomes leave theirs as it was.
func SetConditions(conds *[]metav1.Condition, gen int64, outs []Outcome) {
	for _, o := range outs {
		switch {
		case o.Condition == "":
		case o.Absent:
			meta.RemoveStatusCondition(conds, o.Condition)
		case o.Status == "":
		default:
			set(conds, gen, o.Condition, o.Status, o.Reason, o.Message)
		}
	}
}

// SetReady summarises the outcomes that are not informational into Ready:
// True with readyMessage when each is done, else False with the reason of
// the first that is not and a message that names its condition. Blocked steps come
// after what blocks them, so Ready names the cause, not a consequence.
func SetReady(conds *[]metav1.Condition, gen int64, outs []Outcome, readyMessage string) {
	for _, o := range outs {
		if o.Informational || o.Absent {
			continue
		}
		status, reason, msg := o.Status, o.Reason, o.Message
		if status == "" { // kept: as its condition stands
			c := meta.FindStatusCondition(*conds, o.Condition)
			if o.Condition == "" || c == nil {
				continue
			}
			status, reason, msg = c.Status, c.Reason, c.Message
		}
		if status == metav1.ConditionTrue {
			continue
		}
		if o.Condition != "" {
			msg = o.Condition + ": " + msg
		}
		set(conds, gen, v1.ConditionReady, metav1.ConditionFalse, reason, msg)
		return
	}
	set(conds, gen, v1.ConditionReady, metav1.ConditionTrue, v1.ReasonReconciled, readyMessage)
}

func set(conds *[]metav1.Condition, gen int64, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen,
	})
}
