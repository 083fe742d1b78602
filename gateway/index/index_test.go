package index

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

func TestLiveUploadRefs(t *testing.T) {
	g := NewWithT(t)
	const a, b = "upl_0123456789abcdef0123456789abcdef", "upl_fedcba9876543210fedcba9876543210"
	task := &v1.GenerationTask{Spec: v1.GenerationTaskSpec{Request: runtime.RawExtension{Raw: []byte(
		`{"prompt":"upl_short","image_urls":["https://gw/files/uploads/7/image/` + a + `.png?expiry=1&signature=x",` +
			`"https://gw/files/uploads/7/image/` + b + `.png"],"reference_images":["https://gw/files/uploads/7/image/` + a + `.png"]}`)}}}
	g.Expect(liveUploadRefs(task)).To(Equal([]string{a, b}), "each ID once; text that only looks like one is ignored")

	task.Status.Phase = v1.TaskInProgress
	g.Expect(liveUploadRefs(task)).To(HaveLen(2))
	for _, final := range []v1.TaskPhase{v1.TaskCompleted, v1.TaskFailed} {
		task.Status.Phase = final
		g.Expect(liveUploadRefs(task)).To(BeEmpty(), "a finished task needs no file")
	}
}
