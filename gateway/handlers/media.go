package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/apierr"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/index"
	"github.com/modelgate/modelgate/gateway/media"
	"github.com/modelgate/modelgate/gateway/pricing"
	"github.com/modelgate/modelgate/gateway/routing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/tasks"
)

const (
	// maxMediaBody bounds an image or video submission (media travels as URLs).
	maxMediaBody = 4 << 20
	// maxBatchIDs is the contract's batch task query limit.
	maxBatchIDs = 100
	// modelDecidedVideoSeconds is reserved for duration -1 (the model's maximum).
	modelDecidedVideoSeconds = media.VideoMaxDuration
	// replayWait bounds how long a colliding submission waits for the
	// winner's task to reach the informer cache.
	replayWait = 3 * time.Second
)

// Error types of the contract's image task error table.
const (
	errInvalidRequest    = "invalid_request"
	errUnauthorized      = "unauthorized"
	errInsufficientQuota = "insufficient_quota"
	errTaskNotFound      = "task_not_found"
	errRateLimited       = "rate_limit_exceeded"
	errInternal          = "internal_error"
)

// Media serves one generation family endpoint group (images or videos):
// submission, single query and batch query.
type Media struct {
	*Deps
	typ v1.ModelType
}

// registerMedia mounts the image and video task endpoints.
func registerMedia(mux Mux, d *Deps) {
	for _, m := range []*Media{{d, v1.ModelTypeImage}, {d, v1.ModelTypeVideo}} {
		base := "/v1/" + string(m.typ) + "s/generations"
		mux.Handle("POST "+base, http.HandlerFunc(m.Submit))
		mux.Handle("GET "+base, http.HandlerFunc(m.Batch))
		mux.Handle("GET "+base+"/{task_id}", http.HandlerFunc(m.Get))
	}
}

// mediaFail writes the contract's common error shape with an image task error type.
func mediaFail(w http.ResponseWriter, status int, typ, message string) {
	apierr.Common(w, status, typ, message)
}

// Submit validates a generation request, reserves its quota and creates the
// GenerationTask; the answer is the queued task.
func (m *Media) Submit(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	requestID := newRequestID()
	w.Header().Set("x-request-id", requestID)

	p, f := m.Auth.APIKey(ctx, r, false)
	if f != nil {
		mediaFail(w, f.Status, errUnauthorized, f.Message)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxMediaBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			mediaFail(w, http.StatusRequestEntityTooLarge, errInvalidRequest, "request body is larger than 4 MiB; upload media first and send URLs")
			return
		}
		mediaFail(w, http.StatusBadRequest, errInvalidRequest, "could not read the request body")
		return
	}
	var head struct {
		Model any `json:"model"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		mediaFail(w, http.StatusBadRequest, errInvalidRequest, "the request body is not a JSON object")
		return
	}
	model, _ := head.Model.(string)
	if model == "" {
		mediaFail(w, http.StatusBadRequest, errInvalidRequest, "model is required")
		return
	}
	task, status, typ, msg := m.submit(ctx, w, p, model, body, requestID)
	if status != 0 {
		mediaFail(w, status, typ, msg)
		return
	}
	out := m.render(ctx, task)
	out.Metadata = map[string]any{}
	writeJSON(w, http.StatusOK, out)
}

// submit runs the pipeline after authentication. A non-zero status is the refusal.
func (m *Media) submit(ctx context.Context, w http.ResponseWriter, p *auth.Principal, model string, body []byte, requestID string) (*v1.GenerationTask, int, string, string) {
	if !p.AllowsModel(model) {
		return nil, http.StatusForbidden, errUnauthorized, fmt.Sprintf("this API key may not use model %q", model)
	}
	route, err := m.Router.Route(ctx, p.Tenant.Namespace, model)
	if err != nil {
		return nil, http.StatusInternalServerError, errInternal, "could not look up the model"
	}
	if route == nil {
		return nil, http.StatusNotFound, "model_not_found", fmt.Sprintf("model %q not found", model)
	}
	if route.Spec.Type != m.typ {
		return nil, http.StatusBadRequest, errInvalidRequest,
			fmt.Sprintf("model %q is a %s model; use /v1/%ss/generations", model, route.Spec.Type, route.Spec.Type)
	}
	norm, verr := media.ValidateContext(ctx, route.Spec.ValidationProfile, body, media.Options{
		PrivateAssetReviewEnabled: route.Spec.PrivateAssetReview, ImageProbe: m.ImageProbe,
	})
	if verr != nil {
		return nil, verr.Status, verr.Type, verr.Message
	}
	if norm.ClientBusinessID != "" {
		if t, err := m.byBusinessID(ctx, p, norm.ClientBusinessID); err != nil {
			return nil, http.StatusInternalServerError, errInternal, "could not look up client_business_id"
		} else if t != nil {
			return t, 0, "", "" // a replay: the existing task, never a second charge
		}
	}
	plan := m.Router.Plan(route, p.Groups())
	if len(plan) == 0 {
		return nil, http.StatusServiceUnavailable, errInternal, fmt.Sprintf("no upstream serves model %q for this key's group", model)
	}
	if ok, wait := m.Limiter.Allow(p.Tenant.Namespace, p.Tenant.Spec.RequestsPerMinute); !ok {
		apierr.RetryAfter(w, wait)
		return nil, http.StatusTooManyRequests, errRateLimited, "rate limit exceeded; retry after the time in the Retry-After header"
	}
	accepted := m.Clock.Now()
	rule, err := m.Prices().Select(p.Tenant.Namespace, model, plan[0].Group,
		pricing.Facts{Resolution: norm.Resolution, HasVideoInput: norm.HasVideoInput})
	switch {
	case errors.Is(err, pricing.ErrNoPrice):
		return nil, http.StatusNotFound, "model_not_found", fmt.Sprintf("model %q has no published price for this key's group", model)
	case err != nil:
		return nil, http.StatusServiceUnavailable, errInternal, "the price of this model cannot be loaded safely; retry later"
	}
	estimate, err := rule.EstimateMedia(mediaEstimate(norm), accepted)
	if err != nil {
		log.FromContext(ctx).Error(err, "estimate media request", "model", model)
		return nil, http.StatusInternalServerError, errInternal, "this model's price cannot be estimated for an asynchronous task"
	}
	task, err := m.newTask(p, norm, route, plan[0].Group, planNames(plan), rule, requestID, estimate, accepted)
	if err != nil {
		return nil, http.StatusInternalServerError, errInternal, "could not prepare the task"
	}
	switch err := m.Ledger.Reserve(ctx, requestID, p.TokenID, p.UserID, estimate); {
	case errors.Is(err, store.ErrInsufficientQuota):
		return nil, http.StatusPaymentRequired, errInsufficientQuota,
			"insufficient quota: the key's or the account's balance (or its daily or monthly limit) does not cover this request"
	case err != nil:
		log.FromContext(ctx).Error(err, "reserve quota", "requestID", requestID)
		return nil, http.StatusServiceUnavailable, errInternal, "could not reserve quota; retry later"
	}
	if err := m.Writer.Create(ctx, task); err != nil {
		// No orphaned charge: the reservation of this submission goes back.
		if rerr := m.Ledger.Refund(context.WithoutCancel(ctx), requestID); rerr != nil {
			log.FromContext(ctx).Error(rerr, "refund after failed task creation", "requestID", requestID)
		}
		if apierrors.IsAlreadyExists(err) && norm.ClientBusinessID != "" {
			if t := m.awaitReplay(ctx, p, norm.ClientBusinessID); t != nil {
				return t, 0, "", ""
			}
		}
		log.FromContext(ctx).Error(err, "create generation task", "requestID", requestID)
		return nil, http.StatusInternalServerError, errInternal, "could not create the task"
	}
	m.archiveNew(ctx, task)
	return task, 0, "", ""
}

// mediaEstimate is the reservation request: n outputs (pre-deducted), the
// reference images, and the requested duration (the model's maximum when
// the model decides).
func mediaEstimate(n *media.Normalized) pricing.MediaRequest {
	req := pricing.MediaRequest{Outputs: int64(max(n.N, 1)), InputImages: int64(n.ReferenceImages)}
	if n.Duration == media.VideoDurationAuto {
		req.DurationSeconds = modelDecidedVideoSeconds
	} else if n.Duration > 0 {
		req.DurationSeconds = int64(n.Duration)
	}
	if n.InputVideoSeconds > 0 {
		req.InputVideoSeconds = int64(n.InputVideoSeconds + 0.999999)
	}
	return req
}

func planNames(plan []routing.Candidate) []string {
	out := make([]string, 0, len(plan))
	for _, c := range plan {
		out = append(out, c.Backend.Name)
	}
	return out
}

// newTask builds the GenerationTask of an accepted submission.
func (m *Media) newTask(p *auth.Principal, n *media.Normalized, route *v1.ModelRoute, group string, backends []string,
	rule *pricing.Rule, requestID string, estimate billing.Quota, accepted time.Time) (*v1.GenerationTask, error) {
	reqJSON, err := n.RequestJSON()
	if err != nil {
		return nil, err
	}
	taskID := tasks.NewTaskID()
	if n.ClientBusinessID != "" {
		taskID = tasks.BusinessTaskID(p.Tenant.Namespace, m.typ, n.ClientBusinessID)
	}
	sub := &tasks.Submission{
		AcceptedAt: accepted.UnixMilli(), RouteNamespace: route.Namespace, RouteName: route.Name, Backends: backends,
		PriceNamespace: rule.Namespace, PriceName: rule.Name, Price: rule.Spec(), TokenDisplay: p.Token.Spec.DisplayName,
		Outputs: int64(max(n.N, 1)), InputImages: int64(n.ReferenceImages), DurationSeconds: int64(n.Duration),
		InputVideoSeconds: mediaEstimate(n).InputVideoSeconds,
	}
	for _, a := range n.ReviewAssets {
		sub.ReviewAssets = append(sub.ReviewAssets, tasks.ReviewAsset{Type: string(a.Type), URL: tasks.AssetRef(a.URL), Role: a.Role})
	}
	ann, err := sub.Encode()
	if err != nil {
		return nil, err
	}
	return &v1.GenerationTask{
		ObjectMeta: metav1.ObjectMeta{
			Name: tasks.ObjectName(taskID), Namespace: p.Tenant.Namespace,
			Labels:      map[string]string{"app.kubernetes.io/managed-by": "modelgate"},
			Annotations: map[string]string{tasks.SubmissionAnnotation: ann},
		},
		Spec: v1.GenerationTaskSpec{
			TaskID: taskID, Model: route.Spec.Model, Type: m.typ, Profile: route.Spec.ValidationProfile,
			Request:   runtime.RawExtension{Raw: reqJSON},
			TokenName: p.Token.Name, TokenID: p.TokenID, UserID: p.UserID, Group: group,
			ClientBusinessID: n.ClientBusinessID, PrivateAssetReview: n.PrivateAssetReview,
			ReservedQuota: int64(estimate), RequestID: requestID,
		},
	}, nil
}

// archiveNew writes the new task's archive row (insert only, never over a
// newer state), so a query right after submission answers even before the
// informer cache has the object. A failure is logged: the controller writes
// the row on its first pass anyway.
func (m *Media) archiveNew(ctx context.Context, task *v1.GenerationTask) {
	rec, err := tasks.Record(task)
	if err == nil {
		_, err = m.Ledger.InsertTask(context.WithoutCancel(ctx), rec)
	}
	if err != nil {
		log.FromContext(ctx).Error(err, "archive new task", "task", task.Spec.TaskID)
	}
}

// byBusinessID finds the caller's task of this family with a client
// business ID: the live object first, then the ledger archive.
func (m *Media) byBusinessID(ctx context.Context, p *auth.Principal, cbid string) (*v1.GenerationTask, error) {
	if t, err := m.fromCache(ctx, p, index.TaskClientBusinessID, cbid); t != nil || err != nil {
		return t, err
	}
	rec, err := m.Ledger.TaskByClientBusinessID(ctx, p.UserID, string(m.typ), cbid)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return tasks.FromRecord(rec)
}

// awaitReplay waits for a concurrent submission's task to appear.
func (m *Media) awaitReplay(ctx context.Context, p *auth.Principal, cbid string) *v1.GenerationTask {
	deadline := time.Now().Add(replayWait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if t, err := m.byBusinessID(ctx, p, cbid); err == nil && t != nil {
			return t
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// fromCache returns the tenant's live task of this family matching an index.
func (m *Media) fromCache(ctx context.Context, p *auth.Principal, field, value string) (*v1.GenerationTask, error) {
	list := &v1.GenerationTaskList{}
	if err := m.Cache.List(ctx, list, client.InNamespace(p.Tenant.Namespace), client.MatchingFields{field: value}); err != nil {
		return nil, err
	}
	for i := range list.Items {
		t := &list.Items[i]
		if t.Spec.Type == m.typ && t.Spec.UserID == p.UserID {
			return t.DeepCopy(), nil
		}
	}
	return nil, nil
}

// lookup finds one of the caller's tasks by task ID or client business ID,
// live or archived; nil when there is none.
func (m *Media) lookup(ctx context.Context, p *auth.Principal, id string) (*v1.GenerationTask, error) {
	if t, err := m.fromCache(ctx, p, index.TaskID, id); t != nil || err != nil {
		return t, err
	}
	rec, err := m.Ledger.TaskByID(ctx, p.UserID, id)
	switch {
	case err == nil && rec.Kind == string(m.typ):
		return tasks.FromRecord(rec)
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	return m.byBusinessID(ctx, p, id)
}

// Get answers GET …/generations/{task_id}: the task ID or the caller's
// client_business_id.
func (m *Media) Get(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p, f := m.Auth.APIKey(ctx, r, false)
	if f != nil {
		mediaFail(w, f.Status, errUnauthorized, f.Message)
		return
	}
	id := strings.TrimSpace(r.PathValue("task_id"))
	t, err := m.lookup(ctx, p, id)
	if err != nil {
		log.FromContext(ctx).Error(err, "look up task", "task", id)
		mediaFail(w, http.StatusInternalServerError, errInternal, "could not read the task")
		return
	}
	if t == nil {
		mediaFail(w, http.StatusNotFound, errTaskNotFound, fmt.Sprintf("task %q not found", id))
		return
	}
	writeJSON(w, http.StatusOK, m.render(ctx, t))
}

// Batch answers GET …/generations?ids=a,b,c: at most 100 IDs; the caller's
// tasks found, in the order asked, and the IDs not found.
func (m *Media) Batch(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p, f := m.Auth.APIKey(ctx, r, false)
	if f != nil {
		mediaFail(w, f.Status, errUnauthorized, f.Message)
		return
	}
	var ids []string
	seen := map[string]bool{}
	for _, v := range r.URL.Query()["ids"] {
		for _, id := range strings.Split(v, ",") {
			if id = strings.TrimSpace(id); id != "" && !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	switch {
	case len(ids) == 0:
		mediaFail(w, http.StatusBadRequest, errInvalidRequest, "ids is required: a comma-separated list of task IDs")
		return
	case len(ids) > maxBatchIDs:
		mediaFail(w, http.StatusBadRequest, errInvalidRequest, fmt.Sprintf("at most %d task IDs per query (got %d)", maxBatchIDs, len(ids)))
		return
	}
	out := batchJSON{Object: "list", Data: []taskJSON{}, NotFound: []string{}}
	for _, id := range ids {
		t, err := m.lookup(ctx, p, id)
		if err != nil {
			log.FromContext(ctx).Error(err, "look up task", "task", id)
			mediaFail(w, http.StatusInternalServerError, errInternal, "could not read the tasks")
			return
		}
		if t == nil {
			out.NotFound = append(out.NotFound, id)
			continue
		}
		out.Data = append(out.Data, m.render(ctx, t))
	}
	writeJSON(w, http.StatusOK, out)
}

type batchJSON struct {
	Object   string     `json:"object"`
	Data     []taskJSON `json:"data"`
	NotFound []string   `json:"not_found"`
}

// taskJSON is the contract's generation task.
type taskJSON struct {
	ID          string        `json:"id"`
	Object      string        `json:"object"`
	Model       string        `json:"model"`
	Status      string        `json:"status"`
	Progress    int32         `json:"progress"`
	CreatedAt   int64         `json:"created_at"`
	CompletedAt *int64        `json:"completed_at,omitempty"`
	ExpiresAt   *int64        `json:"expires_at,omitempty"`
	URL         string        `json:"url,omitempty"`
	Result      *resultJSON   `json:"result,omitempty"`
	Error       *v1.TaskError `json:"error,omitempty"`
	Usage       *usageJSON    `json:"usage,omitempty"`
	Billing     *billingJSON  `json:"billing,omitempty"`
	Metadata    any           `json:"metadata,omitempty"` // submission only: {}
}

type resultJSON struct {
	Type string        `json:"type"`
	Data []resultEntry `json:"data"`
}

type resultEntry struct {
	URL string `json:"url"`
}

type billingJSON struct {
	Status  string `json:"status"`
	Credits string `json:"credits,omitempty"`
	CostUSD string `json:"cost_usd,omitempty"`
}

type tokenDetails struct {
	TextTokens  int64 `json:"text_tokens"`
	ImageTokens int64 `json:"image_tokens"`
}

type inputDetails struct {
	TextTokens          int64         `json:"text_tokens"`
	ImageTokens         int64         `json:"image_tokens"`
	CachedTokens        int64         `json:"cached_tokens"`
	CachedTokensDetails *tokenDetails `json:"cached_tokens_details,omitempty"`
}

type usageJSON struct {
	InputTokens         int64         `json:"input_tokens"`
	OutputTokens        int64         `json:"output_tokens"`
	TotalTokens         int64         `json:"total_tokens"`
	InputTokensDetails  *inputDetails `json:"input_tokens_details,omitempty"`
	OutputTokensDetails *tokenDetails `json:"output_tokens_details,omitempty"`
}

// render turns a task into the contract's JSON. Result URLs naming blobs are
// signed afresh, valid until the task's expires_at.
func (m *Media) render(ctx context.Context, t *v1.GenerationTask) taskJSON {
	st := &t.Status
	out := taskJSON{
		ID: t.Spec.TaskID, Object: "generation.task", Model: string(t.Spec.Model),
		Status: string(v1.TaskQueued), Progress: st.Progress, CreatedAt: t.CreationTimestamp.Unix(),
	}
	if st.Phase != "" {
		out.Status = string(st.Phase)
	}
	if out.Status == string(v1.TaskSubmitted) { // not a status the task table of the contract shows
		out.Status = string(v1.TaskQueued)
	}
	switch st.Phase {
	case v1.TaskCompleted:
		out.Progress = 100
		if st.CompletedAt != nil {
			c := st.CompletedAt.Unix()
			out.CompletedAt = &c
		}
		if st.ExpiresAt != nil {
			e := st.ExpiresAt.Unix()
			out.ExpiresAt = &e
		}
		if st.Result != nil {
			out.Result = m.renderResult(ctx, t)
			if len(out.Result.Data) > 0 {
				out.URL = out.Result.Data[0].URL
			}
		}
	case v1.TaskFailed:
		out.Progress = 0
		out.Error = st.Error
		if out.Error == nil {
			out.Error = &v1.TaskError{Code: "generation_failed", Message: "the generation failed"}
		}
	}
	out.Billing = renderBilling(st.Billing)
	if out.Billing != nil && out.Billing.Status == string(v1.BillingSettled) && st.Usage != nil {
		out.Usage = renderUsage(st.Usage)
	}
	return out
}

func (m *Media) renderResult(ctx context.Context, t *v1.GenerationTask) *resultJSON {
	res := &resultJSON{Type: t.Status.Result.Type, Data: []resultEntry{}}
	ttl := 24 * time.Hour
	if e := t.Status.ExpiresAt; e != nil {
		ttl = max(e.Sub(m.Clock.Now()), time.Second)
	}
	for _, d := range t.Status.Result.Data {
		u := d.URL
		if key, ok := strings.CutPrefix(u, tasks.BlobScheme); ok {
			signed, err := m.Blobs.SignedURL(ctx, key, ttl)
			if err != nil {
				log.FromContext(ctx).Error(err, "sign result URL", "task", t.Spec.TaskID)
				continue
			}
			u = signed
		}
		res.Data = append(res.Data, resultEntry{URL: u})
	}
	return res
}

// renderBilling is the billing object: amounts only when settled or
// refunded (refunded is always zero); omitted when unknown.
func renderBilling(b *v1.TaskBilling) *billingJSON {
	if b == nil {
		return nil
	}
	out := &billingJSON{Status: string(b.Status)}
	switch b.Status {
	case v1.BillingSettled:
		if b.Quota == nil {
			return nil // no safe public value: omit the whole object
		}
		q := billing.Quota(*b.Quota)
		out.Credits, out.CostUSD = q.CreditsString(), q.CostUSD()
	case v1.BillingRefunded:
		out.Credits, out.CostUSD = "0", "0"
	}
	return out
}

func renderUsage(u *v1.ImageTokenUsage) *usageJSON {
	if u.InputTokens < 0 || u.OutputTokens < 0 || u.TotalTokens != u.InputTokens+u.OutputTokens {
		return nil // not valid: omitted, never repaired
	}
	out := &usageJSON{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens}
	if d := u.InputTokensDetails; d != nil {
		out.InputTokensDetails = &inputDetails{TextTokens: d.TextTokens, ImageTokens: d.ImageTokens, CachedTokens: d.CachedTokens}
		if c := d.CachedTokensDetails; c != nil {
			out.InputTokensDetails.CachedTokensDetails = &tokenDetails{TextTokens: c.TextTokens, ImageTokens: c.ImageTokens}
		}
	}
	if d := u.OutputTokensDetails; d != nil {
		out.OutputTokensDetails = &tokenDetails{TextTokens: d.TextTokens, ImageTokens: d.ImageTokens}
	}
	return out
}
