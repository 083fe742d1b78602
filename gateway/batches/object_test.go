package batches

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

func TestObjectOf(t *testing.T) {
	g := NewWithT(t)
	created := time.Unix(1700000000, 0)
	b := &v1.Batch{
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)},
		Spec: v1.BatchSpec{
			BatchID: "batch_1", Endpoint: chat, InputFileID: "file-in",
			CompletionWindow: &metav1.Duration{Duration: 24 * time.Hour},
			Metadata:         map[string]string{"k": "v"},
		},
	}

	// Not reached by the controller yet: validating, every optional field null.
	raw, err := json.Marshal(ObjectOf(b))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(raw).To(MatchJSON(`{"id":"batch_1","object":"batch","endpoint":"/v1/chat/completions","errors":null,
		"input_file_id":"file-in","completion_window":"24h","status":"validating","output_file_id":null,
		"error_file_id":null,"created_at":1700000000,"in_progress_at":null,"expires_at":null,"finalizing_at":null,
		"completed_at":null,"failed_at":null,"expired_at":null,"cancelling_at":null,"cancelled_at":null,
		"request_counts":{"total":0,"completed":0,"failed":0},"metadata":{"k":"v"},
		"usage":{"input_tokens":0,"input_tokens_details":{"cached_tokens":0},"output_tokens":0,
		"output_tokens_details":{"reasoning_tokens":0},"total_tokens":0}}`))

	at := metav1.NewTime(created.Add(time.Minute))
	exp := metav1.NewTime(ExpiresAt(b))
	b.Status = v1.BatchStatus{
		State: v1.BatchCompleted, RequestCounts: v1.BatchRequestCounts{Total: 3, Completed: 2, Failed: 1},
		OutputFileID: "file-out", ErrorFileID: "file-err", InProgressAt: &at, CompletedAt: &at, ExpiresAt: &exp,
		Model: "m-1", Usage: &v1.BatchTokens{InputTokens: 300, CachedTokens: 100, OutputTokens: 60, ReasoningTokens: 10},
	}
	o := ObjectOf(b)
	g.Expect(o.Model).To(Equal("m-1"))
	g.Expect(o.Usage).To(Equal(Usage{InputTokens: 300, InputTokensDetails: InputTokensDetails{CachedTokens: 100},
		OutputTokens: 60, OutputTokensDetails: OutputTokensDetails{ReasoningTokens: 10}, TotalTokens: 360}))
	g.Expect(o.Status).To(Equal(v1.BatchCompleted))
	g.Expect(*o.OutputFileID).To(Equal("file-out"))
	g.Expect(*o.ErrorFileID).To(Equal("file-err"))
	g.Expect(*o.InProgressAt).To(Equal(int64(1700000060)))
	g.Expect(*o.ExpiresAt).To(Equal(int64(1700000000 + 86400)))
	g.Expect(o.RequestCounts).To(Equal(RequestCounts{Total: 3, Completed: 2, Failed: 1}))

	b.Status = v1.BatchStatus{State: v1.BatchFailed, Errors: []v1.BatchError{{Code: "duplicate_custom_id", Message: "m", Line: 2}}}
	raw, err = json.Marshal(ObjectOf(b).Errors)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(raw).To(MatchJSON(`{"object":"list","data":[{"code":"duplicate_custom_id","message":"m","param":null,"line":2}]}`))
}

func TestCompletionWindow(t *testing.T) {
	g := NewWithT(t)
	g.Expect(window(nil)).To(Equal("24h"))
	g.Expect(window(&metav1.Duration{Duration: 24 * time.Hour})).To(Equal("24h"))
	g.Expect(window(&metav1.Duration{Duration: 90 * time.Minute})).To(Equal("1h30m"))
}
