package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/batches"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/platform/blob"
)

// progress is a batch's record in the blob store: how many lines (in file
// order) have a recorded result, their counts and charge, the parts that
// hold the results, and the result files once written. It moves only
// after the part it names is stored.
type progress struct {
	Next      int64 `json:"next"`
	Completed int64 `json:"completed"`
	Failed    int64 `json:"failed"`
	// charge is what the lines done were billed.
	charge
	// Parts are the first line index of each part, in order.
	Parts        []int64 `json:"parts"`
	OutputFileID string  `json:"outputFileID,omitempty"`
	ErrorFileID  string  `json:"errorFileID,omitempty"`
	// Written: both result files are stored (either may be absent).
	Written bool `json:"written,omitempty"`
	// Expired: a line was not run because the completion window ended
	// (an upstream job stopped at its end): the batch ends expired.
	Expired bool `json:"expired,omitempty"`
}

// part is one pass's results: lines [Start, End) of the file (by index
// among its requests), their counts and charge, and their output lines.
type part struct {
	Start     int64 `json:"start"`
	End       int64 `json:"end"`
	Completed int64 `json:"completed"`
	Failed    int64 `json:"failed"`
	// charge is what the part's lines were billed.
	charge
	// Lines are the output lines (JSONL), output and error lines mixed in
	// file order.
	Lines []byte `json:"lines"`
}

func prefix(b *v1.Batch) string {
	return "batches/" + b.Namespace + "/" + string(b.UID) + "/"
}

func progressKey(b *v1.Batch) string { return prefix(b) + "progress.json" }

func partKey(b *v1.Batch, start int64) string {
	return fmt.Sprintf("%spart-%08d.json", prefix(b), start)
}

func (r *Reconciler) readJSON(ctx context.Context, key string, v any) (bool, error) {
	rd, err := r.Blobs.Open(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer func() { _ = rd.Close() }()
	data, err := io.ReadAll(rd)
	if err != nil {
		return false, err
	}
	return true, json.Unmarshal(data, v)
}

func (r *Reconciler) writeJSON(ctx context.Context, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = r.Blobs.Put(ctx, key, "application/json", bytes.NewReader(data))
	return err
}

// loadProgress reads b's progress and adopts a part stored after it (the
// previous run stopped between writing the part and the progress).
func (r *Reconciler) loadProgress(ctx context.Context, b *v1.Batch) (*progress, error) {
	p := &progress{}
	if _, err := r.readJSON(ctx, progressKey(b), p); err != nil {
		return nil, fmt.Errorf("read batch progress: %w", err)
	}
	for {
		var pt part
		found, err := r.readJSON(ctx, partKey(b, p.Next), &pt)
		if err != nil {
			return nil, fmt.Errorf("read batch part: %w", err)
		}
		if !found || pt.End <= p.Next {
			return p, nil
		}
		p.add(&pt)
		if err := r.writeJSON(ctx, progressKey(b), p); err != nil {
			return nil, err
		}
	}
}

func (p *progress) add(pt *part) {
	p.Parts = append(p.Parts, pt.Start)
	p.Next, p.Completed, p.Failed, p.charge = pt.End, p.Completed+pt.Completed, p.Failed+pt.Failed, p.plus(pt.charge)
}

// charge is what lines were billed: their quota and the tokens their usage
// rows count (none for a line whose answer was lost: only its quota is in
// the ledger). Embedded in a record, its fields are the record's.
type charge struct {
	Quota  billing.Quota  `json:"quota,omitempty"`
	Tokens v1.BatchTokens `json:"tokens,omitzero"`
}

func (c charge) plus(o charge) charge {
	return charge{Quota: c.Quota + o.Quota, Tokens: c.Tokens.Plus(o.Tokens)}
}

// mirror writes the progress's counts and charge into status.
func (p *progress) mirror(st *v1.BatchStatus) {
	st.RequestCounts.Completed, st.RequestCounts.Failed = p.Completed, p.Failed
	usd := v1.Decimal(p.Quota.CostUSD())
	st.Cost = &v1.BatchCost{Quota: int64(p.Quota), CostUSD: &usd}
	tokens := p.Tokens
	st.Usage = &tokens
}

// stopReason is why no more lines start: "" while they may.
type stopReason string

const (
	stopCancelled stopReason = "batch_cancelled"
	stopExpired   stopReason = "batch_expired"
)

// stopping reports whether lines of b may still start: not once a
// cancellation is requested (read from the cache, so a pass sees it at
// its next line) or the batch is deleted, nor past the completion window.
func (r *Reconciler) stopping(ctx context.Context, b *v1.Batch) stopReason {
	if b.Status.State == v1.BatchCancelling || !b.DeletionTimestamp.IsZero() {
		return stopCancelled
	}
	if !r.Clock.Now().Before(b.Status.ExpiresAt.Time) {
		return stopExpired
	}
	cur := &v1.Batch{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(b), cur); err == nil && cancelRequested(cur) {
		return stopCancelled
	}
	return ""
}

// run is one in-progress pass: lines from the progress on, for at most the
// pass budget, then the part and the progress; with every line done (or
// the batch stopping), the result files.
func (r *Reconciler) run(ctx context.Context, b *v1.Batch) (ctrl.Result, error) {
	stop := ctx
	// What a pass records outlives the manager's stop: the lines started
	// finish and their part is stored, so a restart does not run them again.
	ctx = context.WithoutCancel(ctx)
	st := &b.Status
	p, err := r.loadProgress(ctx, b)
	if err != nil {
		return ctrl.Result{}, err
	}
	p.mirror(st)
	if p.Next >= st.RequestCounts.Total {
		switch {
		case st.State == v1.BatchCancelling:
			return ctrl.Result{}, r.finalize(ctx, b, v1.BatchCancelled)
		case p.Expired:
			return ctrl.Result{}, r.finalize(ctx, b, v1.BatchExpired)
		}
		st.State, st.FinalizingAt = v1.BatchFinalizing, stamp(r.Clock.Now())
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	var limit int64
	if st.Execution == v1.BatchExecutionUpstream && r.Upstream != nil {
		res, handled, gatewayLines, err := r.runUpstream(ctx, b, p)
		if handled {
			return res, err
		}
		limit = gatewayLines
	}
	pt, stopped, err := r.runPart(ctx, stop, b, p.Next, limit)
	if err != nil {
		return ctrl.Result{}, err
	}
	if pt.End > pt.Start {
		if err := r.writeJSON(ctx, partKey(b, pt.Start), pt); err != nil {
			return ctrl.Result{}, fmt.Errorf("store batch part: %w", err)
		}
		p.add(pt)
		if err := r.writeJSON(ctx, progressKey(b), p); err != nil {
			return ctrl.Result{}, fmt.Errorf("store batch progress: %w", err)
		}
		p.mirror(st)
	}
	switch stopped {
	case stopCancelled:
		if st.State != v1.BatchCancelling {
			st.State, st.CancellingAt = v1.BatchCancelling, stamp(r.Clock.Now())
		}
	case stopExpired:
		return ctrl.Result{}, r.finalize(ctx, b, v1.BatchExpired)
	}
	return ctrl.Result{RequeueAfter: time.Millisecond}, nil
}

// runPart runs lines from index start for at most the pass budget on
// spec.concurrency workers (none starts once stop ends) and returns their
// part. The lines started all
// finish (each under its own timeout, not the manager's context), so the
// part covers a contiguous range; limit (0: none) bounds how many lines it
// runs. When the batch stops (cancelled,
// expired), the lines not run go into the part as unanswered and stopped
// says why.
func (r *Reconciler) runPart(ctx, stop context.Context, b *v1.Batch, start, limit int64) (*part, stopReason, error) {
	budget := r.PassBudget
	if budget <= 0 {
		budget = DefaultPassBudget
	}
	deadline := r.Clock.Now().Add(budget)
	workers := int(max(b.Spec.Concurrency, 1))
	type job struct {
		i    int
		line batches.Line
	}
	var (
		mu      sync.Mutex
		results []batches.OutputLine
		charges []charge
		runErr  error
	)
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := range jobs {
				out, c, err := r.runLine(ctx, b, j.line)
				mu.Lock()
				if err != nil && runErr == nil {
					runErr = err
				}
				results[j.i], charges[j.i] = out, c
				mu.Unlock()
			}
		})
	}
	var stopped stopReason
	var unrun []batches.Line
	var index int64
	errFull := errors.New("pass budget spent")
	_, perr := r.parse(ctx, b, func(l batches.Line) error {
		defer func() { index++ }()
		if index < start {
			return nil
		}
		if stopped == "" {
			stopped = r.stopping(ctx, b)
		}
		if stopped != "" {
			unrun = append(unrun, l)
			return nil
		}
		if stop.Err() != nil || !r.Clock.Now().Before(deadline) || (limit > 0 && index-start >= limit) {
			return errFull
		}
		mu.Lock()
		bad := runErr != nil
		i := len(results)
		results, charges = append(results, batches.OutputLine{}), append(charges, charge{})
		mu.Unlock()
		if bad {
			return errFull
		}
		jobs <- job{i: i, line: l}
		return nil
	})
	close(jobs)
	wg.Wait()
	if perr != nil && !errors.Is(perr, errFull) {
		return nil, "", fmt.Errorf("read the input file: %w", perr)
	}
	pt := &part{Start: start}
	var buf []byte
	for i, out := range results {
		if out.ID == "" { // not run (a line failed to start): the part ends before it
			results = results[:i]
			unrun = nil
			stopped = ""
			break
		}
		pt.charge = pt.plus(charges[i])
	}
	for _, l := range unrun {
		code, msg := string(stopped), "This request was not executed because the batch was cancelled."
		if stopped == stopExpired {
			msg = "This request could not be executed before the completion window expired."
		}
		results = append(results, batches.Unanswered(b.Spec.BatchID, l, code, msg))
	}
	for _, out := range results {
		if out.Failed() {
			pt.Failed++
		} else {
			pt.Completed++
		}
		var err error
		if buf, err = out.AppendJSONL(buf); err != nil {
			return nil, "", err
		}
	}
	pt.End, pt.Lines = start+int64(len(results)), buf
	if runErr != nil {
		log.FromContext(ctx).Error(runErr, "a batch line could not run; the pass ends before it", "batch", b.Spec.BatchID)
	}
	return pt, stopped, nil
}

// runLine runs one line unless an earlier run already did: a line whose
// usage row is in the ledger was sent and billed, and its answer was lost
// with that run, so it is not sent again.
func (r *Reconciler) runLine(ctx context.Context, b *v1.Batch, l batches.Line) (batches.OutputLine, charge, error) {
	id := batches.RequestID(b.Spec.BatchID, l.Number)
	done, err := r.Ledger.UsageQuotas(ctx, []string{id})
	if err != nil {
		return batches.OutputLine{}, charge{}, err
	}
	if q, ok := done[id]; ok {
		return batches.Unanswered(b.Spec.BatchID, l, "result_unavailable",
			"This request was executed and billed, but its response was lost when the batch's runner stopped."), charge{Quota: q}, nil
	}
	timeout := r.LineTimeout
	if timeout <= 0 {
		timeout = DefaultLineTimeout
	}
	// The line runs to its end when the manager stops (ctx is not
	// cancelled by it), so its answer is recorded with the part.
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := r.Lines.Run(lctx, b, id, l.Body)
	if err != nil {
		return batches.OutputLine{}, charge{}, err
	}
	body := jsonBody(res.Body)
	if res.Status == 0 {
		res.Status = http.StatusOK
	}
	var c charge
	if res.Billed {
		c = charge{Quota: res.Quota, Tokens: res.Tokens}
	}
	return batches.Answered(b.Spec.BatchID, l, res.Status, body), c, nil
}

// jsonBody is an answer's body for the output line: as it is when JSON,
// else wrapped in an error object.
func jsonBody(body []byte) []byte {
	if json.Valid(body) {
		return body
	}
	wrapped, _ := json.Marshal(map[string]any{"error": map[string]string{"message": string(body), "type": "server_error"}})
	return wrapped
}

// finalize writes the output and error files from the parts and ends the
// batch in state end.
func (r *Reconciler) finalize(ctx context.Context, b *v1.Batch, end v1.BatchState) error {
	p, err := r.loadProgress(ctx, b)
	if err != nil {
		return err
	}
	if !p.Written {
		if err := r.writeFiles(ctx, b, p); err != nil {
			return err
		}
	}
	st := &b.Status
	p.mirror(st)
	st.OutputFileID, st.ErrorFileID = p.OutputFileID, p.ErrorFileID
	now := stamp(r.Clock.Now())
	st.State = end
	switch end {
	case v1.BatchCompleted:
		st.CompletedAt = now
	case v1.BatchCancelled:
		st.CancelledAt = now
	case v1.BatchExpired:
		st.ExpiredAt = now
	}
	return nil
}

// writeFiles assembles the parts into the output file (2xx lines) and the
// error file (the others); a file with no line is not written, as OpenAI
// leaves its ID null. Each ID is recorded in the progress as soon as the
// file exists, so a restart does not write it twice.
func (r *Reconciler) writeFiles(ctx context.Context, b *v1.Batch, p *progress) error {
	var out, errs bytes.Buffer
	for _, start := range p.Parts {
		var pt part
		found, err := r.readJSON(ctx, partKey(b, start), &pt)
		if err != nil {
			return fmt.Errorf("read batch part: %w", err)
		}
		if !found {
			return fmt.Errorf("batch part %d is missing", start)
		}
		for line := range bytes.Lines(pt.Lines) {
			var o batches.OutputLine
			if err := json.Unmarshal(line, &o); err != nil {
				return fmt.Errorf("batch part %d: %w", start, err)
			}
			if o.Failed() {
				errs.Write(line)
			} else {
				out.Write(line)
			}
		}
	}
	write := func(id *string, kind string, data *bytes.Buffer) error {
		if *id != "" || data.Len() == 0 {
			return nil
		}
		var keep time.Duration
		if b.Spec.OutputExpiresAfter != nil {
			keep = b.Spec.OutputExpiresAfter.Duration
		}
		fid, err := r.Files.WriteResult(ctx, b.Spec.UserID, b.Spec.BatchID+"_"+kind+".jsonl", keep, data)
		if err != nil {
			return fmt.Errorf("write the %s file: %w", kind, err)
		}
		*id = fid
		return r.writeJSON(ctx, progressKey(b), p)
	}
	if err := write(&p.OutputFileID, "output", &out); err != nil {
		return err
	}
	if err := write(&p.ErrorFileID, "error", &errs); err != nil {
		return err
	}
	p.Written = true
	return r.writeJSON(ctx, progressKey(b), p)
}
