package generationtask

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// Each case is a task's status at one point of its life and the condition
// every step reports there; no control plane, no ledger.

type want struct {
	status metav1.ConditionStatus
	reason string
}

func TestConditions(t *testing.T) {
	deadline := metav1.NewTime(time.Date(2026, 5, 4, 10, 20, 0, 0, time.UTC))
	settled := &v1.TaskBilling{Status: v1.BillingSettled, Quota: ptr.To[int64](80000), Credits: ptr.To(v1.Decimal("32")), CostUSD: ptr.To(v1.Decimal("0.16"))}
	refunded := &v1.TaskBilling{Status: v1.BillingRefunded, Quota: ptr.To[int64](0), Credits: ptr.To(v1.Decimal("0")), CostUSD: ptr.To(v1.Decimal("0"))}
	pending := &v1.TaskBilling{Status: v1.BillingPending}
	yes, no := ptr.To(true), ptr.To(false)
	tests := []struct {
		name   string
		review bool
		status v1.GenerationTaskStatus
		facts  Facts
		want   map[string]want
		ready  string // Ready's message prefix
	}{{
		name:  "new: nothing taken in",
		facts: Facts{Webhook: no},
		want: map[string]want{v1.ConditionAdmitted: {"False", "Pending"}, v1.ConditionReviewed: {"True", "NotRequired"},
			v1.ConditionSubmitted: {"False", "Pending"}, v1.ConditionSettled: {"False", "Held"}, v1.ConditionDelivered: {"True", "NoWebhook"},
			v1.ConditionReady: {"False", "Pending"}},
		ready: "Admitted: ",
	}, {
		name:   "queued under review: Ready names the review",
		review: true,
		status: v1.GenerationTaskStatus{Phase: v1.TaskQueued, Billing: pending, ReviewRounds: []v1.ReviewRound{{Round: 1, Backend: "sim", Deadline: deadline,
			Outcome: v1.ReviewPending, Assets: []v1.ReviewAsset{{State: v1.ReviewPassed}, {State: v1.ReviewPending}}}}},
		facts: Facts{Webhook: yes},
		want: map[string]want{v1.ConditionAdmitted: {"True", "Admitted"}, v1.ConditionReviewed: {"False", "Reviewing"},
			v1.ConditionSubmitted: {"False", "Pending"}, v1.ConditionDelivered: {"False", "Waiting"}, v1.ConditionReady: {"False", "Reviewing"}},
		ready: "Reviewed: round 1 on backend sim: 1 of 2 assets passed",
	}, {
		name:   "running upstream: the charge is held",
		status: v1.GenerationTaskStatus{Phase: v1.TaskInProgress, Billing: pending, Backend: "b", UpstreamTaskID: "up-1", Attempts: 1},
		facts:  Facts{Webhook: no},
		want: map[string]want{v1.ConditionSubmitted: {"True", "Accepted"}, v1.ConditionSettled: {"False", "Held"},
			v1.ConditionReady: {"False", "Held"}},
		ready: "Settled: ",
	}, {
		name:   "completed, the archive write failed",
		status: v1.GenerationTaskStatus{Phase: v1.TaskCompleted, Billing: settled, Backend: "b", UpstreamTaskID: "up-1", Attempts: 1},
		facts:  Facts{ArchiveErr: errors.New("database is locked"), Webhook: no},
		want:   map[string]want{v1.ConditionSettled: {"False", "LedgerUnavailable"}, v1.ConditionReady: {"False", "LedgerUnavailable"}},
		ready:  "Settled: archive the final state: database is locked",
	}, {
		name:   "completed and archived, webhook being retried",
		status: v1.GenerationTaskStatus{Phase: v1.TaskCompleted, Billing: settled, Webhook: &v1.WebhookDelivery{ID: "evt_1", State: v1.WebhookPending, Attempts: 1, LastError: "HTTP 500"}},
		facts:  Facts{Archived: true, Webhook: yes},
		want: map[string]want{v1.ConditionSettled: {"True", "Settled"}, v1.ConditionDelivered: {"False", "Delivering"},
			v1.ConditionReady: {"False", "Delivering"}},
		ready: "Delivered: event evt_1: attempt 1 failed (HTTP 500)",
	}, {
		name:   "completed, archived and delivered",
		status: v1.GenerationTaskStatus{Phase: v1.TaskCompleted, Billing: settled, Webhook: &v1.WebhookDelivery{ID: "evt_1", State: v1.WebhookDelivered, Attempts: 2}},
		facts:  Facts{Archived: true, Webhook: yes},
		want:   map[string]want{v1.ConditionDelivered: {"True", "Delivered"}, v1.ConditionReady: {"True", "Archived"}},
		ready:  "the task is completed and archived",
	}, {
		name: "review rejected: failed, refunded, nothing left to do",
		status: v1.GenerationTaskStatus{Phase: v1.TaskFailed, Billing: refunded, Error: &v1.TaskError{Code: v1.CodeGenerationFailed, Message: "rejected the image"},
			ReviewRounds: []v1.ReviewRound{{Round: 1, Backend: "sim", Outcome: v1.ReviewRejected}}},
		review: true,
		facts:  Facts{Archived: true, Webhook: no},
		want: map[string]want{v1.ConditionReviewed: {"False", "Rejected"}, v1.ConditionSubmitted: {"False", "UpstreamFailed"},
			v1.ConditionSettled: {"True", "Refunded"}, v1.ConditionReady: {"True", "Archived"}},
		ready: "the task is failed and archived",
	}, {
		name:   "policy refusal",
		status: v1.GenerationTaskStatus{Phase: v1.TaskFailed, Billing: refunded, Attempts: 1, Error: &v1.TaskError{Code: v1.CodeContentPolicy, Message: "refused"}},
		facts:  Facts{Archived: true, Webhook: no},
		want:   map[string]want{v1.ConditionSubmitted: {"False", "ContentPolicy"}, v1.ConditionReady: {"True", "Archived"}},
	}, {
		name:   "a webhook given up leaves nothing to do",
		status: v1.GenerationTaskStatus{Phase: v1.TaskCompleted, Billing: settled, Webhook: &v1.WebhookDelivery{ID: "evt_1", State: v1.WebhookFailed, Attempts: 7}},
		facts:  Facts{Archived: true, Webhook: yes},
		want:   map[string]want{v1.ConditionDelivered: {"False", "GaveUp"}, v1.ConditionReady: {"True", "Archived"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task := &v1.GenerationTask{Spec: v1.GenerationTaskSpec{ReservedQuota: 80000, PrivateAssetReview: tt.review}, Status: tt.status}
			task.Generation = 1
			SetConditions(task, tt.facts)
			for typ, w := range tt.want {
				c := meta.FindStatusCondition(task.Status.Conditions, typ)
				if c == nil {
					t.Fatalf("%s: missing", typ)
				}
				if c.Status != w.status || c.Reason != w.reason {
					t.Errorf("%s = %s/%s (%s), want %s/%s", typ, c.Status, c.Reason, c.Message, w.status, w.reason)
				}
			}
			if r := meta.FindStatusCondition(task.Status.Conditions, v1.ConditionReady); tt.ready != "" && !hasPrefix(r.Message, tt.ready) {
				t.Errorf("Ready message %q, want prefix %q", r.Message, tt.ready)
			}
		})
	}
}

func TestDeliveredIsKeptWhenTheTenantCannotBeRead(t *testing.T) {
	task := &v1.GenerationTask{Status: v1.GenerationTaskStatus{Phase: v1.TaskInProgress}}
	SetConditions(task, Facts{Webhook: ptr.To(true)})
	SetConditions(task, Facts{})
	if c := meta.FindStatusCondition(task.Status.Conditions, v1.ConditionDelivered); c.Reason != v1.ReasonWaiting {
		t.Errorf("Delivered = %s, want it kept as Waiting", c.Reason)
	}
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }
