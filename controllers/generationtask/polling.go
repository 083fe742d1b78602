package generationtask

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
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
)

// upstreamJitter draws the poll jitter, in [0, 1).
var upstreamJitter = rand.Float64

// failover moves a task that no upstream accepted to the next backend of its
// plan. When the plan is exhausted a retryable cause (network, 429, 5xx)
// starts over from the first backend after a back-off; submissions are
// bounded by MaxUpstreamAttempts (and at least one per backend).
func (p *pass) failover(ctx context.Context, j *job, cause *upstream.Error) (ctrl.Result, error) {
	st := &j.t.Status
	log.FromContext(ctx).Info("backend did not accept the task", "task", j.t.Spec.TaskID, "backend", j.backend.Name,
		"status", cause.Status, "retry", cause.Retryable, "error", cause.Error())
	next, wrapped := nextBackend(j.route, j.sub.Backends, j.backend.Name)
	limit := max(MaxUpstreamAttempts, len(j.sub.Backends))
	if next == nil || (wrapped && !cause.Retryable) || int(st.Attempts) >= limit {
		return ctrl.Result{}, p.fail(ctx, j.t, fmt.Sprintf("no backend accepted the task (%d attempts); last error: %s",
			st.Attempts, cause.Message))
	}
	st.Backend, st.UpstreamTaskID, st.Phase, st.StartedAt, st.NextPollAt = next.Name, "", v1.TaskQueued, nil, nil
	if !wrapped {
		// The status write wakes the next reconcile, which submits there.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	round := int(st.Attempts) / max(len(j.sub.Backends), 1)
	wait := min(DefaultUpstreamPollMin<<min(round, 5), DefaultUpstreamPollMax)
	wait = time.Duration(float64(wait) * (0.8 + 0.4*upstreamJitter()))
	wait = max(wait, cause.RetryAfter)
	at := wholeSecondAfter(p.now, wait)
	st.NextPollAt = &at
	return ctrl.Result{RequeueAfter: at.Sub(p.now)}, nil
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
// task's deadline, on a whole second (status times have second precision,
// so an early wake-up is recognised after the round trip).
func (p *pass) schedulePoll(j *job, retryAfter, next time.Duration) ctrl.Result {
	st := &j.t.Status
	var elapsed time.Duration
	left := time.Duration(-1)
	if st.StartedAt != nil {
		elapsed = p.now.Sub(st.StartedAt.Time)
		left = st.StartedAt.Add(optDuration(j.backend, "timeout", DefaultUpstreamTimeout)).Sub(p.now)
	}
	wait := next
	if wait <= 0 {
		wait = UpstreamPollWait(elapsed, retryAfter, optDuration(j.backend, "pollMin", DefaultUpstreamPollMin),
			optDuration(j.backend, "pollMax", DefaultUpstreamPollMax), upstreamJitter())
	}
	if left > 0 && left < wait {
		wait = left // the deadline is checked at the poll it lands on
	}
	at := wholeSecondAfter(p.now, wait)
	st.NextPollAt = &at
	return ctrl.Result{RequeueAfter: at.Sub(p.now)}
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

// call resolves the backend (its credential from the Secret next to the
// route) into an adapter call. A missing credential is an *upstream.Error
// of class Failover (not retried on that backend); an API server failure
// is returned as is.
func (p *pass) call(ctx context.Context, j *job) (upstream.Call, error) {
	t := j.t
	request := t.Spec.Request.Raw
	if p.Blobs != nil { // inline images the gateway stored and reviewed copies travel as signed links
		var err error
		if request, err = forwardCopies(request, t); err != nil {
			return upstream.Call{}, err
		}
		if request, err = tasks.ResolveBlobRefs(ctx, request, p.Blobs, ResultValidity); err != nil {
			return upstream.Call{}, err
		}
	}
	c := upstream.Call{Kind: upstream.Kind(t.Spec.Type), TaskID: t.Spec.TaskID, Request: request,
		Outputs: j.sub.Outputs, InputImages: j.sub.InputImages, DurationSeconds: j.sub.DurationSeconds}
	if st := t.Status.StartedAt; st != nil && t.Status.UpstreamTaskID != "" {
		c.Elapsed = p.now.Sub(st.Time)
	}
	if c.Kind != upstream.Video {
		c.Kind = upstream.Image
	}
	var err error
	c.Backend, err = p.resolved(ctx, j)
	return c, err
}

// resolved is the job's backend as an adapter sees it, its credential
// resolved from the route's namespace.
func (p *pass) resolved(ctx context.Context, j *job) (upstream.Backend, error) {
	return credential.Resolve(ctx, credential.FromReader(p.Client), j.route.Namespace, j.backend)
}

// outputTarget is where the job's outputs go and how many and how large
// they may be: at most the outputs paid for (n images, one video).
func outputTarget(j *job) tasks.OutputTarget {
	o := tasks.OutputTarget{Namespace: j.t.Namespace, TaskID: j.t.Spec.TaskID, Type: string(j.t.Spec.Type),
		Keep: 1, MaxBytes: tasks.DefaultMaxVideoBytes}
	if j.t.Spec.Type != v1.ModelTypeVideo {
		o.Keep, o.MaxBytes = int(max(j.sub.Outputs, 1)), tasks.DefaultMaxImageBytes
	}
	if v, err := strconv.ParseInt(j.backend.Options["maxOutputBytes"], 10, 64); err == nil && v > 0 {
		o.MaxBytes = v
	}
	return o
}
