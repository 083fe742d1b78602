package batches

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// Object is OpenAI's batch object. Timestamps are Unix seconds, null until
// the batch enters the state they name.
type Object struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Endpoint         string            `json:"endpoint"`
	Errors           *ErrorList        `json:"errors"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window"`
	Status           v1.BatchState     `json:"status"`
	OutputFileID     *string           `json:"output_file_id"`
	ErrorFileID      *string           `json:"error_file_id"`
	CreatedAt        int64             `json:"created_at"`
	InProgressAt     *int64            `json:"in_progress_at"`
	ExpiresAt        *int64            `json:"expires_at"`
	FinalizingAt     *int64            `json:"finalizing_at"`
	CompletedAt      *int64            `json:"completed_at"`
	FailedAt         *int64            `json:"failed_at"`
	ExpiredAt        *int64            `json:"expired_at"`
	CancellingAt     *int64            `json:"cancelling_at"`
	CancelledAt      *int64            `json:"cancelled_at"`
	RequestCounts    RequestCounts     `json:"request_counts"`
	Metadata         map[string]string `json:"metadata"`
	// Model is the model the lines name (the first line's); absent until
	// the batch is validated.
	Model string `json:"model,omitempty"`
	// Usage is the billed lines' tokens, as their usage rows count them.
	Usage Usage `json:"usage"`
}

// Usage is OpenAI's batch usage object.
type Usage struct {
	InputTokens         int64               `json:"input_tokens"`
	InputTokensDetails  InputTokensDetails  `json:"input_tokens_details"`
	OutputTokens        int64               `json:"output_tokens"`
	OutputTokensDetails OutputTokensDetails `json:"output_tokens_details"`
	TotalTokens         int64               `json:"total_tokens"`
}

// InputTokensDetails break the input tokens down.
type InputTokensDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

// OutputTokensDetails break the output tokens down.
type OutputTokensDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// UsageOf renders a batch's token counts as OpenAI's usage object.
func UsageOf(t *v1.BatchTokens) Usage {
	if t == nil {
		return Usage{}
	}
	return Usage{InputTokens: t.InputTokens, InputTokensDetails: InputTokensDetails{CachedTokens: t.CachedTokens},
		OutputTokens: t.OutputTokens, OutputTokensDetails: OutputTokensDetails{ReasoningTokens: t.ReasoningTokens},
		TotalTokens: t.InputTokens + t.OutputTokens}
}

// ErrorList is the batch object's errors: a list object.
type ErrorList struct {
	Object string      `json:"object"`
	Data   []ListError `json:"data"`
}

// ListError is one batch-level error.
type ListError struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
	Line    *int64  `json:"line"`
}

// RequestCounts counts a batch's lines.
type RequestCounts struct {
	Total     int64 `json:"total"`
	Completed int64 `json:"completed"`
	Failed    int64 `json:"failed"`
}

// ObjectOf renders b as OpenAI's batch object. A batch the controller has
// not reached yet is validating, as OpenAI reports a batch just created; a
// batch asked to cancel is cancelling (since the ask) until it ends.
func ObjectOf(b *v1.Batch) Object {
	st := &b.Status
	o := Object{
		ID:               b.Spec.BatchID,
		Object:           "batch",
		Endpoint:         b.Spec.Endpoint,
		InputFileID:      b.Spec.InputFileID,
		CompletionWindow: window(b.Spec.CompletionWindow),
		Status:           State(b),
		OutputFileID:     optString(st.OutputFileID),
		ErrorFileID:      optString(st.ErrorFileID),
		CreatedAt:        b.CreationTimestamp.Unix(),
		InProgressAt:     unix(st.InProgressAt),
		ExpiresAt:        unix(st.ExpiresAt),
		FinalizingAt:     unix(st.FinalizingAt),
		CompletedAt:      unix(st.CompletedAt),
		FailedAt:         unix(st.FailedAt),
		ExpiredAt:        unix(st.ExpiredAt),
		CancellingAt:     unix(st.CancellingAt),
		CancelledAt:      unix(st.CancelledAt),
		RequestCounts:    RequestCounts(st.RequestCounts),
		Metadata:         b.Spec.Metadata,
		Model:            st.Model,
		Usage:            UsageOf(st.Usage),
	}
	if at, asked := CancelRequestedAt(b); asked && o.CancellingAt == nil && o.Status == v1.BatchCancelling {
		s := at.Unix()
		o.CancellingAt = &s
	}
	if len(st.Errors) > 0 {
		o.Errors = &ErrorList{Object: "list", Data: make([]ListError, len(st.Errors))}
		for i, e := range st.Errors {
			o.Errors.Data[i] = ListError{Code: e.Code, Message: e.Message}
			if e.Line > 0 {
				line := e.Line
				o.Errors.Data[i].Line = &line
			}
		}
	}
	return o
}

// window renders a completion window as OpenAI writes it ("24h").
func window(d *metav1.Duration) string {
	if d == nil {
		return "24h"
	}
	s := d.Duration.String() // 24h0m0s, 1h30m0s
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func unix(t *metav1.Time) *int64 {
	if t == nil {
		return nil
	}
	s := t.Unix()
	return &s
}

// ExpiresAt is the end of b's completion window, counted from its creation.
func ExpiresAt(b *v1.Batch) time.Time {
	w := 24 * time.Hour
	if b.Spec.CompletionWindow != nil {
		w = b.Spec.CompletionWindow.Duration
	}
	return b.CreationTimestamp.Add(w)
}
