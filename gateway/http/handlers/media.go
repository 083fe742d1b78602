package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/admission"
	"github.com/modelgate/modelgate/gateway/apierr"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/index"
	"github.com/modelgate/modelgate/gateway/media"
	"github.com/modelgate/modelgate/gateway/mediaduration"
	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/platform/telemetry"
	"github.com/modelgate/modelgate/gateway/pricing"
	"github.com/modelgate/modelgate/gateway/routing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/tasks"
)

const (
	// maxMediaBody bounds an image submission (media travels as URLs).
	maxMediaBody = 4 << 20
	// maxVideoBody bounds a video submission, which under private asset
	// review may carry inline images of up to 20 MiB each (base64).
	maxVideoBody = 64 << 20
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
	*MediaDeps
	typ v1.ModelType
}

// registerMedia mounts the image and video task endpoints.
func registerMedia(mux Mux, keys Authenticator, d *MediaDeps) {
	for _, m := range []*Media{{d, v1.ModelTypeImage}, {d, v1.ModelTypeVideo}} {
		base := "/v1/" + string(m.typ) + "s/generations"
		endpoint := string(v1.EndpointImageGeneration)
		if m.typ == v1.ModelTypeVideo {
			endpoint = string(v1.EndpointVideoGeneration)
		}
		mux.Handle("POST "+base, instrument(endpoint, telemetry.OperationGenerateContent, mediaIDHeaders,
			authenticated(keys, false, m.authFail, m.Submit)))
		mux.Handle("GET "+base, authenticated(keys, false, m.authFail, m.Batch))
		mux.Handle("GET "+base+"/{task_id}", authenticated(keys, false, m.authFail, m.Get))
	}
}

// mediaIDHeaders carry a submission's ID.
var mediaIDHeaders = []string{"x-request-id"}

// authFail answers an authentication failure in the task endpoints' shape.
func (m *Media) authFail(w http.ResponseWriter, status int, message string) {
	m.fail(w, status, errUnauthorized, message)
}

// fail writes the contract's common error shape {error:{code, message,
// type}}. The image endpoints use the image task error table's types (typ);
// the video endpoints, which the contract gives no table of their own, the
// common gateway errors' types by status (404 not_found_error, 401
// authentication_error, 429 rate_limit_error, ...): docs/api-choices.md.
func (m *Media) fail(w http.ResponseWriter, status int, typ, message string) {
	if m.typ == v1.ModelTypeVideo {
		typ = apierr.OpenAIType(status)
	}
	apierr.Common(w, status, typ, message)
}

// Submit validates a generation request, reserves its quota and creates the
// GenerationTask; the answer is the queued task.
func (m *Media) Submit(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	ctx := r.Context()
	info := infoOf(ctx)
	requestID, span := info.id, info.span
	limit := int64(maxMediaBody)
	if m.typ == v1.ModelTypeVideo {
		limit = maxVideoBody
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			m.fail(w, http.StatusRequestEntityTooLarge, errInvalidRequest,
				fmt.Sprintf("request body is larger than %d MiB; upload media first and send URLs", limit>>20))
			return
		}
		m.fail(w, http.StatusBadRequest, errInvalidRequest, "could not read the request body")
		return
	}
	var head struct {
		Model any `json:"model"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		m.fail(w, http.StatusBadRequest, errInvalidRequest, "the request body is not a JSON object")
		return
	}
	model, _ := head.Model.(string)
	if head.Model == nil { // absent or null: the default model of this type, when one is declared
		if model, err = m.Router.DefaultModel(ctx, p.Tenant.Namespace, m.typ); err != nil {
			m.fail(w, http.StatusServiceUnavailable, errInternal, "the model catalog is unavailable; retry")
			return
		}
	}
	if model == "" {
		m.fail(w, http.StatusBadRequest, errInvalidRequest, "model is required (no default "+string(m.typ)+" model is configured)")
		return
	}
	requestParsed(span, p, model, 0, false)
	task, refused := m.submit(ctx, p, model, body, requestID)
	if refused != nil {
		m.refuse(w, refused)
		return
	}
	if refused := m.awaitSubmission(ctx, task, requestID); refused != nil {
		// Refunded by the controller: nothing is charged, the task is
		// archived as failed, and the client sees the refusal itself.
		apierr.Common(w, http.StatusUnprocessableEntity, codeContentPolicy, refused.Status.Error.Message)
		return
	}
	info.model = model
	taskSubmitted(span, model, task.Spec.TaskID)
	out := tasks.Render(ctx, task, m.Blobs, m.Clock.Now())
	out.Metadata = map[string]any{}
	writeJSON(w, http.StatusOK, out)
}

// submit admits the request (gateway/admission: a direct reservation, which
// the controller settles), stores its inline review assets and creates the
// GenerationTask. A replayed client_business_id answers the existing task,
// never a second charge.
func (m *Media) submit(ctx context.Context, p *auth.Principal, model string, body []byte, requestID string) (*v1.GenerationTask, *admission.Error) {
	sub := &mediaSubject{m: m, p: p, body: body}
	ad, refused := m.Admitter.Admit(ctx, admission.Request{
		Principal: p, RequestID: requestID, Model: model, Family: m.typ,
		Subject: sub, Reserver: admission.Direct{Ledger: m.Ledger},
	})
	switch {
	case refused != nil:
		return nil, refused
	case ad.Done:
		return sub.replay, nil
	}
	refund := func(why string) {
		// No orphaned charge: the reservation of this submission goes back.
		if rerr := m.Ledger.Refund(context.WithoutCancel(ctx), requestID); rerr != nil {
			log.FromContext(ctx).Error(rerr, "refund after "+why, "requestID", requestID)
		}
	}
	norm := sub.norm
	inline := inlineKeys(p.Tenant.Namespace, norm)
	task, err := m.newTask(p, norm, ad.Route, ad.Plan[0].Group, planNames(ad.Plan), ad.Rule, requestID, ad.Estimate, ad.Accepted, inline)
	if err != nil {
		refund("failed task preparation")
		return nil, admission.Refuse(admission.Internal, "could not prepare the task")
	}
	if err := m.storeInline(ctx, norm, inline); err != nil {
		refund("failed inline asset storage")
		log.FromContext(ctx).Error(err, "store inline review assets", "requestID", requestID)
		return nil, admission.Refuse(admission.Internal, "could not store the request's inline images; retry later")
	}
	if err := m.Writer.Create(ctx, task); err != nil {
		refund("failed task creation")
		m.dropInline(context.WithoutCancel(ctx), inline)
		if apierrors.IsAlreadyExists(err) && norm.ClientBusinessID != "" {
			if t := m.awaitReplay(ctx, p, norm.ClientBusinessID); t != nil {
				return t, nil
			}
		}
		log.FromContext(ctx).Error(err, "create generation task", "requestID", requestID)
		return nil, admission.Refuse(admission.Internal, "could not create the task")
	}
	// The controller writes the archive row on its first pass; until the
	// cache or the archive has the task, queries read it from the API
	// server (fromAPI).
	return task, nil
}

// mediaSubject is a submission's part of admission: the validation profile
// of its route, the durations of uploaded references, the replay of a
// client_business_id, and the estimate of the normalized request.
type mediaSubject struct {
	m      *Media
	p      *auth.Principal
	body   []byte
	norm   *media.Normalized
	replay *v1.GenerationTask
}

// Check validates the body against the route's profile and finds a replay.
func (s *mediaSubject) Check(ctx context.Context, route *v1.ModelRoute) (bool, *admission.Error) {
	norm, verr := media.ValidateContext(ctx, route.Spec.ValidationProfile, s.body, media.Options{
		PrivateAssetReviewEnabled: route.Spec.PrivateAssetReview, ImageProbe: s.m.ImageProbe,
	})
	if verr != nil {
		return false, admission.InvalidWith(verr.Status, verr.Type, verr.Message)
	}
	s.norm = norm
	if s.m.typ == v1.ModelTypeVideo {
		if status, msg := s.m.uploadedDurations(ctx, norm); status != 0 {
			return false, admission.InvalidWith(status, errInvalidRequest, msg)
		}
	}
	if norm.ClientBusinessID == "" {
		return false, nil
	}
	t, err := s.m.byBusinessID(ctx, s.p, norm.ClientBusinessID)
	if err != nil {
		return false, admission.Refuse(admission.Internal, "could not look up client_business_id")
	}
	s.replay = t
	return t != nil, nil
}

// Facts: a media price may depend on the resolution and on video input.
func (s *mediaSubject) Facts() pricing.Facts {
	return pricing.Facts{Resolution: s.norm.Resolution, HasVideoInput: s.norm.HasVideoInput}
}

// Estimate is the pre-deducted price of the outputs asked for.
func (s *mediaSubject) Estimate(rule *pricing.Rule, _ *v1.ModelRoute, accepted time.Time) (billing.Quota, error) {
	return rule.EstimateMedia(mediaEstimate(s.norm), accepted)
}

// mediaTypes are the image task error table's types of the refusals
// (the video endpoints type errors by status: fail).
var mediaTypes = map[admission.Reason]string{
	admission.ModelNotAllowed:    errUnauthorized,
	admission.ModelNotFound:      "model_not_found",
	admission.RateLimited:        errRateLimited,
	admission.InsufficientQuota:  errInsufficientQuota,
	admission.WrongFamily:        errInvalidRequest,
	admission.Invalid:            errInvalidRequest,
	admission.NoBackend:          errInternal,
	admission.PricingUnavailable: errInternal,
	admission.Unpriceable:        errInternal,
	admission.Unavailable:        errInternal,
	admission.Internal:           errInternal,
}

// refuse writes an admission refusal in the task endpoints' shape.
func (m *Media) refuse(w http.ResponseWriter, e *admission.Error) {
	typ, msg := e.Type, e.Message
	if typ == "" {
		typ = mediaTypes[e.Reason]
	}
	switch e.Reason {
	case admission.RateLimited:
		apierr.RetryAfter(w, e.RetryAfter)
	case admission.Unpriceable:
		msg = "this model's price cannot be estimated for an asynchronous task"
	}
	m.fail(w, e.Status, typ, msg)
}

// uploadedDurations replaces the declared durations of reference videos
// and audio that are the gateway's own uploads by the durations read from
// their stored headers, and checks the 15-second totals again with them;
// the probed video seconds feed the estimate. Other URLs keep what the
// client declared: they are not downloaded at submission (under private
// asset review the review round reads them). A non-zero status refuses.
func (m *Media) uploadedDurations(ctx context.Context, n *media.Normalized) (int, string) {
	if m.Blobs == nil {
		return 0, ""
	}
	groups := []struct {
		typ    string
		fields []string // request field, then the URL key of its items
	}{{"video", []string{"video_list", "video_url", "video_with_roles", "url"}}, {"audio", []string{"audio_with_roles", "url"}}}
	for _, g := range groups {
		var total, list float64
		var names []string
		probed := false
		for i := 0; i < len(g.fields); i += 2 {
			items, _ := n.Request[g.fields[i]].([]any)
			if len(items) > 0 {
				names = append(names, g.fields[i])
			}
			for j, it := range items {
				item, _ := it.(map[string]any)
				secs, _ := item["duration"].(float64)
				raw, _ := item[g.fields[i+1]].(string)
				if key, ok := m.Blobs.KeyOfLink(ctx, raw); ok {
					d, err := storedDuration(ctx, m.Blobs, key)
					switch {
					case errors.Is(err, mediaduration.ErrUnknown):
						return http.StatusBadRequest, fmt.Sprintf("%s[%d]: the uploaded %s's duration cannot be read from its headers", g.fields[i], j, g.typ)
					case errors.Is(err, blob.ErrNotFound):
						return http.StatusBadRequest, fmt.Sprintf("%s[%d]: the uploaded %s no longer exists; upload it again", g.fields[i], j, g.typ)
					case err != nil:
						log.FromContext(ctx).Error(err, "read an uploaded file's duration", "key", key)
						return http.StatusServiceUnavailable, "could not read an uploaded file; retry later"
					}
					secs, probed = d.Seconds(), true
				}
				total += secs
				if g.fields[i] == "video_list" {
					list += secs
				}
			}
		}
		if !probed {
			continue
		}
		if total > media.VideoMaxRefSeconds {
			return http.StatusBadRequest, fmt.Sprintf("%s durations must total at most %d seconds (got %s s, read from the uploaded files)",
				strings.Join(names, " and "), media.VideoMaxRefSeconds, strconv.FormatFloat(math.Round(total*1000)/1000, 'f', -1, 64))
		}
		if g.typ == "video" {
			n.InputVideoSeconds, n.ListVideoSeconds = total, list
		} else {
			n.InputAudioSeconds = total
		}
	}
	return 0, ""
}

// mediaEstimate is the reservation request: n outputs (pre-deducted), the
// reference images, and the requested duration (the model's maximum when
// the model decides).
func mediaEstimate(n *media.Normalized) pricing.MediaRequest {
	req := pricing.MediaRequest{Outputs: int64(max(n.N, 1)), InputImages: int64(n.ReferenceImages)}
	if prompt, ok := n.Request["prompt"].(string); ok {
		req.PromptBytes = int64(len(prompt))
	}
	if n.Duration == media.VideoDurationAuto {
		req.DurationSeconds = modelDecidedVideoSeconds
	} else if n.Duration > 0 {
		req.DurationSeconds = int64(n.Duration)
	}
	if n.InputVideoSeconds > 0 {
		req.InputVideoSeconds = int64(n.InputVideoSeconds + 0.999999)
	}
	req.VideoWidth, req.VideoHeight = videoEstimateSize(n)
	return req
}

// videoEstimateSize is the largest pixel size a video request can produce,
// for a per_token estimate: its nominal size, or for the adaptive ratio
// the largest of its resolution tier (0, 0 for an image request).
func videoEstimateSize(n *media.Normalized) (int64, int64) {
	if n.Width > 0 && n.Height > 0 && strings.HasSuffix(n.Resolution, "p") {
		return int64(n.Width), int64(n.Height)
	}
	var bw, bh int64
	for _, r := range []string{"16:9", "9:16", "4:3", "3:4", "1:1"} {
		if w, h, ok := media.VideoPixelSize(r, n.Resolution); ok && int64(w)*int64(h) > bw*bh {
			bw, bh = int64(w), int64(h)
		}
	}
	return bw, bh
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
	rule *pricing.Rule, requestID string, estimate billing.Quota, accepted time.Time, inline map[string]string) (*v1.GenerationTask, error) {
	if len(inline) > 0 { // the stored copy's reference replaces the inline data
		tasks.RewriteStrings(n.Request, func(s string) string {
			if key, ok := inline[s]; ok {
				return tasks.BlobScheme + key
			}
			return s
		})
	}
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
		InputVideoSeconds: mediaEstimate(n).InputVideoSeconds, ListVideoMillis: int64(math.Round(n.ListVideoSeconds * 1000)),
	}
	for _, a := range n.ReviewAssets {
		sub.ReviewAssets = append(sub.ReviewAssets, tasks.ReviewAsset{Type: string(a.Type), URL: a.URL, Role: a.Role, BlobKey: inline[a.URL]})
	}
	return &v1.GenerationTask{
		ObjectMeta: metav1.ObjectMeta{
			Name: tasks.ObjectName(taskID), Namespace: p.Tenant.Namespace,
			// Held from the start: a task deleted before the controller
			// first sees it still has its reservation refunded.
			Finalizers: []string{v1.LedgerFinalizer},
			Labels:     map[string]string{"app.kubernetes.io/managed-by": "modelgate"},
		},
		Spec: v1.GenerationTaskSpec{
			TaskID: taskID, Model: route.Spec.Model, Type: m.typ, Profile: route.Spec.ValidationProfile,
			Request:   runtime.RawExtension{Raw: reqJSON},
			TokenName: p.Token.Name, TokenID: p.TokenID, UserID: p.UserID, Group: group,
			ClientBusinessID: n.ClientBusinessID, PrivateAssetReview: n.PrivateAssetReview,
			ReservedQuota: int64(estimate), RequestID: requestID, Submission: sub,
		},
	}, nil
}

// byBusinessID finds the caller's task of this family with a client
// business ID: the live object first, then the ledger archive.
func (m *Media) byBusinessID(ctx context.Context, p *auth.Principal, cbid string) (*v1.GenerationTask, error) {
	if t, err := m.fromCache(ctx, p, index.TaskClientBusinessID, cbid); t != nil || err != nil {
		return t, err
	}
	rec, err := m.Ledger.TaskByClientBusinessID(ctx, p.UserID, string(m.typ), cbid)
	if errors.Is(err, store.ErrNotFound) {
		return m.fromAPI(ctx, p, tasks.BusinessTaskID(p.Tenant.Namespace, m.typ, cbid))
	}
	if err != nil {
		return nil, err
	}
	return tasks.FromRecord(rec)
}

// fromAPI reads the tenant's task with this task ID from the API server:
// a task created a moment ago that neither the informer cache nor the
// ledger archive (written by the controller's first pass) has yet. Only
// IDs of the task ID shape are looked up, so an unknown ID costs at most
// one read.
func (m *Media) fromAPI(ctx context.Context, p *auth.Principal, taskID string) (*v1.GenerationTask, error) {
	if m.API == nil || !tasks.IsTaskID(taskID) {
		return nil, nil
	}
	t := &v1.GenerationTask{}
	err := m.API.Get(ctx, client.ObjectKey{Namespace: p.Tenant.Namespace, Name: tasks.ObjectName(taskID)}, t)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case t.Spec.TaskID != taskID || t.Spec.Type != m.typ || t.Spec.UserID != p.UserID:
		return nil, nil
	}
	return t, nil
}

// awaitReplay waits for a concurrent submission's task to appear.
func (m *Media) awaitReplay(ctx context.Context, p *auth.Principal, cbid string) *v1.GenerationTask {
	var found *v1.GenerationTask
	pollCache(ctx, replayWait, func(ctx context.Context) bool {
		if t, err := m.byBusinessID(ctx, p, cbid); err == nil && t != nil {
			found = t
		}
		return found != nil
	})
	return found
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
	if t, err := m.fromAPI(ctx, p, id); t != nil || err != nil {
		return t, err
	}
	return m.byBusinessID(ctx, p, id)
}

// Get answers GET …/generations/{task_id}: the task ID or the caller's
// client_business_id.
func (m *Media) Get(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	ctx := r.Context()
	id := strings.TrimSpace(r.PathValue("task_id"))
	t, err := m.lookup(ctx, p, id)
	if err != nil {
		log.FromContext(ctx).Error(err, "look up task", "task", id)
		m.fail(w, http.StatusInternalServerError, errInternal, "could not read the task")
		return
	}
	if t == nil {
		m.fail(w, http.StatusNotFound, errTaskNotFound, fmt.Sprintf("task %q not found", id))
		return
	}
	writeJSON(w, http.StatusOK, tasks.Render(ctx, t, m.Blobs, m.Clock.Now()))
}

// Batch answers GET …/generations?ids=a,b,c: at most 100 IDs; the caller's
// tasks found, in the order asked, and the IDs not found.
func (m *Media) Batch(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	ctx := r.Context()
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
		m.fail(w, http.StatusBadRequest, errInvalidRequest, "ids is required: a comma-separated list of task IDs")
		return
	case len(ids) > maxBatchIDs:
		m.fail(w, http.StatusBadRequest, errInvalidRequest, fmt.Sprintf("at most %d task IDs per query (got %d)", maxBatchIDs, len(ids)))
		return
	}
	out := batchJSON{Object: "list", Data: []tasks.View{}, NotFound: []string{}}
	for _, id := range ids {
		t, err := m.lookup(ctx, p, id)
		if err != nil {
			log.FromContext(ctx).Error(err, "look up task", "task", id)
			m.fail(w, http.StatusInternalServerError, errInternal, "could not read the tasks")
			return
		}
		if t == nil {
			out.NotFound = append(out.NotFound, id)
			continue
		}
		out.Data = append(out.Data, tasks.Render(ctx, t, m.Blobs, m.Clock.Now()))
	}
	writeJSON(w, http.StatusOK, out)
}

type batchJSON struct {
	Object   string       `json:"object"`
	Data     []tasks.View `json:"data"`
	NotFound []string     `json:"not_found"`
}

// inlineKeys maps each inline review image's key ("sha256:<hex>") to where
// its decoded content is stored: one copy per tenant and content digest.
func inlineKeys(namespace string, n *media.Normalized) map[string]string {
	var out map[string]string
	for _, a := range n.ReviewAssets {
		if a.Data == nil {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		digest := strings.TrimPrefix(a.URL, media.InlineKeyPrefix)
		out[a.URL] = fmt.Sprintf("tenants/%s/review-assets/%s.%s", namespace, digest, media.InlineExtension(a.MimeType))
	}
	return out
}

// storeInline writes the decoded inline images (under private asset review
// an inline image is decoded, validated and stored before it is used).
// Keys are content-addressed, so a repeat rewrites the same bytes.
func (m *Media) storeInline(ctx context.Context, n *media.Normalized, keys map[string]string) error {
	for _, a := range n.ReviewAssets {
		key, ok := keys[a.URL]
		if !ok {
			continue
		}
		if _, err := m.Blobs.Put(ctx, key, a.MimeType, bytes.NewReader(a.Data)); err != nil {
			return err
		}
	}
	return nil
}

// dropInline deletes copies stored for a submission that did not become a
// task, unless a review record of another task holds them.
func (m *Media) dropInline(ctx context.Context, keys map[string]string) {
	for _, key := range keys {
		if used, err := m.Ledger.ReviewBlobInUse(ctx, key); err != nil || used {
			continue
		}
		if err := m.Blobs.Delete(ctx, key); err != nil {
			log.FromContext(ctx).Error(err, "delete inline asset of a refused submission")
		}
	}
}
