package vertex

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// The backend options of batch prediction.
const (
	// OptionBatchGCSURI is the Cloud Storage location (gs://bucket/prefix)
	// a batch's input file is uploaded to and its predictions are written
	// under. Without it a batch's lines run through the gateway.
	OptionBatchGCSURI = "batchGCSURI"
	// OptionStorageURL is the root of the Cloud Storage JSON API; empty:
	// DefaultStorageURL. A private endpoint, a proxy or a test's fake.
	OptionStorageURL = "storageURL"
	// OptionBatch "gateway" runs a batch's lines through the gateway even
	// when the backend could submit them as a batch prediction job.
	OptionBatch = "batch"
)

// BatchGateway is the OptionBatch value that keeps batches in the gateway.
const BatchGateway = "gateway"

// DefaultStorageURL is Cloud Storage's JSON API endpoint.
const DefaultStorageURL = "https://storage.googleapis.com"

// LineLabel is the request label that carries a line's custom ID through
// a batch prediction job: the input line has no ID field of its own, and
// the output echoes each line's request, labels included.
const LineLabel = "modelgate_line"

// The job states (google.cloud.aiplatform.v1.JobState) a batch maps from.
const (
	jobCancelled = "JOB_STATE_CANCELLED"
	jobFailed    = "JOB_STATE_FAILED"
)

// jobName is a batch prediction job's resource name, the batch's upstream
// ID; it becomes a URL path, so nothing else is accepted.
var jobName = regexp.MustCompile(`^projects/[a-z0-9-]+/locations/([a-z0-9]+(?:-[a-z0-9]+)*)/batchPredictionJobs/[a-z0-9-]+$`)

// labelValue is what a label value may hold (lower-case letters, digits,
// underscores and hyphens, at most 63), which a custom ID must be to ride
// in one.
var labelValue = regexp.MustCompile(`^[a-z0-9_-]{1,63}$`)

// bucketName is a Cloud Storage bucket name.
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$`)

// BatchProtocol implements upstream.BatchProvider: a Gemini model batches
// in its own protocol when the backend names a Cloud Storage location and
// does not keep batches in the gateway. Claude on Vertex AI does not.
func (p *Provider) BatchProtocol(b upstream.Backend, _ upstream.Protocol) (upstream.Protocol, bool) {
	if b.Options[OptionBatch] == BatchGateway || strings.TrimSpace(b.UpstreamModel) == "" {
		return "", false
	}
	if ps := p.ProtocolsFor(b); len(ps) != 1 || ps[0] != upstream.Gemini {
		return "", false
	}
	if _, _, err := gcsURI(b.Options[OptionBatchGCSURI]); err != nil {
		return "", false
	}
	return upstream.Gemini, true
}

// SubmitBatch implements upstream.BatchProvider: it uploads the lines as
// one JSONL object, {"request": GenerateContentRequest} a line with the
// custom ID in the request's labels, under the backend's batchGCSURI, and
// creates a batch prediction job reading it and writing its predictions
// beside it. The job's resource name is the ID.
func (p *Provider) SubmitBatch(ctx context.Context, b upstream.Backend, up upstream.Protocol, lines []upstream.BatchLine) (string, error) {
	if up != upstream.Gemini {
		return "", unsupported(b, "batch prediction takes Gemini requests, not %s", up)
	}
	bucket, prefix, err := gcsURI(b.Options[OptionBatchGCSURI])
	if err != nil {
		return "", unsupported(b, "%s: %v", OptionBatchGCSURI, err)
	}
	if len(lines) == 0 {
		// Vertex AI fails a job on an empty input file.
		return "", upstream.RequestError(errors.New("a batch prediction job needs at least one line"))
	}
	var in bytes.Buffer
	for _, l := range lines {
		line, err := inputLine(l)
		if err != nil {
			return "", err
		}
		in.Write(line)
		in.WriteByte('\n')
	}
	run := make([]byte, 12)
	_, _ = rand.Read(run)
	dir := path.Join(prefix, "modelgate-"+hex.EncodeToString(run))
	object := dir + "/input.jsonl"

	acct, project, err := p.account(b)
	if err != nil {
		return "", err
	}
	up1 := strings.TrimRight(storageURL(b), "/") + "/upload/storage/v1/b/" + url.PathEscape(bucket) + "/o?uploadType=media&name=" + url.QueryEscape(object)
	if _, err := p.exchange(ctx, b, acct, http.MethodPost, up1, "application/jsonl", in.Bytes(), true); err != nil {
		return "", fmt.Errorf("upload the batch input to gs://%s/%s: %w", bucket, object, err)
	}
	loc, err := locationURL(b, project, region(b))
	if err != nil {
		return "", err
	}
	job := map[string]any{
		"displayName": "modelgate-" + hex.EncodeToString(run),
		"model":       "publishers/google/models/" + strings.TrimSpace(b.UpstreamModel),
		"inputConfig": map[string]any{"instancesFormat": "jsonl",
			"gcsSource": map[string]any{"uris": []string{"gs://" + bucket + "/" + object}}},
		"outputConfig": map[string]any{"predictionsFormat": "jsonl",
			"gcsDestination": map[string]any{"outputUriPrefix": "gs://" + bucket + "/" + dir}},
	}
	body, _ := json.Marshal(job)
	x, err := p.exchange(ctx, b, acct, http.MethodPost, loc+"/batchPredictionJobs", "application/json", body, true)
	if err != nil {
		return "", err
	}
	var created struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(x, &created); err != nil || !jobName.MatchString(created.Name) {
		return "", &upstream.Error{Class: upstream.Permanent, Status: http.StatusBadGateway,
			Message: fmt.Sprintf("backend %q (vertex): the batch prediction job created has no usable name", b.Name), Err: err}
	}
	return created.Name, nil
}

// inputLine is a line of the job's input file: the request with the
// line's custom ID added to its labels, no model (the job names it).
func inputLine(l upstream.BatchLine) ([]byte, error) {
	if !labelValue.MatchString(l.CustomID) {
		return nil, upstream.RequestError(fmt.Errorf("custom ID %q cannot be a Vertex AI label value (lower-case letters, digits, _ and -, at most 63)", l.CustomID))
	}
	var req map[string]json.RawMessage
	if err := json.Unmarshal(l.Body, &req); err != nil || req == nil {
		return nil, upstream.RequestError(fmt.Errorf("line %s: the request is not a JSON object", l.CustomID))
	}
	delete(req, "model")
	labels := map[string]string{}
	if raw, ok := req["labels"]; ok {
		if err := json.Unmarshal(raw, &labels); err != nil {
			return nil, upstream.RequestError(fmt.Errorf("line %s: labels is not an object of strings", l.CustomID))
		}
		if labels == nil {
			labels = map[string]string{}
		}
	}
	labels[LineLabel] = l.CustomID
	req["labels"], _ = json.Marshal(labels)
	return json.Marshal(map[string]any{"request": req})
}

// job is the part of a BatchPredictionJob the provider reads.
type job struct {
	Name  string `json:"name"`
	State string `json:"state"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	InputConfig struct {
		GcsSource struct {
			URIs []string `json:"uris"`
		} `json:"gcsSource"`
	} `json:"inputConfig"`
	OutputInfo struct {
		GcsOutputDirectory string `json:"gcsOutputDirectory"`
	} `json:"outputInfo"`
}

// jobState maps a job state to the batch's: failed, ended (its
// predictions can be read) or, for every state on the way, running.
func jobState(s string) upstream.BatchJobState {
	switch s {
	case "JOB_STATE_SUCCEEDED", "JOB_STATE_PARTIALLY_SUCCEEDED", jobCancelled, "JOB_STATE_EXPIRED":
		return upstream.BatchJobEnded
	case jobFailed:
		return upstream.BatchJobFailed
	}
	return upstream.BatchJobRunning
}

// BatchStatus implements upstream.BatchProvider with
// batchPredictionJobs.get.
func (p *Provider) BatchStatus(ctx context.Context, b upstream.Backend, id string) (upstream.BatchJob, error) {
	j, err := p.getJob(ctx, b, id)
	if err != nil {
		return upstream.BatchJob{}, err
	}
	out := upstream.BatchJob{State: jobState(j.State)}
	if out.State == upstream.BatchJobFailed {
		out.Message = "the batch prediction job failed"
		if j.Error != nil && j.Error.Message != "" {
			out.Message = j.Error.Message
		}
	}
	return out, nil
}

// CancelBatch implements upstream.BatchProvider with
// batchPredictionJobs.cancel. Vertex AI refuses to cancel a job that has
// ended (FAILED_PRECONDITION); that is no error here.
func (p *Provider) CancelBatch(ctx context.Context, b upstream.Backend, id string) error {
	u, err := jobURL(b, id)
	if err != nil {
		return err
	}
	acct, _, err := p.account(b)
	if err != nil {
		return err
	}
	_, err = p.exchange(ctx, b, acct, http.MethodPost, u+":cancel", "application/json", []byte("{}"), false)
	if ue, ok := upstream.As(err); ok && (ue.Status == http.StatusBadRequest || ue.Status == http.StatusConflict) {
		if j, gerr := p.getJob(ctx, b, id); gerr == nil && jobState(j.State) != upstream.BatchJobRunning {
			return nil
		}
	}
	return err
}

// BatchResults implements upstream.BatchProvider: it lists the job's
// output directory and reads each predictions*.jsonl object, a line
// {"status", "request", "response"} an answer for the custom ID in the
// echoed request's labels. A cancelled job's lines not answered are read
// from its input file and reported NotRun "cancelled".
func (p *Provider) BatchResults(ctx context.Context, b upstream.Backend, id string, each func(upstream.BatchAnswer) error) error {
	j, err := p.getJob(ctx, b, id)
	if err != nil {
		return err
	}
	if jobState(j.State) == upstream.BatchJobRunning {
		return fmt.Errorf("backend %q (vertex): batch prediction job %s has not ended (%s)", b.Name, id, j.State)
	}
	acct, _, err := p.account(b)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	if dir := j.OutputInfo.GcsOutputDirectory; dir != "" {
		bucket, prefix, err := gcsURI(dir)
		if err != nil {
			return fmt.Errorf("backend %q (vertex): the job's output directory: %w", b.Name, err)
		}
		objects, err := p.listObjects(ctx, b, acct, bucket, prefix+"/")
		if err != nil {
			return err
		}
		for _, o := range objects {
			if base := path.Base(o); !strings.HasPrefix(base, "predictions") || !strings.HasSuffix(base, ".jsonl") {
				continue
			}
			err := p.readLines(ctx, b, acct, bucket, o, func(raw json.RawMessage) error {
				a, ok := answer(raw)
				if !ok || seen[a.CustomID] {
					return nil
				}
				seen[a.CustomID] = true
				return each(a)
			})
			if err != nil {
				return err
			}
		}
	}
	if j.State != jobCancelled {
		return nil
	}
	for _, in := range j.InputConfig.GcsSource.URIs {
		bucket, object, err := gcsURI(in)
		if err != nil {
			return fmt.Errorf("backend %q (vertex): the job's input file: %w", b.Name, err)
		}
		err = p.readLines(ctx, b, acct, bucket, object, func(raw json.RawMessage) error {
			var l struct {
				Request struct {
					Labels map[string]string `json:"labels"`
				} `json:"request"`
			}
			if json.Unmarshal(raw, &l) != nil {
				return nil
			}
			cid := l.Request.Labels[LineLabel]
			if cid == "" || seen[cid] {
				return nil
			}
			seen[cid] = true
			return each(upstream.BatchAnswer{CustomID: cid, NotRun: upstream.NotRunCancelled})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// answer reads a prediction line: an empty status with a response is the
// line's 200 answer; a status is its error, the Google error object the
// status carries when it has one, else the status as the message.
func answer(raw json.RawMessage) (upstream.BatchAnswer, bool) {
	var l struct {
		Status  string `json:"status"`
		Request struct {
			Labels map[string]string `json:"labels"`
		} `json:"request"`
		Response json.RawMessage `json:"response"`
	}
	if json.Unmarshal(raw, &l) != nil || l.Request.Labels[LineLabel] == "" {
		return upstream.BatchAnswer{}, false
	}
	a := upstream.BatchAnswer{CustomID: l.Request.Labels[LineLabel]}
	if l.Status == "" && len(l.Response) > 0 && string(l.Response) != "null" {
		a.Status, a.Body = http.StatusOK, l.Response
		return a, true
	}
	a.Status, a.Body = statusError(l.Status)
	return a, true
}

// statusError is the HTTP status and Google error body of a failed
// prediction's status string, which reads "<reason>: <error JSON>" when
// the model's call failed with an error body.
func statusError(s string) (int, []byte) {
	if i := strings.IndexByte(s, '{'); i >= 0 {
		var e struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		raw := []byte(s[i:])
		if json.Unmarshal(raw, &e) == nil && e.Error.Code >= 400 && e.Error.Code <= 599 {
			return e.Error.Code, raw
		}
	}
	msg := strings.TrimSpace(s)
	if msg == "" {
		msg = "the batch prediction job gave no answer for the line"
	}
	return http.StatusInternalServerError, upstream.ErrorBody(upstream.Gemini, http.StatusInternalServerError, msg)
}

// getJob reads batch prediction job id.
func (p *Provider) getJob(ctx context.Context, b upstream.Backend, id string) (*job, error) {
	u, err := jobURL(b, id)
	if err != nil {
		return nil, err
	}
	acct, _, err := p.account(b)
	if err != nil {
		return nil, err
	}
	x, err := p.exchange(ctx, b, acct, http.MethodGet, u, "", nil, false)
	if err != nil {
		return nil, err
	}
	var j job
	if err := json.Unmarshal(x, &j); err != nil {
		return nil, &upstream.Error{Class: upstream.Transient, Retryable: true,
			Message: fmt.Sprintf("backend %q (vertex): the batch prediction job is unreadable", b.Name), Err: err}
	}
	return &j, nil
}

// listObjects lists the names of the objects under prefix in bucket, page
// by page.
func (p *Provider) listObjects(ctx context.Context, b upstream.Backend, acct *account, bucket, prefix string) ([]string, error) {
	var names []string
	token := ""
	for {
		q := url.Values{"prefix": {prefix}}
		if token != "" {
			q.Set("pageToken", token)
		}
		u := strings.TrimRight(storageURL(b), "/") + "/storage/v1/b/" + url.PathEscape(bucket) + "/o?" + q.Encode()
		x, err := p.exchange(ctx, b, acct, http.MethodGet, u, "", nil, false)
		if err != nil {
			return nil, fmt.Errorf("list gs://%s/%s: %w", bucket, prefix, err)
		}
		var page struct {
			Items []struct {
				Name string `json:"name"`
			} `json:"items"`
			NextPageToken string `json:"nextPageToken"`
		}
		if err := json.Unmarshal(x, &page); err != nil {
			return nil, fmt.Errorf("list gs://%s/%s: %w", bucket, prefix, err)
		}
		for _, it := range page.Items {
			names = append(names, it.Name)
		}
		if page.NextPageToken == "" || page.NextPageToken == token {
			return names, nil
		}
		token = page.NextPageToken
	}
}

// readLines downloads an object and calls f with each JSON value of it,
// without holding the object in memory.
func (p *Provider) readLines(ctx context.Context, b upstream.Backend, acct *account, bucket, object string, f func(json.RawMessage) error) error {
	u := strings.TrimRight(storageURL(b), "/") + "/storage/v1/b/" + url.PathEscape(bucket) + "/o/" + url.PathEscape(object) + "?alt=media"
	resp, err := p.send(ctx, b, acct, http.MethodGet, u, "", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("read gs://%s/%s: %w", bucket, object, httpError(b, resp, false))
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var raw json.RawMessage
		switch err := dec.Decode(&raw); {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return &upstream.Error{Class: upstream.Transient, Retryable: true,
				Message: fmt.Sprintf("read gs://%s/%s: not JSON lines", bucket, object), Err: err}
		}
		if err := f(raw); err != nil {
			return err
		}
	}
}

// exchange sends one JSON API request and reads its 2xx answer; any other
// is an *upstream.Error (a 404, 405 or 501 on submission wrapping
// upstream.ErrNoBatchAPI).
func (p *Provider) exchange(ctx context.Context, b upstream.Backend, acct *account, method, u, contentType string, body []byte, submit bool) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, b.TimeoutOr(upstream.DefaultTimeout))
	defer cancel()
	resp, err := p.send(ctx, b, acct, method, u, contentType, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, httpError(b, resp, submit)
	}
	x, err := io.ReadAll(io.LimitReader(resp.Body, upstream.MaxBody))
	if err != nil {
		return nil, &upstream.Error{Class: upstream.Transient, Retryable: true, Message: "the upstream's answer was cut off", Err: err}
	}
	return x, nil
}

// httpError classifies a Vertex AI or Cloud Storage answer with an error
// status (submit: nothing was accepted yet, so a retryable one or a refused
// credential may move the batch elsewhere).
func httpError(b upstream.Backend, resp *http.Response, submit bool) error {
	x, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := upstream.StatusError(&upstream.Exchange{Status: resp.StatusCode, Header: resp.Header, Body: x}, submit, time.Now())
	e.Message = fmt.Sprintf("backend %q (vertex): %s", b.Name, e.Message)
	if submit && upstream.NoBatchAPIStatus(resp.StatusCode) {
		e.Err = upstream.ErrNoBatchAPI
	}
	return e
}

// send sends one request with the service account's access token; a 401
// drops the cached token, as for a text call.
func (p *Provider) send(ctx context.Context, b upstream.Backend, acct *account, method, u, contentType string, body []byte) (*http.Response, error) {
	token, err := acct.token(ctx, b)
	if err != nil {
		return nil, err
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, unsupported(b, "invalid batch URL: %v", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := upstream.RoundTrip(p.client, req)
	if err != nil {
		return nil, &upstream.Error{Class: upstream.Transient, Retryable: true,
			Message: fmt.Sprintf("backend %q (vertex): the upstream could not be reached", b.Name), Err: err}
	}
	if resp.StatusCode == http.StatusUnauthorized {
		p.tokens.forget(b)
	}
	return resp, nil
}

// account is backend b's service account and the project its calls name.
func (p *Provider) account(b upstream.Backend) (*account, string, error) {
	acct, err := p.tokens.account(b)
	if err != nil {
		return nil, "", err
	}
	project := b.Options[OptionProject]
	if project == "" {
		project = acct.project
	}
	return acct, project, nil
}

// jobURL is the URL of job id: the backend's base (or the endpoint of the
// job's location) and API version before the resource name.
func jobURL(b upstream.Backend, id string) (string, error) {
	m := jobName.FindStringSubmatch(id)
	if m == nil {
		return "", &upstream.Error{Class: upstream.Permanent, Status: http.StatusBadRequest,
			Message: fmt.Sprintf("backend %q (vertex): %q is not a batch prediction job name", b.Name, id)}
	}
	return baseURL(b, m[1]) + "/" + url.PathEscape(apiVersion(b)) + "/" + id, nil
}

// storageURL is the backend's Cloud Storage JSON API root.
func storageURL(b upstream.Backend) string {
	if u := strings.TrimSpace(b.Options[OptionStorageURL]); u != "" {
		return u
	}
	return DefaultStorageURL
}

// gcsURI splits gs://bucket/path into the bucket and the path without
// leading or trailing slashes.
func gcsURI(s string) (bucket, name string, err error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), "gs://")
	if !ok {
		return "", "", fmt.Errorf("%q is not a gs:// URI", s)
	}
	bucket, name, _ = strings.Cut(rest, "/")
	if !bucketName.MatchString(bucket) {
		return "", "", fmt.Errorf("%q does not name a Cloud Storage bucket", s)
	}
	return bucket, strings.Trim(name, "/"), nil
}
