package handlers

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/tasks"
)

// DefaultSubmitWait bounds how long a submission waits for the controller's
// first upstream submission of the task it created (MediaDeps.SubmitWait,
// --submit-wait), so that an upstream's synchronous policy refusal reaches
// the client as a 422 instead of a failed task.
const DefaultSubmitWait = 3 * time.Second

// codeContentPolicy is the task error code (and the 422 error type) of an
// upstream's policy refusal; the controller sets it.
const codeContentPolicy = "content_policy_violation"

// submitWaitPoll is how often the informer cache is read while waiting.
const submitWaitPoll = 20 * time.Millisecond

func (d *MediaDeps) submitWait() time.Duration {
	if d.SubmitWait != 0 {
		return max(d.SubmitWait, 0)
	}
	return DefaultSubmitWait
}

// awaitSubmission watches the task just created, in the informer cache,
// until its first upstream submission has an outcome, and returns the task
// when an upstream refused it for policy reasons at submission (before
// accepting it: status.startedAt is unset). The controller has refunded it
// then and archives it as failed. nil means answer as usual: the upstream
// accepted, the task failed otherwise, private asset review runs first (it
// can take minutes), or the wait ran out.
// A replayed submission (client_business_id) is answered at once: its
// task was created, and waited for, by the first one.
func (m *Media) awaitSubmission(ctx context.Context, created *v1.GenerationTask, requestID string) *v1.GenerationTask {
	wait := m.submitWait()
	if wait <= 0 || m.Cache == nil || created.Spec.RequestID != requestID {
		return nil
	}
	var refused *v1.GenerationTask
	key := client.ObjectKeyFromObject(created)
	pollCache(ctx, wait, func(ctx context.Context) bool {
		t := &v1.GenerationTask{}
		if err := m.Cache.Get(ctx, key, t); err != nil || t.Spec.TaskID != created.Spec.TaskID {
			return false
		}
		switch st := t.Status; {
		case st.Phase == v1.TaskFailed && st.StartedAt == nil && st.Error != nil && st.Error.Code == codeContentPolicy:
			refused = t
			return true
		case st.Phase == v1.TaskInProgress, tasks.Final(st.Phase), reviewing(t):
			return true
		}
		return false
	})
	return refused
}

// pollCache calls check every submitWaitPoll until it reports done, wait
// has passed or ctx ends: the informer cache has no event a request could
// wait on.
func pollCache(ctx context.Context, wait time.Duration, check func(ctx context.Context) bool) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(submitWaitPoll)
	defer tick.Stop()
	for !check(ctx) {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// reviewing reports a task whose private asset review round is open.
func reviewing(t *v1.GenerationTask) bool {
	n := len(t.Status.ReviewRounds)
	return n > 0 && t.Status.ReviewRounds[n-1].Outcome == "pending"
}
