// Package batch runs Batches: it checks a batch's input file, runs its lines
// through the gateway's own data path at the batch's concurrency, and writes
// the output and error files.
//
// A pass of the reconciler moves a batch one step. validating: the input
// file is parsed whole (batches.ParseInput); an invalid file fails the
// batch, nothing billed. in_progress: lines run in file order on
// spec.concurrency workers, each through LineRunner (the gateway's text
// handlers in process, composed in gateway/wire: the same admission and
// reservation, routing, translation, failover and usage row as a request
// sent alone, under the line's fixed request ID batches.RequestID and at the
// batch price). A pass starts lines for at most PassBudget, lets the running
// ones finish, records their results as one part in the blob store and the
// progress next to it, and mirrors counts and cost into status in one
// patch; the next pass goes on from the progress. finalizing: the parts are
// assembled into the output and error files (Files.WriteResult), then
// completed. The cancel annotation (modelgate.io/cancel-requested) and the
// end of the completion window stop the starting of lines; the lines not run
// go to the error file as batch_cancelled or batch_expired, and the batch
// ends cancelled or expired.
//
// A restarted manager does not run a line twice: results are recorded per
// part before the progress moves, a part written before a crash is adopted,
// and a line whose usage row is already in the ledger is not sent again
// (docs/batches.md, "Execution").
package batch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/batches"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/store"
)

// CancelAnnotation marks a batch whose cancellation was requested (its
// value is the RFC 3339 time of the request); the API sets it.
const CancelAnnotation = batches.CancelAnnotation

// Defaults.
const (
	// DefaultPassBudget bounds how long one pass starts lines: the status
	// (counts, cost) moves at least this often, and a cancellation is seen
	// by the next line started.
	DefaultPassBudget = 10 * time.Second
	// DefaultLineTimeout bounds one line; a line runs to its end even when
	// the manager stops, so that its answer is recorded.
	DefaultLineTimeout = 10 * time.Minute
)

// Reasons of the Ready condition.
const (
	ReasonRunning  = "Running"
	ReasonFinished = "Finished"
)

// LineRunner runs one line of a batch through the gateway's data path.
// The composition root implements it on the gateway's text handlers.
type LineRunner interface {
	// Run sends body to b's endpoint as b's ApiToken, under requestID,
	// charged at the batch price. An error means the line could not be
	// run now (it is tried again); an answer, refusals included, is a
	// LineResult.
	Run(ctx context.Context, b *v1.Batch, requestID string, body []byte) (LineResult, error)
}

// LineResult is a line's answer.
type LineResult struct {
	Status int
	Body   []byte
	// Billed: the line's usage row is durable, for Quota and Tokens.
	Billed bool
	Quota  billing.Quota
	Tokens v1.BatchTokens
	// Usage is the usage row of a line an upstream batch job answered
	// (Upstream.Answer), written by Upstream.Settle.
	Usage *store.UsageRow
}

// Files reads a batch's input file and writes its result files (the
// gateway's file store, gateway/files).
type Files interface {
	// Open reads the user's file fileID.
	Open(ctx context.Context, userID int64, fileID string) (io.ReadCloser, error)
	// WriteResult stores a result file for the user and returns its ID;
	// expiresAfter, when positive, is how long it is kept.
	WriteResult(ctx context.Context, userID int64, name string, expiresAfter time.Duration, r io.Reader) (string, error)
}

// ErrFileNotFound is Files.Open's answer for a file that does not exist.
var ErrFileNotFound = errors.New("file not found")

// Ledger is what the controller asks the ledger: the usage rows already
// present among the lines' request IDs (*store.Store implements it).
type Ledger interface {
	UsageQuotas(ctx context.Context, requestIDs []string) (map[string]billing.Quota, error)
}

// Reconciler runs Batches.
type Reconciler struct {
	Client client.Client
	Lines  LineRunner
	// Upstream runs lines on the upstream's batch API where the route's
	// backend has one; nil runs every batch through the gateway.
	Upstream Upstream
	Files    Files
	Ledger   Ledger
	// Blobs holds each batch's progress and result parts.
	Blobs *blob.Store
	Clock clock.PassiveClock
	// PassBudget: DefaultPassBudget when zero.
	PassBudget time.Duration
	// LineTimeout: DefaultLineTimeout when zero.
	LineTimeout time.Duration
	// PollInterval is how often an upstream job is read:
	// DefaultPollInterval when zero.
	PollInterval time.Duration
	// Workers is the number of batches run at once.
	Workers int
}

// +kubebuilder:rbac:groups=modelgate.io,resources=batches,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=modelgate.io,resources=batches/status,verbs=get;update;patch

// Reconcile moves one batch one step.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &v1.Batch{}
	if err := r.Client.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !b.DeletionTimestamp.IsZero() {
		return r.release(ctx, b)
	}
	if b.Status.State.Terminal() {
		return ctrl.Result{}, r.dropFinalizer(ctx, b)
	}
	orig := b.DeepCopy()
	res, err := r.step(ctx, b)
	setReady(b)
	if perr := r.patchStatus(ctx, orig, b); perr != nil {
		return ctrl.Result{}, errors.Join(err, perr)
	}
	return res, err
}

// step is one pass's work on b, its status changed in place.
func (r *Reconciler) step(ctx context.Context, b *v1.Batch) (ctrl.Result, error) {
	now := r.Clock.Now()
	st := &b.Status
	if st.ExpiresAt == nil {
		st.ExpiresAt = &metav1.Time{Time: batches.ExpiresAt(b)}
	}
	// A cancel asked before the batch ended ends it cancelled, even when
	// every line has run by then: the API answered it cancelling.
	if cancelRequested(b) && (st.State == "" || st.State == v1.BatchValidating || st.State == v1.BatchInProgress || st.State == v1.BatchFinalizing) {
		st.State, st.CancellingAt = v1.BatchCancelling, stamp(now)
	}
	switch st.State {
	case "", v1.BatchValidating:
		return r.validate(ctx, b, now)
	case v1.BatchInProgress, v1.BatchCancelling:
		return r.run(ctx, b)
	case v1.BatchFinalizing:
		return ctrl.Result{}, r.finalize(ctx, b, v1.BatchCompleted)
	}
	return ctrl.Result{}, nil
}

// validate parses the whole input file: invalid, the batch fails (nothing
// ran, nothing is billed); valid, it is in progress with its total.
func (r *Reconciler) validate(ctx context.Context, b *v1.Batch, now time.Time) (ctrl.Result, error) {
	st := &b.Status
	st.State = v1.BatchValidating
	if e, refused := batches.InputErrorOf(b); refused { // the gateway refused the file already
		st.State, st.FailedAt, st.Errors = v1.BatchFailed, stamp(now), []v1.BatchError{e}
		return ctrl.Result{}, nil
	}
	var firstModel string
	total, err := r.parse(ctx, b, func(l batches.Line) error {
		if firstModel == "" {
			firstModel = lineModel(l.Body)
		}
		return nil
	})
	var ie *batches.InputError
	switch {
	case errors.As(err, &ie):
		st.State, st.FailedAt = v1.BatchFailed, stamp(now)
		st.Errors = []v1.BatchError{{Code: ie.Code, Message: clip(ie.Message), Line: ie.Line}}
		return ctrl.Result{}, nil
	case errors.Is(err, ErrFileNotFound):
		st.State, st.FailedAt = v1.BatchFailed, stamp(now)
		st.Errors = []v1.BatchError{{Code: "invalid_input_file", Message: "the input file " + b.Spec.InputFileID + " does not exist"}}
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	if st.Execution, err = r.execution(ctx, b, firstModel); err != nil {
		return ctrl.Result{}, err
	}
	st.State, st.InProgressAt = v1.BatchInProgress, stamp(now)
	st.RequestCounts.Total, st.Model = total, clipTo(firstModel, maxModelLen)
	return ctrl.Result{RequeueAfter: time.Millisecond}, nil
}

// execution is where b's lines run: Upstream when the first line's model
// is served by a backend with a batch API of its own, else Gateway. A line
// whose backend has none runs through the gateway either way.
func (r *Reconciler) execution(ctx context.Context, b *v1.Batch, model string) (v1.BatchExecution, error) {
	if r.Upstream == nil || model == "" {
		return v1.BatchExecutionGateway, nil
	}
	_, ok, err := r.Upstream.Target(ctx, b, model)
	switch {
	case err != nil:
		return "", fmt.Errorf("choose the batch's execution: %w", err)
	case ok:
		return v1.BatchExecutionUpstream, nil
	}
	return v1.BatchExecutionGateway, nil
}

// lineModel is the model a line's body names ("" when none).
func lineModel(body []byte) string {
	var m struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &m)
	return m.Model
}

// parse reads b's input file, calling each with its lines in order.
func (r *Reconciler) parse(ctx context.Context, b *v1.Batch, each func(batches.Line) error) (int64, error) {
	rc, err := r.Files.Open(ctx, b.Spec.UserID, b.Spec.InputFileID)
	if err != nil {
		return 0, err
	}
	defer func() { _ = rc.Close() }()
	return batches.ParseInput(rc, b.Spec.Endpoint, batches.MaxLinesOf(b.Spec.API), each)
}

func (r *Reconciler) patchStatus(ctx context.Context, orig, b *v1.Batch) error {
	if equality.Semantic.DeepEqual(orig.Status, b.Status) {
		return nil
	}
	err := r.Client.Status().Patch(ctx, b, client.MergeFrom(orig))
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// setReady: Ready is True once nothing is left to do.
func setReady(b *v1.Batch) {
	c := metav1.Condition{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonRunning,
		Message: "the batch is " + string(orValidating(b.Status.State)), ObservedGeneration: b.Generation}
	if b.Status.State.Terminal() {
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonFinished, "the batch is "+string(b.Status.State)
	}
	meta.SetStatusCondition(&b.Status.Conditions, c)
	b.Status.ObservedGeneration = b.Generation
}

func orValidating(s v1.BatchState) v1.BatchState {
	if s == "" {
		return v1.BatchValidating
	}
	return s
}

func cancelRequested(b *v1.Batch) bool {
	_, ok := b.Annotations[CancelAnnotation]
	return ok
}

func stamp(t time.Time) *metav1.Time { return &metav1.Time{Time: t} }

// Bounds of status strings, as the resource's schema sets them.
const (
	maxMessageLen = 1024
	maxModelLen   = 256
)

// clip keeps a message within status's bound.
func clip(s string) string { return clipTo(s, maxMessageLen) }

func clipTo(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Lines == nil || r.Files == nil || r.Blobs == nil || r.Ledger == nil {
		return fmt.Errorf("batch controller: a line runner, files, a blob store and a ledger are required")
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.Batch{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Named("batch").
		Complete(r)
}
