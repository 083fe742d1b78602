package generationtask

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/media"
	"github.com/modelgate/modelgate/gateway/tasks"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// MaxUpstreamAttempts bounds the submissions of one task over all its
// backends.
const MaxUpstreamAttempts = 8

// job is one unfinished task on the backend it runs on: what every
// execution step needs.
type job struct {
	t       *v1.GenerationTask
	sub     *tasks.Submission
	route   *v1.ModelRoute
	backend *v1.Backend
	adapter upstream.TaskAdapter
}

// run moves an unfinished task one step on, on a real upstream or the
// simulated one, only through their upstream.TaskAdapter: submit once
// (recording the upstream task ID before the first poll, so a restarted
// manager polls instead of submitting again), move to the next backend of
// the plan while nothing was accepted, poll with back-off, then store the
// outputs and settle through complete, or refund through fail.
func (p *pass) run(ctx context.Context, t *v1.GenerationTask) (ctrl.Result, error) {
	j, err := p.job(ctx, t)
	if j == nil || err != nil {
		return ctrl.Result{}, err
	}
	st := &t.Status
	if next := st.NextPollAt; next != nil && p.now.Before(next.Time) {
		return ctrl.Result{RequeueAfter: next.Sub(p.now)}, nil // woken early (our own write): no status change
	}
	if st.Phase == v1.TaskInProgress && st.UpstreamTaskID != "" {
		return p.poll(ctx, j)
	}
	// Review and submission call the vendor, and a second call is a second
	// charge there (or a second asset). A reconcile woken while the previous
	// one ran (by another writer of the object) can read a cache that has
	// not seen that one's status write: it would submit again, and its
	// status patch would replace the first upstream task's ID, orphaning a
	// task the vendor bills. Polls are reads and go on from the cache.
	if current, err := p.isCurrent(ctx, t); err != nil || !current {
		return ctrl.Result{RequeueAfter: cacheLag}, err
	}
	if p.Blobs == nil {
		return ctrl.Result{}, p.fail(ctx, t, "no blob store is configured for generated media")
	}
	if t.Spec.PrivateAssetReview && len(j.sub.ReviewAssets) > 0 {
		passed, res, err := p.review(ctx, j)
		if !passed || err != nil {
			return res, err
		}
	}
	return p.submit(ctx, j)
}

// cacheLag is how long a pass that found the cache behind the API server
// waits before it looks again (the write it missed wakes it sooner).
const cacheLag = time.Second

// isCurrent reports whether t, as the cache gave it, is the object the API
// server holds (the same resourceVersion). A task gone meanwhile is not.
func (p *pass) isCurrent(ctx context.Context, t *v1.GenerationTask) (bool, error) {
	live := &v1.GenerationTask{}
	if err := p.apiReader().Get(ctx, client.ObjectKeyFromObject(t), live); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("read the task: %w", err)
	}
	if live.ResourceVersion != t.ResourceVersion {
		log.FromContext(ctx).V(1).Info("the cache is behind the task; waiting for it", "task", t.Spec.TaskID)
		return false, nil
	}
	return true, nil
}

// job resolves the task's submission, route, backend and adapter; nil (the
// task failed) when one of them is missing.
func (p *pass) job(ctx context.Context, t *v1.GenerationTask) (*job, error) {
	sub, err := tasks.SubmissionOf(t)
	if err != nil {
		return nil, p.fail(ctx, t, "the task has no usable submission record")
	}
	route, b, err := p.backend(ctx, t, sub)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, p.fail(ctx, t, "no backend of the model is available for this task")
	}
	ad, ok := p.Upstreams.Task(b.Provider)
	if !ok {
		return nil, p.fail(ctx, t, fmt.Sprintf("provider %q has no asynchronous media adapter in this release", b.Provider))
	}
	return &job{t: t, sub: sub, route: route, backend: b, adapter: ad}, nil
}

// backend returns the task's route and the first usable backend of the
// submission's plan; nil when none is left.
func (p *pass) backend(ctx context.Context, t *v1.GenerationTask, sub *tasks.Submission) (*v1.ModelRoute, *v1.Backend, error) {
	route := &v1.ModelRoute{}
	err := p.Client.Get(ctx, client.ObjectKey{Namespace: sub.RouteNamespace, Name: sub.RouteName}, route)
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

// submit hands the task to the job's upstream.
func (p *pass) submit(ctx context.Context, j *job) (ctrl.Result, error) {
	st := &j.t.Status
	if limit := max(MaxUpstreamAttempts, len(j.sub.Backends)); int(st.Attempts) >= limit {
		return ctrl.Result{}, p.fail(ctx, j.t, fmt.Sprintf("the task was submitted upstream %d times without a result", st.Attempts))
	}
	call, err := p.call(ctx, j)
	if err != nil {
		if ue, ok := errors.AsType[*upstream.Error](err); ok {
			return p.failover(ctx, j, ue)
		}
		return ctrl.Result{}, err
	}
	st.Backend, st.Attempts = j.backend.Name, st.Attempts+1
	s, err := j.adapter.Submit(ctx, call)
	if err != nil {
		ue := upstream.Classify(err)
		if ue.Class != upstream.Permanent {
			return p.failover(ctx, j, ue)
		}
		log.FromContext(ctx).Info("upstream refused the task", "task", j.t.Spec.TaskID, "backend", j.backend.Name, "status", ue.Status, "error", ue.Error())
		return ctrl.Result{}, p.failWith(ctx, j.t, failureCode(ue.Status, ue.Code), "the upstream rejected the request: "+ue.Message)
	}
	if s.ID == "" && s.Final == nil {
		return ctrl.Result{}, p.fail(ctx, j.t, "the upstream accepted the task without naming it")
	}
	started := metav1.NewTime(p.now)
	st.Phase, st.Progress, st.StartedAt, st.NextPollAt = v1.TaskInProgress, 0, &started, nil
	st.UpstreamTaskID = s.ID
	log.FromContext(ctx).Info("upstream accepted the task", "task", j.t.Spec.TaskID, "backend", j.backend.Name, "upstreamTask", s.ID)
	if s.Final != nil {
		res, err := p.final(ctx, j, *s.Final)
		if err != nil && s.ID == "" {
			// A synchronous answer that could not be stored exists nowhere
			// else: the retry submits again (the tenant is still billed once).
			st.Phase, st.StartedAt = v1.TaskQueued, nil
		}
		return res, err
	}
	// The status (with the upstream task ID) is written when this returns,
	// before the first poll.
	return p.schedulePoll(j, 0, s.NextPoll), nil
}

// poll asks the upstream once and acts on the answer.
func (p *pass) poll(ctx context.Context, j *job) (ctrl.Result, error) {
	st := &j.t.Status
	if st.StartedAt == nil {
		started := metav1.NewTime(p.now)
		st.StartedAt = &started
	}
	timeout := optDuration(j.backend, "timeout", DefaultUpstreamTimeout)
	if !p.now.Before(st.StartedAt.Add(timeout)) {
		return ctrl.Result{}, p.fail(ctx, j.t, fmt.Sprintf("the upstream did not finish the task within %s", timeout))
	}
	call, err := p.call(ctx, j)
	if err != nil {
		ue, ok := errors.AsType[*upstream.Error](err)
		if !ok {
			return ctrl.Result{}, err
		}
		log.FromContext(ctx).Info("cannot poll the upstream yet", "task", j.t.Spec.TaskID, "backend", j.backend.Name, "error", ue.Error())
		return p.schedulePoll(j, 0, 0), nil
	}
	s, err := j.adapter.Poll(ctx, call, st.UpstreamTaskID)
	if err != nil {
		ue := upstream.Classify(err)
		if ue.Class == upstream.Permanent {
			log.FromContext(ctx).Info("upstream task query failed for good", "task", j.t.Spec.TaskID, "backend", j.backend.Name, "error", ue.Error())
			return ctrl.Result{}, p.fail(ctx, j.t, "the upstream lost the task: "+ue.Message)
		}
		log.FromContext(ctx).V(1).Info("upstream task query failed; polling again later", "task", j.t.Spec.TaskID,
			"backend", j.backend.Name, "status", ue.Status, "retryAfter", ue.RetryAfter, "error", ue.Error())
		return p.schedulePoll(j, ue.RetryAfter, 0), nil
	}
	if s.State == upstream.Running {
		st.Progress = int32(min(max(s.Progress, 0), 99)) // written only at polls
		return p.schedulePoll(j, s.RetryAfter, s.NextPoll), nil
	}
	return p.final(ctx, j, s)
}

// final settles a final upstream state: outputs copied into the blob store
// (tasks.StoreOutputs), then complete; or fail.
func (p *pass) final(ctx context.Context, j *job, s upstream.Status) (ctrl.Result, error) {
	t := j.t
	if s.State != upstream.Succeeded {
		msg := s.ErrorMessage
		if msg == "" {
			msg = "the upstream failed the generation"
		}
		return ctrl.Result{}, p.failWith(ctx, t, failureCode(0, s.ErrorCode), msg)
	}
	to := outputTarget(j)
	to.Downloads = p.Downloads
	res, err := tasks.StoreOutputs(ctx, p.Blobs, to, s.Outputs)
	if err != nil {
		ue, ok := errors.AsType[*upstream.Error](err)
		switch {
		case ok && ue.Class == upstream.Permanent:
			return ctrl.Result{}, p.fail(ctx, t, "the upstream's output could not be fetched: "+ue.Message)
		case ok && t.Status.UpstreamTaskID != "":
			log.FromContext(ctx).Info("fetching the upstream's output failed; polling again later", "task", t.Spec.TaskID, "error", err.Error())
			return p.schedulePoll(j, ue.RetryAfter, 0), nil
		}
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, p.complete(ctx, j, produced{result: res, seconds: producedSeconds(j, s), usage: imageUsage(s.Usage)})
}

// policyCodes are upstream error codes that mean a policy refusal: the
// contract's own, and OpenAI's image moderation code.
var policyCodes = map[string]bool{v1.CodeContentPolicy: true, "moderation_blocked": true}

// failureCode is the task error code of an upstream refusal: a policy
// refusal (HTTP 422, the status the contract gives content_policy_violation,
// or a policy error code) is content_policy_violation, anything else
// generation_failed.
func failureCode(status int, code string) string {
	if status == http.StatusUnprocessableEntity || policyCodes[code] {
		return v1.CodeContentPolicy
	}
	return v1.CodeGenerationFailed
}

// producedSeconds is the video length to bill: what the upstream reports
// (at most the requested duration), else the requested duration, else the
// length the model picks by default.
func producedSeconds(j *job, s upstream.Status) int64 {
	if j.t.Spec.Type != v1.ModelTypeVideo {
		return 0
	}
	req := j.sub.DurationSeconds
	switch {
	case s.VideoSeconds > 0 && req > 0:
		return min(s.VideoSeconds, req)
	case s.VideoSeconds > 0:
		return min(s.VideoSeconds, media.VideoMaxDuration)
	case req > 0:
		return req
	}
	return media.VideoDefaultDuration
}

// cancelUpstream asks the upstream to drop an accepted task, where the
// adapter can; failures are logged, never blocking the deletion.
func (p *pass) cancelUpstream(ctx context.Context, t *v1.GenerationTask) {
	if t.Status.UpstreamTaskID == "" || t.Status.Backend == "" {
		return
	}
	sub, err := tasks.SubmissionOf(t)
	if err != nil {
		return
	}
	route, b, err := p.backend(ctx, t, sub)
	if err != nil || b == nil {
		return
	}
	ad, ok := p.Upstreams.Task(b.Provider)
	if !ok {
		return
	}
	c, ok := ad.(upstream.Canceler)
	if !ok {
		return
	}
	call, err := p.call(ctx, &job{t: t, sub: sub, route: route, backend: b, adapter: ad})
	if err == nil {
		err = c.Cancel(ctx, call, t.Status.UpstreamTaskID)
	}
	if err != nil {
		log.FromContext(ctx).Info("the upstream did not cancel the deleted task", "task", t.Spec.TaskID, "error", err.Error())
	}
}

// imageUsage is the task status form of an upstream's token usage.
func imageUsage(u *upstream.ImageUsage) *v1.ImageTokenUsage {
	if !u.Valid() {
		return nil
	}
	out := &v1.ImageTokenUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.InputTokens + u.OutputTokens}
	if d := u.InputTokensDetails; d != nil {
		out.InputTokensDetails = &v1.InputTokenDetails{TokenCountDetails: v1.TokenCountDetails{TextTokens: d.TextTokens, ImageTokens: d.ImageTokens},
			CachedTokens: d.CachedTokens}
		if c := d.CachedTokensDetails; c != nil {
			out.InputTokensDetails.CachedTokensDetails = &v1.TokenCountDetails{TextTokens: c.TextTokens, ImageTokens: c.ImageTokens}
		}
	}
	if d := u.OutputTokensDetails; d != nil {
		out.OutputTokensDetails = &v1.TokenCountDetails{TextTokens: d.TextTokens, ImageTokens: d.ImageTokens}
	}
	return out
}
