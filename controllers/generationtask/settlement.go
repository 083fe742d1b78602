package generationtask

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers/internal/reconciler"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/pricing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/tasks"
)

// produced is what a generation yielded: the stored result, the video
// length, and the token usage a token-priced model reported (nil: none).
type produced struct {
	result  *v1.TaskResult
	seconds int64
	usage   *v1.ImageTokenUsage
}

// complete settles the charge of what was produced, records the usage row
// and marks the task completed. Settle and the usage row are idempotent by
// request ID, and the charge is a pure function of the task, so a retry
// after a crash between the steps charges once.
func (p *pass) complete(ctx context.Context, j *job, out produced) error {
	t := j.t
	charge, byTokens := p.charge(ctx, j, out)
	st := &t.Status
	switch err := p.Ledger.Settle(ctx, t.Spec.RequestID, charge); {
	case errors.Is(err, store.ErrReservationClosed):
		// Refunded meanwhile (a stale-reservation sweep): nothing was charged.
		log.FromContext(ctx).Info("reservation already refunded; task completes unbilled", "task", t.Spec.TaskID)
		st.Billing = refundedBilling()
	case err != nil:
		return fmt.Errorf("settle: %w", err)
	default:
		st.Billing = &v1.TaskBilling{Status: v1.BillingSettled, Quota: ptr.To(int64(charge)),
			Credits: ptr.To(v1.Decimal(charge.CreditsString())), CostUSD: ptr.To(v1.Decimal(charge.CostUSD()))}
		if err := p.settledRow(ctx, j, charge, byTokens, out.usage); err != nil {
			return err
		}
	}
	done, expires := metav1.NewTime(p.now), metav1.NewTime(p.now.Add(ResultValidity))
	st.Phase, st.Progress, st.Result, st.Error = v1.TaskCompleted, 100, out.result, nil
	st.CompletedAt, st.ExpiresAt, st.NextPollAt = &done, &expires, nil
	ev := reconciler.Recorder{R: p.Events}
	ev.Normal(t, v1.EventTaskCompleted, "Complete", "task %s completed", t.Spec.TaskID)
	ev.Normal(t, v1.EventTaskSettled, "Settle", "task %s settled: %s credits (%s USD)", t.Spec.TaskID, deref(st.Billing.Credits), deref(st.Billing.CostUSD))
	return nil
}

// settledRow records the settled usage row, dated at billing (the
// contract's created_at: a task accepted before a window and settled in it
// falls in that window).
func (p *pass) settledRow(ctx context.Context, j *job, charge billing.Quota, byTokens bool, usage *v1.ImageTokenUsage) error {
	t := j.t
	row := store.UsageRow{
		RequestID: t.Spec.RequestID, CreatedAt: p.now.Unix(), UserID: t.Spec.UserID, TokenID: t.Spec.TokenID,
		TokenName: j.sub.TokenDisplay, ModelName: string(t.Spec.Model), TaskID: t.Spec.TaskID,
		BillingPhase: store.PhaseSettled, Quota: charge, Backend: t.Status.Backend,
	}
	if byTokens {
		// The usage object is shown only when it is exactly what was charged.
		t.Status.Usage = usage
		row.PromptTokens, row.CompletionTokens = usage.InputTokens, usage.OutputTokens
		row.ReportedTotalTokens = ptr.To(usage.TotalTokens)
	}
	if _, err := p.Ledger.RecordTaskUsage(ctx, row); err != nil {
		return fmt.Errorf("usage row: %w", err)
	}
	return nil
}

// preConsumed lists the task's held reservation as a pre_consumed usage
// row while it runs (dated at acceptance, the reservation's quota). The
// settled row replaces it; a refund removes it (store.Refund).
func (p *pass) preConsumed(ctx context.Context, t *v1.GenerationTask) error {
	sub, err := tasks.SubmissionOf(t)
	if err != nil {
		return nil // failed on the next pass, which refunds
	}
	row := store.UsageRow{RequestID: t.Spec.RequestID, CreatedAt: time.UnixMilli(sub.AcceptedAt).Unix(),
		UserID: t.Spec.UserID, TokenID: t.Spec.TokenID, TokenName: sub.TokenDisplay, ModelName: string(t.Spec.Model),
		TaskID: t.Spec.TaskID, BillingPhase: store.PhasePreConsumed, Quota: billing.Quota(t.Spec.ReservedQuota)}
	if _, err := p.Ledger.RecordTaskUsage(ctx, row); err != nil {
		return fmt.Errorf("pre-consumed usage row: %w", err)
	}
	return nil
}

// charge prices what was produced with the rule snapshot taken at
// submission, at the submission instant: outputs and seconds, or for a
// per_token rule the reported token usage (byTokens). A rule that no longer
// compiles, or a per_token task without usage, charges the reservation.
func (p *pass) charge(ctx context.Context, j *job, out produced) (q billing.Quota, byTokens bool) {
	t, sub := j.t, j.sub
	rule, err := pricing.Compile(&v1.PriceRule{
		ObjectMeta: metav1.ObjectMeta{Namespace: sub.PriceNamespace, Name: sub.PriceName}, Spec: sub.Price}, "")
	switch {
	case err != nil:
	case sub.Price.ChargeType == v1.ChargePerToken && out.usage == nil:
		err = errors.New("the model is priced per token but reported no token usage")
	case sub.Price.ChargeType == v1.ChargePerToken:
		if q, err = rule.Charge(tasks.PricingUsage(out.usage), time.UnixMilli(sub.AcceptedAt)); err == nil {
			return q, true
		}
	default:
		u := pricing.Usage{Requests: int64(len(out.result.Data)), InputImages: sub.InputImages, InputVideoSeconds: inputVideoSeconds(t, sub)}
		if t.Spec.Type == v1.ModelTypeVideo {
			u.Requests, u.OutputSeconds = 1, out.seconds
		}
		if q, err = rule.Charge(u, time.UnixMilli(sub.AcceptedAt)); err == nil {
			return q, false
		}
	}
	log.FromContext(ctx).Error(err, "price task outputs; charging the reservation", "task", t.Spec.TaskID)
	return billing.Quota(t.Spec.ReservedQuota), false
}

func refundedBilling() *v1.TaskBilling {
	return &v1.TaskBilling{Status: v1.BillingRefunded, Quota: ptr.To[int64](0),
		Credits: ptr.To(v1.Decimal("0")), CostUSD: ptr.To(v1.Decimal("0"))}
}

// fail refunds the reservation (nothing was produced) and marks the task failed.
func (p *pass) fail(ctx context.Context, t *v1.GenerationTask, message string) error {
	return p.failWith(ctx, t, v1.CodeGenerationFailed, message)
}

// failWith is fail with an error code.
func (p *pass) failWith(ctx context.Context, t *v1.GenerationTask, code, message string) error {
	switch err := p.Ledger.Refund(ctx, t.Spec.RequestID); {
	case errors.Is(err, store.ErrReservationClosed), errors.Is(err, store.ErrNotFound):
		// Settled already (cannot happen before output) or never reserved.
		log.FromContext(ctx).Info("refund of a failed task found no open reservation", "task", t.Spec.TaskID, "error", err.Error())
	case err != nil:
		return fmt.Errorf("refund: %w", err)
	}
	done := metav1.NewTime(p.now)
	st := &t.Status
	st.Phase, st.Progress, st.Result, st.NextPollAt = v1.TaskFailed, 0, nil, nil
	st.Error = &v1.TaskError{Code: code, Message: message}
	st.Billing, st.CompletedAt, st.ExpiresAt = refundedBilling(), &done, nil
	reconciler.Recorder{R: p.Events}.Warning(t, v1.EventTaskFailed, "Refund", "task %s failed and was refunded: %s", t.Spec.TaskID, message)
	return nil
}
