package controllers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/assetcopy"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/blob"
	"github.com/modelgate/modelgate/gateway/media"
	"github.com/modelgate/modelgate/gateway/mediaduration"
	"github.com/modelgate/modelgate/gateway/pricing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/tasks"
	"github.com/modelgate/modelgate/gateway/uploads"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/webhook"
)

// GenerationTask defaults.
const (
	// DefaultTaskRetention is how long a final task object stays before it
	// is deleted (the ledger archive keeps answering queries).
	DefaultTaskRetention = time.Hour
	// ResultValidity is how long generated URLs are valid (expires_at).
	ResultValidity = 24 * time.Hour
	// CodeGenerationFailed is the error code of a failed task.
	CodeGenerationFailed = "generation_failed"
	// CodeContentPolicy is the error code of a task an upstream refused
	// for policy reasons (the image task error table's 422 type).
	CodeContentPolicy = "content_policy_violation"
	// CodeDeleted is the error code of a task deleted before it finished.
	CodeDeleted = "deleted"

	// DefaultReviewDeadline is the private asset review deadline per round.
	DefaultReviewDeadline = 20 * time.Minute

	minPoll = 250 * time.Millisecond
	maxPoll = 10 * time.Second
)

// TaskLedger is the part of the ledger the GenerationTask controller uses;
// *store.Store implements it.
type TaskLedger interface {
	Settle(ctx context.Context, requestID string, actual billing.Quota) error
	Refund(ctx context.Context, requestID string) error
	RecordTaskUsage(ctx context.Context, row store.UsageRow) (bool, error)
	UpsertTask(ctx context.Context, rec store.TaskRecord) error
	PrepareReviewAsset(ctx context.Context, a store.ReviewAsset, now time.Time) (store.ReviewAsset, error)
	DecideReviewAsset(ctx context.Context, a store.ReviewAsset, state string, now time.Time) (store.ReviewAsset, error)
}

var _ TaskLedger = (*store.Store)(nil)

// GenerationTaskReconciler advances image and video tasks: queued →
// in_progress → completed | failed, settles or refunds their reservation,
// writes the usage row and the ledger archive, and deletes the object after
// its retention.
type GenerationTaskReconciler struct {
	Client client.Client
	Ledger TaskLedger
	// Upstreams are the adapters tasks run on (builtin.Registry()).
	Upstreams *upstream.Registry
	// Blobs receives generated assets; nil fails every task.
	Blobs *blob.Store
	Clock clock.PassiveClock
	// Retention keeps a final task object this long; default DefaultTaskRetention.
	Retention time.Duration
	// ReviewDeadline bounds one private asset review round; default
	// DefaultReviewDeadline (the contract's 20 minutes).
	ReviewDeadline time.Duration
	// Events records each task's end and a webhook that gave up (nil: none).
	Events events.EventRecorder
	// Webhooks delivers task webhooks (the zero value is ready to use).
	Webhooks webhook.Sender
	// Workers is the number of concurrent reconciles (Setup: Options.Concurrency).
	Workers int
	// Copier copies URL assets under private asset review into the blob
	// store before the review service sees them; nil copies into Blobs
	// through the guarded dialer (assetcopy.Copier).
	Copier AssetCopier
}

// AssetCopier stores a copy of a review asset fetched from its URL; a
// *assetcopy.Refusal is the asset's fault (the task fails, no fee).
type AssetCopier interface {
	Copy(ctx context.Context, typ, rawURL, keyBase string) (uploads.Object, error)
}

// +kubebuilder:rbac:groups=modelgate.io,resources=generationtasks,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=modelgate.io,resources=generationtasks/finalizers,verbs=update
// +kubebuilder:rbac:groups=modelgate.io,resources=generationtasks/status,verbs=get;update;patch

// Reconcile advances one GenerationTask.
func (r *GenerationTaskReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t := &v1.GenerationTask{}
	if err := r.Client.Get(ctx, req.NamespacedName, t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !t.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, finalize(ctx, r.Client, t, func(ctx context.Context) error { return r.abandon(ctx, t) })
	}
	if added, err := ensureFinalizer(ctx, r.Client, t); added || err != nil {
		return ctrl.Result{}, err
	}
	before := t.DeepCopy()
	res, err := r.reconcile(ctx, t)
	if perr := patchStatusIfChanged(ctx, r.Client, before, t); perr != nil {
		err = errors.Join(err, perr)
	}
	return res, err
}

func (r *GenerationTaskReconciler) reconcile(ctx context.Context, t *v1.GenerationTask) (ctrl.Result, error) {
	now := r.Clock.Now()
	switch {
	case tasks.Final(t.Status.Phase):
		return r.finish(ctx, t, now)
	case t.Status.Phase == "":
		t.Status.Phase, t.Status.Progress = v1.TaskQueued, 0
		t.Status.Billing = &v1.TaskBilling{Status: v1.BillingPending}
		setCondition(&t.Status.Conditions, t.Generation, v1.ConditionReady, false, v1.ReasonTaskInFlight, "the task is queued")
		t.Status.ObservedGeneration = t.Generation
		if err := r.preConsumed(ctx, t); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.archive(ctx, t) // the status change wakes us again
	}
	sub, err := tasks.SubmissionOf(t)
	if err != nil {
		return ctrl.Result{}, r.fail(ctx, t, now, "the task has no usable submission record")
	}
	route, backend, err := r.backend(ctx, t, sub)
	if err != nil {
		return ctrl.Result{}, err
	}
	if backend == nil {
		return ctrl.Result{}, r.fail(ctx, t, now, "no backend of the model is available for this task")
	}
	return r.runUpstream(ctx, t, sub, route, backend, now)
}

// backend returns the task's route and the first usable backend of the
// submission's plan; nil when none is left.
func (r *GenerationTaskReconciler) backend(ctx context.Context, t *v1.GenerationTask, sub *tasks.Submission) (*v1.ModelRoute, *v1.Backend, error) {
	route := &v1.ModelRoute{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: sub.RouteNamespace, Name: sub.RouteName}, route)
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get route: %w", err)
	}
	names := sub.Backends
	if t.Status.Backend != "" { // keep the backend a started task runs on
		names = []string{t.Status.Backend}
	}
	// A task an upstream has accepted stays there even if the backend was
	// disabled since: the upstream may charge for it, so it is followed to
	// its end rather than failed and refunded.
	accepted := t.Status.UpstreamTaskID != ""
	for _, name := range names {
		for i := range route.Spec.Backends {
			if b := &route.Spec.Backends[i]; b.Name == name && (!b.Disabled || accepted) {
				return route, b, nil
			}
		}
	}
	return route, nil, nil
}

// Review outcomes and asset states (status.reviewRounds).
const (
	reviewPending  = "pending"
	reviewPassed   = "passed"
	reviewRejected = "rejected"
	reviewExpired  = "expired"
)

// review runs private asset review before generation: one round per backend
// (a backend switch starts a new round with a new deadline), every selected
// asset must pass, and a rejection or the deadline fails the task before any
// video is submitted, refunding the reservation (no generation fee). passed
// reports that generation may start.
//
// Each asset is prepared through the ledger's reusable record for (tenant,
// channel, asset): a record that passed before is reused at once, and tasks
// that need the same asset meanwhile share one preparation. The channel's
// review service decides pending records (reviewer); a channel
// without a private asset library skips review.
func (r *GenerationTaskReconciler) review(ctx context.Context, t *v1.GenerationTask, sub *tasks.Submission, route *v1.ModelRoute,
	b *v1.Backend, now time.Time) (passed bool, res ctrl.Result, err error) {
	svc := r.reviewer(b)
	if svc == nil {
		return true, ctrl.Result{}, nil
	}
	st := &t.Status
	deadline := r.ReviewDeadline
	if deadline <= 0 {
		deadline = DefaultReviewDeadline
	}
	var round *v1.ReviewRound
	if n := len(st.ReviewRounds); n > 0 && st.ReviewRounds[n-1].Backend == b.Name {
		round = &st.ReviewRounds[n-1]
	}
	if round == nil {
		if len(st.ReviewRounds) >= 16 {
			return false, ctrl.Result{}, r.fail(ctx, t, now, "private asset review: too many review rounds")
		}
		rr := v1.ReviewRound{Round: int32(len(st.ReviewRounds) + 1), Backend: b.Name,
			Deadline: metav1.NewTime(now.Add(deadline)), Outcome: reviewPending}
		for _, a := range sub.ReviewAssets {
			rr.Assets = append(rr.Assets, v1.ReviewAsset{URL: a.URL, Type: a.Type, Role: a.Role, State: reviewPending})
		}
		st.ReviewRounds = append(st.ReviewRounds, rr)
		round = &st.ReviewRounds[len(st.ReviewRounds)-1]
	}
	if round.Outcome == reviewPassed {
		return true, ctrl.Result{}, nil
	}
	channel := tasks.ReviewChannel(route.Namespace, route.Name, b.Name)
	wait, all := maxPoll, true
	for i := range round.Assets {
		a := &round.Assets[i]
		state, again, refusal, copyKey, err := r.prepareAsset(ctx, svc, b, t.Namespace, store.ReviewAsset{UserID: t.Spec.UserID, Channel: channel,
			Type: a.Type, Key: a.URL, BlobKey: blobKeyOf(sub, a.URL)}, now)
		if err != nil {
			return false, ctrl.Result{}, err
		}
		a.State = state
		if refusal != "" {
			round.Outcome = reviewRejected
			return false, ctrl.Result{}, r.fail(ctx, t, now,
				fmt.Sprintf("private asset review could not use the %s asset %s: %s; no video generation fee is charged", a.Type, a.URL, refusal))
		}
		a.Copy = copyKey
		if state == reviewRejected {
			round.Outcome = reviewRejected
			return false, ctrl.Result{}, r.fail(ctx, t, now,
				fmt.Sprintf("private asset review rejected the %s asset %s; no video generation fee is charged", a.Type, a.URL))
		}
		if state != reviewPassed {
			all, wait = false, min(wait, again)
		}
	}
	if msg, err := r.referenceTotals(ctx, round, sub); err != nil || msg != "" {
		if err != nil {
			return false, ctrl.Result{}, err
		}
		round.Outcome = reviewRejected
		return false, ctrl.Result{}, r.fail(ctx, t, now, msg+"; no video generation fee is charged")
	}
	if all {
		round.Outcome = reviewPassed
		return true, ctrl.Result{}, nil
	}
	if !now.Before(round.Deadline.Time) {
		round.Outcome = reviewExpired
		return false, ctrl.Result{}, r.fail(ctx, t, now,
			"private asset review did not finish before the round's deadline; no video generation fee is charged")
	}
	return false, ctrl.Result{RequeueAfter: roundUp(min(wait, round.Deadline.Sub(now)))}, nil
}

// prepareAsset looks up or starts the asset's shared preparation, copies a
// URL asset into the blob store while it has no copy (rule 4: the bytes are
// checked, not the URL), asks the review service to decide it while
// pending, and returns its state and, when still pending, when to look
// again. refusal is why the asset cannot be used (the task fails).
func (r *GenerationTaskReconciler) prepareAsset(ctx context.Context, svc upstream.AssetReviewer, b *v1.Backend, namespace string,
	a store.ReviewAsset, now time.Time) (state string, wait time.Duration, refusal, copyKey string, err error) {
	rec, err := r.Ledger.PrepareReviewAsset(ctx, a, now)
	if err != nil {
		return "", 0, "", "", fmt.Errorf("prepare review asset: %w", err)
	}
	// Copied in any state: a record decided before copies were made gets
	// one too, since the upstream receives the copy, not the URL.
	if rec.BlobKey == "" && !strings.HasPrefix(rec.Key, media.InlineKeyPrefix) {
		obj, err := r.copier().Copy(ctx, rec.Type, rec.Key, assetcopy.Key(namespace, rec.Type, rec.Key))
		if ref, ok := errors.AsType[*assetcopy.Refusal](err); ok {
			// Not recorded as a decision: the URL may serve a usable file
			// later, and the next request prepares it again.
			return store.ReviewRejected, 0, ref.Message, "", nil
		}
		if err != nil {
			return "", 0, "", "", fmt.Errorf("copy review asset: %w", err)
		}
		rec.BlobKey = obj.Key
		if rec, err = r.Ledger.PrepareReviewAsset(ctx, rec, now); err != nil {
			return "", 0, "", "", fmt.Errorf("record review asset copy: %w", err)
		}
	}
	if rec.State != store.ReviewPending {
		return rec.State, 0, "", rec.BlobKey, nil
	}
	state, wait, err = svc.Decide(ctx, upstream.Backend{Name: b.Name, Provider: b.Provider, BaseURL: b.BaseURL, Options: b.Options},
		upstream.ReviewAsset{Type: rec.Type, Key: rec.Key, PreparedAt: rec.PreparedAt}, now)
	if err != nil {
		log.FromContext(ctx).Error(err, "asset review service", "backend", b.Name)
		return store.ReviewPending, minPoll * 4, "", rec.BlobKey, nil
	}
	if state == store.ReviewPending {
		return state, max(wait, minPoll), "", rec.BlobKey, nil
	}
	if rec, err = r.Ledger.DecideReviewAsset(ctx, rec, state, now); err != nil {
		return "", 0, "", "", fmt.Errorf("record review decision: %w", err)
	}
	return rec.State, 0, "", rec.BlobKey, nil
}

// reviewFields name the request field of each reviewed media type.
var reviewFields = map[string]string{"video": "video_with_roles", "audio": "audio_with_roles"}

// referenceTotals applies the model's limit of 15 seconds in total to the
// reference videos and to the reviewed audio, with the reviewed assets'
// durations read from their stored copies' headers (what a client declares
// is not trusted; video_list, outside review, counts as the gateway counted
// it). It answers the refusal message, or "" while within the limit or
// while a copy is still missing (an asset stored before copies were made).
func (r *GenerationTaskReconciler) referenceTotals(ctx context.Context, round *v1.ReviewRound, sub *tasks.Submission) (string, error) {
	if msg, err := r.probeDurations(ctx, round); err != nil || msg != "" {
		return msg, err
	}
	for _, typ := range []string{"video", "audio"} {
		var total time.Duration
		if typ == "video" {
			total = time.Duration(sub.ListVideoMillis) * time.Millisecond
		}
		for _, a := range round.Assets {
			if a.Type != typ {
				continue
			}
			if a.DurationMillis <= 0 {
				return "", nil
			}
			total += time.Duration(a.DurationMillis) * time.Millisecond
		}
		if total > media.VideoMaxRefSeconds*time.Second {
			return fmt.Sprintf("%s durations must total at most %d seconds (got %s, read from the files)",
				reviewFields[typ], media.VideoMaxRefSeconds, strconv.FormatFloat(total.Seconds(), 'f', -1, 64)+" s"), nil
		}
	}
	return "", nil
}

// probeDurations reads the duration of each video and audio copy once
// (status keeps it for pricing); a copy whose headers give none is refused.
func (r *GenerationTaskReconciler) probeDurations(ctx context.Context, round *v1.ReviewRound) (string, error) {
	if r.Blobs == nil {
		return "", nil
	}
	for i := range round.Assets {
		a := &round.Assets[i]
		if (a.Type != "video" && a.Type != "audio") || a.Copy == "" || a.DurationMillis > 0 {
			continue
		}
		d, err := r.durationOf(ctx, a.Copy)
		if errors.Is(err, mediaduration.ErrUnknown) {
			return fmt.Sprintf("private asset review could not read the duration of a %s asset: %v", a.Type, err), nil
		}
		if err != nil {
			return "", err
		}
		a.DurationMillis = max(d.Milliseconds(), 1)
	}
	return "", nil
}

// passedRound is the task's last review round when it passed (nil when
// the task had no review, or it has not passed).
func passedRound(t *v1.GenerationTask) *v1.ReviewRound {
	if n := len(t.Status.ReviewRounds); n > 0 && t.Status.ReviewRounds[n-1].Outcome == reviewPassed {
		return &t.Status.ReviewRounds[n-1]
	}
	return nil
}

// inputVideoSeconds is the input video length to bill, whole seconds
// rounded up: after a passed review the reviewed videos count with the
// durations read from their copies (plus video_list as the gateway counted
// it); otherwise, or while a reviewed video has no probed duration, the
// gateway's figure (declared seconds, or an upload's probed ones).
func inputVideoSeconds(t *v1.GenerationTask, sub *tasks.Submission) int64 {
	round := passedRound(t)
	if round == nil {
		return sub.InputVideoSeconds
	}
	millis, probed := sub.ListVideoMillis, false
	for _, a := range round.Assets {
		if a.Type != "video" {
			continue
		}
		if a.DurationMillis <= 0 {
			return sub.InputVideoSeconds
		}
		millis, probed = millis+a.DurationMillis, true
	}
	if !probed {
		return sub.InputVideoSeconds
	}
	return (millis + 999) / 1000
}

// durationOf probes a stored copy: only its container headers are read.
func (r *GenerationTaskReconciler) durationOf(ctx context.Context, key string) (time.Duration, error) {
	rd, err := r.Blobs.Open(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("open review asset copy: %w", err)
	}
	defer func() { _ = rd.Close() }()
	return mediaduration.Of(rd, rd.Size(), rd.ContentType())
}

func (r *GenerationTaskReconciler) copier() AssetCopier {
	if r.Copier != nil {
		return r.Copier
	}
	if r.Blobs == nil {
		return noCopier{}
	}
	return &assetcopy.Copier{Blobs: r.Blobs}
}

// noCopier fails every copy: without a blob store a URL asset cannot be
// prepared, which is the platform's fault (retried), not the client's.
type noCopier struct{}

func (noCopier) Copy(context.Context, string, string, string) (uploads.Object, error) {
	return uploads.Object{}, errors.New("no blob store is configured for review asset copies")
}

// reviewer returns the review service of a channel, or nil when the channel
// has no private asset library (review is skipped and the channel's own
// media processing applies). Backend option "assetLibrary" names a
// registered reviewer, or "none"; without it, a provider that is itself a
// reviewer (the simulated one) reviews its own channels, any other has none.
func (r *GenerationTaskReconciler) reviewer(b *v1.Backend) upstream.AssetReviewer {
	lib, ok := b.Options["assetLibrary"]
	if !ok {
		lib = b.Provider
	}
	if rv, found := r.Upstreams.Reviewer(lib); found {
		return rv
	}
	return nil
}

// blobKeyOf is where the gateway stored an inline review asset ("" for URLs).
func blobKeyOf(sub *tasks.Submission, key string) string {
	for _, a := range sub.ReviewAssets {
		if a.URL == key {
			return a.BlobKey
		}
	}
	return ""
}

// roundUp rounds a wait up to whole seconds (status times have second
// precision) and to at least one second.
func roundUp(d time.Duration) time.Duration {
	if r := d.Truncate(time.Second); r != d || d <= 0 {
		return r + time.Second
	}
	return d
}

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
func (r *GenerationTaskReconciler) complete(ctx context.Context, t *v1.GenerationTask, sub *tasks.Submission, now time.Time,
	p produced) error {
	charge, byTokens := r.charge(ctx, t, sub, p)
	st := &t.Status
	switch err := r.Ledger.Settle(ctx, t.Spec.RequestID, charge); {
	case errors.Is(err, store.ErrReservationClosed):
		// Refunded meanwhile (a stale-reservation sweep): nothing was charged.
		log.FromContext(ctx).Info("reservation already refunded; task completes unbilled", "task", t.Spec.TaskID)
		charge = 0
		st.Billing = refundedBilling()
	case err != nil:
		return fmt.Errorf("settle: %w", err)
	default:
		st.Billing = &v1.TaskBilling{Status: v1.BillingSettled, Quota: ptr.To(int64(charge)),
			Credits: ptr.To(v1.Decimal(charge.CreditsString())), CostUSD: ptr.To(v1.Decimal(charge.CostUSD()))}
		row := store.UsageRow{
			// Dated at billing, the contract's created_at: a task accepted
			// before a window and settled in it falls in that window.
			RequestID: t.Spec.RequestID, CreatedAt: now.Unix(), UserID: t.Spec.UserID, TokenID: t.Spec.TokenID,
			TokenName: sub.TokenDisplay, ModelName: string(t.Spec.Model), TaskID: t.Spec.TaskID,
			BillingPhase: store.PhaseSettled, Quota: charge, Backend: st.Backend,
		}
		if byTokens {
			// The usage object is shown only when it is exactly what was charged.
			st.Usage = p.usage
			row.PromptTokens, row.CompletionTokens = p.usage.InputTokens, p.usage.OutputTokens
			row.ReportedTotalTokens = ptr.To(p.usage.TotalTokens)
		}
		if _, err := r.Ledger.RecordTaskUsage(ctx, row); err != nil {
			return fmt.Errorf("usage row: %w", err)
		}
	}
	done, expires := metav1.NewTime(now), metav1.NewTime(now.Add(ResultValidity))
	st.Phase, st.Progress, st.Result, st.Error = v1.TaskCompleted, 100, p.result, nil
	st.CompletedAt, st.ExpiresAt, st.NextPollAt = &done, &expires, nil
	recorder{R: r.Events}.Normal(t, v1.EventTaskCompleted, "Settle", "task %s completed", t.Spec.TaskID)
	return nil
}

// preConsumed lists the task's held reservation as a pre_consumed usage
// row while it runs (dated at acceptance, the reservation's quota). The
// settled row replaces it; a refund removes it (store.Refund).
func (r *GenerationTaskReconciler) preConsumed(ctx context.Context, t *v1.GenerationTask) error {
	sub, err := tasks.SubmissionOf(t)
	if err != nil {
		return nil // failed on the next pass, which refunds
	}
	row := store.UsageRow{RequestID: t.Spec.RequestID, CreatedAt: time.UnixMilli(sub.AcceptedAt).Unix(),
		UserID: t.Spec.UserID, TokenID: t.Spec.TokenID, TokenName: sub.TokenDisplay, ModelName: string(t.Spec.Model),
		TaskID: t.Spec.TaskID, BillingPhase: store.PhasePreConsumed, Quota: billing.Quota(t.Spec.ReservedQuota)}
	if _, err := r.Ledger.RecordTaskUsage(ctx, row); err != nil {
		return fmt.Errorf("pre-consumed usage row: %w", err)
	}
	return nil
}

// charge prices what was produced with the rule snapshot taken at
// submission, at the submission instant: outputs and seconds, or for a
// per_token rule the reported token usage (byTokens). A rule that no longer
// compiles, or a per_token task without usage, charges the reservation.
func (r *GenerationTaskReconciler) charge(ctx context.Context, t *v1.GenerationTask, sub *tasks.Submission, p produced) (q billing.Quota, byTokens bool) {
	rule, err := pricing.Compile(&v1.PriceRule{
		ObjectMeta: metav1.ObjectMeta{Namespace: sub.PriceNamespace, Name: sub.PriceName}, Spec: sub.Price}, "")
	switch {
	case err != nil:
	case sub.Price.ChargeType == v1.ChargePerToken && p.usage == nil:
		err = errors.New("the model is priced per token but reported no token usage")
	case sub.Price.ChargeType == v1.ChargePerToken:
		if q, err = rule.Charge(tasks.PricingUsage(p.usage), time.UnixMilli(sub.AcceptedAt)); err == nil {
			return q, true
		}
	default:
		u := pricing.Usage{Requests: int64(len(p.result.Data)), InputImages: sub.InputImages, InputVideoSeconds: inputVideoSeconds(t, sub)}
		if t.Spec.Type == v1.ModelTypeVideo {
			u.Requests, u.OutputSeconds = 1, p.seconds
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
func (r *GenerationTaskReconciler) fail(ctx context.Context, t *v1.GenerationTask, now time.Time, message string) error {
	return r.failWith(ctx, t, now, CodeGenerationFailed, message)
}

// failWith is fail with an error code.
func (r *GenerationTaskReconciler) failWith(ctx context.Context, t *v1.GenerationTask, now time.Time, code, message string) error {
	switch err := r.Ledger.Refund(ctx, t.Spec.RequestID); {
	case errors.Is(err, store.ErrReservationClosed), errors.Is(err, store.ErrNotFound):
		// Settled already (cannot happen before output) or never reserved.
		log.FromContext(ctx).Info("refund of a failed task found no open reservation", "task", t.Spec.TaskID, "error", err.Error())
	case err != nil:
		return fmt.Errorf("refund: %w", err)
	}
	done := metav1.NewTime(now)
	st := &t.Status
	st.Phase, st.Progress, st.Result, st.NextPollAt = v1.TaskFailed, 0, nil, nil
	st.Error = &v1.TaskError{Code: code, Message: message}
	st.Billing, st.CompletedAt, st.ExpiresAt = refundedBilling(), &done, nil
	recorder{R: r.Events}.Warning(t, v1.EventTaskFailed, "Refund", "task %s failed and was refunded: %s", t.Spec.TaskID, message)
	return nil
}

// abandon is what deleting an unfinished task does: the upstream is asked to
// cancel where its adapter can, the reservation is refunded, and the task is
// archived as failed with code "deleted" (nothing is charged). A final task
// has nothing left to settle.
func (r *GenerationTaskReconciler) abandon(ctx context.Context, t *v1.GenerationTask) error {
	if tasks.Final(t.Status.Phase) {
		return nil
	}
	r.cancelUpstream(ctx, t)
	if err := r.fail(ctx, t, r.Clock.Now(), "the task was deleted before it finished"); err != nil {
		return err
	}
	t.Status.Error.Code = CodeDeleted
	if err := r.archive(ctx, t); err != nil {
		return fmt.Errorf("archive the deleted task: %w", err)
	}
	log.FromContext(ctx).Info("deleted task refunded and archived as failed", "task", t.Spec.TaskID)
	return nil
}

// cancelUpstream asks the upstream to drop an accepted task, where the
// adapter can; failures are logged, never blocking the deletion.
func (r *GenerationTaskReconciler) cancelUpstream(ctx context.Context, t *v1.GenerationTask) {
	if t.Status.UpstreamTaskID == "" || t.Status.Backend == "" {
		return
	}
	sub, err := tasks.SubmissionOf(t)
	if err != nil {
		return
	}
	route, backend, err := r.backend(ctx, t, sub)
	if err != nil || backend == nil {
		return
	}
	ad, ok := r.Upstreams.Task(backend.Provider)
	if !ok {
		return
	}
	c, ok := ad.(upstream.Canceler)
	if !ok {
		return
	}
	call, err := r.upstreamCall(ctx, t, sub, route, backend, r.Clock.Now())
	if err == nil {
		err = c.Cancel(ctx, call, t.Status.UpstreamTaskID)
	}
	if err != nil {
		log.FromContext(ctx).Info("the upstream did not cancel the deleted task", "task", t.Spec.TaskID, "error", err.Error())
	}
}

// finish archives a final task once, then deletes the object after its retention.
func (r *GenerationTaskReconciler) finish(ctx context.Context, t *v1.GenerationTask, now time.Time) (ctrl.Result, error) {
	if !meta.IsStatusConditionTrue(t.Status.Conditions, v1.ConditionReady) {
		if err := r.archive(ctx, t); err != nil {
			setCondition(&t.Status.Conditions, t.Generation, v1.ConditionReady, false, v1.ReasonLedgerUnavailable, err.Error())
			return ctrl.Result{}, err
		}
		setCondition(&t.Status.Conditions, t.Generation, v1.ConditionReady, true, v1.ReasonTaskArchived,
			fmt.Sprintf("the task is %s and archived in the ledger", t.Status.Phase))
		t.Status.ObservedGeneration = t.Generation
	}
	if wait := r.deliverWebhook(ctx, t, now); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil // the object stays until its event is delivered or given up
	}
	retention := r.Retention
	if retention <= 0 {
		retention = DefaultTaskRetention
	}
	final := t.CreationTimestamp.Time
	if t.Status.CompletedAt != nil {
		final = t.Status.CompletedAt.Time
	}
	if left := final.Add(retention).Sub(now); left > 0 {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	// Final, archived and delivered: nothing is left for the finalizer.
	if err := removeFinalizer(ctx, r.Client, t); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Client.Delete(ctx, t); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("delete after retention: %w", err)
	}
	return ctrl.Result{}, nil
}

// archive writes the task's current state to the ledger.
func (r *GenerationTaskReconciler) archive(ctx context.Context, t *v1.GenerationTask) error {
	rec, err := tasks.Record(t)
	if err != nil {
		return err
	}
	return r.Ledger.UpsertTask(ctx, rec)
}

// SetupWithManager registers the reconciler.
func (r *GenerationTaskReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.GenerationTask{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Named("generationtask").
		Complete(r)
}
