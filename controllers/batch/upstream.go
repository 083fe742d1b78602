package batch

import (
	"context"
	"errors"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers/internal/reconciler"
	"github.com/modelgate/modelgate/gateway/batches"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// Upstream runs a batch's lines as jobs of the batch API of the route's
// upstream (upstream.BatchProvider): the composition root implements it on
// the gateway's routes, admission, prices, adapters and ledger.
type Upstream interface {
	// Target is the upstream batch API that serves model for b's key (the
	// first backend of its plan), ok false when that backend has none: the
	// lines then run through the gateway.
	Target(ctx context.Context, b *v1.Batch, model string) (t Target, ok bool, err error)
	// Prepare admits one line for a job as a lone request is admitted (the
	// key's rights, the route, the limits, the batch price) without
	// reserving: its target, estimate and body in the target's protocol.
	// refused is the line's answer when admission refused it. ErrRunInGateway:
	// the line's backend has no batch API; it runs through the gateway.
	Prepare(ctx context.Context, b *v1.Batch, requestID string, body []byte) (line PreparedLine, refused *LineResult, err error)
	// Reserve holds amount for a job's lines until holdUntil, under the
	// reservation ID id; the error wraps store.ErrInsufficientQuota when
	// the key's or the tenant's balance cannot cover it.
	Reserve(ctx context.Context, b *v1.Batch, id string, amount billing.Quota, holdUntil time.Time) error
	// Refund gives a job's reservation back whole.
	Refund(ctx context.Context, id string) error
	// Submit starts a job of lines on t; the error wraps
	// upstream.ErrNoBatchAPI when the upstream has no batch API after all.
	Submit(ctx context.Context, b *v1.Batch, t Target, lines []upstream.BatchLine) (jobID string, err error)
	Status(ctx context.Context, b *v1.Batch, t Target, jobID string) (upstream.BatchJob, error)
	Cancel(ctx context.Context, b *v1.Batch, t Target, jobID string) error
	Results(ctx context.Context, b *v1.Batch, t Target, jobID string, each func(upstream.BatchAnswer) error) error
	// Answer is an answered line's result as the client receives it (in
	// the client's protocol and model), with its usage row priced at the
	// batch price of accepted when the upstream answered 2xx.
	Answer(ctx context.Context, b *v1.Batch, t Target, requestID string, body []byte, accepted time.Time, ans upstream.BatchAnswer) (LineResult, error)
	// Settle writes the lines' usage rows (each once, however often it is
	// called) and closes reservation id at their sum.
	Settle(ctx context.Context, id string, rows []store.UsageRow) error
}

// Target is the backend whose batch API runs a job: the route of Model and
// its backend Backend, priced as group Group.
type Target struct {
	Model   string `json:"model"`
	Backend string `json:"backend"`
	Group   string `json:"group,omitempty"`
}

// PreparedLine is a line admitted for a job.
type PreparedLine struct {
	Target   Target
	Estimate billing.Quota
	// Body is the request in the target's protocol, model rewritten.
	Body []byte
}

// ErrRunInGateway is Prepare's answer for a line whose backend has no
// batch API.
var ErrRunInGateway = errors.New("the line's backend has no batch API")

// Bounds of one upstream job: OpenAI's Batch API takes at most 50 000
// requests and 200 MB a file; a smaller job also bounds what the
// controller holds in memory while it reads the job's answers.
const (
	MaxJobLines = 10000
	MaxJobBytes = 64 << 20
)

// DefaultPollInterval is how often an upstream job's state is read.
const DefaultPollInterval = 30 * time.Second

// reservationHold is how long after the completion window a job's
// reservation stays open if nothing settles it (a batch deleted while its
// job ran): then the stale-reservation sweep gives it back.
const reservationHold = time.Hour

// job is an upstream job's record in the blob store, written before the
// job is submitted and again with its upstream ID: lines [Start, End) of
// the file, the reservation that holds their estimates, and each line's
// place (sent to the upstream, or answered at admission).
type job struct {
	Start       int64         `json:"start"`
	End         int64         `json:"end"`
	Target      Target        `json:"target"`
	Reservation string        `json:"reservation"`
	Reserved    billing.Quota `json:"reserved"`
	ID          string        `json:"id,omitempty"`
	SubmittedAt time.Time     `json:"submittedAt"`
	CancelSent  bool          `json:"cancelSent,omitempty"`
	Lines       []jobLine     `json:"lines"`
	// sent are the lines for the upstream, while the job is submitted.
	sent []upstream.BatchLine
}

// jobLine is one line of a job: sent upstream, or answered already (a
// refusal at admission, in Answer).
type jobLine struct {
	Number   int64               `json:"number"`
	CustomID string              `json:"customID"`
	Answer   *batches.OutputLine `json:"answer,omitempty"`
	// charge is what the line was billed.
	charge
}

func jobKey(b *v1.Batch, start int64) string {
	return fmt.Sprintf("%sjob-%08d.json", prefix(b), start)
}

// runUpstream is an in-progress pass of an Upstream batch: the open job
// polled (and its answers collected once it ended), or the next job
// submitted. handled is false when the pass belongs to the gateway: the
// batch stopping with no job open (the lines not run are answered as
// such), the next line needing the gateway (gatewayLines says how many
// lines it runs there), or an upstream without a batch API (the batch
// goes on in Gateway execution).
func (r *Reconciler) runUpstream(ctx context.Context, b *v1.Batch, p *progress) (res ctrl.Result, handled bool, gatewayLines int64, err error) {
	j := &job{}
	found, err := r.readJSON(ctx, jobKey(b, p.Next), j)
	if err != nil {
		return res, true, 0, fmt.Errorf("read batch job: %w", err)
	}
	if found && j.ID == "" && j.Reservation != "" {
		// Written, but its submission never recorded a job: the
		// reservation goes back and the lines start over.
		if err := r.abandonJob(ctx, b, j); err != nil {
			return res, true, 0, err
		}
		found = false
	}
	if found && j.ID != "" {
		res, err := r.pollJob(ctx, b, p, j)
		return res, true, 0, err
	}
	if r.stopping(ctx, b) != "" {
		return res, false, 0, nil
	}
	// Before a job can exist upstream, so that deleting the batch stops it
	// (docs/batches.md, "Deletion"). Adding it ends the pass; its own event
	// starts the next.
	if added, err := reconciler.EnsureFinalizer(ctx, r.Client, b, Finalizer); added || err != nil {
		return res, true, 0, err
	}
	j, err = r.buildJob(ctx, b, p.Next)
	switch {
	case err != nil:
		return res, true, 0, err
	case len(j.Lines) == 0: // the first line runs through the gateway
		return res, false, 1, nil
	case j.Reservation == "": // every line answered at admission
		return ctrl.Result{RequeueAfter: time.Millisecond}, true, 0, r.storeJobPart(ctx, b, p, j, nil)
	}
	return r.submitJob(ctx, b, j)
}

// buildJob admits lines from index start for one job, in file order, up to
// the job bounds, the first line for another target, or the first line the
// gateway must run; then reserves their estimates (halving the job until
// the balance covers it). No line sent: Lines is empty when the first line
// needs the gateway, else every line was answered at admission.
func (r *Reconciler) buildJob(ctx context.Context, b *v1.Batch, start int64) (*job, error) {
	j := &job{Start: start}
	var (
		estimates []billing.Quota
		sentAt    []int // index in j.Lines of each sent line
		size      int
		index     int64
	)
	errEnd := errors.New("job full")
	_, err := r.parse(ctx, b, func(l batches.Line) error {
		defer func() { index++ }()
		if index < start {
			return nil
		}
		if len(sentAt) >= MaxJobLines || size >= MaxJobBytes {
			return errEnd
		}
		id := batches.RequestID(b.Spec.BatchID, l.Number)
		pl, refused, err := r.Upstream.Prepare(ctx, b, id, l.Body)
		switch {
		case errors.Is(err, ErrRunInGateway):
			return errEnd
		case err != nil:
			return err
		case refused != nil:
			out := batches.Answered(b.Spec.BatchID, l, refused.Status, jsonBody(refused.Body))
			j.Lines = append(j.Lines, jobLine{Number: l.Number, CustomID: l.CustomID, Answer: &out})
			return nil
		case len(sentAt) > 0 && pl.Target != j.Target:
			return errEnd
		}
		j.Target = pl.Target
		sentAt = append(sentAt, len(j.Lines))
		estimates = append(estimates, pl.Estimate)
		size += len(pl.Body)
		j.Lines = append(j.Lines, jobLine{Number: l.Number, CustomID: l.CustomID})
		j.sent = append(j.sent, upstream.BatchLine{CustomID: id, Body: pl.Body})
		return nil
	})
	if err != nil && !errors.Is(err, errEnd) {
		return nil, fmt.Errorf("admit the job's lines: %w", err)
	}
	if len(sentAt) == 0 {
		j.End = start + int64(len(j.Lines))
		return j, nil
	}
	n, err := r.reserveJob(ctx, b, j, estimates)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		// Not even the first line fits at its estimate: the lines answered
		// before it end the job, or it runs alone through the gateway,
		// whose admission fits its output to the balance (or refuses it).
		j.Lines, j.sent = j.Lines[:sentAt[0]], nil
		j.End = start + int64(len(j.Lines))
		return j, nil
	}
	// The job ends before its first line not reserved for.
	if n < len(sentAt) {
		j.Lines, j.sent = j.Lines[:sentAt[n]], j.sent[:n]
	}
	j.End = start + int64(len(j.Lines))
	return j, nil
}

// reserveJob reserves the estimates of the job's first n sent lines,
// halving n until the balances cover them; it returns n (0: none fit).
func (r *Reconciler) reserveJob(ctx context.Context, b *v1.Batch, j *job, estimates []billing.Quota) (int, error) {
	hold := b.Status.ExpiresAt.Add(reservationHold)
	// A reservation ID of its own per attempt: a reservation that was
	// refunded cannot be reserved again.
	j.Reservation = fmt.Sprintf("%s_job%d_%d", b.Spec.BatchID, j.Start, r.Clock.Now().UnixNano())
	for n := len(estimates); n > 0; n /= 2 {
		var sum billing.Quota
		for _, e := range estimates[:n] {
			sum += e
		}
		err := r.Upstream.Reserve(ctx, b, j.Reservation, sum, hold)
		switch {
		case err == nil:
			j.Reserved = sum
			return n, nil
		case !errors.Is(err, store.ErrInsufficientQuota):
			return 0, fmt.Errorf("reserve the job's lines: %w", err)
		}
	}
	j.Reservation = ""
	return 0, nil
}

// submitJob records the job, submits it and records its upstream ID.
func (r *Reconciler) submitJob(ctx context.Context, b *v1.Batch, j *job) (ctrl.Result, bool, int64, error) {
	j.SubmittedAt = r.Clock.Now()
	if err := r.writeJSON(ctx, jobKey(b, j.Start), j); err != nil {
		return ctrl.Result{}, true, 0, errors.Join(fmt.Errorf("store batch job: %w", err), r.Upstream.Refund(ctx, j.Reservation))
	}
	id, err := r.Upstream.Submit(ctx, b, j.Target, j.sent)
	if err != nil {
		if aerr := r.abandonJob(ctx, b, j); aerr != nil {
			return ctrl.Result{}, true, 0, errors.Join(err, aerr)
		}
		if errors.Is(err, upstream.ErrNoBatchAPI) {
			log.FromContext(ctx).Info("the upstream has no batch API; the batch runs through the gateway",
				"batch", b.Spec.BatchID, "backend", j.Target.Backend)
			b.Status.Execution = v1.BatchExecutionGateway
			return ctrl.Result{RequeueAfter: time.Millisecond}, true, 0, nil
		}
		return ctrl.Result{}, true, 0, fmt.Errorf("submit the batch job: %w", err)
	}
	j.ID = id
	if err := r.writeJSON(ctx, jobKey(b, j.Start), j); err != nil {
		return ctrl.Result{}, true, 0, fmt.Errorf("store batch job: %w", err)
	}
	b.Status.UpstreamJobs = appendJob(b.Status.UpstreamJobs, v1.BatchUpstreamJob{
		Backend: j.Target.Backend, ID: id, Lines: int64(len(j.sent)), SubmittedAt: stamp(j.SubmittedAt)})
	return ctrl.Result{RequeueAfter: r.pollInterval()}, true, 0, nil
}

// abandonJob refunds a job that was not submitted and forgets it.
func (r *Reconciler) abandonJob(ctx context.Context, b *v1.Batch, j *job) error {
	if err := r.Upstream.Refund(ctx, j.Reservation); err != nil {
		return fmt.Errorf("refund the batch job: %w", err)
	}
	if err := r.Blobs.Delete(ctx, jobKey(b, j.Start)); err != nil && !errors.Is(err, blob.ErrNotFound) {
		return fmt.Errorf("delete batch job: %w", err)
	}
	return nil
}

func appendJob(jobs []v1.BatchUpstreamJob, j v1.BatchUpstreamJob) []v1.BatchUpstreamJob {
	jobs = append(jobs, j)
	if len(jobs) > 16 {
		jobs = jobs[len(jobs)-16:]
	}
	return jobs
}

func (r *Reconciler) pollInterval() time.Duration {
	if r.PollInterval > 0 {
		return r.PollInterval
	}
	return DefaultPollInterval
}

// pollJob reads the open job's state: running, it is asked to stop once
// the batch is cancelled or past its window; ended or failed, its answers
// become the job's part.
func (r *Reconciler) pollJob(ctx context.Context, b *v1.Batch, p *progress, j *job) (ctrl.Result, error) {
	state, err := r.Upstream.Status(ctx, b, j.Target, j.ID)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("read the upstream batch job: %w", err)
	}
	switch state.State {
	case upstream.BatchJobEnded:
		return ctrl.Result{RequeueAfter: time.Millisecond}, r.collectJob(ctx, b, p, j)
	case upstream.BatchJobFailed:
		msg := "The upstream batch job failed"
		if state.Message != "" {
			msg += ": " + clip(state.Message)
		}
		each := func(l batches.Line) (batches.OutputLine, charge) {
			return batches.Unanswered(b.Spec.BatchID, l, "batch_failed", msg), charge{}
		}
		if err := r.Upstream.Refund(ctx, j.Reservation); err != nil {
			return ctrl.Result{}, fmt.Errorf("refund the failed batch job: %w", err)
		}
		return ctrl.Result{RequeueAfter: time.Millisecond}, r.storeJobPart(ctx, b, p, j, each)
	}
	if stop := r.stopping(ctx, b); stop != "" && !j.CancelSent {
		if err := r.Upstream.Cancel(ctx, b, j.Target, j.ID); err != nil {
			return ctrl.Result{}, fmt.Errorf("cancel the upstream batch job: %w", err)
		}
		j.CancelSent = true
		if err := r.writeJSON(ctx, jobKey(b, j.Start), j); err != nil {
			return ctrl.Result{}, fmt.Errorf("store batch job: %w", err)
		}
		if stop == stopCancelled && b.Status.State != v1.BatchCancelling {
			b.Status.State, b.Status.CancellingAt = v1.BatchCancelling, stamp(r.Clock.Now())
		}
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	return ctrl.Result{RequeueAfter: r.pollInterval()}, nil
}

// collectJob reads an ended job's answers, bills the answered lines (their
// usage rows, then the reservation closed at their sum) and stores the
// job's part. A restart that repeats it bills nothing twice: the rows are
// keyed by the lines' request IDs and the reservation closes once.
func (r *Reconciler) collectJob(ctx context.Context, b *v1.Batch, p *progress, j *job) error {
	answers := map[string]upstream.BatchAnswer{}
	err := r.Upstream.Results(ctx, b, j.Target, j.ID, func(a upstream.BatchAnswer) error {
		answers[a.CustomID] = a
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the upstream batch job's answers: %w", err)
	}
	stop := r.stopping(ctx, b)
	var rows []store.UsageRow
	var answerErr error
	each := func(l batches.Line) (batches.OutputLine, charge) {
		id := batches.RequestID(b.Spec.BatchID, l.Number)
		a, ok := answers[id]
		if !ok {
			a.NotRun = upstream.NotRunExpired
		}
		if a.NotRun != "" {
			return notRun(b.Spec.BatchID, l, a.NotRun, stop), charge{}
		}
		res, err := r.Upstream.Answer(ctx, b, j.Target, id, l.Body, j.SubmittedAt, a)
		if err != nil {
			answerErr = errors.Join(answerErr, err)
			return batches.Unanswered(b.Spec.BatchID, l, "result_unavailable", "The upstream's answer to this request could not be read."), charge{}
		}
		var c charge
		if res.Usage != nil {
			rows = append(rows, *res.Usage)
			c = charge{Quota: res.Usage.Quota, Tokens: res.Tokens}
		}
		return batches.Answered(b.Spec.BatchID, l, res.Status, jsonBody(res.Body)), c
	}
	if err := r.jobOutputs(ctx, b, j, each); err != nil {
		return err
	}
	if answerErr != nil {
		log.FromContext(ctx).Error(answerErr, "batch answers unreadable", "batch", b.Spec.BatchID, "job", j.ID)
	}
	if err := r.Upstream.Settle(ctx, j.Reservation, rows); err != nil {
		return fmt.Errorf("bill the batch job: %w", err)
	}
	return r.writeJobPart(ctx, b, p, j)
}

// notRun is the error-file line of a line the job did not run: cancelled
// or expired as the batch was, or as the upstream reports it.
func notRun(batchID string, l batches.Line, reason string, stop stopReason) batches.OutputLine {
	switch {
	case stop == stopExpired, stop == "" && reason == upstream.NotRunExpired:
		return batches.Unanswered(batchID, l, string(stopExpired), "This request could not be executed before the completion window expired.")
	default:
		return batches.Unanswered(batchID, l, string(stopCancelled), "This request was not executed because the batch was cancelled.")
	}
}

// storeJobPart stores the part of a job whose sent lines (if any) each
// answers without their answers from the upstream.
func (r *Reconciler) storeJobPart(ctx context.Context, b *v1.Batch, p *progress, j *job, each func(batches.Line) (batches.OutputLine, charge)) error {
	if err := r.jobOutputs(ctx, b, j, each); err != nil {
		return err
	}
	return r.writeJobPart(ctx, b, p, j)
}

// jobOutputs gives every sent line of j its output line, from each (read
// again from the input file, with its body).
func (r *Reconciler) jobOutputs(ctx context.Context, b *v1.Batch, j *job, each func(batches.Line) (batches.OutputLine, charge)) error {
	pending := map[int64]int{}
	for i, jl := range j.Lines {
		if jl.Answer == nil {
			pending[jl.Number] = i
		}
	}
	if len(pending) == 0 {
		return nil
	}
	_, err := r.parse(ctx, b, func(l batches.Line) error {
		if i, ok := pending[l.Number]; ok {
			out, c := each(l)
			j.Lines[i].Answer, j.Lines[i].charge = &out, c
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the input file: %w", err)
	}
	return nil
}

// writeJobPart stores the job's lines, answered, as its part and moves the
// progress past them.
func (r *Reconciler) writeJobPart(ctx context.Context, b *v1.Batch, p *progress, j *job) error {
	pt := &part{Start: j.Start, End: j.End}
	var err error
	for _, jl := range j.Lines {
		out := jl.Answer
		if out == nil {
			return fmt.Errorf("batch job %s: line %d has no answer", j.ID, jl.Number)
		}
		if out.Error != nil && out.Error.Code == string(stopExpired) {
			p.Expired = true
		}
		if out.Failed() {
			pt.Failed++
		} else {
			pt.Completed++
		}
		pt.charge = pt.plus(jl.charge)
		if pt.Lines, err = out.AppendJSONL(pt.Lines); err != nil {
			return err
		}
	}
	if err := r.writeJSON(ctx, partKey(b, pt.Start), pt); err != nil {
		return fmt.Errorf("store batch part: %w", err)
	}
	p.add(pt)
	if err := r.writeJSON(ctx, progressKey(b), p); err != nil {
		return fmt.Errorf("store batch progress: %w", err)
	}
	p.mirror(&b.Status)
	return nil
}
