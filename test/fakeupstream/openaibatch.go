package fakeupstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The OpenAI fake's Batch API, written from the API reference
// (platform.openai.com/docs/api-reference/batch and /files) and the
// openai-go SDK's Batch, FileObject and BatchError types:
//
//   - POST /v1/files (multipart: purpose and file; purpose batch takes a
//     .jsonl file), GET /v1/files/{id}, GET /v1/files/{id}/content;
//   - POST /v1/batches {input_file_id, endpoint, completion_window "24h",
//     metadata}, GET /v1/batches/{id}, GET /v1/batches (newest first,
//     limit and after), POST /v1/batches/{id}/cancel.
//
// A batch validates its input file (JSON lines, unique custom_id, method
// POST, url equal to the batch's endpoint, one model per file): a bad file
// fails the batch with errors.data. Otherwise its lines run one by one
// through the fake's own chat completions or responses handler, so the
// script, Handle and the default reply answer each line as they answer a
// single call (a line's Request carries BatchCustomIDHeader), and the
// batch moves validating → in_progress → finalizing → completed with its
// request_counts. Answers with status 200 go to the output file, the
// others to the error file; a cancel stops the lines not yet run and
// writes each to the error file with code batch_cancelled.

// BatchCustomIDHeader is set on the request of a batch line as the fake's
// handlers see it (Handle, Requests): the line's custom_id, so that a test
// can answer one line differently. It is the fake's own, never on the wire.
const BatchCustomIDHeader = "X-Fake-Batch-Custom-Id"

// batchEndpoints are the endpoints a batch may name; the fake runs the
// text ones.
var batchEndpoints = []string{"/v1/responses", "/v1/chat/completions", "/v1/embeddings", "/v1/completions"}

type batchState struct {
	files     map[string]*fakeFile
	batches   map[string]*fakeBatch
	order     []string // batch IDs, oldest first
	created   int
	runs      map[string]int
	lineDelay time.Duration
}

type fakeFile struct {
	obj     map[string]any
	content []byte
}

type fakeBatch struct {
	obj        map[string]any
	auth       string
	cancel     chan struct{}
	cancelOnce sync.Once
}

func newBatchState() *batchState {
	return &batchState{files: map[string]*fakeFile{}, batches: map[string]*fakeBatch{}, runs: map[string]int{}}
}

func isBatchPath(p string) bool {
	return p == "/v1/files" || strings.HasPrefix(p, "/v1/files/") || p == "/v1/batches" || strings.HasPrefix(p, "/v1/batches/")
}

func (s *Server) hasBatchAPI() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.batch != nil
}

// SetBatchLineDelay makes each batch line wait d before it runs (a batch a
// test can cancel midway).
func (s *Server) SetBatchLineDelay(d time.Duration) {
	s.mu.Lock()
	s.batch.lineDelay = d
	s.mu.Unlock()
}

// BatchesCreated is the number of batches created.
func (s *Server) BatchesCreated() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.batch.created
}

// BatchLineRuns is how many times a batch line with customID ran.
func (s *Server) BatchLineRuns(customID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.batch.runs[customID]
}

// BatchStatus is the status of batch id ("" when there is none).
func (s *Server) BatchStatus(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.batch.batches[id]; b != nil {
		st, _ := b.obj["status"].(string)
		return st
	}
	return ""
}

func (s *Server) serveBatch(w http.ResponseWriter, r *http.Request, body []byte, i int) {
	auth := r.Header.Get("Authorization")
	switch {
	case !strings.HasPrefix(auth, "Bearer "):
		s.reject(i)
		s.writeOpenAIAuthError(w, "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).")
		return
	case strings.TrimPrefix(auth, "Bearer ") != s.Key():
		s.reject(i)
		s.writeOpenAIAuthError(w, "Incorrect API key provided.")
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/"), "/")
	ok := true
	switch {
	case r.Method == http.MethodPost && len(parts) == 1 && parts[0] == "files":
		ok = s.uploadFile(w, r, body)
	case r.Method == http.MethodGet && len(parts) == 2 && parts[0] == "files":
		ok = s.getFile(w, parts[1], false)
	case r.Method == http.MethodGet && len(parts) == 3 && parts[0] == "files" && parts[2] == "content":
		ok = s.getFile(w, parts[1], true)
	case r.Method == http.MethodPost && len(parts) == 1 && parts[0] == "batches":
		ok = s.createBatch(w, body, auth)
	case r.Method == http.MethodGet && len(parts) == 1 && parts[0] == "batches":
		s.listBatches(w, r)
	case r.Method == http.MethodGet && len(parts) == 2 && parts[0] == "batches":
		ok = s.getBatch(w, parts[1])
	case r.Method == http.MethodPost && len(parts) == 3 && parts[0] == "batches" && parts[2] == "cancel":
		ok = s.cancelBatch(w, parts[1])
	default:
		s.writeError(w, http.StatusNotFound, "invalid_request_error", "Invalid URL ("+r.Method+" "+r.URL.Path+")")
		ok = false
	}
	if !ok {
		s.reject(i)
	}
}

func writeParamError(w http.ResponseWriter, status int, msg, param string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": param, "code": nil}})
}

var filePurposes = []string{"assistants", "batch", "fine-tune", "vision", "user_data", "evals"}

func (s *Server) uploadFile(w http.ResponseWriter, r *http.Request, body []byte) bool {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		writeParamError(w, http.StatusBadRequest, "Invalid Content-Type header ("+r.Header.Get("Content-Type")+"), expected multipart/form-data.", "")
		return false
	}
	form, err := multipart.NewReader(bytes.NewReader(body), params["boundary"]).ReadForm(256 << 20)
	if err != nil {
		writeParamError(w, http.StatusBadRequest, "The multipart body could not be parsed: "+err.Error(), "")
		return false
	}
	defer func() { _ = form.RemoveAll() }()
	purpose := ""
	if v := form.Value["purpose"]; len(v) > 0 {
		purpose = v[0]
	}
	switch {
	case purpose == "":
		writeParamError(w, http.StatusBadRequest, "Missing required parameter: 'purpose'.", "purpose")
		return false
	case !slices.Contains(filePurposes, purpose):
		writeParamError(w, http.StatusBadRequest, fmt.Sprintf("'%s' is not one of %q - 'purpose'", purpose, filePurposes), "purpose")
		return false
	case len(form.File["file"]) == 0:
		writeParamError(w, http.StatusBadRequest, "Missing required parameter: 'file'.", "file")
		return false
	}
	fh := form.File["file"][0]
	if purpose == "batch" && !strings.HasSuffix(fh.Filename, ".jsonl") {
		writeParamError(w, http.StatusBadRequest, "Invalid file format for Batch API. Must be .jsonl", "file")
		return false
	}
	f, err := fh.Open()
	if err != nil {
		writeParamError(w, http.StatusBadRequest, "The file could not be read.", "file")
		return false
	}
	var content bytes.Buffer
	_, err = content.ReadFrom(f)
	_ = f.Close()
	if err != nil {
		writeParamError(w, http.StatusBadRequest, "The file could not be read.", "file")
		return false
	}
	s.mu.Lock()
	obj := s.addFile(fh.Filename, purpose, content.Bytes())
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, obj)
	return true
}

// addFile stores a file; s.mu is held.
func (s *Server) addFile(name, purpose string, content []byte) map[string]any {
	s.seq++
	id := fmt.Sprintf("file-%024d", s.seq)
	obj := map[string]any{"object": "file", "id": id, "purpose": purpose, "filename": name, "bytes": len(content),
		"created_at": time.Now().Unix(), "expires_at": nil, "status": "processed", "status_details": nil}
	s.batch.files[id] = &fakeFile{obj: obj, content: content}
	return cloneObj(obj)
}

func (s *Server) getFile(w http.ResponseWriter, id string, content bool) bool {
	s.mu.Lock()
	f := s.batch.files[id]
	s.mu.Unlock()
	if f == nil {
		writeParamError(w, http.StatusNotFound, "No such File object: "+id, "id")
		return false
	}
	if !content {
		writeJSON(w, http.StatusOK, f.obj)
		return true
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(f.content)
	return true
}

func (s *Server) createBatch(w http.ResponseWriter, body []byte, auth string) bool {
	var req struct {
		InputFileID      string            `json:"input_file_id"`
		Endpoint         string            `json:"endpoint"`
		CompletionWindow string            `json:"completion_window"`
		Metadata         map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeParamError(w, http.StatusBadRequest, "We could not parse the JSON body of your request. "+err.Error(), "")
		return false
	}
	switch {
	case req.InputFileID == "":
		writeParamError(w, http.StatusBadRequest, "Missing required parameter: 'input_file_id'.", "input_file_id")
		return false
	case req.Endpoint == "":
		writeParamError(w, http.StatusBadRequest, "Missing required parameter: 'endpoint'.", "endpoint")
		return false
	case !slices.Contains(batchEndpoints, req.Endpoint):
		writeParamError(w, http.StatusBadRequest, fmt.Sprintf("'%s' is not one of %q - 'endpoint'", req.Endpoint, batchEndpoints), "endpoint")
		return false
	case req.CompletionWindow != "24h":
		writeParamError(w, http.StatusBadRequest, fmt.Sprintf("'%s' is not one of ['24h'] - 'completion_window'", req.CompletionWindow), "completion_window")
		return false
	case len(req.Metadata) > 16:
		writeParamError(w, http.StatusBadRequest, "Invalid 'metadata': too many properties. Expected an object with at most 16 properties.", "metadata")
		return false
	}
	s.mu.Lock()
	f := s.batch.files[req.InputFileID]
	if f == nil || f.obj["purpose"] != "batch" {
		s.mu.Unlock()
		writeParamError(w, http.StatusBadRequest, "Invalid 'input_file_id': '"+req.InputFileID+"'. No batch input file with that ID.", "input_file_id")
		return false
	}
	s.seq++
	id := fmt.Sprintf("batch_%024d", s.seq)
	now := time.Now().Unix()
	meta := any(nil)
	if req.Metadata != nil {
		meta = req.Metadata
	}
	b := &fakeBatch{auth: auth, cancel: make(chan struct{}), obj: map[string]any{
		"id": id, "object": "batch", "endpoint": req.Endpoint, "errors": nil, "input_file_id": req.InputFileID,
		"completion_window": "24h", "status": "validating", "output_file_id": nil, "error_file_id": nil,
		"created_at": now, "in_progress_at": nil, "expires_at": now + 24*3600, "finalizing_at": nil, "completed_at": nil,
		"failed_at": nil, "expired_at": nil, "cancelling_at": nil, "cancelled_at": nil,
		"request_counts": map[string]any{"total": 0, "completed": 0, "failed": 0}, "metadata": meta,
	}}
	s.batch.batches[id] = b
	s.batch.order = append(s.batch.order, id)
	s.batch.created++
	content := f.content
	obj := cloneObj(b.obj)
	s.mu.Unlock()
	go s.runBatch(b, req.Endpoint, content)
	writeJSON(w, http.StatusOK, obj)
	return true
}

// cloneObj is a shallow copy of a wire object, safe to encode outside s.mu.
func cloneObj(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if c, ok := v.(map[string]any); ok {
			v = cloneObj(c)
		}
		out[k] = v
	}
	return out
}

func (s *Server) getBatch(w http.ResponseWriter, id string) bool {
	s.mu.Lock()
	b := s.batch.batches[id]
	var obj map[string]any
	if b != nil {
		obj = cloneObj(b.obj)
	}
	s.mu.Unlock()
	if b == nil {
		writeParamError(w, http.StatusNotFound, "No batch found with id '"+id+"'.", "batch_id")
		return false
	}
	writeJSON(w, http.StatusOK, obj)
	return true
}

func (s *Server) listBatches(w http.ResponseWriter, r *http.Request) {
	limit := 20
	if v, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && v >= 1 && v <= 100 {
		limit = v
	}
	after := r.URL.Query().Get("after")
	s.mu.Lock()
	var data []any
	skipping := after != ""
	more := false
	for i := len(s.batch.order) - 1; i >= 0; i-- {
		id := s.batch.order[i]
		if skipping {
			skipping = id != after
			continue
		}
		if len(data) == limit {
			more = true
			break
		}
		data = append(data, cloneObj(s.batch.batches[id].obj))
	}
	s.mu.Unlock()
	out := map[string]any{"object": "list", "data": []any{}, "first_id": nil, "last_id": nil, "has_more": more}
	if len(data) > 0 {
		out["data"] = data
		out["first_id"] = data[0].(map[string]any)["id"]
		out["last_id"] = data[len(data)-1].(map[string]any)["id"]
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) cancelBatch(w http.ResponseWriter, id string) bool {
	s.mu.Lock()
	b := s.batch.batches[id]
	if b == nil {
		s.mu.Unlock()
		writeParamError(w, http.StatusNotFound, "No batch found with id '"+id+"'.", "batch_id")
		return false
	}
	switch st := b.obj["status"].(string); st {
	case "validating", "in_progress":
		b.obj["status"] = "cancelling"
		b.obj["cancelling_at"] = time.Now().Unix()
		b.cancelOnce.Do(func() { close(b.cancel) })
	case "cancelling", "finalizing":
	default:
		s.mu.Unlock()
		writeJSON(w, http.StatusConflict, map[string]any{"error": map[string]any{
			"message": fmt.Sprintf("Cannot cancel a batch with status '%s'.", st), "type": "invalid_request_error", "param": nil, "code": nil}})
		return false
	}
	obj := cloneObj(b.obj)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, obj)
	return true
}

// batchInputLine is one line of a batch's input file.
type batchInputLine struct {
	CustomID string          `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// validateBatchFile reads an input file as OpenAI validates it, returning
// its lines or the batch's errors.
func validateBatchFile(endpoint string, content []byte) ([]batchInputLine, []any) {
	var lines []batchInputLine
	var errs []any
	fail := func(n int, code, param, msg string) {
		errs = append(errs, map[string]any{"code": code, "line": n, "message": msg, "param": param})
	}
	seen := map[string]bool{}
	model := ""
	for i, raw := range bytes.Split(content, []byte("\n")) {
		n := i + 1
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		var l batchInputLine
		if err := json.Unmarshal(raw, &l); err != nil {
			fail(n, "invalid_json_line", "", "This line is not parseable as valid JSON.")
			continue
		}
		var body struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(l.Body, &body)
		switch {
		case l.CustomID == "":
			fail(n, "missing_required_parameter", "custom_id", "Missing required parameter: 'custom_id'.")
		case seen[l.CustomID]:
			fail(n, "duplicate_custom_id", "custom_id", "The custom_id for this request is a duplicate of another request. The custom_id parameter must be unique for each request in a batch.")
		case l.Method != http.MethodPost:
			fail(n, "invalid_method", "method", "The method for this request is invalid. Only POST is supported.")
		case l.URL != endpoint:
			fail(n, "invalid_url", "url", "The URL provided for this request does not match the batch endpoint.")
		case body.Model == "":
			fail(n, "missing_required_parameter", "body.model", "Missing required parameter: 'model'.")
		case model != "" && body.Model != model:
			fail(n, "mismatched_model", "body.model", "The provided model does not match the model of the other requests in the file. A batch input file must use one model.")
		default:
			model = body.Model
		}
		seen[l.CustomID] = true
		lines = append(lines, l)
	}
	if len(lines) == 0 && len(errs) == 0 {
		fail(1, "empty_file", "", "The batch input file is empty.")
	}
	return lines, errs
}

// runBatch takes a batch through its states, running its lines one by one.
func (s *Server) runBatch(b *fakeBatch, endpoint string, content []byte) {
	set := func(kv ...any) {
		s.mu.Lock()
		for i := 0; i < len(kv); i += 2 {
			b.obj[kv[i].(string)] = kv[i+1]
		}
		s.mu.Unlock()
	}
	lines, errs := validateBatchFile(endpoint, content)
	if len(errs) > 0 {
		set("status", "failed", "failed_at", time.Now().Unix(), "errors", map[string]any{"object": "list", "data": errs})
		return
	}
	s.mu.Lock()
	cancelling := b.obj["status"] == "cancelling"
	if !cancelling {
		b.obj["status"] = "in_progress"
		b.obj["in_progress_at"] = time.Now().Unix()
	}
	b.obj["request_counts"] = map[string]any{"total": len(lines), "completed": 0, "failed": 0}
	s.mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-b.cancel:
		case <-s.stop:
		}
		cancel()
	}()
	var output, errorLines [][]byte
	completed, failed := 0, 0
	for i, l := range lines {
		if ctx.Err() == nil && s.waitLineDelay(ctx) {
			status, body := s.runBatchLine(ctx, b.auth, l)
			if ctx.Err() == nil || status != 0 {
				s.mu.Lock()
				s.batch.runs[l.CustomID]++
				s.mu.Unlock()
			}
			if status != 0 {
				line := s.batchOutputLine(l.CustomID, map[string]any{"status_code": status, "request_id": s.id("req_"), "body": body}, nil)
				if status == http.StatusOK {
					output = append(output, line)
					completed++
				} else {
					errorLines = append(errorLines, line)
					failed++
				}
				set("request_counts", map[string]any{"total": len(lines), "completed": completed, "failed": failed})
				continue
			}
		}
		select {
		case <-s.stop:
			return
		default:
		}
		// Cancelled: this line and every one after it were not run.
		for _, nr := range lines[i:] {
			errorLines = append(errorLines, s.batchOutputLine(nr.CustomID, nil, map[string]any{
				"code": "batch_cancelled", "message": "This request was not executed because the batch was cancelled."}))
		}
		break
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	final := "completed"
	if b.obj["status"] == "cancelling" {
		final = "cancelled"
	} else {
		b.obj["status"] = "finalizing"
		b.obj["finalizing_at"] = time.Now().Unix()
	}
	id := b.obj["id"].(string)
	if len(output) > 0 {
		b.obj["output_file_id"] = s.addFile(id+"_output.jsonl", "batch_output", jsonl(output))["id"]
	}
	if len(errorLines) > 0 {
		b.obj["error_file_id"] = s.addFile(id+"_error.jsonl", "batch_output", jsonl(errorLines))["id"]
	}
	b.obj["status"] = final
	b.obj[final+"_at"] = time.Now().Unix()
}

func jsonl(lines [][]byte) []byte {
	return append(bytes.Join(lines, []byte("\n")), '\n')
}

// waitLineDelay waits the configured line delay; false when ctx ended first.
func (s *Server) waitLineDelay(ctx context.Context) bool {
	s.mu.Lock()
	d := s.batch.lineDelay
	s.mu.Unlock()
	if d <= 0 {
		return true
	}
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *Server) batchOutputLine(customID string, response, errObj map[string]any) []byte {
	out := map[string]any{"id": s.id("batch_req_"), "custom_id": customID, "response": nil, "error": nil}
	if response != nil {
		out["response"] = response
	}
	if errObj != nil {
		out["error"] = errObj
	}
	b, _ := json.Marshal(out)
	return b
}

// runBatchLine sends one line through the fake's own handler for its url;
// status 0 when the line did not finish (cancelled while it ran).
func (s *Server) runBatchLine(ctx context.Context, auth string, l batchInputLine) (status int, body json.RawMessage) {
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, l.URL, bytes.NewReader(l.Body))
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(BatchCustomIDHeader, l.CustomID)
	rec := httptest.NewRecorder()
	reset := false
	func() {
		defer func() {
			if v := recover(); v != nil {
				if !errors.Is(asError(v), http.ErrAbortHandler) {
					panic(v)
				}
				reset = true
			}
		}()
		s.serve(rec, req)
	}()
	switch {
	case reset:
		status = http.StatusInternalServerError
		body, _ = json.Marshal(map[string]any{"error": map[string]any{"message": "The server had an error while processing your request. Sorry about that!",
			"type": "server_error", "param": nil, "code": nil}})
		return status, body
	case ctx.Err() != nil && rec.Body.Len() == 0:
		return 0, nil
	}
	if json.Valid(rec.Body.Bytes()) {
		return rec.Code, rec.Body.Bytes()
	}
	body, _ = json.Marshal(rec.Body.String())
	return rec.Code, body
}

func asError(v any) error {
	if err, ok := v.(error); ok {
		return err
	}
	return nil
}
