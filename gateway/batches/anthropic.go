package batches

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/apierr"
)

// RequestsAnnotation holds the number of requests an Anthropic message
// batch was created with: Anthropic reports them processing from the
// start, before the controller has counted the input file.
const RequestsAnnotation = "modelgate.io/requests"

// Anthropic's processing statuses, a coarser view of the batch states.
const (
	ProcessingInProgress = "in_progress"
	ProcessingCanceling  = "canceling"
	ProcessingEnded      = "ended"
)

// MessageBatch is Anthropic's message_batch object. Timestamps are RFC 3339,
// null until the batch reaches what they name.
type MessageBatch struct {
	ID                string             `json:"id"`
	Type              string             `json:"type"`
	ProcessingStatus  string             `json:"processing_status"`
	RequestCounts     MessageBatchCounts `json:"request_counts"`
	EndedAt           *string            `json:"ended_at"`
	CreatedAt         string             `json:"created_at"`
	ExpiresAt         string             `json:"expires_at"`
	ArchivedAt        *string            `json:"archived_at"`
	CancelInitiatedAt *string            `json:"cancel_initiated_at"`
	ResultsURL        *string            `json:"results_url"`
}

// MessageBatchCounts counts a message batch's requests by outcome; while it
// runs, the requests without one are processing.
type MessageBatchCounts struct {
	Processing int64 `json:"processing"`
	Succeeded  int64 `json:"succeeded"`
	Errored    int64 `json:"errored"`
	Canceled   int64 `json:"canceled"`
	Expired    int64 `json:"expired"`
}

// ProcessingStatus is b's Anthropic processing status.
func ProcessingStatus(b *v1.Batch) string {
	switch s := State(b); {
	case s.Terminal():
		return ProcessingEnded
	case s == v1.BatchCancelling:
		return ProcessingCanceling
	}
	return ProcessingInProgress
}

// MessageBatchOf renders b as Anthropic's message_batch object; resultsURL
// is where its results are served, reported once it ended.
func MessageBatchOf(b *v1.Batch, resultsURL string) MessageBatch {
	st := &b.Status
	o := MessageBatch{
		ID:               b.Spec.BatchID,
		Type:             "message_batch",
		ProcessingStatus: ProcessingStatus(b),
		CreatedAt:        rfc3339(b.CreationTimestamp.Time),
		ExpiresAt:        rfc3339(ExpiresAt(b)),
	}
	if at, asked := CancelRequestedAt(b); asked {
		s := rfc3339(at)
		o.CancelInitiatedAt = &s
	}
	total := st.RequestCounts.Total
	if total == 0 {
		total, _ = strconv.ParseInt(b.Annotations[RequestsAnnotation], 10, 64)
	}
	done := st.RequestCounts.Completed + st.RequestCounts.Failed
	rest := max(total-done, 0)
	c := MessageBatchCounts{Succeeded: st.RequestCounts.Completed, Errored: st.RequestCounts.Failed}
	if o.ProcessingStatus != ProcessingEnded {
		c.Processing = rest
	} else {
		// The requests without an answer end as the batch did.
		switch st.State {
		case v1.BatchCancelled:
			c.Canceled = rest
		case v1.BatchExpired:
			c.Expired = rest
		default:
			c.Errored += rest
		}
		if t := endedAt(st); t != nil {
			s := rfc3339(t.Time)
			o.EndedAt = &s
		}
		u := resultsURL
		o.ResultsURL = &u
	}
	o.RequestCounts = c
	return o
}

func endedAt(st *v1.BatchStatus) *metav1.Time {
	for _, t := range []*metav1.Time{st.CompletedAt, st.CancelledAt, st.ExpiredAt, st.FailedAt} {
		if t != nil {
			return t
		}
	}
	return nil
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// MessageResult is one line of a message batch's results.
type MessageResult struct {
	CustomID string     `json:"custom_id"`
	Result   ResultBody `json:"result"`
}

// ResultBody is a request's outcome: succeeded with the message, errored
// with an Anthropic error response, canceled or expired without either.
type ResultBody struct {
	Type    string          `json:"type"`
	Message json.RawMessage `json:"message,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// Result types of a message batch's results.
const (
	ResultSucceeded = "succeeded"
	ResultErrored   = "errored"
	ResultCanceled  = "canceled"
	ResultExpired   = "expired"
)

// Codes of the error-file lines of requests that never ran.
const (
	CodeCancelled = "batch_cancelled"
	CodeExpired   = "batch_expired"
)

// MessageResultOf converts an output or error line of a message batch to
// its result line: a 2xx answer succeeded (the body is the message),
// another answer errored (its body is the error response when it is one),
// a request that never ran was canceled or expired, or errored for any
// other reason.
func MessageResultOf(o OutputLine) MessageResult {
	r := MessageResult{CustomID: o.CustomID}
	switch {
	case o.Response != nil && !o.Failed():
		r.Result = ResultBody{Type: ResultSucceeded, Message: o.Response.Body}
	case o.Response != nil:
		body := bytes.TrimSpace(o.Response.Body)
		var probe struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(body, &probe) != nil || probe.Type != "error" {
			body = errorResponse(apierr.MessagesType(o.Response.StatusCode), "the request failed with HTTP status "+strconv.Itoa(o.Response.StatusCode))
		}
		r.Result = ResultBody{Type: ResultErrored, Error: body}
	case o.Error != nil && o.Error.Code == CodeCancelled:
		r.Result = ResultBody{Type: ResultCanceled}
	case o.Error != nil && o.Error.Code == CodeExpired:
		r.Result = ResultBody{Type: ResultExpired}
	default:
		msg := "the request failed"
		if o.Error != nil && o.Error.Message != "" {
			msg = o.Error.Message
		}
		r.Result = ResultBody{Type: ResultErrored, Error: errorResponse("api_error", msg)}
	}
	return r
}

// errorResponse is Anthropic's error response body.
func errorResponse(typ, message string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": message}})
	return b
}
