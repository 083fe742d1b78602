package handlers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/batches"
	"github.com/modelgate/modelgate/gateway/files"
)

// Batches serve OpenAI's Batches API (/v1/batches) and Anthropic's Message
// Batches (/v1/messages/batches) on one resource: a Batch in the tenant's
// namespace, which the batch controller runs. The gateway writes the spec
// once, asks for a cancel with batches.CancelAnnotation, and reads the
// status the controller writes.
type Batches struct {
	Files *files.Store
	// Writer creates and patches Batches.
	Writer client.Client
	// API reads Batches from the API server, so a batch is found the
	// moment after it was created.
	API client.Reader
	// Routes resolve the models the lines name.
	Routes BatchRoutes
	Clock  clock.PassiveClock
}

// BatchRoutes finds a tenant's route of a model (*routing.Router).
type BatchRoutes interface {
	Route(ctx context.Context, tenantNamespace, model string) (*v1.ModelRoute, error)
}

// batchEndpoints are the endpoints an OpenAI batch may name, with the model
// family and endpoint type the lines' models must serve. /v1/completions
// is in the resource's enum but not served by the gateway.
var batchEndpoints = map[string]struct {
	family   v1.ModelType
	endpoint v1.EndpointType
}{
	"/v1/chat/completions": {v1.ModelTypeText, v1.EndpointChatCompletions},
	"/v1/responses":        {v1.ModelTypeText, v1.EndpointResponses},
	"/v1/embeddings":       {v1.ModelTypeEmbedding, v1.EndpointEmbeddings},
	"/v1/messages":         {v1.ModelTypeText, v1.EndpointMessages},
}

const (
	// maxMetadataPairs and the lengths are OpenAI's metadata limits.
	maxMetadataPairs    = 16
	maxMetadataKeyLen   = 64
	maxMetadataValueLen = 512
	// defaultBatchPage and maxBatchPage bound GET /v1/batches.
	defaultBatchPage = 20
	maxBatchPage     = 100
)

func registerBatches(mux Mux, keys Authenticator, h *Batches) {
	mux.Handle("POST /v1/batches", authenticated(keys, false, openAIPathFail, h.Create))
	mux.Handle("GET /v1/batches", authenticated(keys, false, openAIPathFail, h.List))
	mux.Handle("GET /v1/batches/{batch_id}", authenticated(keys, false, openAIPathFail, h.Get))
	mux.Handle("POST /v1/batches/{batch_id}/cancel", authenticated(keys, false, openAIPathFail, h.Cancel))
	registerMessageBatches(mux, keys, h)
}

type batchRequest struct {
	InputFileID        string            `json:"input_file_id"`
	Endpoint           string            `json:"endpoint"`
	CompletionWindow   string            `json:"completion_window"`
	Metadata           map[string]string `json:"metadata"`
	OutputExpiresAfter *struct {
		Anchor  *string `json:"anchor"`
		Seconds *int64  `json:"seconds"`
	} `json:"output_expires_after"`
}

// Create accepts a batch: the input file must be the tenant's batch file;
// a file whose lines are invalid (format, endpoint, a model the key may
// not use) makes a batch that failed in validation with the line's error,
// as OpenAI does, and nothing runs.
func (h *Batches) Create(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	ctx := r.Context()
	var req batchRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	if err := dec.Decode(&req); err != nil {
		invalidRequest(w, "", "the body must be a JSON object")
		return
	}
	if msg, param := req.invalid(); msg != "" {
		invalidRequest(w, param, msg)
		return
	}
	in, err := h.Files.Get(ctx, p.UserID, req.InputFileID)
	if errors.Is(err, files.ErrNotFound) {
		invalidRequest(w, "input_file_id", fmt.Sprintf("input_file_id names no file: %s", req.InputFileID))
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if in.Purpose != files.PurposeBatch {
		invalidRequest(w, "input_file_id", fmt.Sprintf("the input file must have purpose 'batch', not '%s'", in.Purpose))
		return
	}
	count, inputErr, err := h.validate(ctx, p, in.ID, req.Endpoint, batches.MaxLines)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	id, err := newBatchID("batch_")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	spec := v1.BatchSpec{API: "openai", Endpoint: req.Endpoint, InputFileID: in.ID, Metadata: req.Metadata}
	if e := req.OutputExpiresAfter; e != nil {
		spec.OutputExpiresAfter = &metav1.Duration{Duration: time.Duration(*e.Seconds) * time.Second}
	}
	b, err := h.createBatch(ctx, p, id, spec, count, inputErr)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, batches.ObjectOf(b))
}

// invalid names the first field OpenAI would refuse.
func (req *batchRequest) invalid() (message, param string) {
	switch {
	case req.InputFileID == "":
		return "input_file_id is required", "input_file_id"
	case req.Endpoint == "":
		return "endpoint is required", "endpoint"
	case req.Endpoint == "/v1/messages":
		return "endpoint /v1/messages is served by POST /v1/messages/batches", "endpoint"
	case batchEndpoints[req.Endpoint].family == "":
		return fmt.Sprintf("endpoint must be one of /v1/chat/completions, /v1/responses, /v1/embeddings, not '%s'", req.Endpoint), "endpoint"
	case req.CompletionWindow != "24h":
		return "completion_window must be '24h'", "completion_window"
	case len(req.Metadata) > maxMetadataPairs:
		return fmt.Sprintf("metadata holds at most %d pairs", maxMetadataPairs), "metadata"
	}
	for k, v := range req.Metadata {
		if len(k) > maxMetadataKeyLen || len(v) > maxMetadataValueLen {
			return fmt.Sprintf("metadata keys are at most %d characters and values at most %d", maxMetadataKeyLen, maxMetadataValueLen), "metadata"
		}
	}
	if e := req.OutputExpiresAfter; e != nil {
		if _, param, msg := checkExpiry("output_expires_after", e.Anchor, e.Seconds); msg != "" {
			return msg, param
		}
	}
	return "", ""
}

// validate reads the input file through batches.ParseInput and checks the
// model of every line against the key and the tenant's routes. An invalid
// file is an *batches.InputError; err is a failure to read it.
func (h *Batches) validate(ctx context.Context, p *auth.Principal, fileID, endpoint string, maxLines int64) (int64, *batches.InputError, error) {
	_, rd, err := h.Files.Open(ctx, p.UserID, fileID)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = rd.Close() }()
	want := batchEndpoints[endpoint]
	checked := map[string]*batches.InputError{}
	n, err := batches.ParseInput(rd, endpoint, maxLines, func(l batches.Line) error {
		var body struct {
			Model string `json:"model"`
		}
		if json.Unmarshal(l.Body, &body) != nil || body.Model == "" {
			return &batches.InputError{Code: "missing_required_parameter", Line: l.Number, Message: "body.model is required"}
		}
		e, seen := checked[body.Model]
		if !seen {
			e, err = h.checkModel(ctx, p, body.Model, want.family, want.endpoint)
			if err != nil {
				return err
			}
			checked[body.Model] = e
		}
		if e != nil {
			return &batches.InputError{Code: e.Code, Line: l.Number, Message: e.Message}
		}
		return nil
	})
	if ie, ok := errors.AsType[*batches.InputError](err); ok {
		return n, ie, nil
	}
	return n, nil, err
}

// checkModel is the admission's route check of one model: the key may use
// it, the tenant has a route of the endpoint's family that serves the
// endpoint.
func (h *Batches) checkModel(ctx context.Context, p *auth.Principal, model string, family v1.ModelType, ep v1.EndpointType) (*batches.InputError, error) {
	if !p.AllowsModel(model) {
		return &batches.InputError{Code: "model_not_allowed", Message: fmt.Sprintf("this API key may not use model %q", model)}, nil
	}
	route, err := h.Routes.Route(ctx, p.Tenant.Namespace, model)
	if err != nil {
		return nil, err
	}
	switch {
	case route == nil || route.Spec.Type != family:
		return &batches.InputError{Code: "model_not_found", Message: fmt.Sprintf("model %q not found", model)}, nil
	case len(route.Spec.EndpointTypes) > 0 && !slices.Contains(route.Spec.EndpointTypes, ep):
		return &batches.InputError{Code: "model_not_found", Message: fmt.Sprintf("model %q is not served on this endpoint", model)}, nil
	}
	return nil, nil
}

// createBatch writes the Batch of spec in the tenant's namespace. A batch whose
// input was refused is failed at once, with the error, for the controller
// to leave alone (a failed batch is terminal).
func (h *Batches) createBatch(ctx context.Context, p *auth.Principal, id string, spec v1.BatchSpec, count int64, inputErr *batches.InputError) (*v1.Batch, error) {
	spec.BatchID = id
	spec.TokenName, spec.TokenID, spec.UserID, spec.Group = p.Token.Name, p.TokenID, p.UserID, p.Group()
	spec.CompletionWindow = &metav1.Duration{Duration: 24 * time.Hour}
	b := &v1.Batch{
		ObjectMeta: metav1.ObjectMeta{
			Name: batchObjectName(id), Namespace: p.Tenant.Namespace,
			Labels:      map[string]string{"app.kubernetes.io/managed-by": "modelgate"},
			Annotations: map[string]string{batches.RequestsAnnotation: strconv.FormatInt(count, 10)},
		},
		Spec: spec,
	}
	var failure v1.BatchError
	if inputErr != nil {
		msg := inputErr.Message
		if len(msg) > 1024 {
			msg = msg[:1024]
		}
		failure = v1.BatchError{Code: inputErr.Code, Message: msg, Line: inputErr.Line}
		// With the object, so the controller never runs a batch it may
		// reach before the status below is written.
		data, err := json.Marshal(failure)
		if err != nil {
			return nil, err
		}
		b.Annotations[batches.InputErrorAnnotation] = string(data)
	}
	if err := h.Writer.Create(ctx, b); err != nil {
		return nil, fmt.Errorf("create batch %s: %w", id, err)
	}
	if inputErr == nil {
		return b, nil
	}
	now := metav1.NewTime(h.Clock.Now())
	orig := b.DeepCopy()
	b.Status = v1.BatchStatus{State: v1.BatchFailed, FailedAt: &now, Errors: []v1.BatchError{failure}}
	// A merge patch: the controller may have written the same failure
	// first, and an update would then conflict.
	if err := h.Writer.Status().Patch(ctx, b, client.MergeFrom(orig)); err != nil {
		return nil, fmt.Errorf("fail batch %s: %w", id, err)
	}
	return b, nil
}

// newBatchID is prefix and 128 random bits in hex.
func newBatchID(prefix string) (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return prefix + hex.EncodeToString(b), nil
}

// batchObjectName is the object name of a batch ID (batch_… → batch-…).
func batchObjectName(id string) string { return strings.ReplaceAll(strings.ToLower(id), "_", "-") }

// lookup returns the tenant's batch id submitted on api; nil when there is
// none (another tenant's, another wire's or a malformed ID alike).
func (h *Batches) lookup(ctx context.Context, p *auth.Principal, api, id string) (*v1.Batch, error) {
	if !validBatchID(api, id) {
		return nil, nil
	}
	b := &v1.Batch{}
	err := h.API.Get(ctx, client.ObjectKey{Namespace: p.Tenant.Namespace, Name: batchObjectName(id)}, b)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case b.Spec.BatchID != id || !visible(b, p, api):
		return nil, nil
	}
	return b, nil
}

// visible: b is the caller's batch of api, and not deleted (a deleted batch
// may stay a while, until its upstream job is stopped: docs/batches.md,
// "Deletion").
func visible(b *v1.Batch, p *auth.Principal, api string) bool {
	return b.Spec.UserID == p.UserID && apiOf(b) == api && b.DeletionTimestamp.IsZero()
}

func validBatchID(api, id string) bool {
	prefix := "batch_"
	if api == "anthropic" {
		prefix = "msgbatch_"
	}
	hexPart, ok := strings.CutPrefix(id, prefix)
	if !ok || len(hexPart) != 32 {
		return false
	}
	_, err := hex.DecodeString(hexPart)
	return err == nil
}

func apiOf(b *v1.Batch) string {
	if b.Spec.API == "" {
		return "openai"
	}
	return b.Spec.API
}

// list returns the tenant's batches of api, newest first.
func (h *Batches) list(ctx context.Context, p *auth.Principal, api string) ([]*v1.Batch, error) {
	var l v1.BatchList
	if err := h.API.List(ctx, &l, client.InNamespace(p.Tenant.Namespace)); err != nil {
		return nil, err
	}
	out := make([]*v1.Batch, 0, len(l.Items))
	for i := range l.Items {
		if b := &l.Items[i]; visible(b, p, api) {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b *v1.Batch) int {
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(b.Spec.BatchID, a.Spec.BatchID)
	})
	return out, nil
}

// requestCancel records the cancel request on b (once: the first ask's
// time stays) unless b has ended.
func (h *Batches) requestCancel(ctx context.Context, b *v1.Batch) error {
	if _, asked := batches.CancelRequestedAt(b); asked || batches.State(b).Terminal() {
		return nil
	}
	patch := client.MergeFrom(b.DeepCopy())
	if b.Annotations == nil {
		b.Annotations = map[string]string{}
	}
	b.Annotations[batches.CancelAnnotation] = h.Clock.Now().UTC().Format(time.RFC3339)
	return h.Writer.Patch(ctx, b, patch)
}

func batchNotFound(w http.ResponseWriter, id string) {
	apiNotFound(w, fmt.Sprintf("No batch found with id '%s'.", id))
}

func apiNotFound(w http.ResponseWriter, message string) {
	openAIFail(w, http.StatusNotFound, "", message)
}

// Get answers the batch object.
func (h *Batches) Get(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	id := r.PathValue("batch_id")
	b, err := h.lookup(r.Context(), p, "openai", id)
	switch {
	case err != nil:
		h.fail(w, r, err)
	case b == nil:
		batchNotFound(w, id)
	default:
		writeJSON(w, http.StatusOK, batches.ObjectOf(b))
	}
}

// batchList is OpenAI's list object of batches.
type batchList struct {
	Object  string           `json:"object"`
	Data    []batches.Object `json:"data"`
	FirstID *string          `json:"first_id"`
	LastID  *string          `json:"last_id"`
	HasMore bool             `json:"has_more"`
}

// List answers a page of the tenant's batches, newest first: after (a
// batch ID) and limit (1 to 100, default 20) as OpenAI takes them.
func (h *Batches) List(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	q := r.URL.Query()
	limit, ok := pageLimit(q.Get("limit"), defaultBatchPage, maxBatchPage)
	if !ok {
		invalidRequest(w, "limit", fmt.Sprintf("limit must be an integer from 1 to %d", maxBatchPage))
		return
	}
	all, err := h.list(r.Context(), p, "openai")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	start := 0
	if after := q.Get("after"); after != "" {
		i := slices.IndexFunc(all, func(b *v1.Batch) bool { return b.Spec.BatchID == after })
		if i < 0 {
			invalidRequest(w, "after", fmt.Sprintf("after names no batch: %s", after))
			return
		}
		start = i + 1
	}
	page := all[start:min(start+limit, len(all))]
	out := batchList{Object: "list", Data: make([]batches.Object, len(page)), HasMore: start+len(page) < len(all)}
	for i, b := range page {
		out.Data[i] = batches.ObjectOf(b)
	}
	if len(page) > 0 {
		first, last := page[0].Spec.BatchID, page[len(page)-1].Spec.BatchID
		out.FirstID, out.LastID = &first, &last
	}
	writeJSON(w, http.StatusOK, out)
}

// pageLimit reads a page size: def when empty, else 1 to max.
func pageLimit(s string, def, max int) (int, bool) {
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 1 && n <= max
}

// Cancel asks the controller to cancel the batch and answers it
// cancelling. A batch that has ended cannot be cancelled (409).
func (h *Batches) Cancel(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	id := r.PathValue("batch_id")
	b, err := h.lookup(r.Context(), p, "openai", id)
	switch {
	case err != nil:
		h.fail(w, r, err)
		return
	case b == nil:
		batchNotFound(w, id)
		return
	case batches.State(b).Terminal():
		openAIFail(w, http.StatusConflict, "", fmt.Sprintf("Cannot cancel a batch with status '%s'.", batches.State(b)))
		return
	}
	if err := h.requestCancel(r.Context(), b); err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, batches.ObjectOf(b))
}

func (h *Batches) fail(w http.ResponseWriter, r *http.Request, err error) {
	log.FromContext(r.Context()).Error(err, "batch")
	openAIFail(w, http.StatusServiceUnavailable, "", "the batch could not be processed; retry")
}
