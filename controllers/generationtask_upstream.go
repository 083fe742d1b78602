package controllers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/blob"
	"github.com/modelgate/modelgate/gateway/media"
	"github.com/modelgate/modelgate/gateway/netguard"
	"github.com/modelgate/modelgate/gateway/tasks"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/credential"
)

// Upstream task defaults (backend options override them: "timeout",
// "pollMin", "pollMax" as Go durations, "maxOutputBytes" in bytes).
const (
	// DefaultUpstreamTimeout bounds a task from its acceptance upstream to
	// its final state; past it the task fails and is refunded.
	DefaultUpstreamTimeout = 30 * time.Minute
	// DefaultUpstreamPollMin and DefaultUpstreamPollMax bound the wait
	// between polls (half the time waited so far, ±20 % jitter); an
	// upstream's Retry-After lengthens it.
	DefaultUpstreamPollMin = time.Second
	DefaultUpstreamPollMax = 30 * time.Second
	// DefaultMaxImageBytes and DefaultMaxVideoBytes cap one downloaded output.
	DefaultMaxImageBytes = 32 << 20
	DefaultMaxVideoBytes = 512 << 20
	// MaxUpstreamAttempts bounds the submissions of one task over all its
	// backends.
	MaxUpstreamAttempts = 8

	downloadTimeout = 5 * time.Minute
	maxTaskOutputs  = 16 // status.result.data MaxItems
)

// upstreamJitter draws the poll jitter, in [0, 1).
var upstreamJitter = rand.Float64

// runUpstream runs a task on a real upstream through its adapter
// (gateway/upstream): submit once (recording the upstream task ID
// before the first poll, so a restarted manager polls instead of submitting
// again), move to the next backend of the plan while nothing was accepted,
// poll with back-off, then store the outputs in the blob store and settle
// through complete, or refund through fail.
func (r *GenerationTaskReconciler) runUpstream(ctx context.Context, t *v1.GenerationTask, sub *tasks.Submission,
	route *v1.ModelRoute, b *v1.Backend, now time.Time) (ctrl.Result, error) {
	ad, ok := r.Upstreams.Task(b.Provider)
	if !ok {
		return ctrl.Result{}, r.fail(ctx, t, now, fmt.Sprintf("provider %q has no asynchronous media adapter in this release", b.Provider))
	}
	st := &t.Status
	if next := st.NextPollAt; next != nil && now.Before(next.Time) {
		return ctrl.Result{RequeueAfter: next.Sub(now)}, nil // woken early (our own write): no status change
	}
	if st.Phase == v1.TaskInProgress && st.UpstreamTaskID != "" {
		return r.pollUpstream(ctx, t, sub, route, b, ad, now)
	}
	if r.Blobs == nil {
		return ctrl.Result{}, r.fail(ctx, t, now, "no blob store is configured for generated media")
	}
	if t.Spec.PrivateAssetReview && len(sub.ReviewAssets) > 0 {
		passed, res, err := r.review(ctx, t, sub, route, b, now)
		if !passed || err != nil {
			return res, err
		}
	}
	return r.submitUpstream(ctx, t, sub, route, b, ad, now)
}

func (r *GenerationTaskReconciler) submitUpstream(ctx context.Context, t *v1.GenerationTask, sub *tasks.Submission,
	route *v1.ModelRoute, b *v1.Backend, ad upstream.TaskAdapter, now time.Time) (ctrl.Result, error) {
	st := &t.Status
	if limit := max(MaxUpstreamAttempts, len(sub.Backends)); int(st.Attempts) >= limit {
		return ctrl.Result{}, r.fail(ctx, t, now, fmt.Sprintf("the task was submitted upstream %d times without a result", st.Attempts))
	}
	call, err := r.upstreamCall(ctx, t, sub, route, b, now)
	if err != nil {
		var ue *upstream.Error
		if errors.As(err, &ue) {
			return r.failover(ctx, t, sub, route, b, now, ue)
		}
		return ctrl.Result{}, err
	}
	st.Backend, st.Attempts = b.Name, st.Attempts+1
	s, err := ad.Submit(ctx, call)
	if err != nil {
		ue := upstream.Classify(err)
		if ue.Class != upstream.Permanent {
			return r.failover(ctx, t, sub, route, b, now, ue)
		}
		log.FromContext(ctx).Info("upstream refused the task", "task", t.Spec.TaskID, "backend", b.Name, "status", ue.Status, "error", ue.Error())
		return ctrl.Result{}, r.failWith(ctx, t, now, failureCode(ue.Status, ue.Code), "the upstream rejected the request: "+ue.Message)
	}
	if s.ID == "" && s.Final == nil {
		return ctrl.Result{}, r.fail(ctx, t, now, "the upstream accepted the task without naming it")
	}
	started := metav1.NewTime(now)
	st.Phase, st.Progress, st.StartedAt, st.NextPollAt = v1.TaskInProgress, 0, &started, nil
	st.UpstreamTaskID = s.ID
	log.FromContext(ctx).Info("upstream accepted the task", "task", t.Spec.TaskID, "backend", b.Name, "upstreamTask", s.ID)
	if s.Final != nil {
		res, err := r.upstreamFinal(ctx, t, sub, b, now, *s.Final)
		if err != nil && s.ID == "" {
			// A synchronous answer that could not be stored exists nowhere
			// else: the retry submits again (the tenant is still billed once).
			st.Phase, st.StartedAt = v1.TaskQueued, nil
		}
		return res, err
	}
	// The status (with the upstream task ID) is written when this returns,
	// before the first poll.
	return r.schedulePoll(t, b, now, 0, s.NextPoll), nil
}

// pollUpstream asks the upstream once and acts on the answer.
func (r *GenerationTaskReconciler) pollUpstream(ctx context.Context, t *v1.GenerationTask, sub *tasks.Submission,
	route *v1.ModelRoute, b *v1.Backend, ad upstream.TaskAdapter, now time.Time) (ctrl.Result, error) {
	st := &t.Status
	if st.StartedAt == nil {
		started := metav1.NewTime(now)
		st.StartedAt = &started
	}
	timeout := optDuration(b, "timeout", DefaultUpstreamTimeout)
	if !now.Before(st.StartedAt.Add(timeout)) {
		return ctrl.Result{}, r.fail(ctx, t, now, fmt.Sprintf("the upstream did not finish the task within %s", timeout))
	}
	call, err := r.upstreamCall(ctx, t, sub, route, b, now)
	if err != nil {
		var ue *upstream.Error
		if !errors.As(err, &ue) {
			return ctrl.Result{}, err
		}
		log.FromContext(ctx).Info("cannot poll the upstream yet", "task", t.Spec.TaskID, "backend", b.Name, "error", ue.Error())
		return r.schedulePoll(t, b, now, 0, 0), nil
	}
	s, err := ad.Poll(ctx, call, st.UpstreamTaskID)
	if err != nil {
		ue := upstream.Classify(err)
		if ue.Class == upstream.Permanent {
			log.FromContext(ctx).Info("upstream task query failed for good", "task", t.Spec.TaskID, "backend", b.Name, "error", ue.Error())
			return ctrl.Result{}, r.fail(ctx, t, now, "the upstream lost the task: "+ue.Message)
		}
		log.FromContext(ctx).V(1).Info("upstream task query failed; polling again later", "task", t.Spec.TaskID,
			"backend", b.Name, "status", ue.Status, "retryAfter", ue.RetryAfter, "error", ue.Error())
		return r.schedulePoll(t, b, now, ue.RetryAfter, 0), nil
	}
	if s.State == upstream.Running {
		st.Progress = int32(min(max(s.Progress, 0), 99)) // written only at polls
		return r.schedulePoll(t, b, now, s.RetryAfter, s.NextPoll), nil
	}
	return r.upstreamFinal(ctx, t, sub, b, now, s)
}

// upstreamFinal settles a final upstream state: outputs copied into the
// blob store, then complete (one billing path with the simulated backend);
// or fail.
func (r *GenerationTaskReconciler) upstreamFinal(ctx context.Context, t *v1.GenerationTask, sub *tasks.Submission,
	b *v1.Backend, now time.Time, s upstream.Status) (ctrl.Result, error) {
	if s.State != upstream.Succeeded {
		msg := s.ErrorMessage
		if msg == "" {
			msg = "the upstream failed the generation"
		}
		return ctrl.Result{}, r.failWith(ctx, t, now, failureCode(0, s.ErrorCode), msg)
	}
	res, err := r.storeOutputs(ctx, t, sub, b, s.Outputs)
	if err != nil {
		var ue *upstream.Error
		switch {
		case errors.As(err, &ue) && ue.Class == upstream.Permanent:
			return ctrl.Result{}, r.fail(ctx, t, now, "the upstream's output could not be fetched: "+ue.Message)
		case errors.As(err, &ue) && t.Status.UpstreamTaskID != "":
			log.FromContext(ctx).Info("fetching the upstream's output failed; polling again later", "task", t.Spec.TaskID, "error", err.Error())
			return r.schedulePoll(t, b, now, ue.RetryAfter, 0), nil
		}
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.complete(ctx, t, sub, now, produced{result: res, seconds: producedSeconds(t, sub, s), usage: imageUsage(s.Usage)})
}

// policyCodes are upstream error codes that mean a policy refusal: the
// contract's own, and OpenAI's image moderation code.
var policyCodes = map[string]bool{CodeContentPolicy: true, "moderation_blocked": true}

// failureCode is the task error code of an upstream refusal: a policy
// refusal (HTTP 422, the status the contract gives content_policy_violation,
// or a policy error code) is content_policy_violation, anything else
// generation_failed.
func failureCode(status int, code string) string {
	if status == http.StatusUnprocessableEntity || policyCodes[code] {
		return CodeContentPolicy
	}
	return CodeGenerationFailed
}

// producedSeconds is the video length to bill: what the upstream reports
// (at most the requested duration), else the requested duration, else the
// length the model picks by default.
func producedSeconds(t *v1.GenerationTask, sub *tasks.Submission, s upstream.Status) int64 {
	if t.Spec.Type != v1.ModelTypeVideo {
		return 0
	}
	req := sub.DurationSeconds
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

// failover moves a task that no upstream accepted to the next backend of its
// plan. When the plan is exhausted a retryable cause (network, 429, 5xx)
// starts over from the first backend after a back-off; submissions are
// bounded by MaxUpstreamAttempts (and at least one per backend).
func (r *GenerationTaskReconciler) failover(ctx context.Context, t *v1.GenerationTask, sub *tasks.Submission,
	route *v1.ModelRoute, cur *v1.Backend, now time.Time, cause *upstream.Error) (ctrl.Result, error) {
	st := &t.Status
	log.FromContext(ctx).Info("backend did not accept the task", "task", t.Spec.TaskID, "backend", cur.Name,
		"status", cause.Status, "retry", cause.Retryable, "error", cause.Error())
	next, wrapped := nextBackend(route, sub.Backends, cur.Name)
	limit := max(MaxUpstreamAttempts, len(sub.Backends))
	if next == nil || (wrapped && !cause.Retryable) || int(st.Attempts) >= limit {
		return ctrl.Result{}, r.fail(ctx, t, now, fmt.Sprintf("no backend accepted the task (%d attempts); last error: %s",
			st.Attempts, cause.Message))
	}
	st.Backend, st.UpstreamTaskID, st.Phase, st.StartedAt, st.NextPollAt = next.Name, "", v1.TaskQueued, nil, nil
	if !wrapped {
		// The status write wakes the next reconcile, which submits there.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	round := int(st.Attempts) / max(len(sub.Backends), 1)
	wait := min(DefaultUpstreamPollMin<<min(round, 5), DefaultUpstreamPollMax)
	wait = time.Duration(float64(wait) * (0.8 + 0.4*upstreamJitter()))
	wait = max(wait, cause.RetryAfter)
	at := wholeSecondAfter(now, wait)
	st.NextPollAt = &at
	return ctrl.Result{RequeueAfter: at.Sub(now)}, nil
}

// nextBackend is the usable backend after cur in the plan; wrapped reports
// that the plan was exhausted and the answer is from its start.
func nextBackend(route *v1.ModelRoute, plan []string, cur string) (next *v1.Backend, wrapped bool) {
	usable := func(name string) *v1.Backend {
		for i := range route.Spec.Backends {
			if b := &route.Spec.Backends[i]; b.Name == name && !b.Disabled {
				return b
			}
		}
		return nil
	}
	at := -1
	for i, n := range plan {
		if n == cur {
			at = i
			break
		}
	}
	for i := at + 1; i < len(plan); i++ {
		if b := usable(plan[i]); b != nil {
			return b, false
		}
	}
	for i := 0; i <= at; i++ {
		if b := usable(plan[i]); b != nil {
			return b, true
		}
	}
	return nil, true
}

// schedulePoll sets the next poll: the upstream's own estimate (next) when
// it gave one, else UpstreamPollWait of the time waited; never past the
// task's deadline, on a whole second (status times have
// second precision, so an early wake-up is recognised after the round trip).
func (r *GenerationTaskReconciler) schedulePoll(t *v1.GenerationTask, b *v1.Backend, now time.Time, retryAfter, next time.Duration) ctrl.Result {
	st := &t.Status
	var elapsed time.Duration
	left := time.Duration(-1)
	if st.StartedAt != nil {
		elapsed = now.Sub(st.StartedAt.Time)
		left = st.StartedAt.Add(optDuration(b, "timeout", DefaultUpstreamTimeout)).Sub(now)
	}
	wait := next
	if wait <= 0 {
		wait = UpstreamPollWait(elapsed, retryAfter, optDuration(b, "pollMin", DefaultUpstreamPollMin),
			optDuration(b, "pollMax", DefaultUpstreamPollMax), upstreamJitter())
	}
	if left > 0 && left < wait {
		wait = left // the deadline is checked at the poll it lands on
	}
	at := wholeSecondAfter(now, wait)
	st.NextPollAt = &at
	return ctrl.Result{RequeueAfter: at.Sub(now)}
}

// UpstreamPollWait is the wait before the next poll of a task that has run
// for elapsed: half of it, within [lo, hi], scaled by a jitter factor in
// [0.8, 1.2) (j in [0, 1)) and kept within [lo, hi]; an upstream's
// Retry-After longer than that wins.
func UpstreamPollWait(elapsed, retryAfter, lo, hi time.Duration, j float64) time.Duration {
	lo = max(lo, time.Second)
	hi = max(hi, lo)
	wait := min(max(elapsed/2, lo), hi)
	wait = min(max(time.Duration(float64(wait)*(0.8+0.4*j)), lo), hi)
	return max(wait, retryAfter)
}

// wholeSecondAfter is now+d rounded up to a whole second.
func wholeSecondAfter(now time.Time, d time.Duration) metav1.Time {
	at := now.Add(d)
	if r := at.Truncate(time.Second); !r.Equal(at) {
		at = r.Add(time.Second)
	}
	return metav1.NewTime(at)
}

func optDuration(b *v1.Backend, key string, def time.Duration) time.Duration {
	if v, ok := b.Options[key]; ok {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			return d
		}
	}
	return def
}

// upstreamCall resolves the backend (its credential from the Secret next to
// the route) into an adapter call. A missing credential is an
// *upstream.Error of class Failover (not retried on that backend); an API
// server failure is returned as is.
func (r *GenerationTaskReconciler) upstreamCall(ctx context.Context, t *v1.GenerationTask, sub *tasks.Submission,
	route *v1.ModelRoute, b *v1.Backend, now time.Time) (upstream.Call, error) {
	request := t.Spec.Request.Raw
	if r.Blobs != nil { // inline images the gateway stored and reviewed copies travel as signed links
		var err error
		if request, err = forwardCopies(request, t); err != nil {
			return upstream.Call{}, err
		}
		if request, err = tasks.ResolveBlobRefs(ctx, request, r.Blobs, ResultValidity); err != nil {
			return upstream.Call{}, err
		}
	}
	c := upstream.Call{Kind: upstream.Kind(t.Spec.Type), TaskID: t.Spec.TaskID, Request: request,
		Outputs: sub.Outputs, InputImages: sub.InputImages, DurationSeconds: sub.DurationSeconds}
	if st := t.Status.StartedAt; st != nil && t.Status.UpstreamTaskID != "" {
		c.Elapsed = now.Sub(st.Time)
	}
	if c.Kind != upstream.Video {
		c.Kind = upstream.Image
	}
	var err error
	c.Backend, err = credential.Resolve(ctx, credential.FromReader(r.Client), route.Namespace, b)
	return c, err
}

// storeOutputs copies the upstream's outputs into the blob store under the
// tenant's prefix (so result URLs are ours and signed on query; the
// upstream's short-lived links never reach the client). Keys are fixed per
// output index, so a retry overwrites harmlessly. At most the outputs paid
// for are kept (n for images, one video).
func (r *GenerationTaskReconciler) storeOutputs(ctx context.Context, t *v1.GenerationTask, sub *tasks.Submission,
	b *v1.Backend, outs []upstream.Output) (*v1.TaskResult, error) {
	keep := 1
	limit := int64(DefaultMaxVideoBytes)
	if t.Spec.Type != v1.ModelTypeVideo {
		keep, limit = int(max(sub.Outputs, 1)), DefaultMaxImageBytes
	}
	keep = min(keep, maxTaskOutputs, len(outs))
	if v, err := strconv.ParseInt(b.Options["maxOutputBytes"], 10, 64); err == nil && v > 0 {
		limit = v
	}
	res := &v1.TaskResult{Type: string(t.Spec.Type), Data: make([]v1.TaskResultItem, 0, keep)}
	for i, o := range outs[:keep] {
		key, err := r.storeOutput(ctx, t, i, o, limit)
		if err != nil {
			return nil, fmt.Errorf("output %d: %w", i, err)
		}
		res.Data = append(res.Data, v1.TaskResultItem{URL: tasks.BlobScheme + key})
	}
	if len(res.Data) == 0 {
		return nil, &upstream.Error{Class: upstream.Permanent, Message: "the upstream reported no output"}
	}
	return res, nil
}

func (r *GenerationTaskReconciler) storeOutput(ctx context.Context, t *v1.GenerationTask, i int, o upstream.Output, limit int64) (string, error) {
	if o.Data == nil && strings.HasPrefix(o.URL, "data:") {
		data, ctype, err := decodeDataURL(o.URL)
		if err != nil {
			return "", &upstream.Error{Class: upstream.Permanent, Message: "an inline output is not a valid data URL", Err: err}
		}
		o = upstream.Output{Data: data, ContentType: ctype}
	}
	if o.Data != nil {
		if int64(len(o.Data)) > limit {
			return "", &upstream.Error{Class: upstream.Permanent, Message: fmt.Sprintf("an output is larger than %d bytes", limit)}
		}
		ctype := o.ContentType
		if ctype == "" {
			ctype = http.DetectContentType(o.Data)
		}
		key := tasks.BlobKey(t.Namespace, t.Spec.TaskID, i, extFor(ctype, ""))
		if _, err := r.Blobs.Put(ctx, key, ctype, bytes.NewReader(o.Data)); err != nil {
			return "", fmt.Errorf("store: %w", err)
		}
		return key, nil
	}
	return r.download(ctx, t, i, o.URL, limit)
}

// download streams an output URL into the blob store, at most limit bytes.
func (r *GenerationTaskReconciler) download(ctx context.Context, t *v1.GenerationTask, i int, u string, limit int64) (string, error) {
	if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
		return "", &upstream.Error{Class: upstream.Permanent, Message: "an output URL is not http(s)"}
	}
	ctx, cancel := context.WithTimeout(ctx, downloadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", &upstream.Error{Class: upstream.Permanent, Message: "an output URL is invalid", Err: err}
	}
	resp, err := upstream.Downloads.Do(req)
	if errors.Is(err, netguard.ErrForbidden) {
		return "", &upstream.Error{Class: upstream.Permanent, Message: "an output URL's address is not allowed: " + netguard.Reason(err)}
	}
	if err != nil {
		// Reason, not err: a transport error names the full URL (signed
		// query included) and the address it resolved to, and this one is
		// logged.
		return "", &upstream.Error{Class: upstream.Transient, Message: "the output could not be downloaded", Retryable: true,
			Err: errors.New(netguard.Reason(err))}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return "", &upstream.Error{Class: upstream.Transient, Status: resp.StatusCode, Retryable: true,
			Message: "the output download answered " + resp.Status}
	case resp.StatusCode != http.StatusOK:
		return "", &upstream.Error{Class: upstream.Permanent, Status: resp.StatusCode,
			Message: "the output download answered " + resp.Status}
	case resp.ContentLength > limit:
		return "", &upstream.Error{Class: upstream.Permanent, Message: fmt.Sprintf("an output is larger than %d bytes", limit)}
	}
	body := bufio.NewReaderSize(resp.Body, 512)
	ctype, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if ctype == "" || ctype == "application/octet-stream" {
		head, _ := body.Peek(512)
		ctype, _, _ = mime.ParseMediaType(http.DetectContentType(head))
	}
	key := tasks.BlobKey(t.Namespace, t.Spec.TaskID, i, extFor(ctype, req.URL.Path))
	lr := &blob.CapReader{R: body, Left: limit}
	if _, err := r.Blobs.Put(ctx, key, ctype, lr); err != nil {
		if lr.Over {
			return "", &upstream.Error{Class: upstream.Permanent, Message: fmt.Sprintf("an output is larger than %d bytes", limit)}
		}
		if lr.ReadErr != nil {
			// No Err: a read error names both ends' addresses, and this one is logged.
			return "", &upstream.Error{Class: upstream.Transient, Message: "the output download was cut off", Retryable: true}
		}
		return "", fmt.Errorf("store: %w", err)
	}
	return key, nil
}

func decodeDataURL(u string) ([]byte, string, error) {
	meta, payload, ok := strings.Cut(strings.TrimPrefix(u, "data:"), ",")
	if !ok || !strings.HasSuffix(meta, ";base64") {
		return nil, "", errors.New("not a base64 data URL")
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	return data, strings.TrimSuffix(meta, ";base64"), err
}

// extFor names a file extension for a content type (else the URL path's).
func extFor(ctype, urlPath string) string {
	switch ctype {
	case "image/png":
		return "png"
	case "image/jpeg":
		return "jpg"
	case "image/webp":
		return "webp"
	case "image/gif":
		return "gif"
	case "video/mp4":
		return "mp4"
	case "video/webm":
		return "webm"
	case "video/quicktime":
		return "mov"
	}
	if e := strings.TrimPrefix(path.Ext(urlPath), "."); e != "" && len(e) <= 5 && isAlnum(e) {
		return strings.ToLower(e)
	}
	return "bin"
}

func isAlnum(s string) bool {
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
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
	}
	if d := u.OutputTokensDetails; d != nil {
		out.OutputTokensDetails = &v1.TokenCountDetails{TextTokens: d.TextTokens, ImageTokens: d.ImageTokens}
	}
	return out
}

// forwardCopies rewrites a stored request so that every reviewed URL asset
// names its reviewed copy ("blob:<key>", signed when forwarded): the
// upstream fetches the bytes review checked, never the tenant's URL, which
// may serve other bytes by now or reach what the upstream should not.
func forwardCopies(request []byte, t *v1.GenerationTask) ([]byte, error) {
	round := passedRound(t)
	if round == nil {
		return request, nil
	}
	copies := map[string]string{}
	for _, a := range round.Assets {
		if a.Copy != "" && !strings.HasPrefix(a.URL, media.InlineKeyPrefix) {
			copies[a.URL] = tasks.BlobScheme + a.Copy
		}
	}
	if len(copies) == 0 {
		return request, nil
	}
	dec := json.NewDecoder(bytes.NewReader(request))
	dec.UseNumber() // numbers pass through unchanged
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("stored request: %w", err)
	}
	v = tasks.RewriteStrings(v, func(s string) string {
		if c, ok := copies[s]; ok {
			return c
		}
		return s
	})
	return json.Marshal(v)
}
