package reconciler

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func cond(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: 3}
}

func TestSetConditionsAndReady(t *testing.T) {
	tests := []struct {
		name   string
		before []metav1.Condition
		outs   []Outcome
		want   []metav1.Condition
	}{{
		name: "all done: Ready True with the kind's message",
		outs: []Outcome{
			{Condition: "Registered", Result: Done("Reconciled", "user 7")},
			{Condition: "GrantsApplied", Result: Done("Reconciled", "2 grants")},
		},
		want: []metav1.Condition{
			cond("Registered", "True", "Reconciled", "user 7"),
			cond("GrantsApplied", "True", "Reconciled", "2 grants"),
			cond("Ready", "True", "Reconciled", "all good"),
		},
	}, {
		name: "Ready names the first step not done, not the ones it blocked",
		outs: []Outcome{
			{Condition: "Registered", Result: Done("Reconciled", "user 7")},
			{Condition: "AccessTokenReady", Result: NotDone("InvalidSpec", "bad")},
			{Condition: "Later", Skipped: true, Result: NotDone("Blocked", "not attempted")},
		},
		want: []metav1.Condition{
			cond("Registered", "True", "Reconciled", "user 7"),
			cond("AccessTokenReady", "False", "InvalidSpec", "bad"),
			cond("Later", "False", "Blocked", "not attempted"),
			cond("Ready", "False", "InvalidSpec", "AccessTokenReady: bad"),
		},
	}, {
		name: "a step without a condition shows on Ready only",
		outs: []Outcome{{Result: NotDone("DuplicateTenant", "namespace has Tenant a")}},
		want: []metav1.Condition{cond("Ready", "False", "DuplicateTenant", "namespace has Tenant a")},
	}, {
		name: "informational steps do not count",
		outs: []Outcome{
			{Condition: "GrantsApplied", Informational: true, Result: NotDone("InvalidSpec", "grant x")},
			{Condition: "Registered", Result: Done("Reconciled", "user 7")},
		},
		want: []metav1.Condition{
			cond("GrantsApplied", "False", "InvalidSpec", "grant x"),
			cond("Registered", "True", "Reconciled", "user 7"),
			cond("Ready", "True", "Reconciled", "all good"),
		},
	}, {
		name:   "a kept step keeps its condition and Ready reads it",
		before: []metav1.Condition{cond("Registered", "True", "Reconciled", "user 7"), cond("Ready", "True", "Reconciled", "all good")},
		outs:   []Outcome{{Condition: "Registered", Result: Kept(errors.New("ledger down"))}},
		want:   []metav1.Condition{cond("Registered", "True", "Reconciled", "user 7"), cond("Ready", "True", "Reconciled", "all good")},
	}, {
		name:   "a step that does not apply loses its condition",
		before: []metav1.Condition{cond("Default", "True", "Default", "d")},
		outs:   []Outcome{{Condition: "Default", Result: NotApplicable()}},
		want:   []metav1.Condition{cond("Ready", "True", "Reconciled", "all good")},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conds := append([]metav1.Condition(nil), tt.before...)
			SetConditions(&conds, 3, tt.outs)
			SetReady(&conds, 3, tt.outs, "all good")
			if d := cmp.Diff(tt.want, conds, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); d != "" {
				t.Errorf("conditions (-want +got):\n%s", d)
			}
		})
	}
}
