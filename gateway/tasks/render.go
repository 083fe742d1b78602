package tasks

import (
	"context"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
)

// View is the contract's generation task.
type View struct {
	ID          string        `json:"id"`
	Object      string        `json:"object"`
	Model       string        `json:"model"`
	Status      string        `json:"status"`
	Progress    int32         `json:"progress"`
	CreatedAt   int64         `json:"created_at"`
	CompletedAt *int64        `json:"completed_at,omitempty"`
	ExpiresAt   *int64        `json:"expires_at,omitempty"`
	URL         string        `json:"url,omitempty"`
	Result      *ResultView   `json:"result,omitempty"`
	Error       *v1.TaskError `json:"error,omitempty"`
	Usage       *UsageView    `json:"usage,omitempty"`
	Billing     *BillingView  `json:"billing,omitempty"`
	Metadata    any           `json:"metadata,omitempty"` // submission only: {}
}

type ResultView struct {
	Type string       `json:"type"`
	Data []ResultItem `json:"data"`
}

type ResultItem struct {
	URL string `json:"url"`
}

type BillingView struct {
	Status  string `json:"status"`
	Credits string `json:"credits,omitempty"`
	CostUSD string `json:"cost_usd,omitempty"`
}

type TokenDetails struct {
	TextTokens  int64 `json:"text_tokens"`
	ImageTokens int64 `json:"image_tokens"`
}

type InputDetails struct {
	TextTokens          int64         `json:"text_tokens"`
	ImageTokens         int64         `json:"image_tokens"`
	CachedTokens        int64         `json:"cached_tokens"`
	CachedTokensDetails *TokenDetails `json:"cached_tokens_details,omitempty"`
}

type UsageView struct {
	InputTokens         int64         `json:"input_tokens"`
	OutputTokens        int64         `json:"output_tokens"`
	TotalTokens         int64         `json:"total_tokens"`
	InputTokensDetails  *InputDetails `json:"input_tokens_details,omitempty"`
	OutputTokensDetails *TokenDetails `json:"output_tokens_details,omitempty"`
}

// Signer signs result URLs that name blobs; *blob.Store implements it.
type Signer interface {
	SignedURL(ctx context.Context, key string, ttl time.Duration) (string, error)
}

// Render turns a task into the contract's JSON, as the task queries and the
// webhooks show it. Result URLs naming blobs are signed afresh, valid until
// the task's expires_at.
func Render(ctx context.Context, t *v1.GenerationTask, blobs Signer, now time.Time) View {
	st := &t.Status
	out := View{
		ID: t.Spec.TaskID, Object: "generation.task", Model: string(t.Spec.Model),
		Status: string(v1.TaskQueued), Progress: st.Progress, CreatedAt: t.CreationTimestamp.Unix(),
	}
	if st.Phase != "" {
		out.Status = string(st.Phase)
	}
	if out.Status == string(v1.TaskSubmitted) { // not a status the task table of the contract shows
		out.Status = string(v1.TaskQueued)
	}
	switch st.Phase {
	case v1.TaskCompleted:
		out.Progress = 100
		if st.CompletedAt != nil {
			c := st.CompletedAt.Unix()
			out.CompletedAt = &c
		}
		if st.ExpiresAt != nil {
			e := st.ExpiresAt.Unix()
			out.ExpiresAt = &e
		}
		if st.Result != nil {
			out.Result = renderResult(ctx, t, blobs, now)
			if len(out.Result.Data) > 0 {
				out.URL = out.Result.Data[0].URL
			}
		}
	case v1.TaskFailed:
		out.Progress = 0
		out.Error = st.Error
		if out.Error == nil {
			out.Error = &v1.TaskError{Code: "generation_failed", Message: "the generation failed"}
		}
	}
	out.Billing = renderBilling(st.Billing)
	if out.Billing != nil && out.Billing.Status == string(v1.BillingSettled) && st.Usage != nil {
		out.Usage = renderUsage(st.Usage)
	}
	return out
}

func renderResult(ctx context.Context, t *v1.GenerationTask, blobs Signer, now time.Time) *ResultView {
	res := &ResultView{Type: t.Status.Result.Type, Data: []ResultItem{}}
	ttl := 24 * time.Hour
	if e := t.Status.ExpiresAt; e != nil {
		ttl = max(e.Sub(now), time.Second)
	}
	for _, d := range t.Status.Result.Data {
		u := d.URL
		if key, ok := strings.CutPrefix(u, BlobScheme); ok {
			signed, err := blobs.SignedURL(ctx, key, ttl)
			if err != nil {
				log.FromContext(ctx).Error(err, "sign result URL", "task", t.Spec.TaskID)
				continue
			}
			u = signed
		}
		res.Data = append(res.Data, ResultItem{URL: u})
	}
	return res
}

// renderBilling is the billing object: amounts only when settled or
// refunded (refunded is always zero); omitted when unknown.
func renderBilling(b *v1.TaskBilling) *BillingView {
	if b == nil {
		return nil
	}
	out := &BillingView{Status: string(b.Status)}
	switch b.Status {
	case v1.BillingSettled:
		if b.Quota == nil {
			return nil // no safe public value: omit the whole object
		}
		q := billing.Quota(*b.Quota)
		out.Credits, out.CostUSD = q.CreditsString(), q.CostUSD()
	case v1.BillingRefunded:
		out.Credits, out.CostUSD = "0", "0"
	}
	return out
}

func renderUsage(u *v1.ImageTokenUsage) *UsageView {
	if u.InputTokens < 0 || u.OutputTokens < 0 || u.TotalTokens != u.InputTokens+u.OutputTokens {
		return nil // not valid: omitted, never repaired
	}
	out := &UsageView{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens}
	if d := u.InputTokensDetails; d != nil {
		out.InputTokensDetails = &InputDetails{TextTokens: d.TextTokens, ImageTokens: d.ImageTokens, CachedTokens: d.CachedTokens}
		if c := d.CachedTokensDetails; c != nil {
			out.InputTokensDetails.CachedTokensDetails = &TokenDetails{TextTokens: c.TextTokens, ImageTokens: c.ImageTokens}
		}
	}
	if d := u.OutputTokensDetails; d != nil {
		out.OutputTokensDetails = &TokenDetails{TextTokens: d.TextTokens, ImageTokens: d.ImageTokens}
	}
	return out
}
