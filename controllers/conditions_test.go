package controllers

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers/internal/reconciler"
)

// These are pure: the step outcomes and the conditions computed from them,
// without an API server (the envtest suite covers the steps' I/O).

func TestSetBackends(t *testing.T) {
	ready := v1.BackendStatus{Name: "sim", Ready: true, Reason: v1.ReasonBackendReady}
	missing := v1.BackendStatus{Name: "remote", Reason: v1.ReasonCredentialMissing, Message: `Secret upstream has no key "apiKey"`}
	off := v1.BackendStatus{Name: "off", Reason: v1.ReasonBackendDisabled, Message: "backend is disabled"}
	tests := []struct {
		name     string
		backends []v1.BackendStatus
		status   metav1.ConditionStatus
		reason   string
		message  string
		ready    int32
	}{
		{"every backend ready", []v1.BackendStatus{ready}, metav1.ConditionTrue, v1.ReasonReconciled, "every backend is ready", 1},
		{"some not ready, named with why", []v1.BackendStatus{ready, missing, off}, metav1.ConditionFalse, v1.ReasonSomeBackendsFailed,
			`2 of 3 backends are not ready: remote: CredentialMissing (Secret upstream has no key "apiKey"); off: Disabled (backend is disabled)`, 1},
		{"none ready", []v1.BackendStatus{off}, metav1.ConditionFalse, v1.ReasonNoReadyBackend,
			"no backend is ready: off: Disabled (backend is disabled)", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			route := &v1.ModelRoute{}
			res := setBackends(route, tt.backends)
			g.Expect(res.Status).To(Equal(tt.status))
			g.Expect(res.Reason).To(Equal(tt.reason))
			g.Expect(res.Message).To(Equal(tt.message))
			g.Expect(route.Status.ReadyBackends).To(Equal(tt.ready))
			g.Expect(serving(t.Context(), route).Status == metav1.ConditionTrue).To(Equal(tt.ready > 0))
		})
	}
}

func TestGrantQuota(t *testing.T) {
	tests := []struct {
		name  string
		grant v1.Grant
		want  int64
		err   string
	}{
		{"quota as is", v1.Grant{ID: "a", Quota: ptr.To[int64](7)}, 7, ""},
		{"credits at 2500 quota each", v1.Grant{ID: "a", Credits: credits("2")}, 5000, ""},
		{"credits that round to nothing are refused", v1.Grant{ID: "a", Credits: credits("0.0001")}, 0, "0.0001 credits round to no quota"},
		{"neither", v1.Grant{ID: "a"}, 0, "neither credits nor quota is set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			q, err := grantQuota(tt.grant)
			if tt.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(int64(q)).To(Equal(tt.want))
		})
	}
}

func credits(s string) *v1.Decimal { d := v1.Decimal(s); return &d }

func TestStepFailed(t *testing.T) {
	readyTenant := &v1.Tenant{Status: v1.TenantStatus{Conditions: []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionTrue}}}}
	down := ledgerError{errors.New("connection refused")}
	tests := []struct {
		name       string
		obj        *v1.Tenant
		registered bool
		err        error
		status     metav1.ConditionStatus
		reason     string
		retried    bool
	}{
		{"a spec the controller cannot use is not retried", readyTenant, true, specError{errors.New("bad grant")}, metav1.ConditionFalse, v1.ReasonInvalidSpec, false},
		{"a ledger outage keeps a registered, ready object as it was", readyTenant, true, down, "", "", true},
		{"a ledger outage before registration is not ready", readyTenant, false, down, metav1.ConditionFalse, v1.ReasonLedgerUnavailable, true},
		{"a ledger outage of an object not ready", &v1.Tenant{}, true, down, metav1.ConditionFalse, v1.ReasonLedgerUnavailable, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			res := stepFailed(tt.obj, tt.registered, tt.err)
			g.Expect(res.Status).To(Equal(tt.status))
			g.Expect(res.Reason).To(Equal(tt.reason))
			g.Expect(res.Err != nil).To(Equal(tt.retried))
		})
	}
}

func TestSetLedgerSynced(t *testing.T) {
	down := ledgerError{errors.New("connection refused")}
	kept := reconciler.Report{Outcomes: []reconciler.Outcome{{Condition: v1.ConditionRegistered, Result: reconciler.Kept(down)}}, Err: down}
	clean := reconciler.Report{Outcomes: []reconciler.Outcome{{Condition: v1.ConditionRegistered, Result: reconciler.Done("Reconciled", "user 1")}}}
	g := NewWithT(t)

	var conds []metav1.Condition
	setLedgerSynced(&conds, 1, clean)
	g.Expect(conds).To(BeEmpty(), "an object that never saw an outage carries no LedgerSynced")

	setLedgerSynced(&conds, 1, kept)
	g.Expect(conds).To(ConsistOf(And(
		HaveField("Type", v1.ConditionLedgerSynced), HaveField("Status", metav1.ConditionFalse),
		HaveField("Reason", v1.ReasonLedgerUnavailable), HaveField("Message", "ledger: connection refused"))))

	setLedgerSynced(&conds, 1, clean)
	g.Expect(conds).To(ConsistOf(And(HaveField("Type", v1.ConditionLedgerSynced), HaveField("Status", metav1.ConditionTrue))))
}
