package fakeupstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Vertex AI batch prediction and the part of Cloud Storage it needs, on the
// Vertex fake's server, written from Google's public references
// (cloud.google.com/vertex-ai/generative-ai/docs/multimodal/batch-prediction-from-cloud-storage,
// …/model-reference/batch-prediction-api, the BatchPredictionJob and
// JobState messages of google.cloud.aiplatform.v1,
// cloud.google.com/storage/docs/json_api/v1/objects):
//
//   - POST /{version}/projects/{p}/locations/{l}/batchPredictionJobs
//     creates a job {displayName, model "publishers/google/models/gemini…",
//     inputConfig {instancesFormat "jsonl", gcsSource {uris}}, outputConfig
//     {predictionsFormat "jsonl", gcsDestination {outputUriPrefix}}},
//     answered with the job (name projects/…/batchPredictionJobs/{number},
//     state JOB_STATE_PENDING); GET …/batchPredictionJobs/{id} reads it and
//     POST …/batchPredictionJobs/{id}:cancel cancels it ({}; 400
//     FAILED_PRECONDITION once it has ended);
//   - the job runs its input's lines {"request": GenerateContentRequest}
//     one by one through this fake's generateContent (the script, Handle
//     and failure injection apply to each line), then writes
//     {gcsOutputDirectory}/predictions.jsonl, a line {"status",
//     "processed_time", "request", "response"} per line run: the status
//     empty and the response the GenerateContentResponse (usageMetadata
//     included), or the status "<reason>: <Google error JSON>" and no
//     response. The request is echoed as sent, labels included;
//   - Cloud Storage's JSON API: POST /upload/storage/v1/b/{bucket}/o
//     ?uploadType=media&name=…, GET /storage/v1/b/{bucket}/o?prefix=…
//     (items, nextPageToken; maxResults), GET /storage/v1/b/{bucket}/o/{object}
//     (?alt=media: the content);
//   - every call with the fake's OAuth2 access token (401 otherwise), jobs
//     in its project only (403).

// vertexBatchState is the fake's Cloud Storage and batch prediction jobs,
// under the Server's lock.
type vertexBatchState struct {
	objects   map[string]gcsObject // "bucket/name" → object
	jobs      map[string]*vertexJob
	created   int
	linesRun  int
	lineDelay time.Duration
	// token is the access token the jobs call generateContent with.
	token string
}

type gcsObject struct {
	data        []byte
	contentType string
	created     time.Time
	generation  int64
}

// vertexJob is one batch prediction job; its resource is what get answers.
type vertexJob struct {
	resource map[string]any
	state    string
	cancel   context.CancelFunc
	done     chan struct{}
}

// batchJobsPath matches …/batchPredictionJobs, …/batchPredictionJobs/{id}
// and …/batchPredictionJobs/{id}:cancel.
var batchJobsPath = regexp.MustCompile(`^/(v1|v1beta1)/projects/([^/]+)/locations/([^/]+)/batchPredictionJobs(?:/([0-9]+)(:cancel)?)?$`)

// PredictionJobsCreated is the number of batch prediction jobs created.
func (s *Server) PredictionJobsCreated() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vbatch().created
}

// PredictionLinesRun is the number of batch lines the jobs sent to the model.
func (s *Server) PredictionLinesRun() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vbatch().linesRun
}

// SetPredictionLineDelay makes each job wait d before each of its lines.
func (s *Server) SetPredictionLineDelay(d time.Duration) {
	s.mu.Lock()
	s.vbatch().lineDelay = d
	s.mu.Unlock()
}

// GCSObject is the content of a Cloud Storage object of the fake.
func (s *Server) GCSObject(bucket, name string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.vbatch().objects[bucket+"/"+name]
	return bytes.Clone(o.data), ok
}

// GCSObjectNames are the names of the fake's objects in bucket, sorted.
func (s *Server) GCSObjectNames(bucket string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.vbatch().objects {
		if b, name, _ := strings.Cut(k, "/"); b == bucket {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// vbatch is the batch state, made on first use; the lock is held.
func (s *Server) vbatch() *vertexBatchState {
	v := s.vertex
	if v.batch == nil {
		v.batch = &vertexBatchState{objects: map[string]gcsObject{}, jobs: map[string]*vertexJob{}}
	}
	return v.batch
}

// serveVertexBatch answers the batch prediction and Cloud Storage calls;
// false for any other path.
func (s *Server) serveVertexBatch(w http.ResponseWriter, r *http.Request) bool {
	p := r.URL.Path
	m := batchJobsPath.FindStringSubmatch(p)
	gcs := strings.HasPrefix(p, "/storage/v1/b/") || strings.HasPrefix(p, "/upload/storage/v1/b/")
	if m == nil && !gcs {
		return false
	}
	body, _ := readAll(r)
	i := s.record(r, body)
	if !s.validToken(r.Header.Get("Authorization")) {
		s.reject(i)
		writeJSON(w, http.StatusUnauthorized, geminiError(401, "Request had invalid authentication credentials. Expected OAuth 2 access token, "+
			"login cookie or other valid authentication credential.", ""))
		return true
	}
	if gcs {
		if !s.serveGCS(w, r, body) {
			s.reject(i)
		}
		return true
	}
	project, location, id, cancel := m[2], m[3], m[4], m[5] != ""
	if project != VertexProject {
		s.reject(i)
		writeJSON(w, http.StatusForbidden, geminiError(403, "Permission 'aiplatform.batchPredictionJobs.create' denied on resource "+
			"'//aiplatform.googleapis.com/projects/"+project+"/locations/"+location+"' (or it may not exist).", ""))
		return true
	}
	switch {
	case id == "" && r.Method == http.MethodPost:
		if !s.createVertexJob(w, project, location, body) {
			s.reject(i)
		}
	case id != "" && !cancel && r.Method == http.MethodGet:
		s.mu.Lock()
		j := s.vbatch().jobs[strings.TrimPrefix(p, "/"+m[1]+"/")]
		var res []byte
		if j != nil {
			res, _ = json.Marshal(j.resource)
		}
		s.mu.Unlock()
		if j == nil {
			s.reject(i)
			writeJSON(w, http.StatusNotFound, geminiError(404, "The BatchPredictionJob does not exist.", ""))
			return true
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(res)
	case cancel && r.Method == http.MethodPost:
		s.cancelVertexJob(w, strings.TrimSuffix(strings.TrimPrefix(p, "/"+m[1]+"/"), ":cancel"))
	default:
		s.reject(i)
		writeJSON(w, http.StatusNotFound, geminiError(404, "The requested URL "+p+" was not found on this server.", ""))
	}
	return true
}

// jobRequest is the create body; unknown fields are refused, as the API's
// JSON parser does.
type jobRequest struct {
	DisplayName string `json:"displayName"`
	Model       string `json:"model"`
	InputConfig struct {
		InstancesFormat string `json:"instancesFormat"`
		GcsSource       *struct {
			URIs []string `json:"uris"`
		} `json:"gcsSource"`
	} `json:"inputConfig"`
	OutputConfig struct {
		PredictionsFormat string `json:"predictionsFormat"`
		GcsDestination    *struct {
			OutputURIPrefix string `json:"outputUriPrefix"`
		} `json:"gcsDestination"`
	} `json:"outputConfig"`
	Labels map[string]string `json:"labels"`
}

func (s *Server) createVertexJob(w http.ResponseWriter, project, location string, body []byte) bool {
	var req jobRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	bad := func(msg string) bool {
		writeJSON(w, http.StatusBadRequest, geminiError(400, msg, ""))
		return false
	}
	if err := dec.Decode(&req); err != nil {
		return bad("Invalid JSON payload received. " + err.Error())
	}
	model, ok := strings.CutPrefix(req.Model, "publishers/google/models/")
	switch {
	case req.DisplayName == "":
		return bad("List of found errors:\t1.Field: batch_prediction_job.display_name; Message: Required field is not set.")
	case !ok || !strings.HasPrefix(model, "gemini"):
		return bad(fmt.Sprintf("Model %q is not a Gemini publisher model this fake serves.", req.Model))
	case req.InputConfig.InstancesFormat != "jsonl" || req.InputConfig.GcsSource == nil || len(req.InputConfig.GcsSource.URIs) == 0:
		return bad("Unsupported input config: instancesFormat jsonl with gcsSource.uris expected.")
	case req.OutputConfig.PredictionsFormat != "jsonl" || req.OutputConfig.GcsDestination == nil ||
		!strings.HasPrefix(req.OutputConfig.GcsDestination.OutputURIPrefix, "gs://"):
		return bad("Unsupported output config: predictionsFormat jsonl with gcsDestination.outputUriPrefix expected.")
	}
	for _, u := range req.InputConfig.GcsSource.URIs {
		if !strings.HasPrefix(u, "gs://") {
			return bad(fmt.Sprintf("Invalid input URI %q: a gs:// URI expected.", u))
		}
	}
	now := time.Now().UTC()
	s.mu.Lock()
	st := s.vbatch()
	st.created++
	name := fmt.Sprintf("projects/%s/locations/%s/batchPredictionJobs/%d", project, location, 4000000000000000000+int64(st.created)*7919)
	ctx, cancel := context.WithCancel(context.Background())
	j := &vertexJob{state: "JOB_STATE_PENDING", cancel: cancel, done: make(chan struct{})}
	j.resource = map[string]any{
		"name": name, "displayName": req.DisplayName, "model": req.Model,
		"inputConfig":  map[string]any{"instancesFormat": "jsonl", "gcsSource": map[string]any{"uris": req.InputConfig.GcsSource.URIs}},
		"outputConfig": map[string]any{"predictionsFormat": "jsonl", "gcsDestination": map[string]any{"outputUriPrefix": req.OutputConfig.GcsDestination.OutputURIPrefix}},
		"state":        j.state, "createTime": now.Format(time.RFC3339Nano), "updateTime": now.Format(time.RFC3339Nano),
	}
	if len(req.Labels) > 0 {
		j.resource["labels"] = req.Labels
	}
	st.jobs[name] = j
	res, _ := json.Marshal(j.resource)
	s.mu.Unlock()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-j.done:
		}
	}()
	go func() {
		defer close(j.done)
		s.runVertexJob(ctx, j, project, location, model)
	}()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(res)
	return true
}

func (s *Server) cancelVertexJob(w http.ResponseWriter, name string) {
	s.mu.Lock()
	j := s.vbatch().jobs[name]
	if j == nil {
		s.mu.Unlock()
		writeJSON(w, http.StatusNotFound, geminiError(404, "The BatchPredictionJob does not exist.", ""))
		return
	}
	switch j.state {
	case "JOB_STATE_SUCCEEDED", "JOB_STATE_PARTIALLY_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED":
		state := j.state
		s.mu.Unlock()
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"code": 400, "status": "FAILED_PRECONDITION",
			"message": fmt.Sprintf("The BatchPredictionJob %s is in state %s and cannot be cancelled.", name, state)}})
		return
	}
	s.setJobState(j, "JOB_STATE_CANCELLING")
	s.mu.Unlock()
	j.cancel()
	writeJSON(w, http.StatusOK, map[string]any{})
}

// setJobState moves job j to state; the lock is held.
func (s *Server) setJobState(j *vertexJob, state string) {
	j.state = state
	j.resource["state"] = state
	j.resource["updateTime"] = time.Now().UTC().Format(time.RFC3339Nano)
}

// runVertexJob runs a job's lines, writes its predictions and ends it.
func (s *Server) runVertexJob(ctx context.Context, j *vertexJob, project, location, model string) {
	s.mu.Lock()
	st := s.vbatch()
	if st.token == "" {
		st.token = "ya29.fake-batch-" + randomHex(24)
	}
	s.vertex.issued[st.token] = time.Now().Add(24 * time.Hour)
	token, delay := st.token, st.lineDelay
	uris := j.resource["inputConfig"].(map[string]any)["gcsSource"].(map[string]any)["uris"].([]string)
	prefix := j.resource["outputConfig"].(map[string]any)["gcsDestination"].(map[string]any)["outputUriPrefix"].(string)
	if j.state == "JOB_STATE_PENDING" {
		s.setJobState(j, "JOB_STATE_RUNNING")
		j.resource["startTime"] = time.Now().UTC().Format(time.RFC3339Nano)
	}
	var input [][]byte
	var missing string
	for _, u := range uris {
		o, ok := st.objects[strings.TrimPrefix(u, "gs://")]
		if !ok {
			missing = u
			break
		}
		input = append(input, o.data)
	}
	s.mu.Unlock()

	fail := func(msg string) {
		s.mu.Lock()
		s.setJobState(j, "JOB_STATE_FAILED")
		j.resource["error"] = map[string]any{"code": 3, "message": msg}
		j.resource["endTime"] = time.Now().UTC().Format(time.RFC3339Nano)
		s.mu.Unlock()
	}
	if missing != "" {
		fail("Failed to read input file " + missing + ": No such object.")
		return
	}
	var lines []json.RawMessage
	for _, data := range input {
		dec := json.NewDecoder(bytes.NewReader(data))
		for dec.More() {
			var l json.RawMessage
			if err := dec.Decode(&l); err != nil {
				fail("Failed to parse the input file as JSON lines: " + err.Error())
				return
			}
			lines = append(lines, l)
		}
	}
	dir := strings.TrimRight(prefix, "/") + "/prediction-model-" + time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
	s.mu.Lock()
	j.resource["outputInfo"] = map[string]any{"gcsOutputDirectory": dir}
	s.mu.Unlock()

	var out bytes.Buffer
	ok, failed := 0, 0
	for _, l := range lines {
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		var line struct {
			Request json.RawMessage `json:"request"`
		}
		_ = json.Unmarshal(l, &line)
		status, resp := s.runVertexLine(ctx, token, project, location, model, line.Request)
		if status == 0 {
			break // cancelled while the line ran: not run
		}
		rec := map[string]any{"processed_time": time.Now().UTC().Format(time.RFC3339Nano), "request": line.Request}
		if status == http.StatusOK {
			rec["status"], rec["response"] = "", json.RawMessage(resp)
			ok++
		} else {
			rec["status"] = http.StatusText(status) + ": " + string(bytes.TrimSpace(resp))
			failed++
		}
		b, _ := json.Marshal(rec)
		out.Write(b)
		out.WriteByte('\n')
	}
	end := "JOB_STATE_SUCCEEDED"
	switch {
	case ctx.Err() != nil:
		end = "JOB_STATE_CANCELLED"
	case failed > 0:
		end = "JOB_STATE_PARTIALLY_SUCCEEDED"
	}
	bucket, name, _ := strings.Cut(strings.TrimPrefix(dir, "gs://"), "/")
	s.mu.Lock()
	st.objects[bucket+"/"+name+"/predictions.jsonl"] = gcsObject{data: out.Bytes(), contentType: "application/jsonl", created: time.Now().UTC(),
		generation: time.Now().UnixMicro()}
	s.setJobState(j, end)
	j.resource["endTime"] = time.Now().UTC().Format(time.RFC3339Nano)
	j.resource["completionStats"] = map[string]any{"successfulCount": strconv.Itoa(ok), "failedCount": strconv.Itoa(failed),
		"incompleteCount": strconv.Itoa(len(lines) - ok - failed)}
	s.mu.Unlock()
}

// labelKey and labelValue are what Vertex AI takes in a label.
var (
	labelKey   = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
	labelValue = regexp.MustCompile(`^[a-z0-9_-]{0,63}$`)
)

// runVertexLine sends one line's request through the fake's own
// generateContent handler (recorded as a request, answered from the
// script) and returns the status and body; 0 when the job was cancelled
// before an answer.
func (s *Server) runVertexLine(ctx context.Context, token, project, location, model string, request json.RawMessage) (status int, body []byte) {
	var req map[string]json.RawMessage
	if json.Unmarshal(request, &req) != nil || req == nil {
		b, _ := json.Marshal(geminiError(400, "Invalid JSON payload received: the line has no request object.", ""))
		return http.StatusBadRequest, b
	}
	if raw, ok := req["labels"]; ok {
		var labels map[string]string
		if json.Unmarshal(raw, &labels) != nil {
			b, _ := json.Marshal(geminiError(400, "Invalid value at 'labels' (map<string, string>)", ""))
			return http.StatusBadRequest, b
		}
		for k, v := range labels {
			if !labelKey.MatchString(k) || !labelValue.MatchString(v) {
				b, _ := json.Marshal(geminiError(400, fmt.Sprintf("Label %q: %q is not a valid label.", k, v), ""))
				return http.StatusBadRequest, b
			}
		}
		delete(req, "labels") // a Vertex field the Gemini validation does not know
	}
	gb, _ := json.Marshal(req)
	s.mu.Lock()
	s.vbatch().linesRun++
	s.mu.Unlock()
	u := fmt.Sprintf("/v1/projects/%s/locations/%s/publishers/google/models/%s:generateContent", project, location, url.PathEscape(model))
	hr := httptest.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(gb))
	hr.Header.Set("Authorization", "Bearer "+token)
	hr.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	func() {
		defer func() {
			if v := recover(); v != nil {
				// A Reset reply: the model's call failed without an answer.
				rec = httptest.NewRecorder()
				writeJSON(rec, http.StatusInternalServerError, geminiError(500, "Internal error encountered.", ""))
			}
		}()
		s.serve(rec, hr)
	}()
	if rec.Body.Len() == 0 {
		return 0, nil // the handler gave up (cancelled, or a hang ended by Close)
	}
	return rec.Code, rec.Body.Bytes()
}

// serveGCS answers the Cloud Storage JSON API calls; false when it refused
// the request.
func (s *Server) serveGCS(w http.ResponseWriter, r *http.Request, body []byte) bool {
	notFound := func(msg string) bool {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"code": 404, "message": msg,
			"errors": []any{map[string]any{"message": msg, "domain": "global", "reason": "notFound"}}}})
		return false
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, "/upload/storage/v1/b/"); ok {
		bucket, tail, _ := strings.Cut(rest, "/")
		q := r.URL.Query()
		if r.Method != http.MethodPost || tail != "o" || bucket == "" {
			return notFound("Not Found")
		}
		if q.Get("uploadType") != "media" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"code": 400,
				"message": "Upload type " + q.Get("uploadType") + " is not served by this fake (media only)."}})
			return false
		}
		name := q.Get("name")
		if name == "" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"code": 400, "message": "Required parameter: name"}})
			return false
		}
		o := gcsObject{data: bytes.Clone(body), contentType: r.Header.Get("Content-Type"), created: time.Now().UTC(), generation: time.Now().UnixMicro()}
		s.mu.Lock()
		s.vbatch().objects[bucket+"/"+name] = o
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, gcsResource(bucket, name, o))
		return true
	}
	rest := strings.TrimPrefix(r.URL.Path, "/storage/v1/b/")
	bucket, tail, _ := strings.Cut(rest, "/")
	if r.Method != http.MethodGet || bucket == "" {
		return notFound("Not Found")
	}
	if tail == "o" {
		q := r.URL.Query()
		prefix, token := q.Get("prefix"), q.Get("pageToken")
		limit, err := strconv.Atoi(q.Get("maxResults"))
		if err != nil || limit <= 0 || limit > 1000 {
			limit = 1000
		}
		s.mu.Lock()
		var names []string
		for k := range s.vbatch().objects {
			if b, name, _ := strings.Cut(k, "/"); b == bucket && strings.HasPrefix(name, prefix) && name > token {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		page := map[string]any{"kind": "storage#objects"}
		items := []any{}
		for i, name := range names {
			if i == limit {
				page["nextPageToken"] = names[i-1]
				break
			}
			items = append(items, gcsResource(bucket, name, s.vbatch().objects[bucket+"/"+name]))
		}
		s.mu.Unlock()
		if len(items) > 0 {
			page["items"] = items
		}
		writeJSON(w, http.StatusOK, page)
		return true
	}
	name, ok := strings.CutPrefix(tail, "o/")
	if !ok || name == "" {
		return notFound("Not Found")
	}
	s.mu.Lock()
	o, found := s.vbatch().objects[bucket+"/"+name]
	s.mu.Unlock()
	if !found {
		return notFound("No such object: " + bucket + "/" + name)
	}
	if r.URL.Query().Get("alt") == "media" {
		ct := o.contentType
		if ct == "" {
			ct = "application/octet-stream"
		}
		w.Header().Set("Content-Type", ct)
		_, _ = w.Write(o.data)
		return true
	}
	writeJSON(w, http.StatusOK, gcsResource(bucket, name, o))
	return true
}

// gcsResource is an object's metadata as the JSON API gives it (int64
// fields as strings).
func gcsResource(bucket, name string, o gcsObject) map[string]any {
	gen := strconv.FormatInt(o.generation, 10)
	return map[string]any{"kind": "storage#object", "id": bucket + "/" + name + "/" + gen, "name": name, "bucket": bucket,
		"generation": gen, "metageneration": "1", "contentType": o.contentType, "size": strconv.Itoa(len(o.data)),
		"timeCreated": o.created.Format(time.RFC3339Nano), "updated": o.created.Format(time.RFC3339Nano),
		"selfLink":  "https://www.googleapis.com/storage/v1/b/" + bucket + "/o/" + url.PathEscape(name),
		"mediaLink": "https://storage.googleapis.com/download/storage/v1/b/" + bucket + "/o/" + url.PathEscape(name) + "?generation=" + gen + "&alt=media"}
}

// readAll reads a request body.
func readAll(r *http.Request) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(r.Body)
	return b.Bytes(), err
}
