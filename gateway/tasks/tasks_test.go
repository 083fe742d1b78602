package tasks

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

func TestIDsAndNames(t *testing.T) {
	g := NewWithT(t)
	id := NewTaskID()
	g.Expect(id).To(MatchRegexp(`^task_[0-9a-f]{24}$`))
	g.Expect(ObjectName(id)).To(MatchRegexp(`^task-[0-9a-f]{24}$`))
	g.Expect(BusinessTaskID("ns-a", v1.ModelTypeVideo, "order-1")).To(Equal(BusinessTaskID("ns-a", v1.ModelTypeVideo, "order-1")))
	g.Expect(BusinessTaskID("ns-a", v1.ModelTypeVideo, "order-1")).NotTo(Equal(BusinessTaskID("ns-b", v1.ModelTypeVideo, "order-1")))
	g.Expect(BusinessTaskID("ns-a", v1.ModelTypeVideo, "order-1")).NotTo(Equal(BusinessTaskID("ns-a", v1.ModelTypeImage, "order-1")))
	g.Expect(BlobKey("ns-a", id, 2, "png")).To(Equal("tenants/ns-a/tasks/" + id + "/2.png"))
	g.Expect(IsTaskID(id)).To(BeTrue())
	g.Expect(IsTaskID(BusinessTaskID("ns-a", v1.ModelTypeVideo, "order-1"))).To(BeTrue())
	for _, bad := range []string{"order-1", "task_", "task_" + strings.ToUpper(id[5:]), id + "0", "task_zz" + id[7:]} {
		g.Expect(IsTaskID(bad)).To(BeFalse(), bad)
	}
}

func TestSubmissionOfReadsTheSpec(t *testing.T) {
	g := NewWithT(t)
	task := &v1.GenerationTask{Spec: v1.GenerationTaskSpec{TaskID: "task_1", Submission: &Submission{RouteName: "img", Outputs: 2}}}
	sub, err := SubmissionOf(task)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sub.RouteName).To(Equal("img"))

	task.Spec.Submission = nil
	_, err = SubmissionOf(task)
	g.Expect(err).To(MatchError(ContainSubstring("has no submission")))
}

func TestRecordRoundTripDropsTheRequest(t *testing.T) {
	g := NewWithT(t)
	done := metav1.Unix(200, 0)
	task := &v1.GenerationTask{
		ObjectMeta: metav1.ObjectMeta{Name: "task-1", Namespace: "ns", CreationTimestamp: metav1.Unix(100, 0)},
		Spec: v1.GenerationTaskSpec{TaskID: "task_1", Model: "m", Type: v1.ModelTypeImage, UserID: 4, TokenID: 2,
			RequestID: "req", ClientBusinessID: "cb"},
		Status: v1.GenerationTaskStatus{Phase: v1.TaskCompleted, CompletedAt: &done,
			Billing: &v1.TaskBilling{Status: v1.BillingSettled, Quota: ptr.To[int64](500)},
			Result:  &v1.TaskResult{Type: "image", Data: []v1.TaskResultItem{{URL: BlobScheme + "k"}}}},
	}
	task.Spec.Request.Raw = []byte(`{"prompt":"secret-ish"}`)
	rec, err := Record(task)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec.Status).To(Equal("completed"))
	g.Expect(rec.BillingStatus).To(Equal("settled"))
	g.Expect(rec.Quota).To(Equal(int64(500)))
	g.Expect(rec.CreatedAt).To(Equal(int64(100)))
	g.Expect(rec.CompletedAt).To(Equal(int64(200)))
	g.Expect(string(rec.Body)).NotTo(ContainSubstring("secret-ish"))
	back, err := FromRecord(&rec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back.Status.Result).To(Equal(task.Status.Result))
	g.Expect(back.CreationTimestamp.Unix()).To(Equal(int64(100)))
	g.Expect(back.Namespace).To(Equal("ns"))
}
