package batches

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

func TestCancelRequestMakesALiveBatchCancelling(t *testing.T) {
	g := NewWithT(t)
	created := time.Unix(1700000000, 0)
	b := &v1.Batch{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)},
		Spec: v1.BatchSpec{BatchID: "batch_1", Endpoint: chat, InputFileID: "file-in"}}
	g.Expect(State(b)).To(Equal(v1.BatchValidating))
	_, asked := CancelRequestedAt(b)
	g.Expect(asked).To(BeFalse())

	b.Annotations = map[string]string{CancelAnnotation: created.Add(time.Minute).UTC().Format(time.RFC3339)}
	b.Status.State = v1.BatchInProgress
	o := ObjectOf(b)
	g.Expect(o.Status).To(Equal(v1.BatchCancelling))
	g.Expect(*o.CancellingAt).To(Equal(int64(1700000060)))

	// The controller's own cancelling time wins; an ended batch stays ended.
	own := metav1.NewTime(created.Add(2 * time.Minute))
	b.Status.CancellingAt = &own
	g.Expect(*ObjectOf(b).CancellingAt).To(Equal(int64(1700000120)))
	b.Status.State = v1.BatchCompleted
	g.Expect(ObjectOf(b).Status).To(Equal(v1.BatchCompleted))

	b.Annotations[CancelAnnotation] = "soon"
	_, asked = CancelRequestedAt(b)
	g.Expect(asked).To(BeFalse(), "not a time")
}

func TestMessageBatchOf(t *testing.T) {
	g := NewWithT(t)
	created := time.Unix(1700000000, 0)
	b := &v1.Batch{
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created),
			Annotations: map[string]string{RequestsAnnotation: "3"}},
		Spec: v1.BatchSpec{BatchID: "msgbatch_1", API: "anthropic", Endpoint: "/v1/messages", InputFileID: "file-in"},
	}
	raw, err := json.Marshal(MessageBatchOf(b, "http://gw/v1/messages/batches/msgbatch_1/results"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(raw).To(MatchJSON(`{"id":"msgbatch_1","type":"message_batch","processing_status":"in_progress",
		"request_counts":{"processing":3,"succeeded":0,"errored":0,"canceled":0,"expired":0},
		"ended_at":null,"created_at":"2023-11-14T22:13:20Z","expires_at":"2023-11-15T22:13:20Z",
		"archived_at":null,"cancel_initiated_at":null,"results_url":null}`))

	b.Annotations[CancelAnnotation] = created.Add(time.Minute).UTC().Format(time.RFC3339)
	b.Status = v1.BatchStatus{State: v1.BatchInProgress, RequestCounts: v1.BatchRequestCounts{Total: 3, Completed: 1}}
	o := MessageBatchOf(b, "u")
	g.Expect(o.ProcessingStatus).To(Equal(ProcessingCanceling))
	g.Expect(*o.CancelInitiatedAt).To(Equal("2023-11-14T22:14:20Z"))
	g.Expect(o.RequestCounts).To(Equal(MessageBatchCounts{Processing: 2, Succeeded: 1}))
	g.Expect(o.ResultsURL).To(BeNil())

	ended := metav1.NewTime(created.Add(time.Hour))
	for state, want := range map[v1.BatchState]MessageBatchCounts{
		v1.BatchCancelled: {Succeeded: 1, Errored: 1, Canceled: 1},
		v1.BatchExpired:   {Succeeded: 1, Errored: 1, Expired: 1},
		v1.BatchCompleted: {Succeeded: 1, Errored: 2},
	} {
		b.Status = v1.BatchStatus{State: state, RequestCounts: v1.BatchRequestCounts{Total: 3, Completed: 1, Failed: 1},
			CancelledAt: &ended, CompletedAt: &ended, ExpiredAt: &ended}
		o := MessageBatchOf(b, "u")
		g.Expect(o.ProcessingStatus).To(Equal(ProcessingEnded), "%s", state)
		g.Expect(o.RequestCounts).To(Equal(want), "%s", state)
		g.Expect(*o.EndedAt).To(Equal("2023-11-14T23:13:20Z"))
		g.Expect(*o.ResultsURL).To(Equal("u"))
	}
}

func TestMessageResultOf(t *testing.T) {
	l := Line{Number: 1, CustomID: "c"}
	for name, tc := range map[string]struct {
		in   OutputLine
		want string
	}{
		"succeeded": {Answered("b", l, 200, []byte(`{"type":"message","id":"msg_1"}`)),
			`{"custom_id":"c","result":{"type":"succeeded","message":{"type":"message","id":"msg_1"}}}`},
		"errored with the upstream's error": {Answered("b", l, 400, []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`)),
			`{"custom_id":"c","result":{"type":"errored","error":{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}}}`},
		"errored without an error body": {Answered("b", l, 503, []byte(`oops`)),
			`{"custom_id":"c","result":{"type":"errored","error":{"type":"error","error":{"type":"api_error","message":"the request failed with HTTP status 503"}}}}`},
		"canceled": {Unanswered("b", l, CodeCancelled, "cancelled"), `{"custom_id":"c","result":{"type":"canceled"}}`},
		"expired":  {Unanswered("b", l, CodeExpired, "expired"), `{"custom_id":"c","result":{"type":"expired"}}`},
		"refused": {Unanswered("b", l, "insufficient_quota", "no quota"),
			`{"custom_id":"c","result":{"type":"errored","error":{"type":"error","error":{"type":"api_error","message":"no quota"}}}}`},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			raw, err := json.Marshal(MessageResultOf(tc.in))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(raw).To(MatchJSON(tc.want))
		})
	}
}
