package fakeupstream

import (
	"bytes"
	"crypto/md5" //nolint:gosec // S3's ETag of a single-part object is its MD5
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"
)

// The Bedrock fake's batch inference, written from AWS's public reference
// (docs.aws.amazon.com/bedrock/latest/APIReference/API_CreateModelInvocationJob.html,
// …/API_GetModelInvocationJob.html, …/API_StopModelInvocationJob.html, the
// user guide's batch-inference-data and batch-inference-results pages,
// docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html and
// …/API_GetObject.html, and the model parameters of Anthropic Claude's
// Messages API on Bedrock), served by the same Server as the runtime:
//
//   - POST /model-invocation-job (CreateModelInvocationJob), GET
//     /model-invocation-job/{jobIdentifier} (GetModelInvocationJob) and POST
//     /model-invocation-job/{jobIdentifier}/stop (StopModelInvocationJob),
//     signed for the service "bedrock", errors as the runtime's;
//   - a path-style S3 (PUT and GET /{bucket}/{key}), signed for the service
//     "s3" with x-amz-content-sha256 (a payload hash or UNSIGNED-PAYLOAD),
//     errors in S3's XML; every bucket exists.
//
// A job validates its input (the object exists, each line a JSON object
// with modelInput, at least BatchMinRecords records: else it fails) and
// then runs its records one by one, each an InvokeModel call of a Claude
// model answered from the script (a Reply's Status fails that record, its
// Delay and SetBatchRecordDelay slow it). The output, {outputS3Uri}/{job
// ID}/{input file name}.out with a manifest.json.out beside it, is written
// when the job ends: Completed, or Stopped after a stop with the records
// not run absent.

// BedrockAccount is the account ID in the ARNs a Bedrock fake issues.
const BedrockAccount = "123456789012"

// BedrockAnthropicVersion is the anthropic_version a Claude body on the
// Bedrock fake must carry.
const BedrockAnthropicVersion = "bedrock-2023-05-31"

// bedrockJobPath is the control plane's job collection.
const bedrockJobPath = "/model-invocation-job"

// bedrockBatch is the Bedrock fake's batch state, under the Server's lock.
type bedrockBatch struct {
	objects     map[string][]byte // "bucket/key" → bytes
	jobs        map[string]*bedrockJob
	tokens      map[string]string // client request token → job ID
	minRecords  int
	recordDelay time.Duration
	created     int
	runs        map[string]int // recordId → records run
}

type bedrockJob struct {
	id, arn, name, model, role, token string
	input, output                     string
	status, message                   string
	submitted, modified, ended        time.Time
	total, processed, succeeded, errs int
	stop                              bool
}

// bedrockBatchState is the server's batch state, made on first use.
func (s *Server) bedrockBatchState() *bedrockBatch {
	if s.bbatch == nil {
		s.bbatch = &bedrockBatch{objects: map[string][]byte{}, jobs: map[string]*bedrockJob{}, tokens: map[string]string{},
			minRecords: 100, runs: map[string]int{}}
	}
	return s.bbatch
}

// SetBatchMinRecords sets the least number of records a batch inference
// job of the fake accepts (100 unless set, Bedrock's quota in most
// regions).
func (s *Server) SetBatchMinRecords(n int) {
	s.mu.Lock()
	s.bedrockBatchState().minRecords = n
	s.mu.Unlock()
}

// SetBatchRecordDelay makes each record of a batch inference job take d.
func (s *Server) SetBatchRecordDelay(d time.Duration) {
	s.mu.Lock()
	s.bedrockBatchState().recordDelay = d
	s.mu.Unlock()
}

// InvocationJobsCreated is the number of batch inference jobs created (a
// repeated client request token creates none).
func (s *Server) InvocationJobsCreated() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bedrockBatchState().created
}

// BatchRecordRuns is the number of times the record recordID was run by
// a batch inference job.
func (s *Server) BatchRecordRuns(recordID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bedrockBatchState().runs[recordID]
}

// BatchRecordsRun is the number of records run by batch inference jobs.
func (s *Server) BatchRecordsRun() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.bedrockBatchState().runs {
		n += c
	}
	return n
}

// S3Object is the fake S3's object bucket/key.
func (s *Server) S3Object(bucket, key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.bedrockBatchState().objects[bucket+"/"+key]
	return bytes.Clone(b), ok
}

// isBedrockBatch reports whether r is for the control plane's jobs or for
// S3 rather than for the runtime's /model/… methods.
func isBedrockBatch(r *http.Request) bool {
	return !strings.HasPrefix(r.URL.Path, "/model/")
}

// serveBedrockBatch answers a control plane or S3 request; false when it
// was refused before reaching the job or object.
func (s *Server) serveBedrockBatch(w http.ResponseWriter, r *http.Request, body []byte) bool {
	p := r.URL.EscapedPath()
	if p != bedrockJobPath && !strings.HasPrefix(p, bedrockJobPath+"/") {
		return s.serveS3(w, r, body)
	}
	if exc, msg := s.verifySig(r, body, "bedrock", hexSHA256(body)); exc != "" {
		writeBedrockError(w, http.StatusForbidden, exc, msg)
		return false
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(p, bedrockJobPath), "/")
	switch {
	case r.Method == http.MethodPost && rest == "":
		return s.createJob(w, body)
	case r.Method == http.MethodPost && strings.HasSuffix(rest, "/stop") && !strings.Contains(strings.TrimSuffix(rest, "/stop"), "/"):
		return s.stopJob(w, strings.TrimSuffix(rest, "/stop"))
	case r.Method == http.MethodGet && rest != "" && !strings.Contains(rest, "/"):
		return s.getJob(w, rest)
	}
	writeBedrockError(w, http.StatusNotFound, "UnknownOperationException", "")
	return false
}

// The CreateModelInvocationJob constraints (the API reference's patterns).
var (
	bedrockJobName   = regexp.MustCompile(`^[a-zA-Z0-9]{1,63}(-*[a-zA-Z0-9\+\-\.]){0,63}$`)
	bedrockToken     = regexp.MustCompile(`^[a-zA-Z0-9]{1,256}(-*[a-zA-Z0-9]){0,256}$`)
	bedrockRoleArn   = regexp.MustCompile(`^arn:aws(-[^:]+)?:iam::([0-9]{12})?:role/.+$`)
	bedrockS3URI     = regexp.MustCompile(`^s3://[a-z0-9][\.\-a-z0-9]{1,61}[a-z0-9](/.*)?$`)
	bedrockJobARNRef = regexp.MustCompile(`^arn:aws(-[^:]+)?:bedrock:[a-z0-9-]{1,20}:[0-9]{12}:model-invocation-job/([a-z0-9]{12})$`)
)

func (s *Server) createJob(w http.ResponseWriter, body []byte) bool {
	var req struct {
		JobName            string `json:"jobName"`
		RoleArn            string `json:"roleArn"`
		ClientRequestToken string `json:"clientRequestToken"`
		ModelID            string `json:"modelId"`
		InputDataConfig    *struct {
			S3InputDataConfig *struct {
				S3URI         string `json:"s3Uri"`
				S3InputFormat string `json:"s3InputFormat"`
			} `json:"s3InputDataConfig"`
		} `json:"inputDataConfig"`
		OutputDataConfig *struct {
			S3OutputDataConfig *struct {
				S3URI string `json:"s3Uri"`
			} `json:"s3OutputDataConfig"`
		} `json:"outputDataConfig"`
		ModelInvocationType    string          `json:"modelInvocationType"`
		TimeoutDurationInHours *int            `json:"timeoutDurationInHours"`
		Tags                   json.RawMessage `json:"tags"`
		VpcConfig              json.RawMessage `json:"vpcConfig"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	invalid := func(msg string) bool {
		writeBedrockError(w, http.StatusBadRequest, "ValidationException", msg)
		return false
	}
	if err := dec.Decode(&req); err != nil {
		return invalid("Malformed request: " + err.Error())
	}
	switch {
	case !bedrockJobName.MatchString(req.JobName):
		return invalid("1 validation error detected: Value '" + req.JobName + "' at 'jobName' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9]{1,63}(-*[a-zA-Z0-9\\+\\-\\.]){0,63}")
	case !bedrockRoleArn.MatchString(req.RoleArn):
		return invalid("1 validation error detected: Value '" + req.RoleArn + "' at 'roleArn' failed to satisfy constraint: Member must satisfy regular expression pattern: ^arn:aws(-[^:]+)?:iam::([0-9]{12})?:role/.+$")
	case req.ClientRequestToken != "" && !bedrockToken.MatchString(req.ClientRequestToken):
		return invalid("1 validation error detected: Value at 'clientRequestToken' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9]{1,256}(-*[a-zA-Z0-9]){0,256}")
	case req.ModelID == "":
		return invalid("1 validation error detected: Value null at 'modelId' failed to satisfy constraint: Member must not be null")
	case req.InputDataConfig == nil || req.InputDataConfig.S3InputDataConfig == nil || !bedrockS3URI.MatchString(req.InputDataConfig.S3InputDataConfig.S3URI):
		return invalid("1 validation error detected: Value at 'inputDataConfig.s3InputDataConfig.s3Uri' failed to satisfy constraint: Member must satisfy regular expression pattern: s3://[a-z0-9][\\.\\-a-z0-9]{1,61}[a-z0-9](/.*)?")
	case req.InputDataConfig.S3InputDataConfig.S3InputFormat != "" && req.InputDataConfig.S3InputDataConfig.S3InputFormat != "JSONL":
		return invalid("1 validation error detected: Value '" + req.InputDataConfig.S3InputDataConfig.S3InputFormat + "' at 'inputDataConfig.s3InputDataConfig.s3InputFormat' failed to satisfy constraint: Member must satisfy enum value set: [JSONL]")
	case req.OutputDataConfig == nil || req.OutputDataConfig.S3OutputDataConfig == nil || !bedrockS3URI.MatchString(req.OutputDataConfig.S3OutputDataConfig.S3URI):
		return invalid("1 validation error detected: Value at 'outputDataConfig.s3OutputDataConfig.s3Uri' failed to satisfy constraint: Member must satisfy regular expression pattern: s3://[a-z0-9][\\.\\-a-z0-9]{1,61}[a-z0-9](/.*)?")
	case !strings.Contains(req.ModelID, "anthropic."):
		// The fake runs Claude records only.
		return invalid("The provided model identifier is invalid.")
	}
	s.mu.Lock()
	bb := s.bedrockBatchState()
	if id, ok := bb.tokens[req.ClientRequestToken]; ok && req.ClientRequestToken != "" {
		arn := bb.jobs[id].arn
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"jobArn": arn})
		return true
	}
	for _, j := range bb.jobs {
		if j.name == req.JobName {
			s.mu.Unlock()
			writeBedrockError(w, http.StatusConflict, "ConflictException", "The provided job name is currently in use.")
			return false
		}
	}
	id := randomJobID()
	now := time.Now().UTC()
	j := &bedrockJob{id: id, arn: "arn:aws:bedrock:" + BedrockRegion + ":" + BedrockAccount + ":model-invocation-job/" + id,
		name: req.JobName, model: req.ModelID, role: req.RoleArn, token: req.ClientRequestToken,
		input: req.InputDataConfig.S3InputDataConfig.S3URI, output: req.OutputDataConfig.S3OutputDataConfig.S3URI,
		status: "Submitted", submitted: now, modified: now}
	bb.jobs[id] = j
	if j.token != "" {
		bb.tokens[j.token] = id
	}
	bb.created++
	s.mu.Unlock()
	go s.runJob(j)
	writeJSON(w, http.StatusOK, map[string]any{"jobArn": j.arn})
	return true
}

func randomJobID() string {
	const alnum = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alnum[int(b[i])%len(alnum)]
	}
	return string(b)
}

// lookupJob finds a job by its escaped identifier (an ARN or a job ID);
// the caller holds the lock.
func (s *Server) lookupJob(escaped string) *bedrockJob {
	ref, err := url.PathUnescape(escaped)
	if err != nil {
		return nil
	}
	if m := bedrockJobARNRef.FindStringSubmatch(ref); m != nil {
		ref = m[2]
	}
	return s.bedrockBatchState().jobs[ref]
}

func (s *Server) getJob(w http.ResponseWriter, ident string) bool {
	s.mu.Lock()
	j := s.lookupJob(ident)
	if j == nil {
		s.mu.Unlock()
		writeBedrockError(w, http.StatusNotFound, "ResourceNotFoundException", "The specified job could not be found.")
		return false
	}
	out := map[string]any{
		"jobArn": j.arn, "jobName": j.name, "modelId": j.model, "roleArn": j.role, "status": j.status,
		"submitTime": j.submitted.Format(time.RFC3339Nano), "lastModifiedTime": j.modified.Format(time.RFC3339Nano),
		"inputDataConfig":        map[string]any{"s3InputDataConfig": map[string]any{"s3Uri": j.input, "s3InputFormat": "JSONL"}},
		"outputDataConfig":       map[string]any{"s3OutputDataConfig": map[string]any{"s3Uri": j.output}},
		"timeoutDurationInHours": 24, "jobExpirationTime": j.submitted.Add(24 * time.Hour).Format(time.RFC3339Nano),
		"modelInvocationType": "InvokeModel",
		"totalRecordCount":    j.total, "processedRecordCount": j.processed, "successRecordCount": j.succeeded, "errorRecordCount": j.errs,
	}
	if j.token != "" {
		out["clientRequestToken"] = j.token
	}
	if j.message != "" {
		out["message"] = j.message
	}
	if !j.ended.IsZero() {
		out["endTime"] = j.ended.Format(time.RFC3339Nano)
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
	return true
}

func (s *Server) stopJob(w http.ResponseWriter, ident string) bool {
	s.mu.Lock()
	j := s.lookupJob(ident)
	if j == nil {
		s.mu.Unlock()
		writeBedrockError(w, http.StatusNotFound, "ResourceNotFoundException", "The specified job could not be found.")
		return false
	}
	switch j.status {
	case "Completed", "PartiallyCompleted", "Failed", "Stopped", "Expired":
		st := j.status
		s.mu.Unlock()
		writeBedrockError(w, http.StatusBadRequest, "ValidationException", "The job cannot be stopped in its current status: "+st+".")
		return false
	}
	j.stop = true
	j.status, j.modified = "Stopping", time.Now().UTC()
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{})
	return true
}

// setJob moves j to status (under the lock); false when a stop came first
// and the status is not a final one.
func (s *Server) setJob(j *bedrockJob, status string, f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j.stop && status != "Stopped" && status != "Failed" {
		return false
	}
	j.status, j.modified = status, time.Now().UTC()
	if f != nil {
		f()
	}
	return true
}

// waitOr waits d unless the server closes first (false).
func (s *Server) waitOr(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	select {
	case <-time.After(d):
		return true
	case <-s.stop:
		return false
	}
}

// runJob carries a job through its statuses.
func (s *Server) runJob(j *bedrockJob) {
	const step = 20 * time.Millisecond
	fail := func(msg string) {
		s.setJob(j, "Failed", func() { j.message, j.ended = msg, time.Now().UTC() })
	}
	if !s.waitOr(step) || !s.setJob(j, "Validating", nil) || !s.waitOr(step) {
		s.endStopped(j, nil)
		return
	}
	inBucket, inKey := splitS3URI(j.input)
	s.mu.Lock()
	raw, ok := s.bedrockBatchState().objects[inBucket+"/"+inKey]
	min := s.bedrockBatchState().minRecords
	s.mu.Unlock()
	if !ok {
		fail("Unable to access input file " + j.input + ". Check that the file exists and that the service role has permission to read it.")
		return
	}
	type record struct {
		RecordID   string          `json:"recordId"`
		ModelInput json.RawMessage `json:"modelInput"`
	}
	var records []record
	for i, line := range bytes.Split(raw, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var rec record
		if err := json.Unmarshal(line, &rec); err != nil || len(rec.ModelInput) == 0 {
			fail(fmt.Sprintf("Invalid record at line %d of %s: each record must be a JSON object with a modelInput.", i+1, j.input))
			return
		}
		if rec.RecordID == "" {
			rec.RecordID = fmt.Sprintf("%011d", i+1)
		}
		records = append(records, rec)
	}
	if len(records) < min {
		fail(fmt.Sprintf("The number of records (%d) in the input is below the minimum (%d) for a batch inference job.", len(records), min))
		return
	}
	if !s.setJob(j, "Scheduled", func() { j.total = len(records) }) || !s.waitOr(step) || !s.setJob(j, "InProgress", nil) {
		s.endStopped(j, nil)
		return
	}
	var out bytes.Buffer
	for _, rec := range records {
		s.mu.Lock()
		stopped := j.stop
		delay := s.bedrockBatchState().recordDelay
		s.mu.Unlock()
		if stopped {
			s.endStopped(j, out.Bytes())
			return
		}
		line, ok := s.runRecord(j, rec.RecordID, rec.ModelInput, delay)
		if !ok {
			return // the server closed
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	s.writeOutput(j, out.Bytes())
	s.setJob(j, "Completed", func() { j.ended = time.Now().UTC() })
}

// endStopped ends a stopped job with the output of the records it ran.
func (s *Server) endStopped(j *bedrockJob, out []byte) {
	s.mu.Lock()
	stopped := j.stop
	s.mu.Unlock()
	if !stopped {
		return // the server closed
	}
	if j.total > 0 {
		s.writeOutput(j, out)
	}
	s.setJob(j, "Stopped", func() { j.ended = time.Now().UTC() })
}

// runRecord runs one record as InvokeModel would and returns its output
// line; false when the server closed meanwhile.
func (s *Server) runRecord(j *bedrockJob, recordID string, input json.RawMessage, delay time.Duration) ([]byte, bool) {
	reply := s.next(Request{Method: http.MethodPost, Path: "/model/" + j.model + "/invoke", Body: input})
	if !s.waitOr(delay + reply.Delay) {
		return nil, false
	}
	rec := map[string]any{"recordId": recordID, "modelInput": input}
	errorRecord := func(code int, msg string) {
		rec["error"] = map[string]any{"errorCode": code, "errorMessage": msg}
	}
	switch msg := validateBedrockClaude(input); {
	case msg != "":
		errorRecord(http.StatusBadRequest, msg)
	case reply.Status != 0:
		_, m := bedrockException(reply.Status)
		if reply.ErrorMessage != "" {
			m = reply.ErrorMessage
		}
		errorRecord(reply.Status, m)
	default:
		model := j.model
		if _, after, ok := strings.Cut(model, "anthropic."); ok {
			model, _, _ = strings.Cut(after, ":")
		}
		rec["modelOutput"] = s.anthropicMessage("msg_bdrk_", model, reply)
	}
	line, _ := json.Marshal(rec)
	s.mu.Lock()
	bb := s.bedrockBatchState()
	bb.runs[recordID]++
	j.processed++
	if _, failed := rec["error"]; failed {
		j.errs++
	} else {
		j.succeeded++
	}
	j.modified = time.Now().UTC()
	s.mu.Unlock()
	return line, true
}

// writeOutput stores the job's output file and its manifest.
func (s *Server) writeOutput(j *bedrockJob, out []byte) {
	outBucket, outPrefix := splitS3URI(j.output)
	_, inKey := splitS3URI(j.input)
	dir := path.Join(outPrefix, j.id)
	s.mu.Lock()
	defer s.mu.Unlock()
	manifest, _ := json.Marshal(map[string]any{"totalRecordCount": j.total, "processedRecordCount": j.processed,
		"successRecordCount": j.succeeded, "errorRecordCount": j.errs})
	objects := s.bedrockBatchState().objects
	objects[outBucket+"/"+dir+"/"+path.Base(inKey)+".out"] = bytes.Clone(out)
	objects[outBucket+"/"+dir+"/manifest.json.out"] = manifest
}

// splitS3URI splits s3://bucket/key into its bucket and key (no slashes
// at either end).
func splitS3URI(u string) (bucket, key string) {
	bucket, key, _ = strings.Cut(strings.TrimPrefix(u, "s3://"), "/")
	return bucket, strings.Trim(key, "/")
}

// validateBedrockClaude checks a Claude InvokeModel body: the Messages
// body without model (nor stream) and with Bedrock's anthropic_version.
func validateBedrockClaude(body []byte) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return "Malformed input request: expected a JSON object, please reformat your input and try again."
	}
	for _, k := range []string{"model", "stream"} {
		if _, ok := m[k]; ok {
			return "Malformed input request: #: extraneous key [" + k + "] is not permitted, please reformat your input and try again."
		}
	}
	var v string
	if raw, ok := m["anthropic_version"]; !ok || json.Unmarshal(raw, &v) != nil {
		return "Malformed input request: #: required key [anthropic_version] not found, please reformat your input and try again."
	}
	if v != BedrockAnthropicVersion {
		return "Invalid API version: " + v
	}
	m["model"] = json.RawMessage(`"claude"`)
	withModel, _ := json.Marshal(m)
	return validateMessages(withModel)
}

// serveS3 answers a path-style S3 PutObject or GetObject.
func (s *Server) serveS3(w http.ResponseWriter, r *http.Request, body []byte) bool {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	resource := "/" + bucket + "/" + key
	hash := r.Header.Get("X-Amz-Content-Sha256")
	switch {
	case r.Header.Get("Authorization") == "":
		writeS3Error(w, http.StatusForbidden, "AccessDenied", "Access Denied", resource)
		return false
	case hash == "":
		writeS3Error(w, http.StatusBadRequest, "InvalidRequest", "Missing required header for this request: x-amz-content-sha256", resource)
		return false
	case hash != "UNSIGNED-PAYLOAD" && hash != hexSHA256(body):
		writeS3Error(w, http.StatusBadRequest, "XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was computed.", resource)
		return false
	}
	if exc, msg := s.verifySig(r, body, "s3", hash); exc != "" {
		code := map[string]string{"UnrecognizedClientException": "InvalidAccessKeyId", "IncompleteSignatureException": "AuthorizationHeaderMalformed"}[exc]
		if code == "" {
			code = "SignatureDoesNotMatch"
		}
		writeS3Error(w, http.StatusForbidden, code, msg, resource)
		return false
	}
	if bucket == "" || key == "" {
		writeS3Error(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "The specified method is not allowed against this resource.", resource)
		return false
	}
	switch r.Method {
	case http.MethodPut:
		s.mu.Lock()
		s.bedrockBatchState().objects[bucket+"/"+key] = bytes.Clone(body)
		s.mu.Unlock()
		sum := md5.Sum(body) //nolint:gosec // S3's ETag
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
		w.Header().Set("x-amz-request-id", "FAKE0000000000000000")
		w.WriteHeader(http.StatusOK)
		return true
	case http.MethodGet:
		obj, ok := s.S3Object(bucket, key)
		if !ok {
			writeS3Error(w, http.StatusNotFound, "NoSuchKey", "The specified key does not exist.", resource)
			return false
		}
		sum := md5.Sum(obj) //nolint:gosec // S3's ETag
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", fmt.Sprint(len(obj)))
		w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(obj)
		return true
	}
	writeS3Error(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "The specified method is not allowed against this resource.", resource)
	return false
}

// writeS3Error writes S3's XML error body.
func writeS3Error(w http.ResponseWriter, status int, code, msg, resource string) {
	type s3Error struct {
		XMLName   xml.Name `xml:"Error"`
		Code      string   `xml:"Code"`
		Message   string   `xml:"Message"`
		Resource  string   `xml:"Resource"`
		RequestID string   `xml:"RequestId"`
	}
	b, _ := xml.Marshal(s3Error{Code: code, Message: msg, Resource: resource, RequestID: "FAKE0000000000000000"})
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("x-amz-request-id", "FAKE0000000000000000")
	w.WriteHeader(status)
	_, _ = w.Write(append([]byte(xml.Header), b...))
}

func hexSHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
