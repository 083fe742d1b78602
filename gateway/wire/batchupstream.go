package wire

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers/batch"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/http/handlers"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// batchUpstream is the Batch controller's Upstream: the lines admitted by
// the bound pipeline's text handlers (as the batch's ApiToken, like
// batchLines), the jobs run by the route's adapter, the reservations and
// usage rows in the ledger.
type batchUpstream struct {
	lines  *batchLines
	ledger *store.Store
}

// usageChunk bounds the usage rows written in one transaction.
const usageChunk = 500

// principal is the batch's key as a principal, or why its lines are
// refused.
func (u *batchUpstream) principal(ctx context.Context, b *v1.Batch) (*boundLines, *auth.Principal, *batch.LineResult, error) {
	bl := u.lines.bound.Load()
	if bl == nil {
		return nil, nil, nil, errNoPipeline
	}
	p, refused, err := u.lines.principal(ctx, bl, b)
	return bl, p, refused, err
}

func (u *batchUpstream) Target(ctx context.Context, b *v1.Batch, model string) (batch.Target, bool, error) {
	bl, p, refused, err := u.principal(ctx, b)
	if err != nil || refused != nil {
		return batch.Target{}, false, err
	}
	t, ok, err := bl.lines.TargetFor(ctx, b.Spec.Endpoint, p, model)
	return targetOf(t), ok, err
}

func (u *batchUpstream) Prepare(ctx context.Context, b *v1.Batch, requestID string, body []byte) (batch.PreparedLine, *batch.LineResult, error) {
	bl, p, refused, err := u.principal(ctx, b)
	if err != nil || refused != nil {
		return batch.PreparedLine{}, refused, err
	}
	line, ref, err := bl.lines.PrepareUpstream(ctx, b.Spec.Endpoint, p, requestID, body)
	switch {
	case errors.Is(err, handlers.ErrNoUpstreamBatch):
		return batch.PreparedLine{}, nil, batch.ErrRunInGateway
	case err != nil:
		return batch.PreparedLine{}, nil, err
	case ref != nil:
		res := lineResult(*ref)
		return batch.PreparedLine{}, &res, nil
	}
	return batch.PreparedLine{Target: targetOf(line.Target), Estimate: line.Estimate, Body: line.Body}, nil, nil
}

func (u *batchUpstream) Reserve(ctx context.Context, b *v1.Batch, id string, amount billing.Quota, holdUntil time.Time) error {
	_, err := u.ledger.ReserveHeld(ctx, id, b.Spec.TokenID, b.Spec.UserID, amount, nil, holdUntil)
	return err
}

func (u *batchUpstream) Refund(ctx context.Context, id string) error {
	if err := u.ledger.Refund(ctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// settling is b's key for what its submitted jobs owe: the key itself, or
// when it has since become unusable (deleted, disabled, its tenant
// suspended) the batch's record of it, so that a job the upstream ran is
// still read and billed.
func (u *batchUpstream) settling(ctx context.Context, b *v1.Batch) (*boundLines, *auth.Principal, error) {
	bl, p, refused, err := u.principal(ctx, b)
	if err != nil || refused == nil {
		return bl, p, err
	}
	tok := &v1.ApiToken{}
	tok.Namespace, tok.Name, tok.Spec.Group = b.Namespace, b.Spec.TokenName, b.Spec.Group
	tenant := &v1.Tenant{}
	tenant.Name = b.Namespace
	tenant.Namespace = b.Namespace
	return bl, &auth.Principal{Token: tok, Tenant: tenant, TokenID: b.Spec.TokenID, UserID: b.Spec.UserID}, nil
}

// api is the batch API of t for b's key.
func (u *batchUpstream) api(ctx context.Context, b *v1.Batch, t batch.Target) (upstream.BatchProvider, upstream.Backend, upstream.Protocol, error) {
	bl, p, err := u.settling(ctx, b)
	if err != nil {
		return nil, upstream.Backend{}, "", err
	}
	return bl.lines.UpstreamBatch(ctx, b.Spec.Endpoint, p, handlerTarget(t))
}

func (u *batchUpstream) Submit(ctx context.Context, b *v1.Batch, t batch.Target, lines []upstream.BatchLine) (string, error) {
	bp, backend, up, err := u.api(ctx, b, t)
	if err != nil {
		return "", err
	}
	return bp.SubmitBatch(ctx, backend, up, lines)
}

func (u *batchUpstream) Status(ctx context.Context, b *v1.Batch, t batch.Target, jobID string) (upstream.BatchJob, error) {
	bp, backend, _, err := u.api(ctx, b, t)
	if err != nil {
		return upstream.BatchJob{}, err
	}
	return bp.BatchStatus(ctx, backend, jobID)
}

func (u *batchUpstream) Cancel(ctx context.Context, b *v1.Batch, t batch.Target, jobID string) error {
	bp, backend, _, err := u.api(ctx, b, t)
	if err != nil {
		return err
	}
	return bp.CancelBatch(ctx, backend, jobID)
}

func (u *batchUpstream) Results(ctx context.Context, b *v1.Batch, t batch.Target, jobID string, each func(upstream.BatchAnswer) error) error {
	bp, backend, _, err := u.api(ctx, b, t)
	if err != nil {
		return err
	}
	return bp.BatchResults(ctx, backend, jobID, each)
}

func (u *batchUpstream) Answer(ctx context.Context, b *v1.Batch, t batch.Target, requestID string, body []byte, accepted time.Time, ans upstream.BatchAnswer) (batch.LineResult, error) {
	bl, p, err := u.settling(ctx, b)
	if err != nil {
		return batch.LineResult{}, err
	}
	_, _, up, err := bl.lines.UpstreamBatch(ctx, b.Spec.Endpoint, p, handlerTarget(t))
	if err != nil {
		return batch.LineResult{}, err
	}
	res, row, err := bl.lines.AnswerUpstream(ctx, b.Spec.Endpoint, p, handlerTarget(t), up, requestID, body, accepted, ans)
	if err != nil {
		return batch.LineResult{}, err
	}
	out := lineResult(res)
	out.Usage = row
	return out, nil
}

func (u *batchUpstream) Settle(ctx context.Context, id string, rows []store.UsageRow) error {
	var sum billing.Quota
	for start := 0; start < len(rows); start += usageChunk {
		chunk := rows[start:min(start+usageChunk, len(rows))]
		if _, err := u.ledger.InsertUsage(ctx, chunk); err != nil {
			return fmt.Errorf("write the batch job's usage rows: %w", err)
		}
	}
	for _, r := range rows {
		sum += r.Quota
	}
	return u.ledger.Settle(ctx, id, sum)
}

func targetOf(t handlers.BatchTarget) batch.Target {
	return batch.Target{Model: t.Model, Backend: t.Backend, Group: t.Group}
}

func handlerTarget(t batch.Target) handlers.BatchTarget {
	return handlers.BatchTarget{Model: t.Model, Backend: t.Backend, Group: t.Group}
}
