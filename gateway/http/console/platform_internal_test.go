package console

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// TestSummarizeTasks: tasks in flight are those not completed or failed
// (no phase yet is queued), counted by phase and family, the oldest listed
// first with their tenant.
func TestSummarizeTasks(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	task := func(id string, user int64, profile v1.ValidationProfile, phase v1.TaskPhase, age time.Duration) v1.GenerationTask {
		return v1.GenerationTask{
			ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: "ns", CreationTimestamp: metav1.NewTime(now.Add(-age))},
			Spec:       v1.GenerationTaskSpec{TaskID: id, UserID: user, Model: "m", Profile: profile, Type: "image"},
			Status:     v1.GenerationTaskStatus{Phase: phase},
		}
	}
	acme := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "acme", Namespace: "acme"}, Spec: v1.TenantSpec{DisplayName: "Acme"}}
	items := []v1.GenerationTask{
		task("t1", 1, v1.ProfileSingleImage, v1.TaskInProgress, time.Minute),
		task("t2", 1, v1.ProfileSingleImage, "", time.Hour),
		task("t3", 2, v1.ProfileAllInOneVideo, v1.TaskQueued, 2*time.Hour),
		task("t4", 1, v1.ProfileSingleImage, v1.TaskCompleted, 3*time.Hour),
		task("t5", 2, v1.ProfileAllInOneVideo, v1.TaskFailed, 4*time.Hour),
		task("t6", 1, v1.ProfileSingleImage, v1.TaskInProgress, 30*time.Second),
	}
	s := summarizeTasks(items, map[int64]*v1.Tenant{1: acme}, now)
	g.Expect(s.Total).To(Equal(4))
	g.Expect(s.Counts).To(Equal([]taskCount{
		{Phase: "queued", Family: "all-in-one-video", Count: 1},
		{Phase: "queued", Family: "single-image", Count: 1},
		{Phase: "in_progress", Family: "single-image", Count: 2},
	}))
	var order, tenants []string
	for _, r := range s.Oldest {
		order, tenants = append(order, r.TaskID), append(tenants, r.Tenant)
	}
	g.Expect(order).To(Equal([]string{"t3", "t2", "t1", "t6"}))
	g.Expect(tenants).To(Equal([]string{"user 2", "Acme (acme)", "Acme (acme)", "Acme (acme)"}))
	g.Expect(s.Oldest[0].Age).To(Equal("2h0m0s"))
}

// TestTenantState: the state column reads Ready and names the conditions
// that are not True.
func TestTenantState(t *testing.T) {
	g := NewWithT(t)
	cond := func(typ string, s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: reason + " message"}
	}
	ready := &v1.Tenant{Status: v1.TenantStatus{Conditions: []metav1.Condition{
		cond(v1.ConditionReady, metav1.ConditionTrue, "Ready"), cond("GrantsApplied", metav1.ConditionTrue, "Applied")}}}
	state, reason, _, notReady := tenantState(ready)
	g.Expect([]any{state, reason, notReady}).To(Equal([]any{"ready", "", []string(nil)}))

	broken := &v1.Tenant{Status: v1.TenantStatus{Conditions: []metav1.Condition{
		cond(v1.ConditionReady, metav1.ConditionFalse, "LedgerUnavailable"), cond("LedgerSynced", metav1.ConditionFalse, "Down"),
		cond("Registered", metav1.ConditionTrue, "Registered")}}}
	state, reason, msg, notReady := tenantState(broken)
	g.Expect([]any{state, reason, msg, notReady}).To(Equal([]any{"not ready", "LedgerUnavailable", "LedgerUnavailable message", []string{"LedgerSynced"}}))

	state, _, _, _ = tenantState(&v1.Tenant{})
	g.Expect(state).To(Equal("pending"))
	deleting := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptrTime(time.Now())}}
	state, _, _, _ = tenantState(deleting)
	g.Expect(state).To(Equal("deleting"))
}

func ptrTime(t time.Time) *metav1.Time { mt := metav1.NewTime(t); return &mt }
